"""mt/token_cache/builder.py: a corpus tokenized on several workers into an entry gives the
batches mt made in memory before the cache; a hit on unchanged data, a rebuild after a change;
a dead worker leaves nothing; the filters act while building."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cached_corpora import (
    entries,
    in_memory,
    open_cache,
    same_batches,
    toy_data,
    training,
)
from conftest import ROOT, TINY, TOY
from mt.cached_mix import mixed_data, run_vocabs
from mt.config import DataConfig
from mt.errors import RunError
from mt.token_cache import builder
from mt.token_cache.keys import entry_settings

MAIN_PID = os.getpid()


@pytest.mark.parametrize("settings_", [
    {},
    {"shared_vocab": True, "lowercase": True},
    {"min_freq": 3, "max_size": 40},
])
def test_memory_mapped_batches_equal_the_in_memory_ones(tmp_path, cache_dir, monkeypatch,
                                                       settings_):
    monkeypatch.setattr(builder, "CHUNK_PAIRS", 64)  # many chunks over two workers
    d = toy_data(tmp_path, 1000)
    for key, value in settings_.items():
        setattr(d, key, value)
    cache = open_cache(d, workers=2)
    [entry] = cache.entries
    assert isinstance(entry.data().src.ids, np.memmap) and entry.data().src.ids.dtype == np.uint16
    memory, src_vocab, tgt_vocab = in_memory(d)
    vocabs = run_vocabs(cache)
    assert vocabs[0].itos == src_vocab.itos and vocabs[1].itos == tgt_vocab.itos
    mapped = mixed_data(cache, *vocabs)
    assert sum(mapped.filter_length(8)) == memory.filter_length(8) > 0
    assert same_batches(mapped, memory, max_tokens=300, seed=7)


def test_cache_hit_on_unchanged_data_and_rebuild_after_a_change(tmp_path, cache_dir,
                                                               monkeypatch, capsys):
    d = toy_data(tmp_path)
    [first] = open_cache(d).entries
    assert "building the token cache" in capsys.readouterr().err
    assert entries(cache_dir) == [first.path.name]

    def no_build(*args):
        raise AssertionError("the cache was built again")

    with monkeypatch.context() as m:
        m.setattr(builder, "build_entry", no_build)
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


@pytest.mark.slow  # tokenizes 72,000 words
def test_ids_are_uint32_when_a_vocabulary_outgrows_uint16(tmp_path, cache_dir):
    d = toy_data(tmp_path)
    words = [" ".join(f"w{i * 80 + j}" for j in range(80)) for i in range(900)]
    (Path(d.dir) / "toy.train.en").write_text("\n".join(words) + "\n", encoding="utf-8")
    (Path(d.dir) / "toy.train.de").write_text("\n".join(["ja"] * 900) + "\n", encoding="utf-8")
    cache = open_cache(d)
    data = cache.entries[0].data()
    assert data.src.ids.dtype == np.uint32 and data.tgt.ids.dtype == np.uint16
    src_vocab, _ = run_vocabs(cache)
    assert src_vocab.decode(training(cache).collate(np.array([3])).src[0].tolist()) == \
        words[3].split()


def _die_in_a_worker(number, pairs, toks=None):
    if os.getpid() != MAIN_PID and pairs[0][0] == CHUNK_TO_DIE_ON:
        os.kill(os.getpid(), signal.SIGKILL)
    return REAL_ENCODE(number, pairs, toks)


REAL_ENCODE = builder._encode_chunk


CHUNK_TO_DIE_ON = (TOY / "toy.train.en").read_text(encoding="utf-8").splitlines()[150]


def test_a_killed_worker_leaves_nothing_behind(tmp_path, cache_dir, monkeypatch):
    d = toy_data(tmp_path)
    monkeypatch.setattr(builder, "CHUNK_PAIRS", 50)
    monkeypatch.setattr(builder, "_encode_chunk", _die_in_a_worker)
    with pytest.raises(RunError, match="tokenizer process died"):
        open_cache(d, workers=2)
    assert entries(cache_dir) == []
    monkeypatch.undo()
    memory, _, _ = in_memory(d)
    assert same_batches(training(open_cache(d, workers=2)), memory, 200, seed=1)


@pytest.mark.dist
def test_under_torchrun_rank_0_builds_and_rank_1_maps(tmp_path, cache_dir):
    d = toy_data(tmp_path)
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


def test_data_filter_drops_pairs_while_building(tmp_path, cache_dir, monkeypatch, capsys):
    from conftest import PLANTED_PAIRS, write_pairs
    from mt.config import FilterConfig
    from mt.tokenizers.text import normalize

    monkeypatch.setattr(builder, "CHUNK_PAIRS", 2)  # duplicates across chunks; chunk 4
    write_pairs(tmp_path, "train", PLANTED_PAIRS)  # (lines 7, 8) is dropped whole; 17 kept
    d = DataConfig(dir=str(tmp_path), train="train", src_lang="de", tgt_lang="en")
    d.filter = FilterConfig(max_ratio=3, dedup=True, drop_copies=True, drop_invalid=True)
    assert entry_settings(d, {})["data"]["filter"]["dedup"]  # part of the key
    corpora = open_cache(d, workers=1)
    [cache] = corpora.entries
    assert cache.meta["pairs"] == 11
    assert cache.meta["filtered"] == {"invalid": 2, "copy": 1, "ratio": 1, "duplicate": 2}
    assert ("data: train: data.filter dropped 6 of 17 pairs (2 invalid, 1 copy, 1 ratio, "
            "2 duplicate)" in capsys.readouterr().err)
    src_tok = corpora.tokenizers()[0]
    sources = [src_tok.detokenize(cache.src_vocab.decode(cache.data().pair(i)[0]))
               for i in range(11)]
    assert sources == [normalize(PLANTED_PAIRS[n - 1][0]) for n in (1, 2, 6, 9, 10, 12, 13, 14,
                                                                    15, 16, 17)]
