"""Bucketed batches against exact-length ones: training speed, padding, shapes and peak memory.

    python -m benchmarks.bench_buckets [--config C] [--steps 1000] [--amp bf16,none] [--rounds 1]
        [--env "K=V [K2=V2]" ...] [--rev COMMIT ...]
    python -m benchmarks.bench_buckets --plan-only --steps 715   # batches only, no training
    python -m benchmarks.bench_buckets --smoke      # the toy corpus, 5 steps

Each contender is a whole `mt train CONFIG --set train.buckets=... --set train.amp=...` process
of --steps steps from scratch (validation only at the end, no BLEU), as a user runs it: exact
lengths with oneDNN's kernel cache at its own default (1,024 kernels), as mt trained before
buckets, against mt's defaults (buckets, mt.threads.KERNEL_CACHES); each --env
setting adds mt's defaults with those variables in the environment (oneDNN's cache as
ONEDNN_PRIMITIVE_CACHE_CAPACITY=N; glibc's malloc as GLIBC_TUNABLES=glibc.malloc.X=N), and
each --rev commit mt's defaults as of that commit (its mt package run from a temporary
directory, with the config and data here: mt before a change, against it). The
contenders take turns, --rounds rounds, each keeping its fastest round and its highest peak.
Printed per contender: target tokens/s (the log intervals' mean, from metrics.jsonl), the
padding fraction of source and target positions and the distinct batch shapes of the batches
those steps train on, wall seconds, and the peak resident memory of the process (sampled every
50 ms).
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

from benchmarks.harness import (
    ROOT,
    SMOKE_DATA,
    alternate,
    environment,
    markdown,
    mt_at,
    parse,
    parser,
    train_command,
    watched,
)
from mt.config import load_config
from mt.threads import KERNEL_CACHES
from mt.train.loop import Trainer

NAMES = {"false": "exact lengths, caches 1,024",
         "true": f"buckets, caches {KERNEL_CACHES[0][1]}"}


def batches_seen(config: str, sets: list[str], steps: int) -> tuple[float, int, int]:
    """Padding fraction and distinct (B, S, T) shapes of the first `steps` batches, and the
    batches of the first epoch."""
    cfg = load_config(config, sets)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(replace(cfg, train=replace(cfg.train, threads=1)), Path(tmp) / "r",
                          "cpu")
        trainer.prepare_run_dir()
        trainer.load_data()
        data, t = trainer.train_data, cfg.train
        shapes, real, padded, epoch = set(), 0, 0, 0
        per_epoch = len(data.plan(t.max_tokens, t.seed, 0))
        while steps > 0:
            plan = data.plan(t.max_tokens, t.seed, epoch)
            for k in range(min(len(plan), steps)):
                b = data.collate(plan[k])
                shapes.add((*b.src.shape, b.tgt_in.size(1)))
                real += int((b.src != 0).sum() + (b.tgt_in != 0).sum())
                padded += b.src.numel() + b.tgt_in.numel()
            steps -= min(len(plan), steps)
            epoch += 1
    return 1 - real / padded, len(shapes), per_epoch


def train(config: str, sets: list[str], steps: int, threads: int, scratch: str,
          env: dict[str, str] | None = None, code: Path = ROOT) -> dict:
    """One `mt train` process (with `env` added to its environment; mt from the directory
    `code`), in a new directory under scratch: seconds, peak RSS and target tokens/s."""
    out = Path(tempfile.mkdtemp(dir=scratch)) / "run"
    command = train_command(config, steps, [*sets, f"train.threads={threads}",
                                            f"train.log_every={max(1, steps // 10)}"], out)
    seconds, peak = watched(command, "mt train", env, code)
    rates = [r["tok_per_s"] for r in map(json.loads, (out / "metrics.jsonl").open())
             if r.get("event") == "train"]
    return {"seconds": seconds, "peak": peak, "tok_s": sum(rates) / len(rates)}


def main() -> None:
    ap = parser(__doc__, rounds=1, smoke="5 steps of the toy config, 1 round")
    ap.add_argument("--config", default=str(ROOT / "configs" / "multi30k_de_en_30min_words.yaml"))
    ap.add_argument("--data", default=None, help="data.dir, if not the config's")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--amp", default="bf16,none", help="train.amp values (default bf16,none)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--plan-only", action="store_true",
                    help="only the batches' padding and shapes over --steps steps: no training")
    ap.add_argument("--env", nargs="+", default=[], metavar="SETTING",
                    help="also buckets with these variables, one contender a setting, e.g. "
                    "ONEDNN_PRIMITIVE_CACHE_CAPACITY=64 (oneDNN's kernel cache: 1,024 kernels "
                    f"by default, {KERNEL_CACHES[0][1]} in mt) or "
                    "GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4194304")
    ap.add_argument("--rev", nargs="+", default=[], metavar="COMMIT",
                    help="also buckets with mt as of these commits, one contender each")
    args = parse(ap, {"config": SMOKE_DATA["config"], "data": SMOKE_DATA["data"], "steps": 5,
                      "amp": "none", "threads": 1})
    # absolute, for mt run from elsewhere (--rev)
    data = Path(args.data or load_config(args.config).data.dir)
    base = [f"data.dir={data if data.is_absolute() else ROOT / data}"]
    revs = [f"mt at {rev}" for rev in args.rev]
    kinds = ["false", "true", *args.env, *revs]
    contenders = {(amp, kind): [*base, f"train.amp={amp}",
                                f"train.buckets={'false' if kind == 'false' else 'true'}"]
                  for amp in args.amp.split(",") for kind in kinds}
    envs = {"false": {name: "1024" for name, _ in KERNEL_CACHES},
            **{setting: environment(setting) for setting in args.env}}
    if args.plan_only:
        for kind in ("false", "true"):
            padding, shapes, per_epoch = batches_seen(
                args.config, contenders[args.amp.split(",")[0], kind], args.steps)
            print(f"{NAMES[kind]}: {args.steps} batches, padding {padding:.1%}, {shapes} "
                  f"distinct shapes; {per_epoch} batches an epoch")
        return
    with tempfile.TemporaryDirectory() as tmp:
        code = {kind: mt_at(rev, Path(tmp) / f"rev{i}")
                for i, (kind, rev) in enumerate(zip(revs, args.rev, strict=True))}
        best = alternate({key: (lambda r, key=key: train(args.config, contenders[key],
                                                          args.steps, args.threads, tmp,
                                                          envs.get(key[1]),
                                                          code.get(key[1], ROOT)))
                          for key in contenders}, args.rounds,
                         keep=lambda a, b: {"seconds": min(a["seconds"], b["seconds"]),
                                            "peak": max(a["peak"], b["peak"]),
                                            "tok_s": max(a["tok_s"], b["tok_s"])})
    seen = {key: batches_seen(args.config, sets, args.steps) for key, sets in contenders.items()
            if key[1] in NAMES}  # an environment changes no batch
    # an environment plans the same batches; so is another commit's mt taken to (--rev)
    seen.update({key: seen[key[0], "true"] for key in contenders if key not in seen})
    print(f"{args.config}: {args.steps} steps, {args.threads} thread(s), best of {args.rounds} "
          "round(s)\n")
    print(markdown(["amp", "batches", "target tok/s", "padding", "distinct shapes", "wall, s",
                    "peak RSS, MiB"],
                   ([amp, NAMES.get(b, f"buckets, {b}"),
                     f"{best[amp, b]['tok_s']:,.0f}", f"{seen[amp, b][0]:.1%}", seen[amp, b][1],
                     f"{best[amp, b]['seconds']:.1f}", f"{best[amp, b]['peak'] / 2**20:,.0f}"]
                    for amp, b in best)))
    for amp in args.amp.split(","):
        old = best[amp, "false"]
        for kind in kinds[1:]:
            new = best[amp, kind]
            which = "buckets" if kind == "true" else f"buckets, {kind}"
            print(f"\n{amp}: {which} / exact lengths: tok/s "
                  f"{new['tok_s'] / old['tok_s']:.2f}x, peak RSS {new['peak'] / old['peak']:.2f}x")
        here = best[amp, "true"]
        for kind in revs:
            then = best[amp, kind]
            print(f"{amp}: buckets here / {kind}: tok/s {here['tok_s'] / then['tok_s']:.2f}x, "
                  f"peak RSS {here['peak'] / then['peak']:.2f}x")


if __name__ == "__main__":
    main()
