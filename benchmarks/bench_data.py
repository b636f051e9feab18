"""Benchmark: start-up time and memory of training on N-fold copies of Multi30k, before the token
cache (mt as of --old-rev, all in memory) and with it (mt here), side by side.

    python -m benchmarks.bench_data                        # folds 1, 10, 30
    python -m benchmarks.bench_data --folds 1 10 30 100 --old-max-fold 30
    python -m benchmarks.bench_data --smoke                # the toy corpus, new path only

For each fold N it writes N shuffled copies of Multi30k train (29,000 x N pairs; --data and
--config name another corpus) to a temporary directory and runs, each as its own process with
a tiny model and train.max_steps=1:
  old        `mt train` from --old-rev: reads, tokenizes and batches everything, every start
  new cold   `mt prepare` into an empty cache: tokenize on every core, write the arrays
  new warm   `mt train` with the cache built: what every later start and --resume costs
Each run reports wall time (the whole process: imports, data, model, one step, one validation
pass on Multi30k val, a checkpoint), the time to step 1 as the trainer logs it (from the trainer's
start: no imports), and the process's peak resident memory. Rounds alternate between the
contenders and each keeps its fastest. Slopes are per pair between the two largest folds (at 1x
data.min_freq=2 keeps a smaller vocabulary, hence a smaller model, than at 2x and above).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness import (
    MULTI30K,
    ROOT,
    SMOKE_DATA,
    alternate,
    markdown,
    mt_at,
    parse,
    parser,
)
from mt.config import DataConfig, load_config
from mt.textio import read_lines, split_path

TINY = ["model.d_model=64", "model.n_heads=4", "model.n_enc_layers=1", "model.n_dec_layers=1",
        "model.d_ff=128", "train.max_steps=1", "train.log_every=1", "train.eval_bleu=false",
        "train.metric=loss", "train.eval_every=100000", "train.threads=1"]
WMT14 = {"WMT14 en-de (4.5M pairs)": 4_500_000, "WMT14 en-fr (36M pairs)": 36_000_000}


def first_cache_commit() -> str:
    """The commit before mt/cache.py was added: mt with its all-in-memory data path."""
    out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", "mt/cache.py"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    if not out:
        sys.exit("bench_data: mt/cache.py is not committed; give --old-rev")
    return out[-1] + "^"


def make_corpus(dest: Path, fold: int, data: Path, d: DataConfig) -> int:
    """N shuffled copies of the training split (the same permutation on both sides), and its
    validation split."""
    sides = {lang: read_lines(split_path(data, d.train, lang)) for lang in (d.src_lang, d.tgt_lang)}
    n = len(sides[d.src_lang])
    order = [i % n for i in range(n * fold)]
    random.Random(fold).shuffle(order)
    dest.mkdir(parents=True)
    for lang, lines in sides.items():
        with open(dest / f"{d.train}.{lang}", "w", encoding="utf-8") as f:
            f.writelines(lines[i] + "\n" for i in order)
        val = split_path(data, d.val, lang)
        shutil.copy(val, dest / val.name)
    return len(order)


# Runs `mt` and, at exit, writes its peak resident memory (VmHWM: this process alone, not its
# workers, and not the benchmark's own memory, which getrusage would count from before exec).
PEAK = """import atexit, runpy, sys
def peak(path):
    with open("/proc/self/status") as f:
        kb = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
    with open(path, "w") as out:
        out.write(kb)
atexit.register(peak, sys.argv[1])
sys.argv = ["mt", *sys.argv[2:]]
runpy.run_module("mt", run_name="__main__", alter_sys=True)
"""


def run(args: list[str], env: dict, code: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of `mt ARGS`, run with the mt package found in `code`."""
    with tempfile.TemporaryFile("w+") as err, tempfile.NamedTemporaryFile("r") as peak:
        started = time.perf_counter()
        p = subprocess.run([sys.executable, "-c", PEAK, peak.name, *args], cwd=code, env=env,
                           stdout=subprocess.DEVNULL, stderr=err)
        wall = time.perf_counter() - started
        if p.returncode:
            err.seek(0)
            sys.exit(f"bench_data: mt {args[0]} failed ({p.returncode}):\n{err.read()[-2000:]}")
        return wall, int(peak.read()) / 1024


def smallest(a: dict[str, list[float]], b: dict[str, list[float]]) -> dict[str, list[float]]:
    """Each measure's smallest over the rounds (noise on a shared machine only adds)."""
    return {name: [min(x, y) for x, y in zip(a[name], b[name])] for name in a}


def to_first_step(run_dir: Path) -> float:
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("event") == "train":
            return record["elapsed_s"]
    raise RuntimeError(f"{run_dir}: no training step logged")


def old_mt(config: list[str], env: dict, tree: Path, runs: Path):
    """A contender: `mt train` from the old tree; its wall time, time to step 1, peak RSS."""
    def measure(r: int) -> dict[str, list[float]]:
        out = runs / f"old.{r}"
        wall, rss = run(["train", *config, "--out", str(out), "--device", "cpu"], env, tree)
        measured = {"old": [wall, to_first_step(out), rss]}
        shutil.rmtree(out)
        return measured
    return measure


