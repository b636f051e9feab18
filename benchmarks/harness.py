"""What the benchmarks share: contenders that take turns and keep their best round, the options
every benchmark has (--rounds, --smoke) and those of the training ones (--config, --data,
--threads) with the Trainers they build, the FLOPs of a batch, and Markdown tables.

A benchmark runs as `python -m benchmarks.bench_train ...`; with --smoke it runs in seconds on
the toy corpus (tests/test_benchmarks.py runs each so), which checks that it still works, not
what it measures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

import torch

from mt.config import Config, load_config
from mt.data import Batch
from mt.device import cpu_info
from mt.train.loop import Trainer
from mt.vocab import PAD

ROOT = Path(__file__).resolve().parents[1]
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
TOY = ROOT / "data" / "toy"
TOY_CONFIG = ROOT / "configs" / "toy.yaml"

M = TypeVar("M")
# Contenders decoding side by side in one process meet more matrix shapes than oneDNN's
# primitive cache holds (1,024 by default): each would evict the others' kernels and build them
# again every round (about a millisecond a shape), which a process decoding with one of them
# does not. Read at the first oneDNN product, so set before any.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "16384")


def cpu_model() -> str:
    """The CPU's name and the instruction sets that decide decoding's fastest dtype, e.g.
    "Intel(R) Xeon(R) Processor (AMX, AVX512-BF16, AVX512-VNNI)": figures from different
    CPUs do not compare, so every benchmark prints it."""
    name, flags = cpu_info()
    isa = [label for label, flag in (("AMX", "amx_tile"), ("AVX512-BF16", "avx512_bf16"),
                                     ("AVX512-VNNI", "avx512_vnni"), ("AVX-512", "avx512f"),
                                     ("AVX2", "avx2")) if flag in flags]
    return f"{name} ({', '.join(isa) or 'no AVX2'})"


def alternate(contenders: Mapping[str, Callable[[int], M]], rounds: int,
              keep: Callable[[M, M], M] = min, rotate: bool = False) -> dict[str, M]:
    """Call each contender with the round's index, in turn, for `rounds` rounds; each keeps
    the better of its measurements by `keep` (default the smaller: times). rotate: round r
    starts with the contender r places further on, so that none always runs after the same
    other one (whose leftovers, say a warm or a crowded page cache, it would inherit).

    Turns rather than one contender's rounds back to back, and the best rather than the mean:
    on a shared machine noise only ever adds time, and it lands on every contender alike.
    """
    best: dict[str, M] = {}
    names = list(contenders)
    for r in range(rounds):
        shift = r % len(names) if rotate else 0
        for name in names[shift:] + names[:shift]:
            run = contenders[name]
            measured = run(r)
            best[name] = keep(best[name], measured) if name in best else measured
    return best


def timer(fn: Callable[[], object]) -> Callable[[int], float]:
    """A contender for alternate() whose measurement, each round, is the seconds of one fn()."""
    def run(r: int) -> float:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    return run


def tree_rss(pid: int) -> int:
    """Resident bytes of process pid and all its descendants (0 once it has ended)."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except (OSError, ValueError):
            continue
    return total


def watched(command: list[str], what: str, env: Mapping[str, str] | None = None,
            cwd: Path = ROOT) -> tuple[float, int]:
    """Seconds and peak resident bytes (of the process tree, sampled every 50 ms) of one
    command run from cwd (the repository's root); SystemExit with its stderr's end if it
    fails."""
    start = time.perf_counter()
    p = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, env=None if env is None else {**os.environ, **env})
    peak = 0
    while p.poll() is None:
        peak = max(peak, tree_rss(p.pid))
        time.sleep(0.05)
    seconds = time.perf_counter() - start
    if p.returncode:
        raise SystemExit(f"{what} failed: {p.stderr.read()[-2000:]}")
    return seconds, peak


