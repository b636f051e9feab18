"""The `plain` format: two files, the source and the target, line i of one translating line i
of the other; given as a prefix ({dir}/{prefix}.{lang}, plain or .gz) or as two paths."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from mt.corpus_formats import CorpusConfig, CorpusFormat
from mt.errors import DataError
from mt.textio import iter_lines, split_path


def iter_parallel(src_path: Path, tgt_path: Path) -> Iterator[tuple[str, str]]:
    """Pairs of lines, streamed. Files of different lengths, or empty ones, are a DataError
    (raised when the shorter one ends)."""
    src, tgt = iter_lines(src_path), iter_lines(tgt_path)
    n = 0
    while True:
        s, t = next(src, None), next(tgt, None)
        if s is None or t is None:
            break
        n += 1
        yield s, t
    if s is not None or t is not None:
        n_src = n + (s is not None) + sum(1 for _ in src)
        n_tgt = n + (t is not None) + sum(1 for _ in tgt)
        raise DataError(f"parallel files differ in length: {src_path} has {n_src} lines, "
                        f"{tgt_path} has {n_tgt}; line i of one must translate line i of the "
                        "other")
    if not n:
        raise DataError(f"{src_path}: file is empty; give a file with one sentence a line")


class PlainFormat(CorpusFormat):
    def check(self, c: CorpusConfig, key: str) -> Iterator[str]:
        if bool(c.prefix) == bool(c.src or c.tgt):
            yield (f"{key}: give prefix (files {{dir}}/{{prefix}}.{{lang}}), or src and tgt, "
                   "for a plain corpus")
        elif not c.prefix and not (c.src and c.tgt):
            yield f"{key}: a plain corpus needs both src and tgt"

    def default_name(self, c: CorpusConfig) -> str:
        return Path(c.prefix or c.src).name

    def paths(self, c: CorpusConfig, data_dir: str, langs: tuple[str, str]) -> tuple[Path, ...]:
        if c.prefix:
            return tuple(split_path(c.dir or data_dir, c.prefix, lang) for lang in langs)
        return Path(c.src), Path(c.tgt)

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        return iter_parallel(*paths)


FORMAT = PlainFormat()
