"""mt/glossary.py: a glossary file read and checked (one line per problem, naming the file and
line), pairs checked the same way, and which entries are active for a tokenized line."""

from __future__ import annotations

import pytest

from mt.errors import DataError
from mt.glossary import (
    MAX_TERM_CHARS,
    Glossary,
    Matcher,
    Matchers,
    as_glossary,
    occurrences,
    own_glossaries,
    per_line,
)
from mt.vocab import UNK, Vocab


class Words:
    """A whitespace tokenizer: enough to show matching on whole tokens."""

    def tokenize_many(self, lines):
        return [line.split() for line in lines]


def matcher(pairs, ignore_case=False, words=("new", "york", "city", "agreement", "Vertrag")):
    vocab = Vocab(["<pad>", "<unk>", "<bos>", "<eos>", *words])
    return Matcher(Glossary.of(pairs), Words(), Words(), vocab, ignore_case)


def test_a_file_with_comments_blank_lines_and_multiword_terms(tmp_path):
    path = tmp_path / "g.tsv"
    path.write_bytes(b"# de -> en\n\nVertrag\tagreement\r\nNew York\tNew York\n"
                     b"  # indented comment\nVertrag\tagreement\n")
    assert Glossary.load(path).entries == (("Vertrag", "agreement"), ("New York", "New York"))


def test_a_lexicon_may_give_a_source_term_several_targets(tmp_path):
    path = tmp_path / "g.tsv"
    path.write_bytes(b"Mann\tman\nMann\tguy\nFrau\twoman\nMann\tman\n")
    assert Glossary.load(path, alternatives=True).entries == (
        ("Mann", "man"), ("Mann", "guy"), ("Frau", "woman"))


@pytest.mark.parametrize("content,needle", [
    (b"a\tb\nc d\n", "g.tsv:2: 0 tabs"),
    (b"a\tb\tc\n", "g.tsv:1: 2 tabs"),
    (b"a\t \n", "g.tsv:1: empty target term"),
    (b"\tb\n", "g.tsv:1: empty source term"),
    (b"a\tb\nx\ty\na\tc\n", "g.tsv:3: 'a' again, as 'c' (before: 'b')"),
    (b"ok\tfine\nbad\t\xff\xfe\n", "g.tsv:2: invalid UTF-8"),
    (b"a\t" + b"x" * (MAX_TERM_CHARS + 1) + b"\n", f"at most {MAX_TERM_CHARS}"),
])
def test_a_bad_file_is_one_line_naming_its_line(tmp_path, content, needle):
    path = tmp_path / "g.tsv"
    path.write_bytes(content)
    with pytest.raises(DataError) as e:
        Glossary.load(path)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_byte_order_mark_is_not_part_of_the_first_term(tmp_path):
    path = tmp_path / "g.tsv"
    path.write_bytes("\ufeffVertrag\tagreement\nYork\tyork\n".encode())  # Notepad's UTF-8
    assert Glossary.load(path).entries == (("Vertrag", "agreement"), ("York", "york"))
    m = Matcher(Glossary.load(path), Words(), Words(),
                Vocab(["<pad>", "<unk>", "<bos>", "<eos>", "agreement"]))
    assert m.active("Der Vertrag".split()) == [0]  # the first entry matches


@pytest.mark.parametrize("given, needle", [
    ([None], "glossary: entry 1: an entry is two strings, [source term, target term], not null"),
    ([["a", "b"], 1, 2], "glossary: entry 2: an entry is two strings, [source term, target "
                         "term], not 1"),
    ([[1, 2]], "not [1, 2]"),
    ([["a", None]], 'not ["a", null]'),
    ([object()], "not <object object at"),
    (5, "glossary: 5 is not a list of pairs; give [[source term, target term], ...]"),
    (b"a\tb", "is not a list of pairs"),
])
def test_what_is_not_a_pair_is_a_data_error_naming_the_entry(given, needle):
    with pytest.raises(DataError) as e:
        as_glossary(given)
    assert needle in str(e.value), str(e.value)


