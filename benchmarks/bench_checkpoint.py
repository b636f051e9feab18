"""What checking a checkpoint's CRC-32s costs: load_checkpoint beside a bare torch.load.

    python -m benchmarks.bench_checkpoint [--vocab 32000] [--rounds 5] [--dir /tmp]
    python -m benchmarks.bench_checkpoint --smoke     # a small model, 1 round

Writes a run directory holding a Transformer-base-sized model (d_model 512, 8 heads, 6+6
layers, d_ff 2048, source and target vocabularies of --vocab tokens; --d-model and --layers
change the size) saved with
save_checkpoint, then times, side by side:
  - the file alone: a bare `torch.load(weights_only=True)`, which checks no CRC, against mt's
    load_checkpoint, which first reads every member of the zip archive to check its CRC-32;
  - what `mt translate` and `mt eval` do before translating (load_run: config, vocabularies,
    building the model, load_checkpoint, copying the weights in), with the check and without.
The file is in the page cache after the first round: the worst case for the check (from a cold
disk, the read it does is one torch.load would have waited for anyway). The contenders take
turns, --rounds rounds, and each keeps its fastest: on a shared machine, noise only ever adds
time. The run directory is deleted at the end.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import mt.checkpoint
from benchmarks.harness import alternate, parse, parser, timer
from mt.checkpoint import CONFIG, SRC_VOCAB, TGT_VOCAB, load_checkpoint, load_run, save_checkpoint
from mt.config import Config, ModelConfig
from mt.model import make_model
from mt.vocab import SPECIALS, Vocab


def main() -> None:
    ap = parser(__doc__, rounds=5, smoke="d_model 64, 1+1 layers, 1,000 tokens, 1 round")
    ap.add_argument("--vocab", type=int, default=32000, help="tokens per side (default 32000)")
    ap.add_argument("--d-model", type=int, default=512, help="d_model (d_ff is 4x; default 512)")
    ap.add_argument("--layers", type=int, default=6, help="encoder and decoder layers (default 6)")
    ap.add_argument("--dir", default=None, help="where the checkpoint is written (default: TMP)")
    args = parse(ap, {"vocab": 1000, "d_model": 64, "layers": 1, "rounds": 1})

    cfg = Config(model=ModelConfig(d_model=args.d_model, n_heads=8, n_enc_layers=args.layers,
                                   n_dec_layers=args.layers, d_ff=4 * args.d_model))
    model = make_model(cfg.model, args.vocab, args.vocab)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        run = Path(tmp)
        cfg.save(run / CONFIG)
        vocab = Vocab(SPECIALS + [f"w{i}" for i in range(args.vocab - len(SPECIALS))])
        vocab.save(run / SRC_VOCAB)
        vocab.save(run / TGT_VOCAB)
        path = run / "best.pt"
        save_checkpoint(path, {"model": model.state_dict(), "step": 1})
        del model
        size = path.stat().st_size
        check = mt.checkpoint.verify_archive

        def unchecked_run() -> None:
            mt.checkpoint.verify_archive = lambda path: None
            try:
                load_run(run)
            finally:
                mt.checkpoint.verify_archive = check

        calls = {"bare": lambda: torch.load(path, map_location="cpu", weights_only=True),
                 "checked": lambda: load_checkpoint(path), "verify": lambda: check(path),
                 "run": unchecked_run, "run_checked": lambda: load_run(run)}
        best = alternate({name: timer(fn) for name, fn in calls.items()}, args.rounds)
    mb = size / 2**20
    ms = {k: f"{v * 1000:6.0f} ms" for k, v in best.items()}
    print(f"checkpoint: {mb:.0f} MiB, fastest of {args.rounds} rounds each")
    print(f"torch.load, no CRC check:           {ms['bare']}")
    print(f"load_checkpoint, with CRC-32 check: {ms['checked']}")
    print(f"  the CRC-32 check alone:           {ms['verify']} ({mb / best['verify']:.0f} MiB/s)")
    print(f"load_run without the check:         {ms['run']}")
    print(f"load_run with the check:            {ms['run_checked']}")
    print(f"ratio load_checkpoint / torch.load: {best['checked'] / best['bare']:.2f}")
    print(f"ratio load_run with / without:      {best['run_checked'] / best['run']:.2f}")


if __name__ == "__main__":
    main()
