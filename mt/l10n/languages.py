"""Language tags as localization files write them, matched to a corpus's language codes.

A file says `de-DE`, `de_AT` or `DE` where the corpus says `de`: a tag matches a code when they
are the same tag (case and `_` aside), else when their languages (the first subtag) are. The
rule is BCP 47's lookup reduced to what these files hold; langcodes would add a dependency
for the same answer on them.
"""

from __future__ import annotations

from collections.abc import Iterable


def normal(tag: str) -> str:
    """`de_DE` -> `de-de`: the form tags are compared in."""
    return tag.strip().replace("_", "-").lower()


def best(code: str, tags: Iterable[str]) -> str | None:
    """The tag among tags that matches code: the same tag, else the first of the same
    language; None if none."""
    tags = list(tags)
    want = normal(code)
    same = [t for t in tags if normal(t) == want]
    if same:
        return same[0]
    return next((t for t in tags if normal(t).split("-")[0] == want.split("-")[0]), None)


def matches(tag: str, code: str) -> bool:
    """Whether a file's language tag is the corpus's language `code`."""
    return best(code, [tag]) is not None
