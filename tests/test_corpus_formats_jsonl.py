"""mt/corpus_formats/jsonl.py: one JSON object a line, keyed by the corpus's languages at its
top or under "translation" (as Hugging Face's translation datasets write them: e.g. wmt14's
{"translation": {"de": ..., "en": ...}}); every malformed line a DataError naming its line."""

from __future__ import annotations

import gzip
import json

import pytest

from mt.corpus_formats import CorpusSource
from mt.errors import DataError
from mt.textio import Undecoded


def pairs(path, langs=("en", "de")) -> list[tuple[str, str]]:
    return list(CorpusSource("j", "jsonl", (path,), langs).pairs())


def test_both_record_shapes_other_keys_ignored_and_gz(tmp_path):
    text = ('{"id": 7, "en": "one", "de": "eins"}\n'
            '{"translation": {"de": "zwei", "en": "two"}, "score": 0.5}\n'
            '{"en": "", "de": "tab\\there, \\u00e4"}\n')
    (tmp_path / "a.jsonl").write_text(text, encoding="utf-8")
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    want = [("one", "eins"), ("two", "zwei"), ("", "tab\there, ä")]
    assert pairs(tmp_path / "a.jsonl") == pairs(tmp_path / "a.jsonl.gz") == want
    assert pairs(tmp_path / "a.jsonl", ("de", "en"))[0] == ("eins", "one")  # keys, not order
    (tmp_path / "bom.jsonl").write_bytes(b"\xef\xbb\xbf" + text.encode())  # as Windows tools write
    assert pairs(tmp_path / "bom.jsonl") == want


@pytest.mark.parametrize("line, message", [
    ('{"en": "a", "de": "b"', r"bad.jsonl:3: not JSON \(Expecting ',' delimiter at column 22\)"),
    ("", r"bad.jsonl:3: not JSON \(Expecting value at column 1\)"),  # a blank line
    ('{"en": "a"}', r'bad.jsonl:3: no "de" key \(it has "en"\)'),
    ('{"translation": {"de": "b"}, "en": "a"}', r'bad.jsonl:3: no "en" key \(it has "de"\)'),
    ('{"en": 1, "de": "b"}', r'bad.jsonl:3: "en" is int, expected a string'),
    ('["a", "b"]', r"bad.jsonl:3: expected a JSON object, found list"),
    ('{"translation": "a b"}', r"bad.jsonl:3: expected a JSON object, found str"),
])
def test_a_malformed_line_is_refused_with_its_number(tmp_path, line, message):
    good = '{"en": "x", "de": "y"}\n'
    (tmp_path / "bad.jsonl").write_text(good * 2 + line + "\n" + good, encoding="utf-8")
    with pytest.raises(DataError, match=message):
        pairs(tmp_path / "bad.jsonl")


def test_an_empty_file_is_refused(tmp_path):
    (tmp_path / "e.jsonl").write_bytes(b"")
    with pytest.raises(DataError, match="e.jsonl: file is empty"):
        pairs(tmp_path / "e.jsonl")


def test_invalid_utf8_stays_marked_on_the_side_that_had_it(tmp_path):
    (tmp_path / "u.jsonl").write_bytes(b'{"en": "ok", "de": "bad \xff byte"}\n')
    ((src, tgt),) = pairs(tmp_path / "u.jsonl")
    assert tgt == "bad \ufffd byte" and isinstance(tgt, Undecoded)
    assert not isinstance(src, Undecoded)


def records(n: int, nested: bool = False) -> str:
    """n varied records: escapes, non-ASCII (some escaped), other keys, CRLF endings."""
    out = []
    for i in range(n):
        pair = {"de": f"Zeile {i} ä \" \t ü" + "x" * (i % 50), "en": f"line {i}"}
        record = {"translation": pair, "id": i} if nested else {"id": i, **pair}
        out.append(json.dumps(record, ensure_ascii=i % 3 == 0) + ("\r\n" if i % 7 else "\n"))
    return "".join(out)


@pytest.mark.parametrize("nested", [False, True])
def test_arrow_blocks_and_the_scanner_give_the_same_pairs(tmp_path, monkeypatch, nested):
    pytest.importorskip("pyarrow")
    from mt.corpus_formats import jsonl

    last = {"en": "last", "de": "y" * 300}  # longer than a block, and no final newline
    text = records(100, nested) + json.dumps({"translation": last} if nested else last)
    (tmp_path / "a.jsonl").write_text(text, encoding="utf-8")
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    monkeypatch.setattr(jsonl, "BLOCK", 256)  # many blocks, and a line longer than one
    want = list(jsonl._scanned_pairs(tmp_path / "a.jsonl", ("en", "de")))
    assert len(want) == 101 and want[3] == ("line 3", "Zeile 3 ä \" \t üxxx")
    monkeypatch.setattr(jsonl, "_scan", None)  # a clean file never reaches the scanner
    assert pairs(tmp_path / "a.jsonl") == pairs(tmp_path / "a.jsonl.gz") == want


@pytest.mark.parametrize("arrow", [True, False])
def test_a_bad_line_in_a_later_block_is_named_after_every_pair_before_it(tmp_path, monkeypatch,
                                                                         arrow):
    from mt.corpus_formats import jsonl

    if arrow:
        pytest.importorskip("pyarrow")
    else:  # as without pyarrow installed
        monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    monkeypatch.setattr(jsonl, "BLOCK", 256)
    (tmp_path / "b.jsonl").write_text(records(60) + "\n" + records(5), encoding="utf-8")
    got = []
    with pytest.raises(DataError, match=r"b.jsonl:61: not JSON \(Expecting value"):
        got.extend(jsonl.iter_jsonl(tmp_path / "b.jsonl", ("en", "de")))
    assert [en for en, _ in got] == [f"line {i}" for i in range(60)]  # each once, in order


def test_sides_that_arrow_would_read_as_dates_stay_text(tmp_path):
    (tmp_path / "d.jsonl").write_text('{"de": "2020-01-01", "en": "2020-01-02"}\n' * 3,
                                      encoding="utf-8")  # Arrow infers timestamps: the scanner
    assert pairs(tmp_path / "d.jsonl", ("de", "en")) == [("2020-01-01", "2020-01-02")] * 3
