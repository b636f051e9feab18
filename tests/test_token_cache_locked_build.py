"""mt/token_cache/locked_build.py: an entry is built once, by one process, in a hidden
directory renamed into place: a killed build is never used, a failed one leaves nothing, two
builders agree, and an unwritable cache location is one clear error."""

import errno
import os
import signal
import subprocess
import sys
import time

import pytest

from cached_corpora import (
    entries,
    in_memory,
    open_cache,
    same_batches,
    toy_data,
    training,
)
from conftest import ROOT
from mt.errors import FileSystemError
from mt.token_cache import builder


@pytest.mark.slow
def test_a_killed_build_is_never_used(tmp_path, cache_dir):
    """kill -9 in the middle of a build: the next run builds afresh and clears the remains."""
    d = toy_data(tmp_path)
    script = ("import time, mt.token_cache\n"
              "from mt.config import DataConfig\n"
              "mt.token_cache.builder._encode_chunk = lambda *a: time.sleep(600)\n"
              f"mt.token_cache.open_cached_corpora(DataConfig(dir={d.dir!r}), workers=1)\n")
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
    d = toy_data(tmp_path)

    def full(self, vocab):
        raise OSError(errno.ENOSPC, "No space left on device", str(self.directory))

    monkeypatch.setattr(builder._Side, "finish", full)
    with pytest.raises(FileSystemError, match="No space left on device; free some") as e:
        open_cache(d)
    assert e.value.exit_code == 7
    assert entries(cache_dir) == []


def test_unwritable_cache_location_is_a_clear_error(tmp_path, monkeypatch):
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    monkeypatch.setenv("MT_CACHE_DIR", str(not_a_dir))
    with pytest.raises(FileSystemError, match="set MT_CACHE_DIR to a writable directory"):
        open_cache(toy_data(tmp_path))


@pytest.mark.slow
def test_concurrent_builders_agree(tmp_path, cache_dir):
    d = toy_data(tmp_path, 2000)
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
