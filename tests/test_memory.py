"""mt.memory: the match percentage on hand-made cases, retrieval, training-time matches, and the
SQLite store's durability (a writer killed mid-way) and damaged files."""

from __future__ import annotations

import re
import signal
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import ROOT
from mt.errors import DataError
from mt.memory import open_memory, score, store
from mt.memory.match import FOLDING_SPLITS, _Words, key, rank, words
from mt.memory.store import most_weight
from mt.memory.training import best_matches


@pytest.mark.parametrize("query, source, expected", [
    ("Save the file", "Save the file", 100.0),  # exact
    ("Save  the file ", "Save the file", 100.0),  # whitespace only: exact
    ("Save the file", "save the file", 99.0),  # case only: the case penalty
    ("Save the file", "Open the file", 100 * (1 - 1 / 3)),  # one word of three substituted
    ("Save the file", "Save the file now", 100 * (1 - 1 / 4)),  # one inserted, of four
    ("the file Save", "Save the file", 100 * (1 - 2 / 3)),  # reordered: a deletion + insertion
    ("Save the file", "save the FILE now", 100 * (1 - 1 / 4) - 1),  # both
    ("", "", 100.0),
    ("", "Save", 0.0),
    ("Save, then quit", "Save then quit", 100 * (1 - 1 / 4)),  # the comma is a word
])
def test_the_match_percentage_is_the_documented_formula(query, source, expected):
    assert score(query, source) == pytest.approx(expected)


@pytest.mark.parametrize("threshold", [0.0, 50.0, 75.0, 99.0])
def test_rank_skips_by_length_only_what_its_threshold_drops(threshold):
    """rank leaves out a candidate whose lengths alone put it below the threshold without
    scoring it: the matches it keeps are those score() keeps, with score()'s percentages."""
    sources = ["Save the file", "save the file", "Save the file now please", "Save", "",
               "the file Save", "SAVE THE FILE", "Save the whole file now", "Save, the file"]
    rows = [(i, s, s.upper()) for i, s in enumerate(sources)]
    for query in ("Save the file", "save", "Save the file now", "", "SAVE the File"):
        want = sorted(((score(query, s), i) for i, s, _ in rows  # ties: the latest first
                       if score(query, s) >= threshold), reverse=True)
        for k in (1, 2, 3, len(rows)):  # the case penalty, computed near the k-th only
            assert [(m.score, m.id) for m in rank(query, rows, k, threshold)] == want[:k]


def test_a_text_is_folded_whole_unless_a_letter_folds_into_two_words():
    """The score's words are the text case-folded, then split (fast), except for a text with a
    character of FOLDING_SPLITS, folded word by word: the same words as key() either way. The
    set is Python's Unicode database's: every character whose folding moves a word boundary."""
    def kind(ch):
        return "w" if re.fullmatch(r"\w", ch) else "s" if ch.isspace() else "p"

    moved = {c for c in map(chr, range(sys.maxunicode + 1))
             if (f := c.casefold()) != c and not (
                 all(kind(x) == "w" for x in f) if kind(c) == "w" else
                 len(f) == 1 and kind(f) == kind(c))}
    assert moved == {c for c in map(chr, range(sys.maxunicode + 1)) if FOLDING_SPLITS.match(c)}
    for text in ("İstanbul ist groß", "STRASSE, Straße", "ǰ-x", "Save the FILE", "ΐ ᾳ"):
        assert _Words(text).folded == key(text).split()


def test_the_candidates_hold_the_most_rare_weight_the_latest_first():
    postings = [np.array([1, 2, 3, 7]), np.array([2, 3]), np.array([3, 9])]
    # 3: 1 + 2 + 5; 9: 5; 2: 1 + 2; 7 and 1: 1 each, 7 the later
    assert most_weight(postings, [1.0, 2.0, 5.0], 10) == [3, 9, 2, 7, 1]
    assert most_weight(postings, [1.0, 2.0, 5.0], 2) == [3, 9]
    assert most_weight([np.zeros(0, np.int64)], [1.0], 5) == []


def test_words_and_keys():
    assert words("Save, the  file.") == ["Save", ",", "the", "file", "."]
    assert key(" Über  DIE Datei ") == "über die datei"


@pytest.fixture
def memory(tmp_path):
    m = open_memory(tmp_path / "m.db", ("en", "de"))
    m.add([("Save the file", "Datei speichern"), ("Open the file", "Datei öffnen"),
           ("Close the window", "Fenster schließen"), ("Save the file", "Datei speichern"),
           ("Quit the program now", "Programm jetzt beenden")])
    yield m
    m.close()


def test_search_finds_the_best_by_the_score_and_keeps_duplicates_once(memory):
    assert memory.info()["pairs"] == 4
    found = memory.search("save the FILE", k=2)
    assert [(m.source, m.score) for m in found] == [
        ("Save the file", pytest.approx(99.0)), ("Open the file", pytest.approx(200 / 3 - 1))]
    assert memory.search("Save the file", k=1)[0].score == 100.0
    assert [m.source for m in memory.search("the window", threshold=50)] == ["Close the window"]
    assert memory.search("zebra giraffe") == []


def test_best_is_searched_once_until_the_memory_changes(memory, tmp_path, monkeypatch):
    """best() keeps its answers while the memory is unchanged: a text asked again is not
    searched again; a pair added through this connection or another is seen at once."""
    searched = []
    search = type(memory).search
    monkeypatch.setattr(type(memory), "search",
                        lambda self, text, *a: searched.append(text) or search(self, text, *a))
    assert memory.best("Save the file now", 50.0).target == "Datei speichern"
    assert memory.best("Save the file now", 50.0).target == "Datei speichern"
    assert memory.best("  ", 50.0) is None and searched == ["Save the file now"]
    memory.add([("Save the file now", "Datei jetzt speichern")])
    assert memory.best("Save the file now", 50.0).target == "Datei jetzt speichern"
    with open_memory(tmp_path / "m.db") as other:  # another connection, as another process
        other.add([("Save the file now", "Jetzt speichern")])
    assert memory.best("Save the file now", 50.0).target == "Jetzt speichern"
    assert memory.best("Save the file now", 90.0).target == "Jetzt speichern"
    assert searched == ["Save the file now"] * 4  # each threshold its own answer