def new_mt(config: list[str], env: dict, workers: int, runs: Path):
    """A contender: `mt prepare` into an empty cache (cold: wall, build seconds, peak RSS), then
    `mt train` from it (warm: wall, time to step 1, peak RSS)."""
    def measure(r: int) -> dict[str, list[float]]:
        out, cache = runs / f"new.{r}", runs / f"cache.{r}"
        env_r = {**env, "MT_CACHE_DIR": str(cache)}
        wall, rss = run(["prepare", *config, "--workers", str(workers)], env_r, ROOT)
        [meta] = (cache / "tokens").glob("*/meta.json")
        cold = [wall, json.loads(meta.read_text())["build_seconds"], rss]
        wall, rss = run(["train", *config, "--out", str(out), "--device", "cpu"], env_r, ROOT)
        measured = {"cold": cold, "warm": [wall, to_first_step(out), rss]}
        shutil.rmtree(cache)
        shutil.rmtree(out)
        return measured
    return measure


def main() -> None:
    ap = parser(__doc__, rounds=1, smoke="the toy corpus once (1x), the new path only, 1 worker")
    ap.formatter_class = argparse.RawTextHelpFormatter
    ap.add_argument("--folds", type=int, nargs="+", default=[1, 10, 30])
    ap.add_argument("--old-max-fold", type=int, default=30,
                    help="skip the old path above this fold (it needs ~1.7 KB and 0.1 ms a pair)")
    ap.add_argument("--old-rev", default=None, help="mt before the cache (default: the commit "
                    "before mt/cache.py was added)")
    ap.add_argument("--config", default=str(ROOT / "configs" / "multi30k_de_en.yaml"))
    ap.add_argument("--data", type=Path, default=MULTI30K, help="Multi30k (train/val .gz)")
    ap.add_argument("--workers", type=int, default=0, help="mt prepare --workers (0: all cores)")
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help="more config overrides for every run, e.g. --set data.min_freq=1")
    args = parse(ap, {**SMOKE_DATA, "data": Path(SMOKE_DATA["data"]), "folds": [1],
                      "old_max_fold": 0, "workers": 1})
    d = load_config(args.config).data

    tmp = Path(tempfile.mkdtemp(prefix="bench_data."))
    try:
        old_tree = tmp / "old"
        if min(args.folds) <= args.old_max_fold:
            rev = args.old_rev or first_cache_commit()
            mt_at(rev, old_tree)
            assert not (old_tree / "mt" / "cache.py").exists(), f"{rev} has the token cache already"
        base = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                "MT_CACHE_DIR": str(tmp / "cache")}
        rows = []
        for fold in args.folds:
            corpus = tmp / f"x{fold}"
            pairs = make_corpus(corpus, fold, args.data, d)
            config = [args.config]
            for s in [f"data.dir={corpus}", *TINY, *args.sets]:
                config += ["--set", s]

            runs = tmp / f"runs{fold}"
            contenders = {"new": new_mt(config, base, args.workers, runs)}
            if fold <= args.old_max_fold:
                contenders["old"] = old_mt(config, base, old_tree, runs)
            best = alternate(contenders, args.rounds, keep=smallest)
            rows.append((fold, pairs, {k: v for m in best.values() for k, v in m.items()}))
            report(rows, args.workers)
            shutil.rmtree(corpus)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report(rows: list, workers: int) -> None:
    table = []
    for fold, pairs, b in rows:
        old = b.get("old")
        cold, warm = b["cold"], b["warm"]
        table.append([f"{fold}x", f"{pairs:,}",
                      f"{old[0]:.1f} s / {old[1]:.1f} s / {old[2]:.0f} MiB" if old else "-",
                      f"{cold[0]:.1f} s / {cold[1]:.1f} s / {pairs / cold[1]:,.0f}",
                      f"{warm[0]:.1f} s / {warm[1]:.1f} s / {warm[2]:.0f} MiB",
                      f"{old[0] / warm[0]:.1f}x" if old else "-"])
    print("\n" + markdown(["fold", "pairs", "old: wall / to step 1 / peak RSS",
                           "new cold `mt prepare`: wall / build / pairs/s",
                           "new warm: wall / to step 1 / peak RSS", "warm speed-up"], table))
    if len(rows) < 2:
        return
    # Between the two largest folds: from 2x on every token occurs at least twice, so the
    # vocabulary (and the model) is the same size and only the data differs.
    (f0, p0, b0), (f1, p1, b1) = rows[-2], rows[-1]
    dp = p1 - p0
    print(f"\nper pair, {f0}x -> {f1}x:")
    for name, label in (("old", "old"), ("warm", "new warm")):
        if name in b0 and name in b1:
            t = (b1[name][0] - b0[name][0]) / dp
            m = (b1[name][2] - b0[name][2]) * 2**20 / dp
            print(f"  {label}: {t * 1e6:.2f} us and {m:.0f} bytes of peak RSS per pair")
            for corpus, size in WMT14.items():
                print(f"    {corpus}: start ~{b1[name][0] + t * (size - p1):.0f} s, peak RSS "
                      f"~{(b1[name][2] * 2**20 + m * (size - p1)) / 2**30:.1f} GiB")
    rate = p1 / b1["cold"][1]
    print(f"  new cold build: {rate:,.0f} pairs/s ({workers or os.cpu_count()} workers); "
          + ", ".join(f"{c}: ~{size / rate / 60:.0f} min" for c, size in WMT14.items()))


if __name__ == "__main__":
    main()
