"""A request's lines as paragraphs or HTML: when they are, and what each line's object
holds."""

import asyncio
from types import SimpleNamespace

import pytest
from document_fakes import identity

from mt.config import DecodeConfig
from mt.document import Document, Documents
from mt.document.paragraph import Settings
from mt.records import Translation
from mt.serve.access import ClientError
from mt.serve.documents import records, wanted
from mt.serve.translating import hardened


def test_lines_are_split_by_default_unless_an_option_is_per_sentence():
    assert wanted("text", None, False, DecodeConfig())
    assert not wanted("text", False, False, DecodeConfig())
    assert not wanted("text", None, True, DecodeConfig())  # a prefix
    assert not wanted("text", None, False, DecodeConfig(beam=2, nbest=2))
    assert wanted("html", None, False, DecodeConfig())


@pytest.mark.parametrize("format, split", [("text", True), ("html", None)])
def test_asked_for_with_an_option_documents_refuse_it_is_a_422(format, split):
    for given, prefix, name in ((DecodeConfig(beam=2, nbest=2), False, "nbest"),
                                (DecodeConfig(), True, "prefix")):
        with pytest.raises(ClientError, match=f"not with {name}") as e:
            wanted(format, split, prefix, given)
        assert e.value.status == 422


@pytest.mark.parametrize("format, split", [("text", True), ("html", None)])
def test_samples_and_alignments_go_with_documents_as_on_the_command_line(format, split):
    """mt.compatibility: the server refused them before; mt translate never did."""
    assert wanted(format, split, False, DecodeConfig(align=True))
    assert wanted(format, split, False, DecodeConfig(sampling="topk", samples=2))
    assert not wanted("text", None, False, DecodeConfig(align=True))  # a line whole, as before


def test_a_split_line_gives_its_sentences_and_the_mean_score():
    lines = ["One dog runs.  Two cats sleep.", "Alone."]
    docs = [Document(line, "text", Settings("en")) for line in lines]
    found = [[t] for d in docs for t in identity(d.inputs)]
    found[0][0].score, found[1][0].score = -1.0, -3.0
    first, second = records(lines, Documents(docs), found)
    assert first == {"src": lines[0], "text": lines[0], "score": -2.0, "sentences": [
        {"src": "One dog runs.", "text": "One dog runs.", "score": -1.0},
        {"src": "Two cats sleep.", "text": "Two cats sleep.", "score": -3.0}]}
    assert second == {"src": "Alone.", "text": "Alone.", "score": 0.0}


def test_malformed_html_is_said_so_in_its_line():
    docs = Documents([Document("<p>An <b>open one.</p>", "html", Settings("en"))])
    [obj] = records(["<p>An <b>open one.</p>"], docs, [[t] for t in identity(docs.inputs)])
    assert obj["text"] == "<p>An <b>open one.</b></p>"
    assert obj["notes"] == ["<b> not closed before its paragraph ends"]


def test_any_format_but_text_is_a_document_and_per_sentence_options_are_refused():
    assert wanted("srt", None, False, DecodeConfig())
    with pytest.raises(ClientError, match='format "md": not with prefix'):
        wanted("md", None, True, DecodeConfig())


def test_a_broken_srt_is_a_422_naming_its_line(tiny_run):
    from mt import Translator
    from mt.serve.documents import prepare

    with pytest.raises(ClientError, match=r"text\[1\]:2: a broken timing") as e:
        prepare(Translator.load(tiny_run), ["1\n00:00:01,000 --> 00:00:02,000\nHi.\n",
                                            "1\n00:01 --> 00:02\nHi.\n"], "srt")
    assert e.value.status == 422


def test_hardened_translates_every_input_then_only_those_harden_remade():
    """mt.serve.translating.hardened: the first pass over all inputs, the second over the
    inputs whose paragraphs lost a directive (None from Documents.harden), merged in order."""
    asked = []

    async def translate(rows):
        asked.append(list(rows))
        return [[Translation(f"pass {len(asked)} row {i}", 0.0)] for i in rows]

    docs = SimpleNamespace(inputs=["a", "b", "c", "d"], harden=lambda found: [
        found[0], None, found[2], None])
    got = asyncio.run(hardened(docs, translate))
    assert asked == [[0, 1, 2, 3], [1, 3]]
    assert [ts[0].text for ts in got] == ["pass 1 row 0", "pass 2 row 1", "pass 1 row 2",
                                          "pass 2 row 3"]