def mt_at(rev: str, dest: Path) -> Path:
    """dest, holding mt's package as of commit rev: `python -m mt` run from dest is that mt."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", rev, "mt"], cwd=ROOT, capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def environment(setting: str) -> dict[str, str]:
    """"A=1 B=2" -> {"A": "1", "B": "2"} (a value may hold "=": GLIBC_TUNABLES=a.b=1)."""
    return dict(item.split("=", 1) for item in setting.split())


def train_command(config: str, steps: int, sets: Sequence[str], out: Path) -> list[str]:
    """`mt train CONFIG --out OUT` on CPU for `steps` steps, validating (loss, no BLEU) only at
    the end, with the `sets` given."""
    command = [sys.executable, "-m", "mt", "train", config, "--out", str(out), "--device", "cpu"]
    for s in [*sets, f"train.max_steps={steps}", "train.max_minutes=0", "train.eval_bleu=false",
              "train.metric=loss", f"train.eval_every={steps}", "train.eval_epochs=false"]:
        command += ["--set", s]
    return command


def parser(doc: str, rounds: int, smoke: str) -> argparse.ArgumentParser:
    """A benchmark's options, described by the first paragraph of its docstring, with --rounds
    (also --repeat) and --smoke, whose help says what the smoke run does."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--rounds", "--repeat", type=int, default=rounds,
                    help=f"rounds; each contender keeps its best (default {rounds})")
    ap.add_argument("--smoke", action="store_true",
                    help=f"run for seconds on the toy corpus, to check it works: {smoke}")
    return ap


def parse(ap: argparse.ArgumentParser, smoke: dict, argv: list[str] | None = None
          ) -> argparse.Namespace:
    """Parse; with --smoke the `smoke` values are the defaults (options given still win)."""
    args = ap.parse_args(argv)
    if args.smoke:
        ap.set_defaults(**smoke)
        args = ap.parse_args(argv)
    return args


def add_data_args(ap: argparse.ArgumentParser, threads: bool = True) -> None:
    """The options trainers() reads: --config, --data and (unless not `threads`) --threads."""
    ap.add_argument("--config", default=str(ROOT / "configs" / "multi30k_de_en.yaml"))
    ap.add_argument("--data", default=str(MULTI30K))
    if threads:
        ap.add_argument("--threads", type=int, default=1)


def add_run_args(ap: argparse.ArgumentParser, default_input: str) -> None:
    """The options of a benchmark that translates: RUN, and --input, its source lines (default:
    Multi30k's file named default_input)."""
    ap.add_argument("run", help="a run directory or checkpoint")
    ap.add_argument("--input", type=Path, default=MULTI30K / default_input,
                    help=f"source lines (default: Multi30k {default_input})")


SMOKE_DATA = {"config": str(TOY_CONFIG), "data": str(TOY)}  # add_data_args' smoke defaults


def trainers(args: argparse.Namespace) -> tuple[Trainer, Callable[..., Trainer]]:
    """A Trainer holding the config's tokenizers, vocabularies and data (from --config, --data,
    --threads), and a function making contenders from it: contender(name, amp=..., compile=...)
    is a Trainer built on the same data with those train options, in a scratch directory."""
    torch.set_num_threads(args.threads)
    cfg = load_config(args.config, [f"data.dir={args.data}", f"train.threads={args.threads}"])
    scratch = Path(tempfile.mkdtemp(prefix="bench."))
    base = Trainer(cfg, scratch / "base", "cpu")
    base.prepare_run_dir()
    base.load_data()

    def contender(name: str, **train) -> Trainer:
        options = {"eval_bleu": False, "metric": "loss", **train}
        t = Trainer(replace(cfg, train=replace(cfg.train, **options)), scratch / name, "cpu")
        t.prepare_run_dir()
        t.load_data()  # the token cache's entry that `base` built
        t.build()
        t.model.train()
        return t

    return base, contender


def forward_flops(cfg: Config, batch: Batch, vocab: int) -> float:
    """Forward FLOPs of the real tokens of a batch (2 per multiply-add)."""
    m = cfg.model
    D, F_, Le, Ld = m.d_model, m.d_ff, m.n_enc_layers, m.n_dec_layers
    total = 0.0
    for s_row, t_row in zip(batch.src, batch.tgt_out):
        S, T = int((s_row != PAD).sum()), int((t_row != PAD).sum())
        enc = S * (8 * D * D + 4 * D * F_) + 4 * S * S * D  # projections, ffn; QK^T and AV
        dec = T * (8 * D * D + 4 * D * D + 4 * D * F_)  # self q/k/v/o, cross q/o, ffn
        dec += S * 4 * D * D + 4 * T * T * D + 4 * T * S * D  # cross k/v; self and cross attn
        total += Le * enc + Ld * dec + 2 * T * D * vocab
    return total


def markdown(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table, as the docs quote the benchmarks' results."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
