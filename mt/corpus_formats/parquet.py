"""The `parquet` format: one Parquet file whose rows are pairs, in a string column per language
(named by the corpus's codes, data.src_lang and data.tgt_lang) or in a `translation` column of
structs with those fields, as Hugging Face's translation datasets store them. Read with pyarrow
(the parquet extra) in batches of rows, only the columns needed."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path

from mt.corpus_formats import CorpusConfig, OneFile
from mt.errors import ConfigError, DataError
from mt.textio import read_error

BATCH_ROWS = 65536
NEEDS = "the parquet format needs pyarrow: pip install 'mt[parquet]'"


def iter_parquet(path: Path, langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """Pairs of a Parquet file, a batch of rows at a time; missing columns, a null, or a file
    that is not Parquet is a DataError naming the file (and the row)."""
    pa, pq = _pyarrow()
    try:
        f = pq.ParquetFile(path)
    except OSError as e:
        raise read_error(e, path) from None
    except pa.ArrowException as e:
        raise DataError(f"{path}: not a Parquet file ({e})") from None
    columns, sides = _columns(f.schema_arrow, langs, path, pa)
    if not f.metadata.num_rows:
        raise DataError(f"{path}: file is empty; give a file with one pair a row")
    row = 0
    try:
        for batch in f.iter_batches(batch_size=BATCH_ROWS, columns=columns):
            arrays = sides(batch)
            for lang, a in zip(langs, arrays):
                if a.null_count:
                    first = row + a.is_null().to_pylist().index(True) + 1
                    raise DataError(f"{path}: row {first}: no {lang!r} text (null); every row "
                                    "needs both sides")
            yield from zip(arrays[0].to_pylist(), arrays[1].to_pylist())
            row += batch.num_rows
    except (pa.ArrowException, OSError) as e:
        raise DataError(f"{path}: cannot read ({e}); is the file complete? Copy it "
                        "again") from None


def _columns(schema, langs: tuple[str, ...], path: Path, pa) -> tuple[list[str], Callable]:
    """The columns to read, and how a batch of them gives the (source, target) arrays."""
    names = schema.names
    if all(lang in names for lang in langs):
        for lang in langs:
            _check_strings(schema.field(lang).type, lang, path, pa)
        return list(langs), lambda batch: (batch.column(0), batch.column(1))
    kind = schema.field("translation").type if "translation" in names else None
    if kind is not None and pa.types.is_struct(kind) and \
            all(kind.get_field_index(lang) >= 0 for lang in langs):
        for lang in langs:
            _check_strings(kind.field(lang).type, f"translation.{lang}", path, pa)

        def sides(batch):  # a null translation leaves its fields' values undefined: null them
            t = batch.column(0)
            return tuple(pa.compute.if_else(t.is_valid(), t.field(lang), None) if t.null_count
                         else t.field(lang) for lang in langs)
        return ["translation"], sides
    raise DataError(f"{path}: no columns {langs[0]!r} and {langs[1]!r}, nor a 'translation' "
                    f"column with those fields (its columns: {', '.join(names) or 'none'}); "
                    "name the columns by the corpus's languages")


def _check_strings(kind, name: str, path: Path, pa) -> None:
    string_view = getattr(pa.types, "is_string_view", lambda kind: False)  # pyarrow >= 16
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or string_view(kind)):
        raise DataError(f"{path}: column {name!r} holds {kind}, expected strings")


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401  (pa.compute)
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(NEEDS) from None
    return pa, pq


class ParquetFormat(OneFile):
    name, suffixes = "parquet", (".parquet",)

    def check(self, c: CorpusConfig, key: str) -> Iterator[str]:
        yield from super().check(c, key)
        if importlib.util.find_spec("pyarrow") is None:
            yield f"{key}: {NEEDS}"

    def pairs(self, paths: tuple[Path, ...], langs: tuple[str, ...]) -> Iterator[tuple[str, str]]:
        return iter_parquet(paths[0], langs)


FORMAT = ParquetFormat()
