"""mt/vocab.py: specials, frequency order, round trips, its own error."""

import pytest

from mt.errors import CheckpointError, VocabError
from mt.tokenizers.spacy_words import SpacyTokenizer
from mt.tokenizers.text import MARK
from mt.vocab import BOS, EOS, PAD, SPECIALS, UNK, Vocab


def test_specials_fixed_and_frequency_order():
    v = Vocab.build([["b", "a", "b"], ["c", "b", "a"], ["d"]], min_freq=1)
    assert v.itos[:4] == SPECIALS and (PAD, UNK, BOS, EOS) == (0, 1, 2, 3)
    assert v.itos[4:] == ["b", "a", "c", "d"]  # by count, ties alphabetical


def test_min_freq_and_max_size():
    sents = [["a"] * 5 + ["b"] * 3 + ["c"] * 2 + ["d"]]
    assert Vocab.build(sents, min_freq=2).itos[4:] == ["a", "b", "c"]
    assert Vocab.build(sents, max_size=2).itos[4:] == ["a", "b"]


def test_encode_decode_and_unknowns():
    v = Vocab.build([["hello", "world"]])
    ids = v.encode(["hello", "there", "world"])
    assert ids[1] == UNK
    assert v.decode(ids + [EOS, v.stoi["hello"]]) == ["hello", "<unk>", "world"]
    assert v.decode([BOS, PAD, v.stoi["world"]]) == ["world"]


def test_save_load_round_trip(tmp_path):
    v = Vocab.build([["Straße", "ß", "日本", "\u00a0x", "a b"], ["emoji😀"]])
    v.save(tmp_path / "v.txt")
    w = Vocab.load(tmp_path / "v.txt")
    assert w.itos == v.itos and w.stoi == v.stoi


def test_tokenize_detokenize_round_trip():
    en = SpacyTokenizer("en")
    toks = en.tokenize("Two dogs, running (fast) in the park.")
    j = MARK
    assert toks == ["Two", "dogs", j + ",", "running", "(" + j, "fast", j + ")", "in", "the",
                    "park", j + "."]
    assert en.detokenize(toks) == "Two dogs, running (fast) in the park."
    assert en.tokenize_many(["a  b", ""]) == [["a", "b"], []]  # no whitespace tokens
    assert SpacyTokenizer("de", lowercase=True).tokenize("Große Hunde") == ["große", "hunde"]


def test_vocab_raises_its_own_error():
    with pytest.raises(VocabError, match="must start with"):
        Vocab(["a", "b"])
    with pytest.raises(VocabError, match="duplicate"):
        Vocab(["<pad>", "<unk>", "<bos>", "<eos>", "a", "a"])
    assert issubclass(VocabError, CheckpointError) and VocabError.exit_code == 5
