"""Corpus formats: how a training corpus's pairs are stored, a registry of readers (docs/data.md).

- `plain` (the default): two files, line i of one translating line i of the other (plain.py).
- `tsv`: one file of `source TAB target` lines (tsv.py).
- `jsonl`, `parquet`: one file of records keyed by language (jsonl.py, parquet.py).
- `xliff`, `tmx`: localization files, XLIFF and TMX (xliff.py, tmx.py; mt.l10n reads them).
- `po`: gettext PO files, msgid -> msgstr (po.py; mt.l10n.po).

A format is one module holding a `FORMAT` (a CorpusFormat: the keys of CorpusConfig it reads,
their checks, where its files are, and how its pairs are read) and one line in FORMATS. Config
validates corpora with it, so this package sits below config and never imports it.
"""

from __future__ import annotations

import importlib
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

FORMATS = {  # a corpus's `format` -> the module whose FORMAT reads it
    "plain": "mt.corpus_formats.plain",
    "tsv": "mt.corpus_formats.tsv",
    "jsonl": "mt.corpus_formats.jsonl",
    "parquet": "mt.corpus_formats.parquet",
    "xliff": "mt.corpus_formats.xliff",
    "tmx": "mt.corpus_formats.tmx",
    "po": "mt.corpus_formats.po",
}
# What a corpus that names no format is: the one place it is decided (configs from before
# `format` existed hold two-file corpora, and a split name in data.train is one).
DEFAULT_FORMAT = "plain"


@dataclass
class CorpusConfig:
    """One training corpus of data.train (docs/data.md#several-corpora)."""

    name: str = ""  # in the log and `mt info`; default: its prefix or file name
    # plain: two files; the others: one file of pairs. The names in FORMATS, checked at load
    # as any Literal is (and a fake format a test registers is one too).
    format: Literal[tuple(FORMATS)] = DEFAULT_FORMAT
    dir: str | None = None  # where prefix's files are; null = data.dir
    prefix: str = ""  # plain: files {dir}/{prefix}.{src_lang} and .{tgt_lang} (or .gz)
    src: str = ""  # plain: or two explicit paths
    tgt: str = ""
    path: str = ""  # tsv, jsonl, parquet, xliff, tmx: the file (.gz allowed but for parquet);
    # po: a file, a directory or a glob
    weight: float = 1.0  # times the corpus is drawn per epoch: 2 = each pair twice, 0.5 = half
    tag: str = ""  # a token like <bt> put before each source sentence of this corpus


class Pairs:
    """A format's pairs, and what it left out of its file as it read them (by why: a
    localization file's units without a translation), counted once the pairs are read."""

    def __init__(self, pairs: Iterable[tuple[str, str]], left_out: Counter | None = None):
        self.pairs, self.left_out = iter(pairs), Counter() if left_out is None else left_out

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return self.pairs


class CorpusFormat:
    """What the registry needs of a format: its checks, its files, its pairs."""

    # The endings of a file of this format, for a file given alone (`mt eval --pairs FILE`)
    suffixes: tuple[str, ...] = ()

    def check(self, c: CorpusConfig, key: str) -> Iterator[str]:
        """A message for each way c (data.train[i], named `key` in messages) is not a corpus of
        this format."""
        return iter(())

    def default_name(self, c: CorpusConfig) -> str:
        """The corpus's name when the config gives none: its file's, or its prefix's."""
        raise NotImplementedError

    def paths(self, c: CorpusConfig, data_dir: str, langs: tuple[str, str]) -> tuple[Path, ...]:
        """The corpus's files, found: data_dir is data.dir, langs (data.src_lang, tgt_lang)."""
        raise NotImplementedError

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        """The (source, target) pairs, streamed (or Pairs, when the format leaves some of its
        file out); langs: the (source, target) language codes, for formats that key the sides
        by them. A file that is not of this format is a DataError naming it (and its line)."""
        raise NotImplementedError


class OneFile(CorpusFormat):
    """A format whose corpus is one file, `path`, holding both sides."""

    name = ""  # the format's name in FORMATS, for messages

    def check(self, c: CorpusConfig, key: str) -> Iterator[str]:
        if not c.path or c.prefix or c.src or c.tgt:
            yield (f"{key}: a {self.name} corpus is one file: give path (and no prefix, src or "
                   "tgt)")

    def default_name(self, c: CorpusConfig) -> str:
        return Path(c.path).name

    def paths(self, c: CorpusConfig, data_dir: str, langs: tuple[str, str]) -> tuple[Path, ...]:
        return (Path(c.path),)


def corpus_format(name: str) -> CorpusFormat:
    """The registered format `name`, its module imported on first use; KeyError if none."""
    return importlib.import_module(FORMATS[name]).FORMAT


def format_of(path: str | Path) -> str | None:
    """The format whose file names end as path's does (a.jsonl.gz: jsonl); None if none."""
    name = Path(path).name
    return next((f for f in FORMATS if name.endswith(corpus_format(f).suffixes)), None)


@dataclass(frozen=True)
class CorpusSource:
    """A corpus with its files found: training's (from data.train), or a held-out set."""

    name: str
    format: str  # its reader: a name in FORMATS
    paths: tuple[Path, ...]  # plain: (source, target); the others: (the file,)
    langs: tuple[str, ...] = ()  # (source, target) codes: the keys of jsonl and parquet sides
    weight: float = 1.0
    tag: str = ""

    def pairs(self) -> Pairs:
        found = corpus_format(self.format).pairs(self.paths, self.langs)
        return found if isinstance(found, Pairs) else Pairs(found)

    def side(self, k: int) -> Iterator[str]:
        """The lines of side k (0 source, 1 target)."""
        return (pair[k] for pair in self.pairs())

    def __str__(self) -> str:
        return " and ".join(map(str, self.paths))

    @property
    def label(self) -> str:
        """Short: a/train for a/train.de and a/train.en."""
        common = os.path.commonprefix([str(p) for p in self.paths]).rstrip(".")
        return common if len(self.paths) == 2 and common else str(self)
