"""The `jsonl` format: one file (plain or .gz) of JSON objects, one a line, each a pair keyed by
the corpus's language codes (data.src_lang, data.tgt_lang) as Hugging Face's translation
datasets write them: {"de": "...", "en": "..."}, or the same inside "translation":
{"translation": {"de": "...", "en": "..."}}. Other keys are ignored.

With pyarrow installed (the parquet extra), blocks of lines are parsed by Arrow's JSON reader,
in C++: about twice as fast as Python's scanner, which is as fast as reading two plain files
(benchmarks/bench_formats.py). A block Arrow does not give back whole, a row for each line,
each with both sides as strings, is read again line by line from there, by the scanner, which
also says what is wrong with a line and where."""

from __future__ import annotations

import gzip
import itertools
import json
from collections.abc import Generator, Iterator
from pathlib import Path

from mt.corpus_formats import OneFile
from mt.errors import DataError
from mt.textio import Undecoded, iter_lines, undecoded

# The C scanner json.loads runs, without its wrappers: reading a corpus is about twice as fast
# (for a line json.loads would not take whole, json.loads gives the error).
_scan = json.JSONDecoder().scan_once


BLOCK = 1 << 22  # bytes of lines Arrow parses at a time


def iter_jsonl(path: Path, langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """Pairs of a file of JSON objects; a line that is not one, or lacks a side, is a DataError
    naming the file and line."""
    lines, whole = yield from _arrow_pairs(path, langs)
    if not (whole and lines):
        yield from _scanned_pairs(path, langs, lines)


def _arrow_pairs(path: Path, langs: tuple[str, ...]
                 ) -> Generator[tuple[str, str], None, tuple[int, bool]]:
    """The pairs of the file's blocks that Arrow reads whole, a row a line, up to the first it
    does not (nothing without pyarrow); returns the lines read and whether that was all."""
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:
        return 0, False
    lines = 0
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb") as f:
            block = b""
            while True:
                more = f.read(BLOCK)
                if not (block or more):
                    return lines, True
                block += more
                end = block.rfind(b"\n") + 1 if more else len(block)  # whole lines
                if not end:
                    continue  # a line longer than a block: read on
                block, rest = block[:end], block[end:]
                n = block.count(b"\n") + (not block.endswith(b"\n"))
                table = pj.read_json(pa.py_buffer(block), read_options=pj.ReadOptions(
                    use_threads=False, block_size=len(block) + 1))
                sides = _sides(table, langs, pa)
                if sides is None or table.num_rows != n:
                    return lines, False  # a blank line, or two objects on one, ...
                yield from zip(sides[0].to_pylist(), sides[1].to_pylist())
                lines, block = lines + n, rest
    except (pa.ArrowException, ValueError, OSError, EOFError):
        return lines, False  # not JSON, not UTF-8, cut short: the scanner says what and where


def _sides(table, langs: tuple[str, ...], pa) -> tuple | None:
    """A parsed block's source and target string columns; None where a row lacks either."""
    fields = table
    if "translation" in table.column_names:
        kind = table.schema.field("translation").type
        if not pa.types.is_struct(kind) or table.column("translation").null_count:
            return None
        fields = pa.Table.from_struct_array(table.column("translation"))
    if not all(lang in fields.column_names for lang in langs):
        return None
    sides = tuple(fields.column(lang) for lang in langs)
    if any(not pa.types.is_string(c.type) or c.null_count for c in sides):
        return None
    return sides


def _scanned_pairs(path: Path, langs: tuple[str, ...], skip: int = 0
                   ) -> Iterator[tuple[str, str]]:
    """The pairs of the file's lines after the first `skip`, parsed by Python's scanner."""
    src, tgt = langs
    n = 0
    lines = iter_lines(path)
    for n, line in enumerate(itertools.islice(lines, skip, None), skip + 1):
        record = _parsed(line.removeprefix("\ufeff") if n == 1 else line, path, n)  # Arrow's too
        try:  # the common case, quickly; record_pair says what is wrong with another
            fields = record["translation"] if "translation" in record else record
            pair = fields[src], fields[tgt]
        except (TypeError, KeyError):
            pair = None
        if pair is None or type(pair[0]) is not str or type(pair[1]) is not str:
            pair = record_pair(record, langs, f"{path}:{n}")
        yield (undecoded(pair[0], line), undecoded(pair[1], line)) if type(line) is Undecoded \
            else pair
    if not n:
        raise DataError(f"{path}: file is empty; give a file with one pair a line")


def _parsed(line: str, path: Path, n: int) -> object:
    try:
        value, end = _scan(line, 0)
        if end == len(line):
            return value
    except (ValueError, StopIteration):
        pass
    try:  # whitespace around the value is fine; anything else, json.loads says where
        return json.loads(line)
    except ValueError as e:
        found = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else e
        raise DataError(f"{path}:{n}: not JSON ({found}); a jsonl corpus has one JSON object a "
                        "line") from None


def record_pair(record: object, langs: tuple[str, ...], where: str) -> tuple[str, str]:
    """The (source, target) strings of one record, at its top or under "translation"."""
    fields = record.get("translation", record) if isinstance(record, dict) else record
    if not isinstance(fields, dict):
        raise DataError(f"{where}: expected a JSON object, found {type(fields).__name__}")
    sides = []
    for lang in langs:
        if lang not in fields:
            keys = ", ".join(map(json.dumps, fields)) or "none"
            raise DataError(f"{where}: no {json.dumps(lang)} key (it has {keys}); each object "
                            "needs the corpus's languages as keys, at its top or under "
                            '"translation"')
        if not isinstance(fields[lang], str):
            raise DataError(f"{where}: {json.dumps(lang)} is "
                            f"{type(fields[lang]).__name__}, expected a string")
        sides.append(fields[lang])
    return sides[0], sides[1]


class JsonlFormat(OneFile):
    name, suffixes = "jsonl", (".jsonl", ".jsonl.gz", ".json", ".json.gz")

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        return iter_jsonl(paths[0], langs)


FORMAT = JsonlFormat()
