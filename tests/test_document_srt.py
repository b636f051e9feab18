"""Subtitles: cue numbers and timings kept byte for byte, each cue's text one Block, broken
timings a one-line DataError naming the line."""

import pytest
from document_fakes import reversed_words

from mt.document import Document
from mt.document.markup import Block
from mt.document.paragraph import Settings
from mt.document.srt import parse
from mt.errors import DataError

SRT = ("\ufeff1\r\n00:00:01,000 --> 00:00:04,000\r\nA man rides\r\nhis bike.\r\n\r\n"
       "2\r\n00:00:05,000 --> 00:00:07,500 X1:10\r\nTwo dogs play.\r\n")


def test_cues_are_blocks_and_the_rest_is_kept():
    parts, notes = parse(SRT)
    assert [p.text for p in parts if isinstance(p, Block)] == ["A man rides his bike.",
                                                                "Two dogs play."]
    assert "".join(p for p in parts if isinstance(p, str)) == (
        "\ufeff1\r\n00:00:01,000 --> 00:00:04,000\r\n\r\n\r\n"
        "2\r\n00:00:05,000 --> 00:00:07,500 X1:10\r\n\r\n")


def test_a_translated_file_keeps_its_timings_and_line_endings():
    doc = Document(SRT, "srt", Settings("en"))
    out = doc.render(reversed_words(doc.inputs)).text
    assert out == ("\ufeff1\r\n00:00:01,000 --> 00:00:04,000\r\nBIKE. HIS RIDES MAN A\r\n\r\n"
                   "2\r\n00:00:05,000 --> 00:00:07,500 X1:10\r\nPLAY. DOGS TWO\r\n")


@pytest.mark.parametrize("text, message", [
    ("1\n00:00:01 --> 00:00:04,000\nHi\n", "subs.srt:2: a broken timing ('00:00:01 --> "),
    ("1\n", "subs.srt:2: a broken timing ('the end of the file')"),
    ("Hello\n", "subs.srt:1: expected a cue number, found 'Hello'"),
])
def test_what_is_not_srt_is_a_data_error_naming_the_line(text, message):
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse(text, "subs.srt")
