"""The language pairs one `mt serve` answers: each a Translator loaded once (a run, or several
as an ensemble) with its own batcher, and the routing of a request's source and target to
one of them.

`mt serve RUN` is one pair, its languages the run's (data.src_lang, data.tgt_lang); `mt serve
--model de-en=runs/a --model en-de=runs/b,runs/c` several. A request names its target, and its
source (`"auto"` or none: the one served pair into that target; of several, the one whose
source the text is identified in, mt.serve.detect). Each pair may have a translation memory
(`--memory PATH`, of several pairs `--memory en-de=PATH`): its translator reads it, and
POST /corrections writes into it (mt.serve.corrections).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from babel import Locale, UnknownLocaleError

from mt.memory import Memory
from mt.serve.access import ClientError
from mt.serve.batcher import Batcher
from mt.serve.corrections import MemoryThread
from mt.serve.detect import Identifier
from mt.translator import Translator

AUTO = "auto"  # a request's source when it does not name one
SPEC = re.compile(r"([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)*)-([A-Za-z]{2,3}(?:[-_][A-Za-z0-9]+)*)")

def language_name(code: str) -> str:
    """A language code's English name, as the Unicode CLDR gives it (Babel): de German, EN-GB
    English (United Kingdom), pt-br Portuguese (Brazil). A code the CLDR does not know (a toy
    corpus's `xx`) is its own name."""
    try:
        return Locale.parse(code.replace("-", "_")).get_display_name("en")
    except (ValueError, UnknownLocaleError):  # not a locale identifier; not one CLDR has
        return code


def parse_model(spec: str) -> tuple[str, str, list[Path]]:
    """`--model SRC-TGT=RUN[,RUN...]`: the pair's languages (lower case) and its runs; a
    ValueError saying what is wrong."""
    pair, eq, runs = spec.partition("=")
    found = SPEC.fullmatch(pair.strip())
    if not eq or not found or not runs.strip():
        raise ValueError(f"{spec!r}: give SOURCE-TARGET=RUN, e.g. de-en=runs/a (an ensemble: "
                         "de-en=runs/a,runs/b)")
    paths = [Path(r.strip()) for r in runs.split(",") if r.strip()]
    return found[1].lower(), found[2].lower(), paths


def parse_models(specs: list[str]) -> list[tuple[str, str, list[Path]]]:
    """Each `--model` (parse_model), or a ValueError, before anything loads, for a pair given
    twice, a run named twice in one ensemble (it would weigh double), or one run served for two
    pairs (a run translates one pair, its data.src_lang-data.tgt_lang)."""
    models = [parse_model(spec) for spec in specs]
    names: set[str] = set()
    served: dict[Path, str] = {}  # a run's directory -> the pair it serves
    for spec, (source, target, runs) in zip(specs, models, strict=True):
        name = f"{source}-{target}"
        if name in names:
            raise ValueError(f"{name}: served twice; give each pair once (an ensemble: "
                             f"{name}=runs/a,runs/b)")
        names.add(name)
        paths = [r.resolve() for r in runs]
        twice = next((r for r, p in zip(runs, paths, strict=True) if paths.count(p) > 1), None)
        if twice is not None:
            raise ValueError(f"{spec!r}: {twice} named twice; an ensemble's members are "
                             "different runs or checkpoints")
        for run in runs:
            other = served.setdefault(home(run), name)
            if other != name:
                raise ValueError(f"{run}: served for {other} and {name}; a run translates one "
                                 "pair, the languages it was trained on")
    return models


def parse_memories(specs: list[str], pairs: list[str] | None) -> dict[str | None, str]:
    """`--memory [SRC-TGT=]MEMORY` (a path or a postgresql:// URL) for the pairs served (their
    names, "en-de"; None: RUN..., one pair whose languages are not read yet): {pair: MEMORY},
    the pair None where a spec of one pair leaves it out. Of several pairs each --memory names
    a served one, once. A ValueError saying what is wrong."""
    found: dict[str | None, str] = {}
    for spec in specs:
        head, eq, where = spec.partition("=")
        named = SPEC.fullmatch(head.strip()) if eq else None  # a URL's `?a=b` names no pair
        name = f"{named[1]}-{named[2]}".lower() if named else None
        where = (where if named else spec).strip()
        if not where:
            raise ValueError(f"{spec!r}: give MEMORY (a path or a postgresql:// URL), or "
                             "SOURCE-TARGET=MEMORY")
        if pairs is not None and len(pairs) > 1 and name is None:
            raise ValueError(f"{spec!r}: several pairs are served; name the pair the memory "
                             f"is for, e.g. {pairs[0]}={where}")
        if pairs is not None and name is not None and name not in pairs:
            raise ValueError(f"{spec!r}: {name} is not served here; the pairs are "
                             f"{', '.join(pairs)}")
        if found and (name in found or pairs is None or len(pairs) == 1):
            raise ValueError(f"{spec!r}: a second memory for {name or 'the pair'}; give "
                             "each pair one")
        found[name] = where
    return found


def home(run: Path) -> Path:
    """The directory of a run (a checkpoint file's run), to tell when two paths are one run."""
    return (run.parent if run.is_file() else run).resolve()


@dataclass
class Pair:
    """One served pair: its languages, its Translator, what GET /info tells of its model, and
    its batcher (made when the app starts); with `--memory`, the memory opened for
    the server's own lookups and POST /corrections (its own connection: the translator reads
    through another) and the thread they run on (made when the app starts)."""

    source: str
    target: str
    translator: Translator
    info: dict = field(default_factory=dict)
    batcher: Batcher | None = None
    memory: Memory | None = None
    memory_thread: MemoryThread | None = None

    @property
    def name(self) -> str:
        return f"{self.source}-{self.target}"


class Pairs:
    """The served pairs, the first the default (of a one-pair server: the only one)."""

    def __init__(self, pairs: list[Pair]):
        """pairs: each once (parse_models checks --model)."""
        self.all = pairs
        self.identifier = Identifier(self.sources())

    @classmethod
    def of(cls, translator: Translator, info: dict | None = None) -> Pairs:
        """One pair: the translator's run's languages."""
        data = translator.run.cfg.data
        return cls([Pair(data.src_lang, data.tgt_lang, translator, info or {})])

    @property
    def default(self) -> Pair:
        return self.all[0]

    def sources(self) -> list[str]:
        return list(dict.fromkeys(p.source for p in self.all))

    def targets(self, source: str | None = None) -> list[str]:
        return list(dict.fromkeys(p.target for p in self.all if source in (None, p.source)))

    def route(self, source: str | None, target: str | None, text: Sequence[str] = ()) -> Pair:
        """The pair that translates source into target (None or "auto": the one pair with that
        target, or of several the one whose source text is identified in; target None: the one
        pair served); a ClientError (422) naming the pairs served for a pair not served, or a
        source that cannot be told."""
        return self.routed(source, target, text)[0]

    def routed(self, source: str | None, target: str | None,
               text: Sequence[str] = ()) -> tuple[Pair, float | None]:
        """route's pair, and the confidence (0 to 100) of the source identified in text (None
        where none was)."""
        source = None if source is None or source.lower() == AUTO else source.lower()
        target = None if target is None else target.lower()
        found = [p for p in self.all if source in (None, p.source) and target in (None, p.target)]
        if len(found) == 1:
            return found[0], None
        if len(found) > 1 and source is None and target is not None and any(text):
            ranked = self.identifier.rank("\n".join(text), [p.source for p in found])
            if ranked:  # else a source the model does not know: not guessed
                return next(p for p in found if p.source == ranked[0][0]), ranked[0][1]
        served = ", ".join(p.name for p in self.all)
        if not found:
            asked = f"{source or AUTO}-{target or '?'}"
            raise ClientError(422, f"{asked}: a language pair this server does not translate; "
                                   f"it translates {served}")
        what = (f"into {target}" if target else "here") + f" ({', '.join(p.name for p in found)})"
        untold = " and the text's language is not told among them" if target else ""
        raise ClientError(422, f"source {source or AUTO}: several pairs translate {what}{untold}; "
                               "name the source language" + ("" if target else " and the target"))
