"""A parallel corpus audit (`mt data check`): each kind of suspect pair counted, with the first
few line numbers, and the training pairs that also occur in the validation or test set.

Pairs are streamed: memory holds only 8-byte keys (mt.filters.text_key) of the training pairs
(for duplicates) and of the held-out sets' sources and pairs. The checks are mt.filters', the
ones `data.filter` drops by; lengths are whitespace words, not tokens.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from mt.config import DataConfig
from mt.corpus_formats import CorpusSource
from mt.data import split_source
from mt.filters import (
    RATIO_FLOOR,
    bad_utf8,
    has_control,
    is_copy,
    is_empty,
    ratio_outlier,
    text_key,
    words,
)
from mt.textio import file_identity

EXAMPLES = 5  # line numbers kept per finding
AUDIT_RATIO = 3.0  # the ratio the audit reports at when data.filter.max_ratio is 0 (off)
def held_out(d: DataConfig) -> list[CorpusSource]:
    """The validation and test sets the training pairs are compared against."""
    return [split_source(d, split) for split in ("val", "test")]


@dataclass
class Finding:
    count: int = 0
    lines: list[int] = field(default_factory=list)  # the first EXAMPLES line numbers (from 1)

    def add(self, line: int) -> None:
        self.count += 1
        if len(self.lines) < EXAMPLES:
            self.lines.append(line)


@dataclass
class Overlap:
    """Training pairs that also occur in a held-out set, after the whitespace rule."""

    split: str
    split_pairs: int  # pairs in the held-out set
    sources: Finding = field(default_factory=Finding)  # training lines whose source is one of its
    pairs: Finding = field(default_factory=Finding)  # training lines that are one of its pairs
    split_sources_seen: int = 0  # its lines whose source occurs in training
    split_pairs_seen: int = 0  # its lines whose pair occurs in training


@dataclass
class CorpusAudit:
    name: str
    src: str
    tgt: str
    pairs: int = 0
    # Each check counts on its own: a pair can be in several.
    empty: Finding = field(default_factory=Finding)  # a side without words
    too_long: Finding = field(default_factory=Finding)  # more than max_len words on a side
    ratio: Finding = field(default_factory=Finding)  # mt.filters.ratio_outlier
    duplicate: Finding = field(default_factory=Finding)  # a repeat of an earlier pair
    copy: Finding = field(default_factory=Finding)  # the target is the source
    invalid_utf8: Finding = field(default_factory=Finding)  # bytes not UTF-8 on a side
    control: Finding = field(default_factory=Finding)  # control characters on a side
    overlap: list[Overlap] = field(default_factory=list)  # training corpora only
    # what its files hold that gives no pair, by why (a PO file's fuzzy entries)
    left_out: dict[str, int] = field(default_factory=dict)


@dataclass
class Audit:
    max_len: int
    max_ratio: float
    corpora: list[CorpusAudit]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    def report(self) -> str:
        labels = {"empty": "empty side",
                  "too_long": f"over {self.max_len} words on a side",
                  "ratio": f"word ratio over {self.max_ratio:g} (floor {RATIO_FLOOR})",
                  "duplicate": "duplicate pairs (repeats)",
                  "copy": "source copied to target",
                  "invalid_utf8": "invalid UTF-8 (U+FFFD)",
                  "control": "control characters"}
        out = []
        for c in self.corpora:
            out.append(f"{c.name}: {c.pairs} pairs ({c.src}, {c.tgt})")
            if c.left_out:
                out.append("  left out: " + ", ".join(f"{n} {why}"
                                                       for why, n in c.left_out.items()))
            rows = [(label, getattr(c, key), "") for key, label in labels.items()]
            for o in c.overlap:
                rows += [(f"source in {o.split}", o.sources,
                          f"{o.split_sources_seen} of {o.split}'s {o.split_pairs}"),
                         (f"pair in {o.split}", o.pairs,
                          f"{o.split_pairs_seen} of {o.split}'s {o.split_pairs}")]
            for label, f, extra in rows:
                where = f"lines {', '.join(map(str, f.lines))}" if f.lines else ""
                line = f"  {label:<32}{f.count:>7}  {where}"
                out.append(f"{line}  ({extra})" if extra and f.count else line.rstrip())
        return "\n".join(out)


class _Index:
    """A held-out set's keys: how many of its lines have each source, each pair."""

    def __init__(self, split: str):
        self.split = split
        self.pairs = 0
        self.source_keys: Counter[int] = Counter()
        self.pair_keys: Counter[int] = Counter()


