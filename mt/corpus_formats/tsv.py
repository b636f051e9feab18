"""The `tsv` format: one file (plain or .gz) of `source TAB target` lines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mt.corpus_formats import OneFile
from mt.errors import DataError
from mt.textio import iter_lines, undecoded


def iter_tsv(path: Path) -> Iterator[tuple[str, str]]:
    """Pairs of a file of `source TAB target` lines; a line with no tab or several is a
    DataError naming it."""
    n = 0
    for n, line in enumerate(iter_lines(path), 1):
        parts = line.split("\t")
        if len(parts) != 2:
            found = "no tab" if len(parts) == 1 else f"{len(parts) - 1} tabs"
            raise DataError(f"{path}:{n}: expected source TAB target, found {found}; a tsv "
                            "corpus has one tab a line")
        yield undecoded(parts[0], line), undecoded(parts[1], line)
    if not n:
        raise DataError(f"{path}: file is empty; give a file with one pair a line")


class TsvFormat(OneFile):
    name, suffixes = "tsv", (".tsv", ".tsv.gz")

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        return iter_tsv(paths[0])


FORMAT = TsvFormat()
