"""What checking a token cache entry costs at load: mt's load with its check and without.

    python -m benchmarks.bench_cache_load [--pairs 2000000] [--rounds 9] [--dir /tmp]
    python -m benchmarks.bench_cache_load --smoke     # the toy corpus, 3,000 pairs, 1 round

Builds the entry of the training split of --data (Multi30k by default) with mt, with the data
settings of --config, then assembles from it an entry of --pairs pairs drawn in shuffled order
(Multi30k train duplicated and shuffled, without tokenizing it again), and times, side by side:
  - a load as `mt train` does it (CacheEntry.open: meta, vocabularies; CacheEntry.check; then
    map the arrays and read their lengths), with the check and without it;
  - the check alone (CacheEntry.check: per side, the ids' maximum against the vocabulary, the
    offsets' order).
Each from the page cache (every file read by a load just before) and cold (its files dropped
from the page cache first, with posix_fadvise). The contenders take turns,
--rounds rounds, and each keeps its fastest: on a shared machine, noise only ever adds time.
Everything is written under a temporary directory in --dir, deleted at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np

from benchmarks.harness import SMOKE_DATA, add_data_args, alternate, markdown, parse, parser, timer
from mt.config import load_config
from mt.token_cache import open_cached_corpora
from mt.token_cache.entry import META, SIDES, CacheEntry


def drop_page_cache(entry: Path) -> None:
    for f in entry.rglob("*"):
        if f.is_file():
            fd = os.open(f, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)


def assemble(small: CacheEntry, entry: Path, pairs: int, seed: int = 0) -> None:
    """An entry of `pairs` pairs drawn from `small`'s, shuffled, as the builder lays it out."""
    shutil.copytree(small.path, entry, ignore=shutil.ignore_patterns("*.ids", "*.offsets"))
    meta = {**small.meta, "pairs": pairs}
    rows = np.random.default_rng(seed).permutation(pairs) % small.meta["pairs"]
    data = small.data()
    for side, a in zip(SIDES, (data.src, data.tgt)):
        lens = np.diff(a.offsets)[rows]
        offsets = np.zeros(pairs + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        within = np.arange(offsets[-1]) - np.repeat(offsets[:-1], lens)
        ids = np.asarray(a.ids)[np.repeat(a.offsets[rows], lens) + within]
        ids.tofile(entry / f"{side}.ids")
        offsets.tofile(entry / f"{side}.offsets")
        meta["tokens"][side] = int(offsets[-1])
    (entry / META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")


def after(first: Callable[[], object], fn: Callable[[], object]) -> Callable[[int], float]:
    """A contender timing fn() after an untimed first()."""
    timed = timer(fn)
    return lambda r: (first(), timed(r))[1]


def main() -> None:
    ap = parser(__doc__, rounds=9, smoke="the toy corpus, 3,000 pairs, 1 round")
    ap.add_argument("--pairs", type=int, default=2_000_000, help="pairs (default 2,000,000)")
    add_data_args(ap, threads=False)
    ap.add_argument("--dir", default=None, help="where the cache is written (default: TMP)")
    args = parse(ap, {**SMOKE_DATA, "pairs": 3000, "rounds": 1})

    d = load_config(args.config, [f"data.dir={args.data}"]).data
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        os.environ["MT_CACHE_DIR"] = tmp
        small = open_cached_corpora(d).entries[0]
        entry = small.path.with_name("big")
        assemble(small, entry, args.pairs)
        opened = CacheEntry.open(entry)

        def load() -> None:
            cache = CacheEntry.open(entry)
            cache.check()
            cache.data()

        calls = {"load without the check": lambda: CacheEntry.open(entry).data(),
                 "load with the check": load, "the check alone": opened.check}
        # From the page cache: every page read by a load just before; cold: none of them.
        wheres = {"page cache": load, "cold": lambda: drop_page_cache(entry)}
        best = alternate({f"{name}, {where}": after(first, fn) for where, first in wheres.items()
                          for name, fn in calls.items()}, args.rounds)
        size = sum(f.stat().st_size for f in entry.iterdir() if f.is_file())
        tokens = opened.meta["tokens"]
    print(f"entry: {args.pairs:,} pairs, {tokens['src']:,} + {tokens['tgt']:,} tokens, "
          f"{size / 2**20:.0f} MiB; fastest of {args.rounds} rounds each\n")
    print(markdown(["", "page cache, ms", "cold, ms"],
                   ([name] + [f"{best[f'{name}, {where}'] * 1000:.1f}" for where in wheres]
                    for name in calls)))


if __name__ == "__main__":
    main()
