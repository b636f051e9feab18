"""The token cache: hits, rebuilds, interrupted and failed builds, and equivalence with the
in-memory path."""

import errno
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import mt.token_cache
from conftest import ROOT, TINY, TOY
from mt.config import DataConfig
from mt.data import ParallelData, group_bounds, read_parallel
from mt.errors import FileSystemError, RunError
from mt.token_cache import Corpora, open_corpora
from mt.tokenizers.spacy_words import SpacyTokenizer
from mt.tokenizers.subword import JOINT, SentencePieceSettings
from mt.vocab import Vocab

MAIN_PID = os.getpid()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("MT_CACHE_DIR", str(path))
    return path


def corpus(tmp_path: Path, n: int = 400) -> DataConfig:
    """The first n toy training pairs (and 100 validation pairs), in a directory of their own."""
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for split, size in (("train", n), ("val", 100)):
        for lang in ("en", "de"):
            lines = (TOY / f"toy.{split}.{lang}").read_text(encoding="utf-8").splitlines()[:size]
            (data / f"toy.{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return DataConfig(dir=str(data))


def entries(cache_dir: Path) -> list[str]:
    """Everything in the cache but lock files: entries and temporary build directories."""
    tokens = cache_dir / "tokens"
    return sorted(p.name for p in tokens.iterdir() if not p.name.endswith(".lock"))


def in_memory(d: DataConfig) -> tuple[ParallelData, Vocab, Vocab]:
    """The training data as mt built it before the cache: all in one process, in memory."""
    src_lines, tgt_lines = read_parallel(Path(d.dir) / f"{d.train}.{d.src_lang}",
                                         Path(d.dir) / f"{d.train}.{d.tgt_lang}")
    src = SpacyTokenizer(d.src_lang, d.lowercase).tokenize_many(src_lines)
    tgt = SpacyTokenizer(d.tgt_lang, d.lowercase).tokenize_many(tgt_lines)
    if d.shared_vocab:
        src_vocab = tgt_vocab = Vocab.build(src + tgt, d.min_freq, d.max_size)
    else:
        src_vocab = Vocab.build(src, d.min_freq, d.max_size)
        tgt_vocab = Vocab.build(tgt, d.min_freq, d.max_size)
    data = ParallelData.from_lists([src_vocab.encode(t) for t in src],
                                   [tgt_vocab.encode(t) for t in tgt])
    return data, src_vocab, tgt_vocab


def open_cache(d: DataConfig, workers: int = 0) -> Corpora:
    return open_corpora(d, workers=workers)


def training(cache: Corpora):
    """The training pairs a new run on `cache` trains on (ids in its counted vocabularies)."""
    return cache.data(*cache.vocabs())


def same_batches(a: ParallelData, b: ParallelData, max_tokens: int, seed: int) -> bool:
    one, two = a.batches(max_tokens, seed), b.batches(max_tokens, seed)
    return len(one) == len(two) and all(
        torch.equal(x.src, y.src) and torch.equal(x.tgt_in, y.tgt_in)
        and torch.equal(x.tgt_out, y.tgt_out) and x.n_tgt_tokens == y.n_tgt_tokens
        for x, y in zip(one, two))


@pytest.mark.parametrize("settings_", [
    {},
    {"shared_vocab": True, "lowercase": True},
    {"min_freq": 3, "max_size": 40},
])
def test_memory_mapped_batches_equal_the_in_memory_ones(tmp_path, cache_dir, monkeypatch,
                                                       settings_):
    monkeypatch.setattr(mt.token_cache, "CHUNK_PAIRS", 64)  # many chunks over two workers
    d = corpus(tmp_path, 1000)
    for key, value in settings_.items():
        setattr(d, key, value)
    cache = open_cache(d, workers=2)
    [entry] = cache.entries
    assert isinstance(entry.data().src.ids, np.memmap) and entry.data().src.ids.dtype == np.uint16
    memory, src_vocab, tgt_vocab = in_memory(d)
    vocabs = cache.vocabs()
    assert vocabs[0].itos == src_vocab.itos and vocabs[1].itos == tgt_vocab.itos
    mapped = cache.data(*vocabs)
    assert sum(mapped.filter_length(8)) == memory.filter_length(8) > 0
    assert same_batches(mapped, memory, max_tokens=300, seed=7)


def test_cache_hit_on_unchanged_data_and_rebuild_after_a_change(tmp_path, cache_dir,
                                                               monkeypatch, capsys):
    d = corpus(tmp_path)
    [first] = open_cache(d).entries
    assert "building the token cache" in capsys.readouterr().err
    assert entries(cache_dir) == [first.path.name]

    def no_build(*args):
        raise AssertionError("the cache was built again")

    with monkeypatch.context() as m:
        m.setattr(mt.token_cache, "_write", no_build)
        [again] = open_cache(d).entries
    assert again.path == first.path and capsys.readouterr().err == ""
    assert again.data().pair(5) == first.data().pair(5)

    en = Path(d.dir) / "toy.train.en"
    lines = en.read_text(encoding="utf-8").splitlines()
    lines[5] = "brand new words"
    en.write_text("\n".join(lines) + "\n", encoding="utf-8")
    [changed] = open_cache(d).entries
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "changed since" in line] == [
        f"data: {en} changed since its token cache was built; rebuilding the cache"]
    assert changed.path != first.path and entries(cache_dir) == [changed.path.name]
    src, _ = changed.data().pair(5)
    assert changed.src_vocab.decode(src) == ["brand", "new", "words"]


