"""mt/token_cache/tokenizer_entries.py: a run's own tokenizer files are used as they are."""

from dataclasses import replace
from pathlib import Path

import numpy as np

from cached_corpora import open_cache, toy_data
from mt.cached_mix import mixed_data, run_vocabs
from mt.token_cache import open_cached_corpora
from mt.tokenizers.subword import JOINT, SentencePieceSettings


def test_given_tokenizer_files_are_used_as_they_are(tmp_path, cache_dir):
    """A fine-tuned run encodes its data with its parent's SentencePiece model (nothing
    trained); a resumed run's own files find the entries it was trained on."""
    spm = {"tokenizer": SentencePieceSettings(vocab_size=360), "shared_vocab": True}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    parent = open_cache(replace(toy_data(tmp_path / "a", n=400), **spm))
    d = replace(toy_data(tmp_path / "b", n=800), **spm)
    files = parent.tok_files
    tok = parent.tokenizers()[0]
    own = open_cache(d)
    assert own.tok_files[JOINT] != files[JOINT]  # trained on other data
    given = open_cached_corpora(d, tok_files=files)
    assert given.tok_files == files and given.entries[0].path != own.entries[0].path
    line = (Path(d.dir) / "toy.train.en").read_text(encoding="utf-8").splitlines()[500]
    assert given.tokenizers()[0].tokenize(line) == tok.tokenize(line)
    vocabs = run_vocabs(parent)
    src = mixed_data(given, *vocabs).collate(np.array([500])).src[0].tolist()
    assert vocabs[0].decode(src) == tok.tokenize(line)
    resumed = open_cached_corpora(d, tok_files=own.tok_files)
    assert resumed.entries[0].path == own.entries[0].path