def audit(train: list[CorpusSource], held: list[CorpusSource], max_len: int, max_ratio: float
          ) -> Audit:
    """Audit the held-out sets, then each training corpus (with its overlap with them). Every
    file is checked to be there before any is read (DataError); parallel files of different
    lengths are a DataError too, when the shorter one ends."""
    for files in (*train, *held):
        for path in files.paths:
            file_identity(Path(path))
    indexes = [_Index(files.name) for files in held]
    done = [_audit_one(files, max_len, max_ratio, index=index)
            for files, index in zip(held, indexes)]
    trained = [_audit_one(files, max_len, max_ratio, against=indexes) for files in train]
    return Audit(max_len, max_ratio, trained + done)


def _audit_one(files: CorpusSource, max_len: int, max_ratio: float, against: Iterable[_Index] = (),
               index: _Index | None = None) -> CorpusAudit:
    """One corpus's findings; against: held-out sets to count overlap with; index: fill it."""
    name, paths = files.name, [str(p) for p in files.paths]
    c = CorpusAudit(name, paths[0], paths[-1])
    c.overlap = [Overlap(i.split, i.pairs) for i in against]
    c.left_out = files.left_out()
    hits = [(set(), set()) for _ in c.overlap]  # per held-out set: source keys, pair keys seen
    seen: set[int] = set()
    n = 0
    for n, (src, tgt) in enumerate(_progress(name, files.pairs()), 1):
        for check in _checks(c, src, tgt, max_len, max_ratio):
            check.add(n)
        if is_empty(src, tgt):
            continue
        key, source = text_key(src, tgt), text_key(src)
        if key in seen:
            c.duplicate.add(n)
        seen.add(key)
        if index is not None:
            index.source_keys[source] += 1
            index.pair_keys[key] += 1
        for o, i, (sources, pairs) in zip(c.overlap, against, hits):
            if source in i.source_keys:
                o.sources.add(n)
                sources.add(source)
            if key in i.pair_keys:
                o.pairs.add(n)
                pairs.add(key)
    c.pairs = n
    if index is not None:
        index.pairs = n
    for o, i, (sources, pairs) in zip(c.overlap, against, hits):
        o.split_sources_seen = sum(i.source_keys[k] for k in sources)
        o.split_pairs_seen = sum(i.pair_keys[k] for k in pairs)
    return c


def _checks(c: CorpusAudit, src: str, tgt: str, max_len: int, max_ratio: float
            ) -> Iterator[Finding]:
    """The findings of c this pair adds to, duplicates and overlap aside."""
    if is_empty(src, tgt):
        yield c.empty
    if max(words(src), words(tgt)) > max_len:
        yield c.too_long
    if ratio_outlier(src, tgt, max_ratio):
        yield c.ratio
    if is_copy(src, tgt):
        yield c.copy
    if bad_utf8(src) or bad_utf8(tgt):
        yield c.invalid_utf8
    if has_control(src) or has_control(tgt):
        yield c.control


def _progress(name: str, pairs: Iterable) -> Iterable:
    """A progress bar on stderr, shown only on a terminal."""
    return tqdm(pairs, desc=f"check {name}", unit=" pairs", unit_scale=True, disable=None,
                file=sys.stderr, dynamic_ncols=True, leave=False)
