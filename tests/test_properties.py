"""Random Unicode through reading, tokenization, the vocabulary and translation: nothing
crashes, one output per input, and no output line holds a line separator."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mt.commands.translate
import mt.translator
from mt.checkpoint import load_run
from mt.config import load_config
from mt.errors import ConfigError
from mt.textio import iter_lines
from mt.tokenizers.spacy_words import SpacyTokenizer
from mt.translator import Translator
from mt.vocab import SPECIALS, UNK, Vocab

ODD = ["\u2028", "\u2029", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\r", "\t", "\x00",
       "\u00a0", "\u3000", "\u200b", "\u200d", "\ufeff", "\ufffd", "\u0301", "\u0308\u0308",
       "\U0001F600", "\U0001F469\u200d\U0001F469\u200d\U0001F467", "\U0001F1E9\U0001F1EA",
       "<unk>", "<eos>", "<pad>", "  ", "..."]
WORDS = "one two three four five six seven eight nine ten".split()

# Lines as `iter_lines` yields them: anything but "\n" (surrogates cannot be read from UTF-8).
char = st.characters(exclude_categories=("Cs",), exclude_characters="\n")
piece = st.one_of(st.text(char, max_size=6), st.sampled_from(ODD), st.sampled_from(WORDS),
                  st.just(" "))
line = st.lists(piece, max_size=14).map("".join)
FAST = settings(max_examples=150, deadline=None)
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def one_line(text: str) -> bool:
    return "\n" not in text and len(text.splitlines()) <= 1


@pytest.fixture(scope="session")
def translator(tiny_run) -> Translator:
    return Translator(load_run(tiny_run))


@pytest.fixture(scope="session")
def tokenizers() -> dict[str, SpacyTokenizer]:
    return {lang: SpacyTokenizer(lang) for lang in ("en", "de")}


@FAST
@given(text=line)
def test_tokens_are_non_empty_and_hold_no_whitespace(tokenizers, text):
    for tok in tokenizers.values():
        tokens = tok.tokenize(text)
        assert all(t and not any(c.isspace() for c in t) for t in tokens), tokens
        assert tok.tokenize_many([text, text]) == [tokens, tokens]
        assert one_line(" ".join(tok.detokenize(tokens).split()))


@FAST
@given(lines=st.lists(line, max_size=8), unseen=line)
def test_vocab_round_trips_through_encode_decode_and_its_file(tokenizers, lines, unseen):
    tok = tokenizers["en"]
    sentences = tok.tokenize_many(lines)
    vocab = Vocab.build(sentences)
    for tokens in sentences:
        ids = vocab.encode(tokens)
        assert all(0 <= i < len(vocab) for i in ids)
        assert vocab.decode(ids) == tokens  # spaCy never leaves "<eos>" etc. as one token
    with tempfile.TemporaryDirectory() as d:
        vocab.save(Path(d) / "vocab.txt")
        assert Vocab.load(Path(d) / "vocab.txt").itos == vocab.itos
    new = [t for t in tok.tokenize(unseen) if t not in vocab.stoi]
    assert vocab.decode(vocab.encode(new)) == [SPECIALS[UNK]] * len(new)


@FAST
@given(data=st.binary(max_size=300))
def test_any_bytes_read_as_lines_without_crashing(data):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.txt")
        with open(path, "wb") as f:
            f.write(data)
        lines = list(iter_lines(path))
    assert len(lines) == data.count(b"\n") + (not data.endswith(b"\n") and len(data) > 0)
    assert not any("\n" in x for x in lines)


@SLOW
@given(lines=st.lists(line, max_size=6))
def test_translate_gives_one_clean_line_per_input(translator, lines):
    out = translator.translate(lines)
    assert len(out) == len(lines)
    for src, hyp in zip(lines, out):
        assert isinstance(hyp, str) and one_line(hyp), repr(hyp)
        assert hyp == " ".join(hyp.split())  # single plain spaces only
        if not src.split() or not translator.src_tok.tokenize(src):
            assert hyp == ""


@SLOW
@given(lines=st.lists(st.one_of(line, st.just("")), max_size=12),
       chunk=st.integers(min_value=1, max_value=5))
def test_translate_stream_keeps_count_and_order_across_chunks(translator, lines, chunk):
    saved = mt.translator.CHUNK_LINES
    mt.translator.CHUNK_LINES = chunk
    try:
        out = list(translator.translate_stream(iter(lines)))
    finally:
        mt.translator.CHUNK_LINES = saved
    assert len(out) == len(lines) and all(one_line(h) for h in out)
    for src, hyp in zip(lines, out):  # in order: empty inputs sit where empty outputs do
        if not translator.src_tok.tokenize(src):
            assert hyp == ""


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(min_value=257, max_value=400))
def test_lines_over_the_positions_are_truncated_not_fatal(translator, n):
    before = translator.warnings().truncated
    out = translator.translate([" ".join(WORDS[i % 10] for i in range(n)), "one"])
    assert len(out) == 2 and all(one_line(h) for h in out)
    assert translator.warnings().truncated == before + 1


KEYS = ["model.d_model", "model.n_heads", "model.dropout", "train.lr", "train.max_tokens",
        "data.src_lang", "data.max_len", "decode.beam", "model.nope", "nope.x", "train"]


@FAST
@given(key=st.sampled_from(KEYS), value=st.one_of(st.text(char, max_size=10),
                                                  st.integers(-5, 5).map(str),
                                                  st.floats(allow_nan=True).map(str)))
def test_any_set_override_loads_or_is_a_config_error(key, value):
    try:
        load_config(None, [f"{key}={value}"])
    except ConfigError as e:  # nothing else: no TypeError or ImportError from odd values
        assert str(e).startswith(("--set", "config:")), str(e)