def test_missing_file_and_bad_pairs(tmp_path):
    with pytest.raises(DataError, match="glossary file not found"):
        Glossary.load(tmp_path / "none.tsv")
    with pytest.raises(DataError, match="entry 2: an entry is two strings"):
        Glossary.of([["a", "b"], ["c"]])
    with pytest.raises(DataError, match="entry 1: empty source term"):
        as_glossary([[" ", "b"]])
    assert as_glossary(None) is None
    assert as_glossary([["a", "b"], ["a", "b"]]).entries == (("a", "b"),)  # same twice: once


def test_active_entries_are_whole_tokens_in_source_order():
    m = matcher([["York", "york"], ["Vertrag", "agreement"], ["Ver", "x"]])
    assert m.active("Der Vertrag mit York".split()) == [1, 0]
    assert m.active("Verträge Yorker".split()) == []  # not inside a token
    assert m.active("vertrag".split()) == []  # case counts, unless ignored
    assert matcher([["Vertrag", "agreement"]], ignore_case=True).active(["VERTRAG"]) == [0]


def test_overlapping_matches_go_longest_first():
    m = matcher([["York", "york"], ["New York", "new york"], ["York City", "city"]])
    assert m.active("New York City".split()) == [1]  # 2 tokens each: the first to start wins
    assert m.active("in New York and York City".split()) == [1, 2]
    assert m.active("York , New York".split()) == [0, 1]  # York alone elsewhere: active too
    longest = matcher([["A B", "x"], ["B C D", "y"]])
    assert longest.active("A B C D".split()) == [1]


def test_target_terms_and_what_an_output_misses():
    m = matcher([["Vertrag", "agreement"], ["NY", "new york"], ["Hund", "dog"]])
    # "dog" has no id: forced as <unk> in its place (mt.unknowns writes it), or not at all
    assert m.terms([0, 1, 2]) == [[7], [4, 5], [UNK]]
    assert m.terms([0, 1, 2], placeholders=False) == [[7], [4, 5]]
    assert m.targets[2] == [UNK]
    assert m.missing([0, 1, 2], [7, 4, 5]) == ["dog"]
    assert m.missing([0, 1, 2], [7, 4, 5, UNK]) == []
    assert m.missing([0, 1, 2], [7, 4, 5, UNK], placeholders=False) == ["dog"]
    assert m.missing([0, 1], [4, 7, 5]) == ["new york"]
    assert occurrences([1, 2, 1, 2], [1, 2]) == [0, 2]


def test_a_lines_own_glossary_adds_entries_and_overrides_a_source_terms_target():
    m = matcher([["Vertrag", "agreement"], ["York", "york"]])
    own = m.extended(Glossary.of([["Vertrag", "new"], ["New York", "new york"]]))
    assert own.glossary.entries == (("Vertrag", "new"), ("York", "york"),
                                    ("New York", "new york"))
    assert own.terms(own.active("New York Vertrag".split())) == [[4, 5], [4]]
    assert m.active("New York Vertrag".split()) == [1, 0]  # the file's matcher as it was
    assert m.terms([0]) == [[7]]
    assert m.extended(Glossary(())) is m  # no entries: the same matcher
    again = m.extended(Glossary.of([["Vertrag", "new"], ["New York", "new york"]]))
    assert again is own  # a glossary that lines repeat is tokenized once
    assert matcher([["a", "b"]], ignore_case=True).extended(
        Glossary.of([["NEW", "new"]])).active(["new"]) == [1]


def test_matchers_keep_one_of_an_empty_glossary_for_lines_to_extend():
    vocab = Vocab(["<pad>", "<unk>", "<bos>", "<eos>", "new", "york"])
    made = Matchers(Words(), Words(), vocab)
    empty = made.of(Glossary(()))
    assert made.of(Glossary(())) is empty and made.of(Glossary(()), True) is not empty
    full = made.of(Glossary.of([["York", "york"]]))
    assert full is not made.of(Glossary.of([["York", "york"]])) and full.active(["York"]) == [0]
    own = own_glossaries([None, [["New", "new"]], Glossary(())], start=5)
    lines = per_line(empty, own)
    assert lines[0] is empty and lines[2] is empty and lines[1].active(["New"]) == [0]
    assert per_line(None, [None, Glossary(())]) == [None, None]
    with pytest.raises(DataError, match=r"glossaries\[6\]: entry 1"):
        own_glossaries([None, [["a"]]], start=5)
