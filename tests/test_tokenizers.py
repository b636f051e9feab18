"""Tokenization comes back exactly: detokenize(tokenize(line)) == normalize(line), for spaCy's
marked words in several languages and for SentencePiece subwords; bad models and settings are
one-line errors."""

from __future__ import annotations

import re
import shutil
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import MULTI30K, ROOT, TOY
from mt.config import DataConfig, load_config
from mt.errors import CheckpointError, ConfigError, DataError
from mt.textio import read_lines, split_path
from mt.tokenizers import Sampling, build_tokenizers, config_problems, load_tokenizers, samples
from mt.tokenizers.spacy_words import SpacyTokenizer
from mt.tokenizers.subword import JOINT, SPACE, SentencePieceSettings
from mt.tokenizers.text import ESCAPE, MARK, escape, normalize, unescape
from mt.vocab import SPECIALS

LANGS = ("en", "de", "fr", "xx", "es")
# What tends to break joiner schemes: the reserved characters themselves, escapes, elisions,
# hyphens, digits glued to words, all kinds of whitespace, combining marks, emoji.
TRICKY = [MARK, ESCAPE, ESCAPE + "m", ESCAPE + ESCAPE, MARK + MARK, SPACE, SPACE + "a", "m",
          "-", "'", "(", ")", ".", ",", "!?", '"', "n't", "l'", "qu'", "d'", "3km", "e.g.",
          "\t", "\u00a0", "  ", "\u2028", "\u3000", "\x1c", "\r", "\n", "\u200b", "e\u0301",
          "\U0001F600", "<unk>", "<0x41>", "U.S.A.", "c'est-à-dire", "Straße", "日本語"]
WORDS = "the dog father figure off screen Kids Food Basket Keks".split()
char = st.characters(exclude_categories=("Cs",))
text = st.lists(st.one_of(st.text(char, max_size=8), st.sampled_from(TRICKY),
                          st.sampled_from(WORDS), st.just(" ")), max_size=14).map("".join)
MANY = settings(max_examples=300, deadline=None)


@pytest.fixture(scope="module")
def spacy_tokenizers() -> dict[str, SpacyTokenizer]:
    return {lang: SpacyTokenizer(lang) for lang in LANGS}


@pytest.fixture(scope="module")
def spm_dir(tmp_path_factory):
    """A joint SentencePiece model trained on the toy corpus (a fraction of a second)."""
    out = tmp_path_factory.mktemp("spm")
    cfg = DataConfig(tokenizer=SentencePieceSettings(vocab_size=330), shared_vocab=True)
    build_tokenizers(cfg, out, TOY / "toy.train.en", TOY / "toy.train.de")
    return out, cfg


@pytest.mark.slow  # spaCy's tokenizers for many languages, many examples
@MANY
@given(line=text)
def test_spacy_round_trip_in_several_languages(spacy_tokenizers, line):
    for lang, tok in spacy_tokenizers.items():
        tokens = tok.tokenize(line)
        assert all(t and not any(c.isspace() for c in t) for t in tokens), (lang, tokens)
        assert tok.detokenize(tokens) == normalize(line), (lang, tokens)


@pytest.mark.slow  # spaCy's tokenizers for many languages, many examples
@settings(max_examples=100, deadline=None)
@given(lines=st.lists(text, max_size=6))
def test_lines_tokenized_together_as_one_by_one(spacy_tokenizers, lines):
    # tokenize_many joins lines into one spaCy Doc; no token may cross or shift a line boundary
    for lang, tok in spacy_tokenizers.items():
        assert tok.tokenize_many(lines) == [tok.tokenize(line) for line in lines], lang


@pytest.fixture(scope="module")
def lowercasing() -> SpacyTokenizer:
    return SpacyTokenizer("de", lowercase=True)


@settings(max_examples=100, deadline=None)
@given(line=text)
def test_lowercased_round_trip(lowercasing, line):
    assert lowercasing.detokenize(lowercasing.tokenize(line)) == normalize(line.lower())


@MANY
@given(t=text, reserved=st.sampled_from([MARK, SPACE]))
def test_escape_hides_the_reserved_character_and_comes_back(t, reserved):
    escaped = escape(t, reserved)
    assert reserved not in escaped
    assert unescape(escaped, reserved) == t


