"""Sentences of a paragraph: spaCy's sentencizer, line breaks, placeholders kept whole, and
long sentences cut at clause boundaries."""

from mt.document.segment import Sentence, cut, split


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
