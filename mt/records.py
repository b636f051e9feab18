"""What a translation is, as the Translator returns it, and the formats it is written in: the
n-best lines (`mt translate --nbest`) and one JSON object per input line (`--format jsonl`,
`mt serve`)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass

from mt.config import DecodeConfig
from mt.memory.match import Match


@dataclass
class Attention:
    """The cross-attention behind one translation: weights (T, S), row j the step that predicts
    output token j; layers and heads averaged (as mt.decoding.align uses it) unless an AttentionSpec
    asked for one layer or every head ((H, T, S))."""

    src_tokens: list[str]  # the source's tokens (after a tag), as the tokenizer wrote them
    out_tokens: list[str]  # the output's tokens, before detokenizing
    weights: list  # (T, S), each row summing to 1; (H, T, S) with AttentionSpec.heads
    src_labels: list[str]  # each source token as a reader sees it: its joiner marks removed
    out_labels: list[str]


@dataclass(frozen=True)
class AttentionSpec:
    """Which cross-attention a translation carries (Translator.translate_nbest(attention=))."""

    layer: int | None = None  # a decoder layer (from 0, -1 the last); None: layers averaged
    heads: bool = False  # every head, (H, T, S), rather than their mean
    end: bool = False  # also the row of the step that predicts <eos> (out_tokens ends "</s>")
    decimals: int | None = 4  # rounded: enough to draw, and a third of the JSON; None: exact

    @property
    def averaged(self) -> bool:
        """Layers and heads averaged, no <eos> row: the weights alignments are made from."""
        return self.layer is None and not self.heads and not self.end


@dataclass
class Translation:
    text: str  # detokenized, on one line
    # length-penalised log-probability (mt.decoding.scores); 0.0 for an empty input
    score: float
    alignment: str | None = None  # with decode.align: Pharaoh `i-j` word pairs (mt.decoding.align)
    attention: Attention | None = None  # with translate_nbest(..., attention=...)
    # with a glossary: the entries active for the line [source, target], and the target terms
    # the output does not hold (the length limit cut it short: mt.decoding.lexical)
    terms: list[list[str]] | None = None
    missing: list[str] | None = None
    # with decode.confidence (mt.confidence): the features, and the probability (0-1) that the
    # line is good where the run has a calibration
    features: dict[str, float] | None = None
    confidence: float | None = None
    # with decode.confidence: each whitespace word of text and the probability of its least
    # likely token
    words: list[list] | None = None
    # with decode.confidence and a calibration: the features outside what its held-out set
    # showed (mt.confidence.Calibration.flags): "coverage", "repetition", "length_ratio"
    flags: list[str] | None = None
    rejected: bool = False  # `mt translate --min-confidence`: below it, so text was emptied
    # with decode.unk replace or forbid: what text holds where the model wrote <unk>, in order
    # (mt.unknowns); None where it wrote none
    unknowns: list[str] | None = None
    # with decode.memory: the line's best match at or above decode.memory_threshold; a line
    # reused as it is (decode.memory_exact reuse, at or above decode.memory_reuse) is its target
    match: Match | None = None


def format_nbest(index: int, translations: list[Translation]) -> str:
    """The n-best format: one `index<TAB>score<TAB>text` line per translation, best first
    (and `<TAB>alignment` after each, with decode.align)."""
    return "".join(f"{index}\t{t.score:.4f}\t{_aligned(t)}\n" for t in translations)


def _aligned(t: Translation) -> str:
    """The text, and a tab and the alignment when there is one."""
    return t.text if t.alignment is None else f"{t.text}\t{t.alignment}"


def record(src: str, translations: list[Translation], nbest: bool) -> dict:
    """One input line's JSON object (`mt translate --format jsonl`, `mt serve`): {"src",
    "text", "score"} of the best translation, its "alignment" (with decode.align) and
    "attention" (when asked for), with a glossary its "terms" (the active entries) and the
    "missing" target terms, "unknowns": what stands where the model wrote <unk>
    (mt.unknowns), with a memory its best "match" ({"source", "target", "score"}), and with
    nbest every translation, best first, as "nbest": [{"text",
    "score"}, ...] (each with its "alignment", "missing" and "unknowns")."""
    best = translations[0]
    fields = {"src": src, **_fields(best)}
    if best.terms is not None:
        fields["terms"] = best.terms
    if best.match is not None:
        fields["match"] = best.match.to_json()
    if best.attention is not None:
        fields["attention"] = dataclasses.asdict(best.attention)
    if nbest:
        fields["nbest"] = [_fields(t) for t in translations]
    return finite(fields)


def finite(value):
    """value (JSON-able) with each NaN or infinity made None: JSON has no such numbers (a
    rejected line's or an empty output's score can be one), so a record writes null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def format_jsonl(src: str, translations: list[Translation], nbest: bool) -> str:
    """One JSON line: the input line's `record`."""
    # ASCII (non-ASCII as \u escapes): no reader can split a line on U+2028 or U+0085.
    return json.dumps(record(src, translations, nbest), allow_nan=False) + "\n"


def _fields(t: Translation) -> dict:
    fields = {"text": t.text, "score": t.score}
    if t.alignment is not None:
        fields["alignment"] = t.alignment
    if t.missing is not None:
        fields["missing"] = t.missing
    if t.unknowns is not None:
        fields["unknowns"] = t.unknowns
    if t.features is not None:
        fields.update(confidence=t.confidence, features=t.features, words=t.words)
        if t.flags is not None:
            fields["flags"] = t.flags
    if t.rejected:
        fields["rejected"] = True
    return fields


def lists(cfg: DecodeConfig, asked: bool = False) -> bool:
    """Whether each input line gets a list (the n-best format, or "nbest" in its JSON): when
    asked for (`--nbest`, even 1) or when decode.nbest or decode.samples is above 1."""
    return asked or cfg.nbest > 1 or cfg.samples > 1
