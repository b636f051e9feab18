"""The `jsonl` format: one file (plain or .gz) of JSON objects, one a line, each a pair keyed by
the corpus's language codes (data.src_lang, data.tgt_lang) as Hugging Face's translation
datasets write them: {"de": "...", "en": "..."}, or the same inside "translation":
{"translation": {"de": "...", "en": "..."}}. Other keys are ignored."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from mt.corpus_formats import OneFile
from mt.errors import DataError
from mt.textio import Undecoded, iter_lines, undecoded

# The C scanner json.loads runs, without its wrappers: reading a corpus is about twice as fast
# (for a line json.loads would not take whole, json.loads gives the error).
_scan = json.JSONDecoder().scan_once


def iter_jsonl(path: Path, langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """Pairs of a file of JSON objects; a line that is not one, or lacks a side, is a DataError
    naming the file and line."""
    src, tgt = langs
    n = 0
    for n, line in enumerate(iter_lines(path), 1):
        record = _parsed(line, path, n)
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
