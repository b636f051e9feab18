"""What makes a training pair suspect, in one place: the predicates `mt data check` counts
(mt.audit) and `data.filter` drops while the token cache is built (PairFilter).

Lengths are whitespace words (`str.split`), not tokens: the audit and the filters run on raw text,
before any tokenizer. A pair with an empty side is never a copy, a ratio outlier or a duplicate:
it is its own finding, and training drops it at load as it always has (docs/data.md).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Sequence

from mt.config import FilterConfig
from mt.textio import Undecoded
from mt.tokenizers.text import normalize

RATIO_FLOOR = 3  # word counts below this count as this in the ratio: 1 word against 3 is no outlier
# C0 and C1 control characters and DEL, but not tab (whitespace, and TSV's separator); lines end
# at '\n', and mt.textio strips a final '\r', so any left is inside the line.
CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f]")
# Why PairFilter drops a pair, in the order it asks: a pair dropped counts under its first reason.
REASONS = ("invalid", "copy", "ratio", "duplicate")


def words(line: str) -> int:
    return len(line.split())


def is_empty(src: str, tgt: str) -> bool:
    """Either side has no word."""
    return not src.strip() or not tgt.strip()


def bad_utf8(line: str) -> bool:
    """The line had bytes that are not UTF-8 (mt.textio marks it), not just a U+FFFD."""
    return isinstance(line, Undecoded)


def has_control(line: str) -> bool:
    return CONTROL.search(line) is not None


def is_copy(src: str, tgt: str) -> bool:
    """The target is the source, after the whitespace rule (the tokenizers see no difference)."""
    return not is_empty(src, tgt) and normalize(src) == normalize(tgt)


def ratio_outlier(src: str, tgt: str, max_ratio: float) -> bool:
    """The longer side has more than max_ratio times the words of the shorter, each count taken
    as at least RATIO_FLOOR: with max_ratio 3, a 2-word side is an outlier beside 10 words or
    more, a 5-word side beside 16 or more."""
    a, b = words(src), words(tgt)
    if not a or not b:
        return False
    return max(a, b) > max_ratio * max(min(a, b), RATIO_FLOOR)


def text_key(*sides: str) -> int:
    """8 bytes of BLAKE2b over the sides after the whitespace rule (a pair: text_key(src, tgt)):
    duplicates are found in bounded memory, a set of these ints; a false match among n
    distinct pairs is about n^2 / 2^65 likely."""
    text = "\t".join(map(normalize, sides)).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


class PairFilter:
    """`data.filter` over a corpus given in chunks of raw text pairs, in order.

    Stateful across chunks: a duplicate is dropped wherever its first occurrence was. `dropped`
    counts the pairs dropped per reason (REASONS), `seen` all pairs looked at.
    """

    def __init__(self, cfg: FilterConfig):
        self.cfg = cfg
        self.keys: set[int] = set()
        self.dropped: Counter[str] = Counter()
        self.seen = 0

    @property
    def active(self) -> bool:
        c = self.cfg
        return bool(c.max_ratio or c.dedup or c.drop_copies or c.drop_invalid)

    def reason(self, src: str, tgt: str) -> str | None:
        """Why this pair is dropped (the first reason in REASONS), or None to keep it. A kept
        pair is remembered for dedup; a dropped one is not."""
        c = self.cfg
        if c.drop_invalid and any(bad_utf8(s) or has_control(s) for s in (src, tgt)):
            return "invalid"
        if c.drop_copies and is_copy(src, tgt):
            return "copy"
        if c.max_ratio and ratio_outlier(src, tgt, c.max_ratio):
            return "ratio"
        if c.dedup and not is_empty(src, tgt):
            key = text_key(src, tgt)
            if key in self.keys:
                return "duplicate"
            self.keys.add(key)
        return None

    def keep(self, pairs: Sequence[tuple[str, str]]) -> list[bool]:
        """Per pair of this chunk: keep it? Counts the dropped ones in `dropped`."""
        self.seen += len(pairs)
        if not self.active:
            return [True] * len(pairs)
        mask = []
        for src, tgt in pairs:
            why = self.reason(src, tgt)
            if why is not None:
                self.dropped[why] += 1
            mask.append(why is None)
        return mask

    def summary(self) -> str:
        """One line for the log: what was dropped, per reason."""
        total = sum(self.dropped.values())
        reasons = ", ".join(f"{self.dropped[r]} {r}" for r in REASONS if self.dropped[r])
        return (f"data.filter dropped {total} of {self.seen} pairs"
                + (f" ({reasons})" if reasons else ""))
