"""A hand-made gold word alignment for the toy task (scripts/make_toy.py): its grammar's
lexicon, word for word, with the reordered number words told apart by their place around
"hundred"/"hundert". German "und" has no gold link."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "scripts"))
import make_toy as toy  # noqa: E402

LEXICON: dict[str, set[str]] = {"today": {"heute"}, "yesterday": {"gestern"},
                                "hundred": {"hundert"}, "one": {"ein", "eins"}}
for en, de, _ in toy.SUBJECTS:
    LEXICON.setdefault(en.lower(), set()).add(de)
for pres, past, de_pres, de_past in toy.VERBS:
    LEXICON.setdefault(pres, set()).update(de_pres)
    LEXICON.setdefault(past, set()).update(de_past)
for pairs in (toy.ADJECTIVES[1:], toy.NOUNS, zip(toy.EN_ONES, toy.DE_ONES),
              zip(toy.EN_TEENS, toy.DE_TEENS), zip(toy.EN_TENS[2:], toy.DE_TENS[2:])):
    for en, de in pairs:
        LEXICON.setdefault(en, set()).add(de.lower())


def _plain(word: str) -> str:
    return word.rstrip(".").lower()


def gold(src: str, tgt: str) -> set[tuple[int, int]]:
    """(i, j) links between the whitespace words of a toy pair: each German word with the
    English word it translates (a digit before "hundert" with the one before "hundred")."""
    en, de = [_plain(w) for w in src.split()], [_plain(w) for w in tgt.split()]
    links = set()
    for j, d in enumerate(de):
        found = [i for i, e in enumerate(en) if d in LEXICON.get(e, ())]
        if len(found) > 1:
            before = j + 1 < len(de) and de[j + 1] == "hundert"
            found = [i for i in found if (i + 1 < len(en) and en[i + 1] == "hundred") == before]
        if len(found) == 1:
            links.add((found[0], j))
    return links
