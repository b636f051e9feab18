"""Sentences of a paragraph: spaCy's sentencizer, line breaks, placeholders kept whole, and
long sentences cut at clause boundaries."""

from collections import Counter
from types import SimpleNamespace

import numpy as np

from mt.document.segment import Sentence, cut, split
from mt.document.starters import learn, starts_sentence
from mt.vocab import SPECIALS, Vocab


def texts(text, sentences):
    return [text[s.start:s.end] for s in sentences]


def test_a_paragraph_is_its_sentences_and_the_whitespace_between_is_left_out():
    text = " Ein Mann fährt über eine Brücke.  Zwei Hunde spielen! Eine Frau singt. "
    found = split(text, "de")
    assert texts(text, found) == ["Ein Mann fährt über eine Brücke.", "Zwei Hunde spielen!",
                                  "Eine Frau singt."]
    assert text[found[0].end:found[1].start] == "  "


def test_a_line_break_ends_a_sentence_in_plain_text_but_not_in_html():
    text = "A title\nThe text goes on.\n\nAnother one."
    assert texts(text, split(text, "en")) == ["A title", "The text goes on.", "Another one."]
    assert texts(text, split(text, "en", lines=False)) == ["A title\nThe text goes on.",
                                                           "Another one."]


def test_a_column_gap_ends_a_sentence_in_plain_text_but_not_in_html():
    """A program's --help: two spaces or more (or a tab) between words of a line are a
    column's edge; one space, or a gap at a line's start, is not."""
    text = "  -v, --verbose      verbose mode\nName\tSize  (bytes)\nA line with one gap."
    assert texts(text, split(text, "en")) == ["-v, --verbose", "verbose mode", "Name", "Size",
                                              "(bytes)", "A line with one gap."]
    assert texts(text, split(text, "en", lines=False)) == [text.strip()]


def test_a_boundary_inside_a_placeholder_moves_to_its_start():
    text = "We saw dogs. {name} has cats."
    start = text.index("{")
    found = split(text, "en", whole=[(start, text.index("}") + 1)])
    assert texts(text, found) == ["We saw dogs.", "{name} has cats."]


def test_an_unknown_language_falls_back_to_spacys_multilingual_rules():
    assert texts("One. Two.", split("One. Two.", "qq")) == ["One.", "Two."]


def test_a_long_sentence_is_cut_at_the_clause_boundary_nearest_its_middle():
    text = "the first clause is here, and the second one, which is long, goes on"
    pieces = cut(text, Sentence(0, len(text)), lambda s: len(s.split()) > 8)
    # 14 words: cut after "here," (nearest the middle), then the 9 words after it once more
    assert texts(text, pieces) == ["the first clause is here,", "and the second one,",
                                   "which is long, goes on"]
    assert all(p.cut for p in pieces)


def test_without_clauses_it_is_cut_at_spaces_and_every_piece_fits():
    text = " ".join(f"w{i}" for i in range(50))
    pieces = split(text, "en", too_long=lambda s: len(s.split()) > 7)
    assert all(len(p.split()) <= 7 for p in texts(text, pieces))
    assert " ".join(texts(text, pieces)) == text


def test_a_cut_never_falls_inside_a_placeholder():
    text = "aaa {{ user name }} bbb ccc"
    whole = [(4, 19)]
    pieces = cut(text, Sentence(0, len(text)), lambda s: len(s) > 20, whole)
    assert "{{ user name }}" in texts(text, pieces)[0] + texts(text, pieces)[1]
    assert all(not (4 < p.start < 19 or 4 < p.end < 19) for p in pieces)


def test_a_sentence_that_fits_is_left_whole():
    assert cut("short one", Sentence(0, 9), lambda s: False) == [Sentence(0, 9)]


def test_a_starter_right_after_a_word_begins_a_sentence():
    begins = starts_sentence(["Ein", "Zwei"], str.split)
    text = "Zwei Männer in einer Stadt Ein Mann fährt. Er sagte, Ein Tag. {wir Ein x} Hund Zwei"
    whole = [(text.index("{"), text.index("}") + 1)]
    assert texts(text, split(text, "de", whole=whole, begins=begins)) == [
        "Zwei Männer in einer Stadt", "Ein Mann fährt.", "Er sagte, Ein Tag.", "{wir Ein x} Hund",
        "Zwei"]  # after a comma, or inside a placeholder: no boundary
    assert texts(text, split(text, "de", whole=whole)) == [
        "Zwei Männer in einer Stadt Ein Mann fährt.", "Er sagte, Ein Tag.", "{wir Ein x} Hund Zwei"]


class FakeEntry:
    """What starters.learn reads of a token cache entry: the source ids and offsets, the
    vocabulary and the counts."""

    def __init__(self, lines: list[list[str]]):
        self.src_vocab = Vocab(SPECIALS + sorted({t for line in lines for t in line}))
        ids = [self.src_vocab.stoi[t] for line in lines for t in line]
        offsets = np.cumsum([0] + [len(line) for line in lines])
        self.array = SimpleNamespace(ids=np.array(ids), offsets=offsets)
        self.every = Counter(t for line in lines for t in line)

    def data(self):
        return SimpleNamespace(src=self.array)

    def counts(self, side):
        return self.every


def test_starters_begin_most_of_their_lines_often_enough_and_are_capitalized():
    lines = ([["Ein", "Mann"]] * 30 + [["Zwei", "Hunde", "Drei"]] * 19 + [["Zwei"]]
             + [["Der", "Hund"]] * 30 + [["sah", "Der"]] * 3 + [["Drei"]] * 10
             + [["ein", "x"]] * 40 + [["Selten"]] * 9 + [[]])
    assert learn([FakeEntry(lines)], share=0.95, least=10) == ["Ein", "Zwei"]
    # Drei: 10 of 29 begin a line; Der: 30 of 33 (< 0.95); ein: lowercase; Selten: 9 lines
    assert learn([FakeEntry(lines)], share=0.9, least=9) == ["Der", "Ein", "Zwei", "Selten"]


def test_a_subword_starter_is_a_whole_word_not_its_first_piece():
    """"▁Ein" begins 30 lines, and "Einrad" (▁Ein rad) shares the piece: the starter is the
    word "Ein", so "Einrad." after a word begins no sentence; "Today" (▁T oday) is one."""
    b = "\u2581"
    lines = ([[f"{b}Ein", f"{b}Mann", "."]] * 30 + [[f"{b}T", "oday", ",", f"{b}ich"]] * 12
             + [[f"{b}ein", f"{b}Mann", f"{b}auf", f"{b}einem", f"{b}Ein", "rad"]] + [[]])
    starters = learn([FakeEntry(lines)], share=0.95, least=10)
    assert starters == [f"{b}Ein", f"{b}T oday"]
    pieces = {"Ein": [f"{b}Ein"], "Einrad.": [f"{b}Ein", "rad", "."],
              "Today,": [f"{b}T", "oday", ","], "T": [f"{b}T"]}
    starts = starts_sentence(starters, pieces.__getitem__)
    assert [starts(w) for w in pieces] == [True, False, True, False]
