"""mt/corpus_formats/parquet.py: a Parquet file with a string column per language, or a
`translation` struct column of them (as Hugging Face's translation datasets store their
splits, e.g. wmt14's `translation: struct<de: string, en: string>`), read a batch of rows at a
time; missing columns, nulls and other files each a DataError naming the file (and the row)."""

from __future__ import annotations

import importlib.util

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from mt.config import load_config  # noqa: E402
from mt.corpus_formats import CorpusSource, parquet  # noqa: E402
from mt.errors import ConfigError, DataError  # noqa: E402

PAIRS = [("one", "eins"), ("two", "zwei"), ("three", "drei"), ("", "vier")]


def pairs(path, langs=("en", "de")) -> list[tuple[str, str]]:
    return list(CorpusSource("p", "parquet", (path,), langs).pairs())


def test_a_column_per_language_or_a_translation_struct_read_across_batches(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setattr(parquet, "BATCH_ROWS", 3)
    pq.write_table(pa.table({"id": [1, 2, 3, 4], "de": [t for _, t in PAIRS],
                             "en": [s for s, _ in PAIRS]}), tmp_path / "columns.parquet")
    structs = [{"de": t, "en": s} for s, t in PAIRS]
    pq.write_table(pa.table({"translation": structs}), tmp_path / "hf.parquet",
                   row_group_size=2)
    assert pairs(tmp_path / "columns.parquet") == pairs(tmp_path / "hf.parquet") == PAIRS
    assert pairs(tmp_path / "hf.parquet", ("de", "en"))[0] == ("eins", "one")


def test_missing_columns_are_refused_naming_the_columns_there(tmp_path):
    pq.write_table(pa.table({"source": ["a"], "target": ["b"]}), tmp_path / "m.parquet")
    pq.write_table(pa.table({"translation": [{"de": "b", "fr": "c"}]}), tmp_path / "t.parquet")
    with pytest.raises(DataError, match=r"m.parquet: no columns 'en' and 'de', nor a "
                                        r"'translation' column .*\(its columns: source, target\)"):
        pairs(tmp_path / "m.parquet")
    with pytest.raises(DataError, match=r"t.parquet: no columns 'en' and 'de'.*translation\)"):
        pairs(tmp_path / "t.parquet")


def test_a_null_is_refused_with_its_row_across_batches(tmp_path, monkeypatch):
    monkeypatch.setattr(parquet, "BATCH_ROWS", 2)
    pq.write_table(pa.table({"en": ["a", "b", "c", "d"], "de": ["a", "b", "c", None]}),
                   tmp_path / "n.parquet")
    pq.write_table(pa.table({"translation": pa.array([{"en": "a", "de": "b"}, None],
                                                     pa.struct([("en", pa.string()),
                                                                ("de", pa.string())]))}),
                   tmp_path / "s.parquet")
    with pytest.raises(DataError, match=r"n.parquet: row 4: no 'de' text \(null\)"):
        pairs(tmp_path / "n.parquet")
    with pytest.raises(DataError, match=r"s.parquet: row 2: no 'en' text \(null\)"):
        pairs(tmp_path / "s.parquet")


def test_other_files_are_refused_in_one_line(tmp_path):
    pq.write_table(pa.table({"en": [1], "de": ["a"]}), tmp_path / "int.parquet")
    pq.write_table(pa.table({"en": pa.array([], pa.string()), "de": pa.array([], pa.string())}),
                   tmp_path / "empty.parquet")
    (tmp_path / "text.parquet").write_text("en\tde\n", encoding="utf-8")
    for name, message in (("int", r"column 'en' holds int64, expected strings"),
                          ("empty", r"file is empty"),
                          ("text", r"not a Parquet file"),
                          ("missing", r"file not found")):
        with pytest.raises(DataError, match=rf"{name}.parquet: {message}"):
            pairs(tmp_path / f"{name}.parquet")


def test_without_pyarrow_a_parquet_corpus_is_refused_at_load(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(ConfigError, match=r"data.train\[0\]: the parquet format needs pyarrow: "
                                          r"pip install 'mt\[parquet\]'"):
        load_config(None, ["data.train=[{format: parquet, path: a.parquet}]"])
