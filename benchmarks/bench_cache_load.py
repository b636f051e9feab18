"""What checking a token cache entry costs at load: mt's load with its check and without.

    python -m benchmarks.bench_cache_load [--pairs 2000000] [--rounds 9] [--dir /tmp]

Builds the Multi30k train entry with mt (the config's data settings), then assembles from it
an entry of --pairs pairs drawn in shuffled order (Multi30k train duplicated and shuffled,
without tokenizing it again), and times, side by side:
  - a load as `mt train` does it (open the entry: meta, vocabularies, the check; then map the
    arrays and read their lengths), with the check and with the check skipped;
  - the check alone (per side: the ids' maximum against the vocabulary, the offsets' order).
Each from the page cache (the entry just written, or read by the round before) and cold (its
files dropped from the page cache first, with posix_fadvise). The contenders take turns,
--rounds rounds, and each keeps its fastest: on a shared machine, noise only ever adds time.
Everything is written under a temporary directory in --dir, deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import mt.token_cache as tc
from mt.config import load_config

ROOT = Path(__file__).resolve().parents[1]


def drop_page_cache(entry: Path) -> None:
    for f in entry.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def assemble(small: tc.TokenCache, entry: Path, pairs: int, seed: int = 0) -> None:
    """An entry of `pairs` pairs drawn from `small`'s, shuffled, as the builder lays it out."""
    shutil.copytree(small.path, entry, ignore=shutil.ignore_patterns("*.ids", "*.offsets"))
    meta = {**small.meta, "pairs": pairs}
    rows = np.random.default_rng(seed).permutation(pairs) % small.meta["pairs"]
    for side in tc.SIDES:
        a = small._array(side)
        lens = np.diff(a.offsets)[rows]
        offsets = np.zeros(pairs + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], lens)
        ids = np.asarray(a.ids)[np.repeat(a.offsets[rows], lens) + within]
        ids.tofile(entry / f"{side}.ids")
        offsets.tofile(entry / f"{side}.offsets")
        meta["tokens"][side] = int(offsets[-1])
    (entry / tc.META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=2_000_000, help="pairs (default 2,000,000)")
    ap.add_argument("--rounds", type=int, default=9, help="rounds of each (default 9)")
    ap.add_argument("--config", default=str(ROOT / "configs" / "multi30k_de_en.yaml"))
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "multi30k"))
    ap.add_argument("--dir", default=None, help="where the cache is written (default: TMP)")
    args = ap.parse_args()

    d = load_config(args.config, [f"data.dir={args.data}"]).data
    check = tc._check
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        os.environ["MT_CACHE_DIR"] = tmp
        small = tc.open_cache(d)
        entry = small.path.with_name("big")
        assemble(small, entry, args.pairs)

        def load() -> None:
            cache = tc._load(entry, d)
            assert cache is not None
            cache.data()

        def unchecked() -> None:
            tc._check = lambda *a: None
            try:
                load()
            finally:
                tc._check = check

        def check_alone() -> None:
            meta = json.loads((entry / tc.META).read_text(encoding="utf-8"))
            cache = tc.TokenCache(entry, meta, *small.vocabs, d)
            for side, vocab in zip(tc.SIDES, cache.vocabs):
                check(cache._array(side), len(vocab), side)

        contenders = {"load without the check": unchecked, "load with the check": load,
                      "the check alone": check_alone}
        best = {(name, cold): float("inf") for name in contenders for cold in (False, True)}
        for _ in range(args.rounds):
            load()  # every page in the page cache for the warm ones
            for (name, cold) in sorted(best, key=lambda k: k[1]):
                if cold:
                    drop_page_cache(entry)
                start = time.perf_counter()
                contenders[name]()
                best[name, cold] = min(best[name, cold], time.perf_counter() - start)
        size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        tokens = json.loads((entry / tc.META).read_text())["tokens"]
    print(f"entry: {args.pairs:,} pairs, {tokens['src']:,} + {tokens['tgt']:,} tokens, "
          f"{size / 2**20:.0f} MiB; fastest of {args.rounds} rounds each")
    print(f"{'':24} {'page cache':>12} {'cold':>12}")
    for name in contenders:
        print(f"{name:24} {best[name, False] * 1000:9.1f} ms {best[name, True] * 1000:9.1f} ms")


if __name__ == "__main__":
    main()