def test_marks_sit_on_punctuation_so_words_keep_one_form():
    en = SpacyTokenizer("en")
    j = MARK
    assert en.tokenize("A father-figure (off-screen).") == [
        "A", "father", j + "-" + j, "figure", "(" + j, "off", j + "-" + j, "screen", j + ")",
        j + "."]
    assert en.tokenize(f"a{MARK}b {ESCAPE}") == ["a", j + ESCAPE + "m" + j, "b",
                                                  ESCAPE + ESCAPE]
    assert en.detokenize(en.tokenize(f"a{MARK}b {ESCAPE}")) == f"a{MARK}b {ESCAPE}"


@pytest.mark.slow  # spaCy's tokenizers for many languages, many examples
@MANY
@given(tokens=st.lists(st.one_of(text, st.sampled_from(TRICKY)), max_size=10))
def test_detokenize_does_its_best_on_tokens_never_tokenized(spacy_tokenizers, spm_dir, tokens):
    """Any strings at all: a string back, never an exception (`mt tokenize --detok`)."""
    spm, _ = load_tokenizers(spm_dir[1], spm_dir[0])
    for tok in (spacy_tokenizers["en"], spm):
        out = tok.detokenize(tokens)
        assert isinstance(out, str)
    assert spm.detokenize(tokens) == normalize(spm.detokenize(tokens))  # one line


@pytest.mark.slow
@pytest.mark.skipif(not MULTI30K.is_dir(), reason="Multi30k not in ../shared/data/multi30k")
@pytest.mark.parametrize("lang", ["de", "en"])
def test_every_multi30k_line_round_trips(lang):
    tok = SpacyTokenizer(lang)
    for split in ("train", "val", "test_2016_flickr"):
        lines = read_lines(split_path(MULTI30K, split, lang))
        changed = [(line, tokens) for line, tokens in zip(lines, tok.tokenize_many(lines))
                   if tok.detokenize(tokens) != normalize(line)]
        assert not changed, (split, len(changed), changed[:3])


# --- SentencePiece ---------------------------------------------------------------------------


def test_sentencepiece_vocab_is_mts(spm_dir):
    directory, cfg = spm_dir
    src, tgt = load_tokenizers(cfg, directory)
    assert src is tgt  # one joint model
    assert src.fixed_vocab[:4] == SPECIALS and len(src.fixed_vocab) == 330
    assert len(set(src.fixed_vocab)) == 330
    assert [p for p in src.fixed_vocab if p.startswith(SPACE)]  # real subwords were learned
    assert list((directory).iterdir()) == [directory / JOINT]


@MANY
@given(line=text)
def test_sentencepiece_round_trip(spm_dir, line):
    tok, _ = load_tokenizers(spm_dir[1], spm_dir[0])
    tokens = tok.tokenize(line)
    assert all(t and not any(c.isspace() for c in t) for t in tokens), tokens
    assert all(t in tok.fixed_vocab for t in tokens)  # byte fallback: never <unk>
    assert tok.detokenize(tokens) == normalize(line)


def test_sentencepiece_samples_segmentations_only_with_alpha(spm_dir):
    directory, cfg = spm_dir
    plain, _ = load_tokenizers(cfg, directory)
    sampling = replace(cfg, tokenizer=replace(cfg.tokenizer, alpha=0.5, samples=3))
    tok, _ = load_tokenizers(sampling, directory)
    assert isinstance(tok, Sampling) and (samples(plain), samples(tok)) == (0, 3)
    lines = ["Yesterday we saw forty two red dogs."] * 20
    assert tok.sample_many(lines, seed=4) == tok.sample_many(lines, seed=4)  # seeded
    assert len({tuple(s) for s in tok.sample_many(lines, seed=4)}) > 1  # but sampled
    assert all(tok.detokenize(s) == lines[0] for s in tok.sample_many(lines, seed=5))


def test_sentencepiece_separate_models_lowercase_and_bpe(tmp_path):
    cfg = DataConfig(tokenizer=SentencePieceSettings(model_type="bpe", vocab_size=290),
                     lowercase=True)
    src, tgt = build_tokenizers(cfg, tmp_path, TOY / "toy.train.en", TOY / "toy.train.de")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spm.src.model", "spm.tgt.model"]
    assert src.fixed_vocab != tgt.fixed_vocab
    line = "Yesterday we saw FORTY two red dogs."
    assert src.detokenize(src.tokenize(line)) == line.lower()


