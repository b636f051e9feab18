"""mt/data.py: reading parallel files, length filtering, token-budget batches, the loader."""

import gzip
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import CONFIG, TINY, assert_user_error, corpus, small_config
from mt.config import load_config
from mt.data import ParallelData, group_bounds, prefetch, read_parallel
from mt.errors import DataError
from mt.textio import read_lines, split_path
from mt.train.loop import Trainer
from mt.vocab import BOS, EOS, PAD


def test_plain_and_gzip_read_the_same(tmp_path):
    text = "eins\nzwei\r\n\ndrei\n"
    (tmp_path / "a.de").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "b.de.gz", "wt", encoding="utf-8") as f:
        f.write(text)
    assert read_lines(tmp_path / "a.de") == read_lines(tmp_path / "b.de.gz") == [
        "eins", "zwei", "", "drei"]
    assert split_path(tmp_path, "b", "de").name == "b.de.gz"


def test_mismatched_parallel_files_name_both(tmp_path):
    (tmp_path / "x.en").write_text("a\nb\nc\n")
    (tmp_path / "x.de").write_text("a\nb\n")
    with pytest.raises(DataError, match=r"x.en has 3 lines, .*x.de has 2"):
        read_parallel(tmp_path / "x.en", tmp_path / "x.de")


def test_length_filter_counts_drops():
    data = ParallelData.from_lists([[5] * 3, [5] * 9, [], [5]], [[6] * 2, [6] * 2, [6], [6] * 9])
    assert data.filter_length(5) == 3 and len(data) == 1


def test_batches_fit_budget_and_cover_everything():
    torch.manual_seed(0)
    lens = torch.randint(1, 30, (500, 2)).tolist()
    data = ParallelData.from_lists([[7] * s for s, _ in lens], [[8] * t for _, t in lens])
    batches = data.batches(max_tokens=300, seed=1)
    seen = 0
    for b in batches:
        assert b.src.numel() + b.tgt_in.numel() <= 300 or b.src.size(0) == 1
        assert (b.tgt_in[:, 0] == BOS).all()
        # tgt_out is tgt_in shifted left, ending in <eos> for every row.
        n = (b.tgt_out != PAD).sum(1)
        assert (b.tgt_out[torch.arange(len(n)), n - 1] == EOS).all()
        words = (b.tgt_out[:, :-1] != PAD) & (b.tgt_out[:, :-1] != EOS)
        assert torch.equal(b.tgt_in[:, 1:][words], b.tgt_out[:, :-1][words])
        seen += b.src.size(0)
    assert seen == 500
    # Length bucketing keeps padding low: most of a batch is real tokens.
    real = sum((b.src != PAD).sum().item() for b in batches)
    assert real / sum(b.src.numel() for b in batches) > 0.8
    # Same seed, same batches; another seed, another order.
    again = data.batches(max_tokens=300, seed=1)
    assert all(torch.equal(a.src, b.src) for a, b in zip(batches, again))
    other = data.batches(max_tokens=300, seed=2)
    assert any(a.src.shape != b.src.shape or not torch.equal(a.src, b.src)
               for a, b in zip(batches, other))


def test_loader_collates_the_planned_batches_in_the_background():
    torch.manual_seed(0)
    lens = torch.randint(1, 30, (300, 2)).tolist()
    data = ParallelData.from_lists([[7] * s for s, _ in lens], [[8] * t for _, t in lens])
    plan = data.plan(max_tokens=300, seed=3)
    eager = data.batches(max_tokens=300, seed=3)
    positions = range(1, len(plan), 2)  # e.g. rank 1 of 2
    lazy = list(data.loader(plan, positions))
    assert len(lazy) == len(positions)
    for k, batch in zip(positions, lazy):
        assert torch.equal(batch.src, eager[k].src) and torch.equal(batch.tgt_out, eager[k].tgt_out)
    stopped = data.loader(plan, range(len(plan)))
    next(stopped)
    stopped.close()  # leaving early stops the thread instead of leaving it blocked
    deadline = time.monotonic() + 10
    while any(t.name == "mt-prefetch" for t in threading.enumerate()):
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_prefetch_raises_the_producers_error_in_the_consumer():
    def items():
        yield 1
        raise DataError("bad chunk")

    it = prefetch(items())
    assert next(it) == 1
    with pytest.raises(DataError, match="bad chunk"):
        next(it)


def test_mismatched_parallel_files_name_both_and_their_counts(cli, tmp_path):
    data = corpus(tmp_path, edit=lambda src, tgt: tgt.pop())
    r = cli("train", CONFIG, "--out", tmp_path / "run", *small_config(data))
    assert_user_error(r, 4, "train.en has 60 lines", "train.de has 59")


def test_empty_and_missing_training_files(cli, tmp_path):
    data = corpus(tmp_path, n=0)
    r = cli("train", CONFIG, "--out", tmp_path / "r1", *small_config(data))
    assert_user_error(r, 4, "train.en", "empty")
    (data / "toy.train.en").write_text("\n\n")
    (data / "toy.train.de").write_text("eins\n\n")
    r = cli("train", CONFIG, "--out", tmp_path / "r3", *small_config(data))
    assert_user_error(r, 4, "train.en", "no training pairs left")
    r = cli("train", CONFIG, "--out", tmp_path / "r2", *small_config(tmp_path / "nowhere"))
    assert_user_error(r, 4, "nowhere/toy.train.en", "not found")
    assert not any((tmp_path / r).exists() for r in ("r1", "r2", "r3"))  # taken back


def test_training_data_invalid_utf8_is_replaced_and_long_lines_dropped(tmp_path, capsys):
    def edit(src, tgt):
        src[2] = b"one \xff\xfe two"  # line 3
        src[4] = tgt[4] = b" ".join([b"seven"] * 45)  # over data.max_len (40): dropped
        src[5] = tgt[5] = b""  # empty: dropped

    data = corpus(tmp_path, edit=edit)
    cfg = load_config(CONFIG, [*TINY, f"data.dir={data}"])
    trainer = Trainer(cfg, tmp_path / "run", "cpu")
    trainer.load_data()
    err = capsys.readouterr().err
    assert "train.en: 1 line(s) had invalid UTF-8 (first at line 3)" in err
    assert "58 training pairs (2 dropped" in err
    assert any("\ufffd" in token for token in trainer.src_vocab.itos)  # the pair was kept


def _greedy(sizes: list[tuple[int, int]], max_tokens: int) -> list[int]:
    """The run boundaries, one item at a time (as mt cut batches before group_bounds)."""
    cuts, count, max_s, max_t = [0], 0, 0, 0
    for i, (s, t) in enumerate(sizes):
        ms, mt_ = max(max_s, s), max(max_t, t)
        if count and (count + 1) * (ms + mt_) > max_tokens:
            cuts.append(i)
            count, ms, mt_ = 0, s, t
        count, max_s, max_t = count + 1, ms, mt_
    return cuts + [len(sizes)] if sizes else [0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 60)), max_size=300),
       st.integers(1, 400))
def test_group_bounds_is_the_greedy_cut(sizes, max_tokens):
    sizes.sort()
    src = np.array([s for s, _ in sizes], dtype=np.int64)
    tgt = np.array([t for _, t in sizes], dtype=np.int64)
    assert group_bounds(src, tgt, max_tokens).tolist() == _greedy(sizes, max_tokens)
