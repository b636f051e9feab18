"""POST /translate's texts as paragraphs or documents (mt.document): each line split into
sentences (unless `"split": false`), or read as a document (`"format": "html"`, `"md"`,
`"srt"`); their sentences go to the batcher as lines, and come back put together, with the
sentences they were split into. POST /translate/document's file (a text format or .docx) the
same way, one document a request.

Options that ask for a line's own output (a prefix, n-best lists, samples, alignments)
translate each line whole, as before: a line is then one sentence. A prefix and n-best lists
asked for with `"split": true` or a format are a 422 (mt.compatibility); samples and
alignments go with documents (each sentence's first sample; the alignments put markup back)."""

from __future__ import annotations

import dataclasses
import json
import typing

from pydantic import BaseModel, ConfigDict, create_model

from mt.compatibility import first_clash
from mt.config import DecodeConfig
from mt.document import Documents, document_format, settings
from mt.document.formats import names, text_formats
from mt.errors import ConfigError, DataError
from mt.records import Translation, lists
from mt.serve.access import ClientError
from mt.translator import Translator

__all__ = ["TEXT_FORMATS", "check_document", "content_type", "file_model", "per_sentence",
           "prepare", "prepare_file", "records", "wanted"]

# POST /translate's `format`: the registry's formats of text (a JSON string holds them)
TEXT_FORMATS = text_formats()


def content_type(format: str) -> str:
    """What POST /translate/document's answer in a format (or an alias: "txt") is sent as."""
    return document_format(format).content_type


def per_sentence(prefix: bool, cfg: DecodeConfig) -> list[str]:
    """The options given that ask for a line's own output (a prefix, n-best lists, samples,
    alignments): with them, lines are translated whole unless "split" or a format asks."""
    return [name for name, on in (("prefix", prefix), ("nbest", cfg.nbest > 1),
                                  ("samples", cfg.samples > 1), ("align", cfg.align)) if on]


def clash(prefix: bool, cfg: DecodeConfig) -> str | None:
    """What documents cannot go with (mt.compatibility) that a request gives, or None."""
    return first_clash("documents", {"prefix": prefix, "nbest": cfg.nbest > 1})


def wanted(format: str, split: bool | None, prefix: bool, cfg: DecodeConfig) -> bool:
    """Whether a request's lines go through mt.document; a ClientError (422) for options
    that cannot go with that."""
    asked = format != "text" or split is True
    if asked and (name := clash(prefix, cfg)):
        what = f'format "{format}"' if format != "text" else "split"
        raise ClientError(422, f"{what}: not with {name} (they are per sentence); "
                               'send "split": false, or leave it out')
    return asked or (split is None and not per_sentence(prefix, cfg) and not lists(cfg))


def check_document(cfg: DecodeConfig) -> None:
    """A 422 ClientError for decoding options a document (POST /translate/document) cannot
    go with."""
    if name := clash(False, cfg):
        raise ClientError(422, f"a document: not with {name} (it is per sentence)")


def prepare(translator: Translator, lines: list[str], format: str,
            cfg: DecodeConfig | None = None) -> Documents:
    """The lines as Documents; a 422 ClientError for a line that is not in its format (an
    .srt's broken timing)."""
    try:
        return Documents.read(lines, format, settings(translator, cfg=cfg),
                              [f"text[{i}]" for i in range(len(lines))])
    except DataError as e:
        raise ClientError(422, str(e)) from None


def file_model(options: dict) -> type[BaseModel]:
    """The query of POST /translate/document: `format` (a format's name or alias), `glossary` (JSON
    pairs) and the decoding options (options: {name: (type, default)}), read from strings as
    a query gives them ("5" is 5); unknown parameters are refused."""
    return create_model(
        "DocumentQuery", __config__=ConfigDict(extra="forbid"),
        format=(typing.Literal[names()], ...), glossary=(str | None, None),
        **options)


def glossary_pairs(given: str | None) -> list | None:
    """The `glossary` query parameter: JSON, [["source", "target"], ...]; a 422 else."""
    if given is None:
        return None
    try:
        pairs = json.loads(given)
    except json.JSONDecodeError as e:
        raise ClientError(422, f"glossary: not JSON ({e.msg}); give [[\"source term\", "
                               "\"target term\"], ...]") from None
    if not isinstance(pairs, list):
        raise ClientError(422, 'glossary: give [["source term", "target term"], ...]')
    return pairs


def prepare_file(translator: Translator, data: bytes, format: str,
                 cfg: DecodeConfig | None = None) -> Documents:
    """A file's bytes as a document of its format (text formats: UTF-8); a 422 ClientError for
    a file that is not one."""
    try:
        return Documents.read([data], format, settings(translator, cfg=cfg), ["document"])
    except DataError as e:
        raise ClientError(422, str(e)) from None
    except ConfigError as e:  # the server lacks an extra (python-docx)
        raise ClientError(501, f"this server cannot read it: {e}") from None


def records(lines: list[str], docs: Documents, found: list[list[Translation]],
            glossary: bool | list[bool] = False) -> list[dict]:
    """Per line {"src", "text", "score"} (the mean of its sentences'), and when split,
    "sentences": [{"src", "text", "score"}]; "attention" when asked for and one sentence;
    with decode.confidence the line's "confidence" (its sentences' least; null uncalibrated)
    and "flags" (any of its sentences', calibrated), its "features" when one sentence, its
    "words" (each whitespace word of its text with the probability of its least likely token)
    where its sentences' words are its text's, and each sentence's "confidence", "features"
    and "words";
    with a glossary (`glossary`: for every line, or per line) the line's "terms" (its
    sentences' active entries, once each) and "missing" (their missing target terms);
    "cut" (sentences cut to fit the model) and "notes" (malformed HTML) when any."""
    out = []
    terms = glossary if isinstance(glossary, list) else [glossary] * len(lines)
    for line, (doc, share), glossary in zip(lines, docs.shares(found), terms, strict=True):
        mine = [ts[0] for ts in share]
        result = doc.render(mine)
        fields = {"src": line, "text": result.text,
                  "score": sum(t.score for t in mine) / len(mine) if mine else 0.0}
        confident = [t for t in mine if t.features is not None]  # with "confidence": true
        if confident:  # a paragraph is as trustworthy as its least trusted sentence
            known = [t.confidence for t in confident if t.confidence is not None]
            fields["confidence"] = min(known) if len(known) == len(confident) else None
            if all(t.flags is not None for t in confident):  # calibrated: any sentence's
                fields["flags"] = sorted({f for t in confident for f in t.flags})
        if len(confident) == 1:
            fields["features"] = confident[0].features
        words = [w for t in confident for w in t.words or ()]
        if confident and [w for w, _ in words] == result.text.split():  # not markup's words
            fields["words"] = words
        if len(mine) > 1:
            fields["sentences"] = [{"src": s, "text": t.text, "score": t.score}
                                   | ({"confidence": t.confidence, "features": t.features,
                                       "words": t.words} if t.features is not None else {})
                                   for s, t in result.sentences]
        if glossary:  # its sentences' together; none for a line without any
            fields["terms"] = [list(e) for e in dict.fromkeys(
                tuple(e) for t in mine for e in t.terms or ())]
            fields["missing"] = [m for t in mine for m in t.missing or ()]
        if len(mine) == 1 and mine[0].attention is not None:
            fields["attention"] = dataclasses.asdict(mine[0].attention)
        if result.cut:
            fields["cut"] = result.cut
        if result.notes:
            fields["notes"] = result.notes
        out.append(fields)
    return out
