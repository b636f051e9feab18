#!/usr/bin/env bash
# One-GPU check of mt's GPU path, under 5 minutes on a current GPU; prints one table.
#   scripts/gpu_check.sh [MULTI30K_DIR]      (default ../shared/data/multi30k)
# 1. bf16 and fp16 runs of the Multi30k config: 200 steps, saved, resumed to 300; the loss
#    after the resume must continue the loss before it, and fp16's GradScaler state must
#    come back from last.pt.
# 2. DDP under torchrun on CUDA (2 ranks sharing the GPU), resumed on 1 rank.
# 3. compile on and off: training tokens/s of the Multi30k run.
# 4. training tokens/s and model FLOPs utilisation (against the bf16 matrix-product peak this
#    script measures) for the Multi30k config and a Transformer-base config (d_model 512,
#    6+6 layers, d_ff 2048, 32k vocabulary, 25k-token batches of synthetic sentences).
# 5. decoding sentences/s on test_2016_flickr, greedy and beam 5.
# Any failed check stops the script with a message and a non-zero exit code (a failed DDP
# run only at the end, after the measurements).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:-../shared/data/multi30k}
OUT=$(mktemp -d /tmp/gpu_check.XXXXXX)
export PYTHONUNBUFFERED=1
fail() { echo "gpu_check FAILED: $*" >&2; exit 1; }

python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
  || fail "torch sees no CUDA device (torch $(python -c 'import torch; print(torch.__version__)'))"
[ -f "$DATA/train.de.gz" ] || [ -f "$DATA/train.de" ] || fail "no Multi30k in $DATA"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

COMMON=(--device cuda --set "data.dir=$DATA" --set train.eval_bleu=false --set train.metric=loss
        --set train.eval_every=100000 --set train.log_every=20)

train_resume() {  # $1 = amp: 200 steps, then --resume to 300
  local run="$OUT/$1"
  python -m mt train configs/multi30k_de_en.yaml --out "$run" "${COMMON[@]}" \
    --set "train.amp=$1" --set train.max_steps=200 > "$run.1.json" \
    || fail "$1 run (first 200 steps)"
  python - "$run" "$1" <<'EOF' || fail "$1: last.pt after 200 steps"
import sys, torch
state = torch.load(f"{sys.argv[1]}/last.pt", weights_only=True)
assert state["step"] == 200, state["step"]
if sys.argv[2] == "fp16":
    scale = state["scaler"].get("scale")
    assert scale is not None and scale > 0, f"no GradScaler state in last.pt: {state['scaler']}"
    print(f"fp16 scale at step 200: {scale}")
EOF
  python -m mt train --out "$run" --resume "${COMMON[@]}" --set "train.amp=$1" \
    --set train.max_steps=300 > "$run.2.json" || fail "$1 resume to 300 steps"
}
train_resume bf16
train_resume fp16
# DDP on CUDA tensors: 2 ranks share the one GPU (gloo: NCCL refuses two ranks on one device),
# 100 steps, then resumed on 1 rank to 150 (the data position is global)
MT_DIST_BACKEND=gloo python -m torch.distributed.run --standalone --nproc_per_node=2 -m mt train \
  configs/multi30k_de_en.yaml --out "$OUT/ddp" "${COMMON[@]}" --set train.amp=bf16 \
  --set train.max_steps=100 > "$OUT/ddp.1.json" \
  && python -m mt train --out "$OUT/ddp" --resume "${COMMON[@]}" --set train.amp=bf16 \
       --set train.max_steps=150 > "$OUT/ddp.2.json" \
  || { DDP_FAILED=1; echo "gpu_check: the DDP run failed; measuring the rest" >&2; }
python -m mt train configs/multi30k_de_en.yaml --out "$OUT/compiled" "${COMMON[@]}" \
  --set train.amp=bf16 --set train.compile=true --set train.max_steps=200 \
  > "$OUT/compiled.json" || fail "compiled run"

python - "$OUT" "$DATA" <<'EOF' || fail "measurements"
import json, sys, time
from pathlib import Path

import torch

from mt.checkpoint import load_run
from mt.config import load_config
from mt.data import Batch, read_parallel, split_path
from mt.model import make_model
from mt.translator import Translator

sys.path.insert(0, "scripts")
from bench_train import forward_flops  # noqa: E402

out, data = Path(sys.argv[1]), sys.argv[2]
rows = []


def train_events(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").open()
            if '"train"' in line]


# 1. loss continuity over the resume, and the resumed scaler
for amp in ("bf16", "fp16"):
    ev = train_events(out / amp)
    by_step = {e["step"]: e for e in ev}
    before, after = by_step[200]["loss"], by_step[220]["loss"]
    assert before is not None and after is not None, f"{amp}: non-finite loss {before} {after}"
    assert abs(after - before) / before < 0.1, f"{amp}: loss {before} at 200, {after} at 220"
    assert ev[0]["loss"] > before, f"{amp}: loss did not fall ({ev[0]['loss']} -> {before})"
    state = torch.load(out / amp / "last.pt", weights_only=True)
    assert state["step"] == 300, state["step"]
    if amp == "fp16":
        assert state["scaler"].get("scale"), "fp16 resume lost the GradScaler state"
    rows.append((f"{amp} resume 200->300", f"loss {before:.3f} at 200, {after:.3f} at 220",
                 f"{by_step[300]['tok_per_s']:,} tok/s"))