def test_a_run_vocabulary_is_looked_up_as_batches_are_made(tmp_path, cache_dir):
    """A resumed run keeps its own vocabularies, whatever the data now counts to: the entry's
    ids are looked up in them, the tokens they lack becoming <unk>."""
    d = corpus(tmp_path)
    cache = open_cache(d)
    src_vocab, tgt_vocab = cache.vocabs()
    smaller = Vocab(src_vocab.itos[:10])
    data = cache.data(smaller, tgt_vocab)
    full = cache.data(src_vocab, tgt_vocab)
    batch, whole = data.collate(np.arange(50)), full.collate(np.arange(50))
    assert batch.src.max() < 10 and (batch.src == 1).any()  # the rest became <unk>
    kept = whole.src < 10
    assert torch.equal(batch.src[kept], whole.src[kept])
    assert torch.equal(batch.tgt_out, whole.tgt_out)


@pytest.mark.slow  # tokenizes 72,000 words
def test_ids_are_uint32_when_a_vocabulary_outgrows_uint16(tmp_path, cache_dir):
    d = corpus(tmp_path)
    words = [" ".join(f"w{i * 80 + j}" for j in range(80)) for i in range(900)]
    (Path(d.dir) / "toy.train.en").write_text("\n".join(words) + "\n", encoding="utf-8")
    (Path(d.dir) / "toy.train.de").write_text("\n".join(["ja"] * 900) + "\n", encoding="utf-8")
    cache = open_cache(d)
    data = cache.entries[0].data()
    assert data.src.ids.dtype == np.uint32 and data.tgt.ids.dtype == np.uint16
    src_vocab, _ = cache.vocabs()
    assert src_vocab.decode(training(cache).collate(np.array([3])).src[0].tolist()) == \
        words[3].split()


def _die_in_a_worker(number, pairs, toks=None):
    if os.getpid() != MAIN_PID and pairs[0][0] == CHUNK_TO_DIE_ON:
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL_ENCODE(number, pairs, toks)


REAL_ENCODE = mt.token_cache._encode_chunk
CHUNK_TO_DIE_ON = (TOY / "toy.train.en").read_text(encoding="utf-8").splitlines()[150]


def test_a_killed_worker_leaves_nothing_behind(tmp_path, cache_dir, monkeypatch):
    d = corpus(tmp_path)
    monkeypatch.setattr(mt.token_cache, "CHUNK_PAIRS", 50)
    monkeypatch.setattr(mt.token_cache, "_encode_chunk", _die_in_a_worker)
    with pytest.raises(RunError, match="tokenizer process died"):
        open_cache(d, workers=2)
    assert entries(cache_dir) == []
    monkeypatch.undo()
    memory, _, _ = in_memory(d)
    assert same_batches(training(open_cache(d, workers=2)), memory, 200, seed=1)


@pytest.mark.slow
def test_a_killed_build_is_never_used(tmp_path, cache_dir):
    """kill -9 in the middle of a build: the next run builds afresh and clears the remains."""
    d = corpus(tmp_path)
    script = ("import time, mt.token_cache\n"
              "from mt.config import DataConfig\n"
              "mt.token_cache._encode_chunk = lambda *a: time.sleep(600)\n"
              f"mt.token_cache.open_corpora(DataConfig(dir={d.dir!r}), workers=1)\n")
    p = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, start_new_session=True,
                         env={**os.environ, "MT_CACHE_DIR": str(cache_dir)})
    try:
        deadline = time.time() + 120
        while not (cache_dir / "tokens").is_dir() or not entries(cache_dir):
            assert p.poll() is None and time.time() < deadline
            time.sleep(0.1)
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    [tmp] = entries(cache_dir)
    assert tmp.startswith(".") and ".tmp" in tmp  # an unfinished build, under another name
    cache = open_cache(d)
    assert entries(cache_dir) == [cache.entries[0].path.name]
    memory, _, _ = in_memory(d)
    assert same_batches(training(cache), memory, 200, seed=1)


def test_disk_full_while_building(tmp_path, cache_dir, monkeypatch):
    d = corpus(tmp_path)

    def full(self, vocab):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.directory))

    monkeypatch.setattr(mt.token_cache._Side, "finish", full)
    with pytest.raises(FileSystemError, match="No space left on device; free some") as e:
        open_cache(d)
    assert e.value.exit_code == 7
    assert entries(cache_dir) == []