def test_a_query_of_common_words_looks_among_their_latest_pairs(tmp_path, monkeypatch):
    """Where even the query's rarest word is held by more than WORD_BUDGET pairs, the
    candidates are those holding most of its COMMON_WORDS rarest words among each one's latest
    WORD_BUDGET pairs (ids 1-5 in the order added)."""
    monkeypatch.setattr(store, "WORD_BUDGET", 2)
    m = open_memory(tmp_path / "m.db", ("en", "de"))
    m.add([(s, str(i)) for i, s in enumerate(
        ["red dog", "red cat", "blue cat", "red dog runs", "blue dog"], 1)])
    asked = []
    holding = type(m).ids_holding
    monkeypatch.setattr(type(m), "ids_holding",
                        lambda self, w, latest=None: asked.append((w, latest)) or
                        holding(self, w, latest))
    found = m.search("red dog sleeps", 3)  # red and dog: 3 pairs each
    assert sorted(asked) == [("dog", 2), ("red", 2)]
    # red's latest two: 4, 2; dog's: 5, 4. The first pair ("red dog") is not among them.
    assert [(x.source, round(x.score, 2)) for x in found] == [
        ("red dog runs", 66.67), ("blue dog", 33.33), ("red cat", 33.33)]
    assert [x.source for x in m.search("red cat", 1)] == ["red cat"]  # exact: by its key
    m.close()


def test_a_correction_added_later_wins_a_tie(memory):
    memory.add([("Save the file", "Die Datei speichern")])
    assert memory.search("Save the file", k=1)[0].target == "Die Datei speichern"


def test_a_pair_added_again_is_the_latest(memory):
    """X, then Y, then X again: X wins, in the exact lookup and in the word index alike."""
    first, second = "Datei speichern", "Die Datei speichern"
    assert memory.add([("Save the file", second)]) == (1, 0)
    assert memory.add([("Save the file", first)]) == (0, 1)  # held already: not new
    assert [m.target for m in memory.search("Save the file", k=2)] == [first, second]
    # the moved pair is found by its words (its index row moved with it), and kept once
    assert [m.target for m in memory.search("Save the files", k=2)] == [first, second]
    assert memory.info()["pairs"] == 5
    assert list(memory.pairs())[-1] == ("Save the file", first)
    assert memory.integrity() == "ok"
    # no word index row is left at the old id: the index's rows are the pairs' ids
    indexed = memory.db.execute("SELECT rowid FROM words WHERE words MATCH 'save'").fetchall()
    held = memory.db.execute("SELECT id FROM pairs WHERE source LIKE 'save%'").fetchall()
    assert sorted(indexed) == sorted(held) and len(held) == 2


def test_a_memory_of_another_pair_is_refused(memory, tmp_path):
    memory.close()
    with pytest.raises(DataError, match="a en-de memory; these pairs are en-fr"):
        open_memory(tmp_path / "m.db", ("en", "fr"))


@pytest.mark.parametrize("content", [b"not a database at all\n" * 100, b""])
def test_a_damaged_file_is_one_data_error(tmp_path, memory, content):
    path = tmp_path / "bad.db"
    if content:
        path.write_bytes(content)
    else:  # a real memory cut short
        memory.close()
        whole = (tmp_path / "m.db").read_bytes()
        path.write_bytes(whole[:len(whole) // 2])
    with pytest.raises(DataError, match="not a readable translation memory|not a translation"):
        open_memory(path).search("Save the file")


def test_a_pair_is_never_its_own_match():
    pairs = [("Save the file", "Datei speichern"), ("Save  the file", "Datei speichern"),
             ("Save the files", "Dateien speichern"), ("Open the window", "Fenster öffnen"),
             ("Open the window", "Fenster aufmachen")]
    found = best_matches(pairs)
    for (s, t), m in zip(pairs, found):
        assert m is not None and " ".join(m.source.split()) + m.target != " ".join(s.split()) + t
    # the duplicate (whitespace only) is excluded too: the next best is the plural
    assert found[0].target == found[1].target == "Dateien speichern"
    # the same source with another translation is a match (100), not a duplicate
    assert (found[3].target, found[3].score) == ("Fenster aufmachen", 100.0)
    assert best_matches(pairs, threshold=90)[0] is None


WRITER = textwrap.dedent("""
    import sys
    from mt.memory import open_memory
    from mt.memory import store
    store.BATCH = 50
    with open_memory(sys.argv[1], ("en", "de")) as m:
        done = 0
        def acknowledged(n):
            global done
            done += n
            print(done, flush=True)
        m.add(((f"sentence number {i}", f"Satz Nummer {i}") for i in range(10**7)), acknowledged)
""")


def test_a_writer_killed_mid_way_loses_no_acknowledged_pair(tmp_path):
    path = tmp_path / "m.db"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    acknowledged = 0
    for line in writer.stdout:
        acknowledged = int(line)
        if acknowledged >= 2000:
            break
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    kept = {s for s, in db.execute("SELECT source FROM pairs")}
    assert {f"sentence number {i}" for i in range(acknowledged)} <= kept
    with open_memory(path) as m:  # and it still answers
        assert m.search("sentence number 7", k=1)[0].target == "Satz Nummer 7"
