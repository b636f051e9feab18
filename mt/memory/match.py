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
# The characters whose case-folding moves a boundary between words (İ: "i" and a combining dot,
# which is not a word character): a text holding one is folded word by word, as key() does;
# any other is folded whole, then split (the same words, faster). tests/test_memory.py
# derives this set from Python's Unicode database.
FOLDING_SPLITS = re.compile("[\u0130\u01f0\u0345\u0390\u03b0\u1e96-\u1e99\u1f50\u1f52\u1f54"
                            "\u1f56\u1fb6\u1fb7\u1fc6\u1fc7\u1fd2\u1fd3\u1fd6\u1fd7\u1fe2-\u1fe4"
                            "\u1fe6\u1fe7\u1ff6\u1ff7]")


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
    a, b = _Words(query), _Words(source)
    return max(0.0, _folded_percent(a, b) - _case_penalty(a, b))


class _Words:
    """A text's words case-folded, what the score compares, made once; with case kept only
    when asked for (the case penalty), as few candidates need it."""

    __slots__ = ("text", "folded", "_cased")

    def __init__(self, text: str):
        self.text, self._cased = text, None
        self.folded = (WORD.findall(text.casefold())
                       if text.isascii() or not FOLDING_SPLITS.search(text)
                       else [w.casefold() for w in self.cased])

    @property
    def cased(self) -> list[str]:
        if self._cased is None:
            self._cased = words(self.text)
        return self._cased


def _folded_percent(a: _Words, b: _Words, at_least: float = 0.0) -> float:
    """The match percentage of b's words for a's before the case penalty; -1 where it is below
    at_least for their lengths alone (a word more or less costs 1 whatever the words are),
    without comparing."""
    longer = max(len(a.folded), len(b.folded))
    if not longer:
        return 100.0
    if 100.0 * (1 - abs(len(a.folded) - len(b.folded)) / longer) < at_least:
        return -1.0
    return 100.0 * (1 - _levenshtein().distance(a.folded, b.folded) / longer)


def _case_penalty(a: _Words, b: _Words) -> float:
    """CASE_PENALTY where some word of b differs from its counterpart in a in case only: the
    distance with case kept is larger than the case-folded one."""
    if a.text == a.text.casefold() and b.text == b.text.casefold():
        return 0.0
    distance = _levenshtein().distance
    return CASE_PENALTY if distance(a.cased, b.cased) > distance(a.folded, b.folded) else 0.0


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
    found = []  # (score before the case penalty, id, words, target)
    for i, s, t in candidates:
        b = _Words(s)
        if (folded := _folded_percent(q, b, threshold)) >= threshold:
            found.append((folded, i, b, t))
    found.sort(key=lambda f: (-f[0], -f[1]))
    # the penalty takes at most CASE_PENALTY off: below the k-th by more, none can reach the k
    if len(found) > k:
        found = [f for f in found if f[0] >= found[k - 1][0] - CASE_PENALTY]
    scored = [Match(b.text, t, max(0.0, folded - _case_penalty(q, b)), i)
              for folded, i, b, t in found]
    scored = [m for m in scored if m.score >= threshold]
    scored.sort(key=lambda m: (-m.score, -m.id))
    return scored[:k]