def test_unwritable_cache_location_is_a_clear_error(tmp_path, monkeypatch):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("MT_CACHE_DIR", str(not_a_dir))
    with pytest.raises(FileSystemError, match="set MT_CACHE_DIR to a writable directory"):
        open_cache(corpus(tmp_path))


@pytest.mark.slow
def test_concurrent_builders_agree(tmp_path, cache_dir):
    d = corpus(tmp_path, 2000)
    config = tmp_path / "data.yaml"
    config.write_text(f"data:\n  dir: {d.dir}\n", encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    runs = [subprocess.Popen([sys.executable, "-m", "mt", "prepare", str(config)], cwd=ROOT,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outs = [r.communicate(timeout=600) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], outs
    assert outs[0][0] == outs[1][0]  # the same entry
    builds = [err for _, err in outs if "building the token cache" in err]
    assert len(builds) == 1, outs  # the second waited for the first, then used its entry
    memory, _, _ = in_memory(d)
    assert same_batches(training(open_cache(d)), memory, 500, seed=2)


@pytest.mark.dist
def test_under_torchrun_rank_0_builds_and_rank_1_maps(tmp_path, cache_dir):
    d = corpus(tmp_path)
    out = tmp_path / "ddp"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "mt",
           "train", str(ROOT / "configs/toy.yaml"), "--out", str(out), "--device", "cpu"]
    for s in [*TINY, f"data.dir={d.dir}", "train.max_steps=3", "train.eval_bleu=false",
              "train.metric=loss"]:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    [entry] = entries(cache_dir)
    meta = json.loads((cache_dir / "tokens" / entry / "meta.json").read_text())
    assert meta["built_by"]["rank"] == 0 and meta["pairs"] == 400
    assert p.stderr.count("building the token cache") == 1
    assert json.loads(p.stdout)["step"] == 3


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


def test_data_filter_drops_pairs_while_building(tmp_path, cache_dir, monkeypatch, capsys):
    from conftest import PLANTED_PAIRS, write_pairs
    from mt.config import FilterConfig
    from mt.tokenizers.text import normalize

    monkeypatch.setattr(mt.token_cache, "CHUNK_PAIRS", 2)  # duplicates across chunks; chunk 4
    write_pairs(tmp_path, "train", PLANTED_PAIRS)  # (lines 7, 8) is dropped whole
    d = DataConfig(dir=str(tmp_path), train="train", src_lang="de", tgt_lang="en")
    d.filter = FilterConfig(max_ratio=3, dedup=True, drop_copies=True, drop_invalid=True)
    assert mt.token_cache._settings(d, {})["data"]["filter"]["dedup"]  # part of the key
    corpora = open_cache(d, workers=1)
    [cache] = corpora.entries
    assert cache.meta["pairs"] == 10
    assert cache.meta["filtered"] == {"invalid": 2, "copy": 1, "ratio": 1, "duplicate": 2}
    assert ("data: train: data.filter dropped 6 of 16 pairs (2 invalid, 1 copy, 1 ratio, "
            "2 duplicate)" in capsys.readouterr().err)
    src_tok = corpora.tokenizers()[0]
    sources = [src_tok.detokenize(cache.src_vocab.decode(cache.data().pair(i)[0]))
               for i in range(10)]
    assert sources == [normalize(PLANTED_PAIRS[n - 1][0]) for n in (1, 2, 6, 9, 10, 12, 13, 14,
                                                                    15, 16)]


def test_given_tokenizer_files_are_used_as_they_are(tmp_path, cache_dir):
    """A fine-tuned run encodes its data with its parent's SentencePiece model (nothing
    trained); a resumed run's own files find the entries it was trained on."""
    spm = {"tokenizer": SentencePieceSettings(vocab_size=360), "shared_vocab": True}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    parent = open_cache(replace(corpus(tmp_path / "a", n=400), **spm))
    d = replace(corpus(tmp_path / "b", n=800), **spm)
    files = parent.tok_files
    tok = parent.tokenizers()[0]
    own = open_cache(d)
    assert own.tok_files[JOINT] != files[JOINT]  # trained on other data
    given = open_corpora(d, tok_files=files)
    assert given.tok_files == files and given.entries[0].path != own.entries[0].path
    line = (Path(d.dir) / "toy.train.en").read_text(encoding="utf-8").splitlines()[500]
    assert given.tokenizers()[0].tokenize(line) == tok.tokenize(line)
    vocabs = parent.vocabs()
    src = given.data(*vocabs).collate(np.array([500])).src[0].tolist()
    assert vocabs[0].decode(src) == tok.tokenize(line)
    resumed = open_corpora(d, tok_files=own.tok_files)
    assert resumed.entries[0].path == own.entries[0].path

