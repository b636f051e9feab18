"""mt/cached_mix.py: a run's vocabularies over its cached corpora, their tags in them, and the
entries' ids looked up in the run's vocabularies as batches are made."""

from pathlib import Path

import numpy as np
import pytest
import torch

from cached_corpora import open_cache, toy_data
from mt.cached_mix import mixed_data, run_vocabs
from mt.config import load_config
from mt.errors import DataError
from mt.token_cache import open_cached_corpora
from mt.vocab import Vocab


def test_a_run_vocabulary_is_looked_up_as_batches_are_made(tmp_path, cache_dir):
    """A resumed run keeps its own vocabularies, whatever the data now counts to: the entry's
    ids are looked up in them, the tokens they lack becoming <unk>."""
    d = toy_data(tmp_path)
    cache = open_cache(d)
    src_vocab, tgt_vocab = run_vocabs(cache)
    smaller = Vocab(src_vocab.itos[:10])
    data = mixed_data(cache, smaller, tgt_vocab)
    full = mixed_data(cache, src_vocab, tgt_vocab)
    batch, whole = data.collate(np.arange(50)), full.collate(np.arange(50))
    assert batch.src.max() < 10 and (batch.src == 1).any()  # the rest became <unk>
    kept = whole.src < 10
    assert torch.equal(batch.src[kept], whole.src[kept])
    assert torch.equal(batch.tgt_out, whole.tgt_out)


def test_a_tag_the_data_holds_is_refused(tmp_path):
    d = Path(toy_data(tmp_path).dir)
    lines = (d / "toy.train.en").read_text(encoding="utf-8").splitlines()
    lines[7] = "we saw <bt> dogs"
    (d / "toy.train.en").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = load_config(None, [f"data.dir={d}", "data.train=[{prefix: toy.train, tag: <bt>}]"])
    with pytest.raises(DataError, match="holds '<bt>', which is also a corpus tag"):
        run_vocabs(open_cached_corpora(cfg.data))


def test_tags_join_the_source_vocabulary_after_its_words(tmp_path):
    d = Path(toy_data(tmp_path).dir)
    cfg = load_config(None, [f"data.dir={d}", "data.train=[{prefix: toy.train, tag: <2de>}]"])
    cache = open_cached_corpora(cfg.data)
    src, tgt = run_vocabs(cache)
    assert src.itos[-1] == "<2de>" and "<2de>" not in tgt.stoi
    batch = mixed_data(cache, src, tgt).collate(np.arange(5))
    assert (batch.src[:, 0] == src.stoi["<2de>"]).all()
    assert Vocab(src.itos[:-1]).itos == cache.entries[0].src_vocab.itos  # the counted words