def ddp_row():
    assert (out / "ddp" / "last.pt").exists(), "the DDP run left no last.pt"
    ev = train_events(out / "ddp")
    state = torch.load(out / "ddp" / "last.pt", weights_only=True)
    assert state["step"] == 150, f"DDP run resumed to step {state['step']}, not 150"
    assert ev[-1]["loss"] < ev[0]["loss"], f"loss {ev[0]['loss']} -> {ev[-1]['loss']}"
    return f"loss {ev[0]['loss']:.3f} -> {ev[-1]['loss']:.3f}", "ok"


# 2. DDP on one GPU, resumed on one rank
try:
    rows.append(("DDP 2 ranks on 1 GPU (gloo), 100 steps, resumed on 1 rank to 150", *ddp_row()))
except AssertionError as e:  # reported in the table; the script fails at its end
    rows.append(("DDP 2 ranks on 1 GPU (gloo)", f"FAILED: {e}", ""))

# 3. compile on/off: the last interval's tokens/s (past compilation)
off = train_events(out / "bf16")[-1]["tok_per_s"]
on = train_events(out / "compiled")[-1]["tok_per_s"]
rows.append(("compile off / on (bf16, Multi30k)", f"{off:,} / {on:,} tok/s", f"{on / off:.2f}x"))

# 4. tokens/s and MFU on synthetic batches: Multi30k config and Transformer-base
dev = torch.device("cuda")
n = 8192
a, b = torch.randn(n, n, device=dev, dtype=torch.bfloat16), torch.randn(n, n, device=dev,
                                                                        dtype=torch.bfloat16)
for _ in range(3):
    a @ b
torch.cuda.synchronize()
clock = time.perf_counter()
for _ in range(20):
    a @ b
torch.cuda.synchronize()
peak = 20 * 2 * n ** 3 / (time.perf_counter() - clock)
rows.append(("bf16 matmul peak (measured, 8192^3)", f"{peak / 1e12:.0f} TFLOP/s", ""))
del a, b

from mt.device import autocast_dtype  # noqa: E402
from mt.loss import label_smoothed_loss  # noqa: E402


def throughput(name, overrides, vocab, tokens, compiled=False):
    cfg = load_config("configs/multi30k_de_en.yaml", overrides)
    model = make_model(cfg.model, vocab, vocab).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    net = torch.compile(model, dynamic=True) if compiled else model
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(8):  # sentences of 20-30 tokens, as many as fit the token budget
        length = int(torch.randint(20, 31, (1,), generator=g))
        count = tokens // (2 * length)
        src = torch.randint(4, vocab, (count, length), generator=g)
        tgt = torch.randint(4, vocab, (count, length), generator=g)
        batches.append(Batch(src, tgt, tgt, tgt.numel()).to(dev))
    dtype = autocast_dtype("bf16", dev)

    def step(batch):
        with torch.autocast("cuda", dtype=dtype):
            logits = net(batch.src, batch.tgt_in)
        loss, _ = label_smoothed_loss(logits, batch.tgt_out, 0.1)
        (loss / batch.n_tgt_tokens).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for batch in batches * 2:  # warm-up, compilation
        step(batch)
    torch.cuda.synchronize()
    clock = time.perf_counter()
    for batch in batches * 3:
        step(batch)
    torch.cuda.synchronize()
    seconds = time.perf_counter() - clock
    tok = sum(b.n_tgt_tokens for b in batches) * 3
    flops = sum(3 * forward_flops(cfg, b, vocab) for b in batches) * 3
    params = sum(p.numel() for p in model.parameters())
    rows.append((f"train {name}{' compiled' if compiled else ''} ({params / 1e6:.0f}M params)",
                 f"{tok / seconds:,.0f} tok/s", f"MFU {flops / seconds / peak:.0%}"))


throughput("Multi30k config, 6k-token batches", [], 10000, 6000)
torch.cuda.empty_cache()
base = ["model.d_model=512", "model.n_heads=8", "model.n_enc_layers=6", "model.n_dec_layers=6",
        "model.d_ff=2048", "model.dropout=0.1"]
throughput("Transformer-base, 25k-token batches", base, 32000, 25000)
torch.cuda.empty_cache()
throughput("Transformer-base, 25k-token batches", base, 32000, 25000, compiled=True)

# 5. decoding speed with the bf16 run's weights, in float32 and bf16 (quality is not the point
#    after 300 steps)
run = load_run(out / "bf16" / "last.pt", dev)
src, _ = read_parallel(split_path(data, "test_2016_flickr", "de"),
                       split_path(data, "test_2016_flickr", "en"))
for beam, dtype in ((1, "float32"), (5, "float32"), (1, "bf16"), (5, "bf16")):
    translator = Translator(run, load_config(out / "bf16" / "config.yaml",
                                             [f"decode.beam={beam}", f"decode.dtype={dtype}"]
                                             ).decode, dev)
    translator.translate(src[:100])  # warm-up
    torch.cuda.synchronize()
    clock = time.perf_counter()
    hyps = translator.translate(src)
    torch.cuda.synchronize()
    assert len(hyps) == len(src)
    rows.append((f"decode {'greedy' if beam == 1 else f'beam {beam}'} {dtype}, {len(src)} "
                 "sentences",
                 f"{len(src) / (time.perf_counter() - clock):,.0f} sentences/s", ""))

print("\n| check | result | |\n|---|---|---|")
for r in rows:
    print(f"| {' | '.join(r)} |")
EOF
[ -z "${DDP_FAILED:-}" ] || fail "DDP run (above)"
echo "gpu_check passed; runs in $OUT"
