"""What a fuzzy match is: the normalization, the words, and the match percentage (docs/memory.md).

    match % = 100 × (1 − D / L) − P

D is the word-level Levenshtein distance (an inserted, deleted or substituted word costs 1,
rapidfuzz's `Levenshtein.distance` over word lists) between the two sources' words case-folded;
L the longer one's length in words; P the case penalty, 1 point when the distance with case kept
is larger than D (a word differs from its counterpart in case only; else 0), so a case-only
difference scores 99, never 100. Words are runs of letters
and digits, and every other non-space character alone (`Save,` is `Save` and `,`); whitespace
only separates them, so texts that differ in spacing alone score 100 (an exact match). Two
empty texts are an exact match; an empty text against a non-empty one scores 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mt.errors import ConfigError

WORD = re.compile(r"\w+|[^\w\s]")
CASE_PENALTY = 1.0  # points off when a word differs from its counterpart in case only


def normalize(text: str) -> str:
    """The text with its whitespace collapsed: runs of it one space, none at the ends."""
    return " ".join(text.split())


def words(text: str) -> list[str]:
    """The text's words as the score counts them, case kept."""
    return WORD.findall(text)


def key(text: str) -> str:
    """What an exact match compares, and what the index holds: the words case-folded, joined
    by one space. Texts with the same key score at least 100 − CASE_PENALTY."""
    return " ".join(w.casefold() for w in words(text))


def terms(text: str) -> list[str]:
    """The words of text's key the index holds, each once: those of letters and digits
    (punctuation is scored, never searched for)."""
    return sorted({w for w in key(text).split() if w[0].isalnum() or w[0] == "_"})


def _levenshtein():
    try:
        from rapidfuzz.distance import Levenshtein
    except ImportError:
        raise ConfigError("a translation memory needs rapidfuzz: pip install 'mt[memory]'"
                          ) from None
    return Levenshtein


def score(query: str, source: str) -> float:
    """The match percentage (0-100) of a memory's source for a query, by the formula above."""
    return _percent(_Words(query), _Words(source))


class _Words:
    """A text's words, case kept and case-folded: what the score compares, made once."""

    __slots__ = ("cased", "folded")

    def __init__(self, text: str):
        self.cased = words(text)
        self.folded = [w.casefold() for w in self.cased]


def _percent(a: _Words, b: _Words, at_least: float = 0.0) -> float:
    """The match percentage of b's words for a's; -1 where it is below at_least for their
    lengths alone (a word more or less costs 1 whatever the words are), without comparing."""
    longer = max(len(a.folded), len(b.folded))
    if not longer:
        return 100.0
    if 100.0 * (1 - abs(len(a.folded) - len(b.folded)) / longer) < at_least:
        return -1.0
    levenshtein = _levenshtein()
    distance = levenshtein.distance(a.folded, b.folded)
    case = 0.0  # the cased distance is larger only where some word differs in case
    if (a.cased != a.folded or b.cased != b.folded) \
            and levenshtein.distance(a.cased, b.cased) > distance:
        case = CASE_PENALTY
    return max(0.0, 100.0 * (1 - distance / longer) - case)


@dataclass(frozen=True)
class Match:
    """A memory's pair found for a query, with its match percentage."""

    source: str
    target: str
    score: float  # 0-100, by score()
    id: int = 0  # the pair's row in its memory: later ids were added later

    @property
    def exact(self) -> bool:
        """An exact match: 100, the same words in the same case (spacing aside)."""
        return self.score >= 100

    def to_json(self) -> dict:
        return {"source": self.source, "target": self.target, "score": round(self.score, 2)}


def rank(query: str, candidates: list[tuple[int, str, str]], k: int, threshold: float = 0.0
         ) -> list[Match]:
    """The k best of (id, source, target) candidates by score, at least threshold; equal
    scores: the latest added (or added again) first: a correction overrides what it corrected."""
    q = _Words(query)
    scored = [Match(s, t, _percent(q, _Words(s), threshold), i) for i, s, t in candidates]
    scored = [m for m in scored if m.score >= threshold]
    scored.sort(key=lambda m: (-m.score, -m.id))
    return scored[:k]
