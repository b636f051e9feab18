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
    a, b = key(query).split(), key(source).split()
    longer = max(len(a), len(b))
    if not longer:
        return 100.0
    levenshtein = _levenshtein()
    distance = levenshtein.distance(a, b)
    case = CASE_PENALTY if levenshtein.distance(words(query), words(source)) > distance else 0.0
    return max(0.0, 100.0 * (1 - distance / longer) - case)


@dataclass(frozen=True)
class Match:
    """A memory's pair found for a query, with its match percentage."""

    source: str
    target: str
    score: float  # 0-100, by score()
    id: int = 0  # the pair's row in its memory: later ids were added later

    def to_json(self) -> dict:
        return {"source": self.source, "target": self.target, "score": round(self.score, 2)}


def rank(query: str, candidates: list[tuple[int, str, str]], k: int, threshold: float = 0.0
         ) -> list[Match]:
    """The k best of (id, source, target) candidates by score, at least threshold; equal
    scores: the latest added (or added again) first: a correction overrides what it corrected."""
    scored = [Match(s, t, score(query, s), i) for i, s, t in candidates]
    scored = [m for m in scored if m.score >= threshold]
    scored.sort(key=lambda m: (-m.score, -m.id))
    return scored[:k]
