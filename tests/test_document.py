"""mt.document's API: a Document's inputs and render, and translate_document /
translate_lines with the tiny model."""

from types import SimpleNamespace

import pytest
from document_fakes import identity

from conftest import TWO_LINES
from mt.checkpoint import load_checkpoint
from mt.document import Document, reads_digits, settings, translate_document, translate_lines
from mt.document.paragraph import Settings
from mt.errors import ConfigError, DataError
from mt.vocab import SPECIALS, Vocab


def test_a_document_keeps_what_is_not_translated_and_renders_the_rest():
    doc = Document("<p>One. Two.</p>\n<pre>x</pre>", "html", Settings("en"))
    assert doc.inputs == ["One.", "Two."] and not doc.marked
    done = doc.render(identity(doc.inputs))
    assert done.text == "<p>One. Two.</p>\n<pre>x</pre>"
    assert [s for s, _ in done.sentences] == ["One.", "Two."] and done.cut == 0


def test_a_placeholder_or_tag_asks_for_alignments():
    assert Document("see https://x.org", "text", Settings("en")).marked
    assert Document("<p>a <b>b</b></p>", "html", Settings("en")).marked


def test_only_the_sentences_that_place_something_ask_for_alignments():
    assert Document("One dog. We saw 42 cats. Two.", "text", Settings("en")).aligned == [
        False, True, False]
    # an element's words, an element's start inside a sentence; a tag at a sentence's very
    # start or end places nothing by the alignment
    assert Document("<p>A <b>red</b> dog. Two cats. Three.</p>", "html",
                    Settings("en")).aligned == [True, False, False]
    assert Document("<p>One dog. <br>Two cats.<br></p>", "html",
                    Settings("en")).aligned == [False, False]
    assert Document("<p>One dog. Two <i>cats. Three</i> birds.</p>", "html",
                    Settings("en")).aligned == [False, True, True]


def test_translate_inputs_aligns_only_where_asked(tiny_run):
    from mt import Translator
    from mt.document import translate_inputs

    translator = Translator.load(tiny_run)
    first, second = TWO_LINES.splitlines()
    doc = Document(f"{first} {second.replace('seven', '7')}", "text", Settings("en"))
    assert doc.aligned == [False, True]
    one, two = translate_inputs(translator, [doc])
    assert one.alignment is None and two.alignment
    assert [one.text, two.text] == translator.translate(doc.inputs)


@pytest.fixture(scope="module")
def translator(tiny_run):
    from mt import Translator

    return Translator.load(tiny_run)


def test_an_unknown_format_is_a_config_error_naming_the_known_ones(translator):
    with pytest.raises(ConfigError, match="document format 'pdf': expected one of text, txt, "
                                          "html, md, srt, docx"):
        translate_document(translator, "# A dog runs.", "pdf")


def test_numbers_left_to_the_model_and_each_sentence_as_written(translator):
    text = "Yesterday we saw forty two red dogs. I need 25 books."
    left = translate_document(translator, text)
    assert [s for s, _ in left.sentences] == ["Yesterday we saw forty two red dogs.",
                                              "I need 25 books."]  # not "I need books."
    # the toy model never saw a digit: 25 is copied where it wrote for it (mt.unknowns)
    assert left.sentences[1][1].text == translator.translate(["I need 25 books."])[0]
    assert left.text.count("25") == 1 and left.sentences[1][1].unknowns == ["25"]
    assert not reads_digits(translator)  # so numbers stay in, whatever decode.mask says
    assert translate_document(translator, text, mask="").text == left.text
    with pytest.raises(ConfigError, match="decode.mask must name placeholder kinds, "
                                          "comma-separated: template, url, email, number"):
        translate_document(translator, text, mask="numbers")


def test_a_paragraph_is_translated_sentence_by_sentence(translator):
    first, second = TWO_LINES.splitlines()
    a, b = translator.translate([first, second])
    done = translate_document(translator, f"{first}\t {second}\n")
    assert done.text == f"{a}\t {b}\n"
    assert [t.text for _, t in done.sentences] == [a, b]
    assert translator.translate([f"{first} {second}"])[0] != f"{a} {b}"  # what it fixes