def test_sentencepiece_vocab_size_too_large_names_the_largest(tmp_path):
    cfg = DataConfig(tokenizer=SentencePieceSettings(vocab_size=100000))
    with pytest.raises(ConfigError, match=r"largest usable size is \d+") as e:
        build_tokenizers(cfg, tmp_path, TOY / "toy.train.en", TOY / "toy.train.de")
    largest = int(re.search(r"largest usable size is (\d+)", str(e.value))[1])
    cfg.tokenizer.vocab_size = largest  # the size named works, one more does not
    src, _ = build_tokenizers(cfg, tmp_path, TOY / "toy.train.en", TOY / "toy.train.de")
    assert len(src.fixed_vocab) == largest
    cfg.tokenizer.vocab_size = largest + 1
    with pytest.raises(ConfigError, match="data.tokenizer.vocab_size"):
        build_tokenizers(cfg, tmp_path, TOY / "toy.train.en", TOY / "toy.train.de")


def test_sentencepiece_on_an_empty_training_split_is_a_data_error(tmp_path):
    (tmp_path / "blank.en").write_text("\n  \n\t\n")
    (tmp_path / "blank.de").write_text("")
    cfg = DataConfig(tokenizer=SentencePieceSettings(vocab_size=300))
    with pytest.raises(DataError, match="no text to train SentencePiece"):
        build_tokenizers(cfg, tmp_path, tmp_path / "blank.en", tmp_path / "blank.de")
    with pytest.raises(DataError, match="not found"):
        build_tokenizers(cfg, tmp_path, tmp_path / "missing.en", tmp_path / "blank.de")


def test_missing_or_corrupt_sentencepiece_model_is_a_checkpoint_error(spm_dir, tmp_path):
    directory, cfg = spm_dir
    with pytest.raises(CheckpointError, match="missing"):
        load_tokenizers(cfg, tmp_path)
    good = (directory / JOINT).read_bytes()
    for damaged in (good[: len(good) // 2], b"not a model", b""):
        (tmp_path / JOINT).write_bytes(damaged)
        with pytest.raises(CheckpointError, match=f"{JOINT}: "):
            load_tokenizers(cfg, tmp_path)
    shutil.copy(directory / JOINT, tmp_path / JOINT)
    load_tokenizers(cfg, tmp_path)


@pytest.mark.parametrize("key, value, needle", [
    ("data.tokenizer", "moses", "data.tokenizer must be one of spacy, sentencepiece, marian"),
    ("data.tokenizer.model_type", "char", "data.tokenizer.model_type must be unigram or bpe"),
    ("data.spm_model_type", "char", "data.tokenizer.model_type must be unigram or bpe"),
    ("data.vocab_size", "100", "data.tokenizer.vocab_size (100) must be more than 260"),
    ("data.spm_max_sentences", "50", "data.tokenizer.max_sentences must be 0"),
    ("data.tokenizer.alpha", "-1", "data.tokenizer.alpha must be 0 (off) or positive"),
    ("data.spm_nbest", "1", "data.tokenizer.nbest must be -1 (all segmentations) or more"),
    ("data.spm_samples", "0", "data.tokenizer.samples must be at least 1"),
])
def test_tokenizer_settings_are_checked_at_load(key, value, needle):
    """In either form (data.tokenizer.KEY, or the old data.spm_KEY), blamed on who gave it."""
    with pytest.raises(ConfigError, match=re.escape(needle)) as e:
        load_config(ROOT / "configs" / "toy.yaml", ["data.tokenizer=sentencepiece",
                                                    f"{key}={value}"])
    assert str(e.value).startswith(f"--set {key}={value}: ")


def test_sentencepiece_needs_no_spacy_language():
    cfg = load_config(None, ["data.tokenizer=sentencepiece", "data.src_lang=klingon"],
                      [config_problems])
    assert cfg.data.src_lang == "klingon"
    with pytest.raises(ConfigError, match="no spaCy tokenizer"):
        load_config(None, ["data.src_lang=klingon"], [config_problems])
