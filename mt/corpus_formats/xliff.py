"""The `xliff` format: an XLIFF 1.2 or 2.0 file, each segment's source and target a pair.

Segments without a target (or with an empty one) and those under `translate="no"` are left
out, counted for `mt data check`. A pair is plain text: the inline codes taken out, whitespace
collapsed (mt.l10n.inline says why). The file's languages are checked against the corpus's:
a file the other way round (its source the corpus's target) gives its pairs turned round;
one in other languages is a DataError.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from mt.corpus_formats import OneFile, Pairs
from mt.errors import DataError
from mt.l10n import xliff
from mt.l10n.inline import plain
from mt.l10n.languages import matches
from mt.textio import open_binary


def iter_xliff(path: Path, langs: tuple[str, ...], left_out: Counter) -> Iterator[tuple[str, str]]:
    turned = False
    with open_binary(path) as f:
        for item in xliff.read(f, str(path)):
            if isinstance(item, xliff.Languages):
                turned = _turned(item, langs, path)
            elif not item.translate:
                left_out["not to translate"] += 1
            elif item.untranslated:
                left_out["no target"] += 1
            else:
                pair = plain(item.source), plain(item.target)
                yield pair[::-1] if turned else pair


def _turned(file: xliff.Languages, langs: tuple[str, ...], path: Path) -> bool:
    """Whether the file's segments go the other way (its source the corpus's target); a
    DataError for a file in other languages."""
    said = (file.source, file.target)  # "": the file does not say

    def fits(a: str, b: str) -> bool:
        return all(not s or matches(s, code) for s, code in zip(said, (a, b)))

    src, tgt = langs
    if fits(src, tgt):
        return False
    if fits(tgt, src):
        return True
    raise DataError(f"{path}: its languages are {said[0] or '?'} to {said[1] or '?'}, not the "
                    f"corpus's {src} to {tgt}")


class XliffFormat(OneFile):
    name, suffixes = "xliff", (".xlf", ".xliff", ".xlf.gz", ".xliff.gz")

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Pairs:
        left_out: Counter = Counter()
        return Pairs(iter_xliff(paths[0], langs, left_out), left_out)


FORMAT = XliffFormat()