def test_placeholders_never_reach_the_model_and_come_back_once(translator):
    text = "Yesterday we saw 42 red dogs at https://x.org/?a=1 for {user}."
    done = translate_document(translator, text, beam=2)
    assert [s for s, _ in done.sentences] == [text]  # as written
    # as the model saw it: numbers left in for the toy model, which never saw a digit
    assert Document(text, "text", settings(translator)).inputs == [
        "Yesterday we saw 42 red dogs at for."]
    for kept in ("42", "https://x.org/?a=1", "{user}"):
        assert done.text.count(kept) == 1



def test_numbers_are_masked_for_a_model_that_reads_digits(translator, monkeypatch):
    import mt.document

    text = "Yesterday we saw 42 red dogs at https://x.org/?a=1 for {user}."
    monkeypatch.setattr(mt.document, "reads_digits", lambda translator: True)
    assert Document(text, "text", settings(translator)).inputs == [
        "Yesterday we saw red dogs at for."]
    masked = translate_document(translator, text, beam=2)
    for kept in ("42", "https://x.org/?a=1", "{user}"):
        assert masked.text.count(kept) == 1
    left = translator.check_options(mask="template,url,email")
    assert Document(text, "text", settings(translator, cfg=left)).inputs == [
        "Yesterday we saw 42 red dogs at for."]
    vocab = SimpleNamespace(run=SimpleNamespace(src_vocab=Vocab([*SPECIALS, "25"])))
    assert reads_digits(vocab)  # the real one: a vocabulary with "25"
    assert not reads_digits(SimpleNamespace(run=SimpleNamespace(src_vocab=Vocab(SPECIALS))))


def test_html_nested_100_deep_is_translated_and_deeper_is_a_data_error(translator):
    """Paragraphs and placement walk the inline tags by recursion: 100 deep (far more than
    pages nest) comes back whole; thousands deep is one DataError, not a RecursionError."""
    deep = "<p>" + "<b>" * 100 + "Yesterday we saw forty two red dogs." + "</b>" * 100 + "</p>"
    done = translate_document(translator, deep, "html")
    assert done.text.startswith("<p>" + "<b>" * 100) and done.text.endswith("</b>" * 100 + "</p>")
    with pytest.raises(DataError, match="nests inline elements 101 deep, more than the 100"):
        translate_document(translator, "<p>" + "<span>" * 5000 + "dogs", "html")


def test_html_keeps_its_tags_around_the_aligned_words(translator):
    done = translate_document(
        translator, '<p>Yesterday we saw <a href="/d?x=1&amp;y=2">forty two</a> red dogs.</p>',
        "html")
    assert done.text == ('<p>Gestern sahen wir <a href="/d?x=1&amp;y=2">zwei und vierzig</a> '
                         "rote Hunde.</p>")


def test_lines_are_translated_in_order_a_chunk_at_a_time(translator):
    lines = TWO_LINES.splitlines() * 3
    assert [d.text for d in translate_lines(translator, lines)] == translator.translate(lines)


@pytest.mark.slow  # trains its run, which it asks for by name
@pytest.mark.parametrize("fixture", ["tiny_run", "spm_run"])
def test_a_sentence_without_final_punctuation_ends_where_a_starter_follows(fixture, request):
    """Word tokens, or SentencePiece pieces (a whole word's: "▁T oday" of "Today" with the toy
    corpus's small vocabulary)."""
    from mt import Translator

    run = request.getfixturevalue(fixture)
    translator = Translator.load(run)
    starters = load_checkpoint(run / "best.pt")["starters"]
    word = {w: " ".join(translator.src_tok.tokenize(w)) for w in ("Today", "Yesterday", "I")}
    assert {word["Today"], word["Yesterday"]} <= set(starters)
    assert word["I"] not in starters  # "Today I ...": it follows a word
    first, second = "Yesterday we saw forty two red dogs", "Today they see nine cats"
    a, b = translator.translate([first, second])
    (done,) = translate_lines(translator, [f"{first} {second}"])
    assert [t.text for _, t in done.sentences] == [a, b] and done.text == f"{a} {b}"
    off = Translator.load(run, ignore_starters=True)
    assert len(next(translate_lines(off, [f"{first} {second}"])).sentences) == 1
