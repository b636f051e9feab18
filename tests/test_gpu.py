"""mt's GPU path on one CUDA GPU, in about 10 minutes (the first five tests took 500 s on an
H200; scripts/gpu_check.sh runs this module and prints its table):

1. bf16 and fp16 runs of the Multi30k config: 200 steps, saved, resumed to 300; the loss after
   the resume continues the loss before it, and fp16's GradScaler state comes back from last.pt.
2. DDP under torchrun on CUDA (2 ranks sharing the GPU), resumed on 1 rank.
3. compile on and off: training tokens/s of the Multi30k run.
4. training tokens/s and model FLOPs utilisation (against the bf16 matrix-product peak measured
   here) for the Multi30k config and a Transformer-base config (d_model 512, 6+6 layers, d_ff
   2048, 32k vocabulary, 25k-token batches of synthetic sentences).
5. decoding sentences/s on test_2016_flickr, greedy and beam 5, float32 and bf16.
6. a glossary's terms kept by constrained beam search on CUDA, agreeing with the CPU, and its
   cost against plain beam 5.
7. an imported Marian model decoding on CUDA as transformers' generate does there.
8. decode.dtype int8 on CUDA: one warning, float32's translations (mt.decoding.precision has no
   CUDA kernel).

Marked gpu; skipped without CUDA. Multi30k is read from $MT_GPU_DATA (default
../shared/data/multi30k). The measurements go to one table, printed when the module ends.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from benchmarks.harness import forward_flops, markdown
from conftest import MULTI30K, ROOT, TOY, run_mt
from mt.checkpoint import load_checkpoint, load_run
from mt.config import load_config
from mt.data import Batch, read_parallel
from mt.device import autocast_dtype
from mt.loss import label_smoothed_loss
from mt.model import make_model
from mt.textio import split_path
from mt.translator import Translator

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

CONFIG = "configs/multi30k_de_en.yaml"


@pytest.fixture(scope="module")
def data() -> Path:
    d = Path(os.environ.get("MT_GPU_DATA", MULTI30K)).resolve()
    assert (d / "train.de.gz").is_file() or (d / "train.de").is_file(), f"no Multi30k in {d}"
    return d


@pytest.fixture(scope="module")
def table(request) -> list[tuple[str, str, str]]:
    """The rows of the check's table: (check, result, rate); printed after the last test."""
    rows: list[tuple[str, str, str]] = []
    yield rows
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    reporter.write_line("\n" + markdown(["check", "result", ""], rows))


@pytest.fixture(scope="module")
def train(data, tmp_path_factory):
    """train(name, *args): `mt train` on Multi30k on the GPU, validating by loss, rarely."""
    out = tmp_path_factory.mktemp("gpu")
    common = ["--device", "cuda", "--set", f"data.dir={data}", "--set", "train.eval_bleu=false",
              "--set", "train.metric=loss", "--set", "train.eval_every=100000", "--set",
              "train.log_every=20"]

    def run(name: str, *args: str, resume: bool = False, launcher: list[str] | None = None):
        run_dir = out / name
        first = ["--resume"] if resume else [CONFIG]
        cmd = ["train", *first, "--out", str(run_dir), *common, *args]
        if launcher is None:
            r = run_mt(*cmd)
            assert r.code == 0, f"{name}: {r.err[-3000:]}"
        else:
            p = subprocess.run([sys.executable, *launcher, "-m", "mt", *cmd], cwd=ROOT,
                               capture_output=True, text=True, timeout=600,
                               env={**os.environ, "MT_DIST_BACKEND": "gloo"})
            assert p.returncode == 0, f"{name}: {p.stderr[-3000:]}"
        return run_dir

    return run


@pytest.fixture(scope="module")
def resumed(train):
    """resumed(amp): a run of 200 steps, checked, then resumed to 300 (once per amp)."""
    runs = {}

    def get(amp: str) -> Path:
        if amp not in runs:
            run = train(amp, "--set", f"train.amp={amp}", "--set", "train.max_steps=200")
            state = load_checkpoint(run / "last.pt")
            assert state["step"] == 200, state["step"]
            if amp == "fp16":
                scale = state["scaler"].get("scale")
                assert scale is not None and scale > 0, f"no GradScaler state: {state['scaler']}"
            runs[amp] = train(amp, "--set", f"train.amp={amp}", "--set", "train.max_steps=300",
                              resume=True)
        return runs[amp]

    return get


def train_events(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "metrics.jsonl").open() if '"train"' in line]


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_resume_continues_the_loss_and_keeps_the_scaler(resumed, table, amp):
    run = resumed(amp)
    ev = train_events(run)
    by_step = {e["step"]: e for e in ev}
    before, after = by_step[200]["loss"], by_step[220]["loss"]
    assert before is not None and after is not None, f"{amp}: non-finite loss {before} {after}"
    assert abs(after - before) / before < 0.1, f"{amp}: loss {before} at 200, {after} at 220"
    assert ev[0]["loss"] > before, f"{amp}: loss did not fall ({ev[0]['loss']} -> {before})"
    state = load_checkpoint(run / "last.pt")
    assert state["step"] == 300, state["step"]
    if amp == "fp16":
        assert state["scaler"].get("scale"), "fp16 resume lost the GradScaler state"
    table.append((f"{amp} resume 200->300", f"loss {before:.3f} at 200, {after:.3f} at 220",
                  f"{by_step[300]['tok_per_s']:,} tok/s"))


@pytest.mark.dist
def test_ddp_two_ranks_on_one_gpu_then_resumed_on_one(train, table):
    """gloo: NCCL refuses two ranks on one device. The data position is global, so one rank
    can resume what two trained."""
    torchrun = ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    bf16 = ["--set", "train.amp=bf16"]
    train("ddp", *bf16, "--set", "train.max_steps=100", launcher=torchrun)
    run = train("ddp", *bf16, "--set", "train.max_steps=150", resume=True)
    ev = train_events(run)
    state = load_checkpoint(run / "last.pt")
    assert state["step"] == 150, f"DDP run resumed to step {state['step']}, not 150"
    assert ev[-1]["loss"] < ev[0]["loss"], f"loss {ev[0]['loss']} -> {ev[-1]['loss']}"
    table.append(("DDP 2 ranks on 1 GPU (gloo), 100 steps, resumed on 1 rank to 150",
                  f"loss {ev[0]['loss']:.3f} -> {ev[-1]['loss']:.3f}", "ok"))


def test_compile_on_and_off(train, resumed, table):
    """The last interval's tokens/s: past compilation."""
    compiled = train("compiled", "--set", "train.amp=bf16", "--set", "train.compile=true",
                     "--set", "train.max_steps=200")
    off = train_events(resumed("bf16"))[-1]["tok_per_s"]
    on = train_events(compiled)[-1]["tok_per_s"]
    table.append(("compile off / on (bf16, Multi30k)", f"{off:,} / {on:,} tok/s",
                  f"{on / off:.2f}x"))


def bf16_matmul_peak() -> float:
    n, dev = 8192, torch.device("cuda")
    a, b = (torch.randn(n, n, device=dev, dtype=torch.bfloat16) for _ in range(2))
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    clock = time.perf_counter()
    for _ in range(20):
        a @ b
    torch.cuda.synchronize()
    return 20 * 2 * n ** 3 / (time.perf_counter() - clock)


def throughput(name, overrides, vocab, tokens, peak, compiled=False) -> tuple[str, str, str]:
    """Training steps on synthetic batches of sentences of 20-30 tokens, bf16 autocast."""
    dev = torch.device("cuda")
    cfg = load_config(ROOT / CONFIG, overrides)
    model = make_model(cfg.model, vocab, vocab).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    net = torch.compile(model, dynamic=True) if compiled else model
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(8):  # as many sentences as fit the token budget
        length = int(torch.randint(20, 31, (1,), generator=g))
        count = tokens // (2 * length)
        src = torch.randint(4, vocab, (count, length), generator=g)
        tgt = torch.randint(4, vocab, (count, length), generator=g)
        batches.append(Batch(src, tgt, tgt, tgt.numel()).to(dev))
    dtype = autocast_dtype("bf16", dev)

    def step(batch):
        with torch.autocast("cuda", dtype=dtype):
            states = net(batch.src, batch.tgt_in, project=False)
        loss, _ = label_smoothed_loss(states, model.generator.weight, batch.tgt_out, 0.1, dtype)
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
    return (f"train {name}{' compiled' if compiled else ''} ({params / 1e6:.0f}M params)",
            f"{tok / seconds:,.0f} tok/s", f"MFU {flops / seconds / peak:.0%}")


def test_training_throughput_and_mfu(table):
    peak = bf16_matmul_peak()
    table.append(("bf16 matmul peak (measured, 8192^3)", f"{peak / 1e12:.0f} TFLOP/s", ""))
    table.append(throughput("Multi30k config, 6k-token batches", [], 10000, 6000, peak))
    torch.cuda.empty_cache()
    base = ["model.d_model=512", "model.n_heads=8", "model.n_enc_layers=6",
            "model.n_dec_layers=6", "model.d_ff=2048", "model.dropout=0.1"]
    table.append(throughput("Transformer-base, 25k-token batches", base, 32000, 25000, peak))
    torch.cuda.empty_cache()
    table.append(throughput("Transformer-base, 25k-token batches", base, 32000, 25000, peak,
                            compiled=True))


def test_decoding_speed(resumed, data, table):
    """With the bf16 run's weights, in float32 and bf16 (quality is not the point after 300
    steps)."""
    run_dir, dev = resumed("bf16"), torch.device("cuda")
    run = load_run(run_dir / "last.pt", dev)
    src, _ = read_parallel(split_path(data, "test_2016_flickr", "de"),
                           split_path(data, "test_2016_flickr", "en"))
    for beam, dtype in ((1, "float32"), (5, "float32"), (1, "bf16"), (5, "bf16")):
        decode = load_config(run_dir / "config.yaml",
                             [f"decode.beam={beam}", f"decode.dtype={dtype}"]).decode
        translator = Translator(run, decode, dev)
        translator.translate(src[:100])  # warm-up
        torch.cuda.synchronize()
        clock = time.perf_counter()
        hyps = translator.translate(src)
        torch.cuda.synchronize()
        assert len(hyps) == len(src)
        table.append((f"decode {'greedy' if beam == 1 else f'beam {beam}'} {dtype}, "
                      f"{len(src)} sentences",
                      f"{len(src) / (time.perf_counter() - clock):,.0f} sentences/s", ""))


def test_glossary_terms_kept_on_cuda(resumed, data, table):
    """Lexically constrained beam search on CUDA tensors: every active term in every output
    (its guarantee), a CPU run of the same weights agreeing, and its cost against plain beam 5."""
    from mt.glossary import occurrences

    run_dir, dev = resumed("bf16"), torch.device("cuda")
    src, _ = read_parallel(split_path(data, "test_2016_flickr", "de"),
                           split_path(data, "test_2016_flickr", "en"))
    glossary = [["Mann", "guy"], ["Frau", "lady"], ["Hund", "puppy"], ["Straße", "road"]]
    found = {}
    for device in (dev, torch.device("cpu")):
        translator = Translator.load(run_dir / "last.pt", device, beam=5)
        translator.translate(src[:50])  # warm-up
        seconds = {}
        for name, g in (("plain", None), ("glossary", glossary)):
            if device.type == "cuda":
                torch.cuda.synchronize()
            clock = time.perf_counter()
            found[device.type, name] = translator.translate_nbest(src[:300], glossary=g)
            if device.type == "cuda":
                torch.cuda.synchronize()
            seconds[name] = time.perf_counter() - clock
        if device.type == "cuda":
            table.append(("decode beam 5 with a 4-term glossary, 300 sentences",
                          f"{300 / seconds['glossary']:,.0f} sentences/s",
                          f"{seconds['glossary'] / seconds['plain']:.2f}x plain beam 5"))
    tok = translator.tgt_tok.tokenize
    active = 0
    for (best,) in found["cuda", "glossary"]:
        assert best.missing == [], best
        for _, tgt in best.terms:
            assert occurrences(tok(best.text), tok(tgt)), (best.text, tgt)
        active += bool(best.terms)
    assert active >= 50, active  # the glossary was exercised
    same = sum(a[0].text == b[0].text for a, b in zip(found["cuda", "glossary"],
                                                      found["cpu", "glossary"]))
    assert same >= 0.9 * 300, same  # float32 on both; rounding may flip a close call


def test_beam_search_alignments_on_cuda(resumed, data):
    """Word alignments kept by beam search on CUDA tensors (no teacher-forced pass): one link
    per target word, and as the teacher-forced pass gives them (asked for with attention)."""
    run_dir = resumed("bf16")
    src, _ = read_parallel(split_path(data, "test_2016_flickr", "de"),
                           split_path(data, "test_2016_flickr", "en"))
    translator = Translator.load(run_dir / "last.pt", torch.device("cuda"), beam=5)
    kept = translator.translate_nbest(src[:100], align=True)
    forced = translator.translate_nbest(src[:100], align=True, attention=True)
    for (a,) in kept:
        assert {int(p.split("-")[1]) for p in a.alignment.split()} == set(
            range(len(a.text.split()))), a
    same = sum(a[0].alignment == b[0].alignment for a, b in zip(kept, forced, strict=True))
    assert same >= 90, same  # steps against one pass: rounding may flip a close argmax


def test_int8_on_cuda_warns_once_and_decodes_in_float32(resumed, data, capsys):
    """No int8 kernel on CUDA (mt.decoding.precision): one warning, and float32's translations."""
    run_dir = resumed("bf16")
    src, _ = read_parallel(split_path(data, "test_2016_flickr", "de"),
                           split_path(data, "test_2016_flickr", "en"))
    f32 = Translator.load(run_dir / "last.pt", torch.device("cuda"), beam=5).translate(src[:64])
    capsys.readouterr()
    q8 = Translator.load(run_dir / "last.pt", torch.device("cuda"), beam=5, dtype="int8")
    assert capsys.readouterr().err.count("no fast int8 kernel on CUDA") == 1
    assert q8.translate(src[:64]) == f32


def test_an_imported_marian_model_decodes_on_cuda_as_transformers_does(tmp_path, table):
    """mt import hf, then greedy and beam 4 on CUDA: equal to transformers' generate on the
    same GPU, token for token (the CPU tests check the same on the CPU)."""
    pytest.importorskip("transformers")
    from hf_models import build_marian
    from transformers import MarianMTModel, MarianTokenizer

    model_dir = build_marian(tmp_path / "marian", d_model=64, ffn=128, init_std=0.05)
    r = run_mt("import", "hf", str(model_dir), "--out", str(tmp_path / "run"))
    assert r.code == 0, r.err
    dev = torch.device("cuda")
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:64]
    tok = MarianTokenizer.from_pretrained(model_dir)
    hf = MarianMTModel.from_pretrained(model_dir).to(dev).eval()
    batch = tok(lines, return_tensors="pt", padding=True).to(dev)
    for beam in (1, 4):
        mine = Translator.load(tmp_path / "run", dev, beam=beam, length_norm="average",
                               max_len_a=0, max_len_b=20).translate(lines)
        rule = {} if beam == 1 else dict(length_penalty=1.0, early_stopping="never")
        with torch.no_grad():
            out = hf.generate(**batch, num_beams=beam, do_sample=False, max_new_tokens=21,
                              bad_words_ids=[[tok.pad_token_id]], **rule)
        theirs = tok.batch_decode(out, skip_special_tokens=True)
        same = sum(a == b for a, b in zip(mine, theirs))
        table.append((f"imported Marian, {'greedy' if beam == 1 else 'beam 4'} on CUDA",
                      f"{same}/{len(lines)} equal to transformers", ""))
        assert same >= len(lines) - 2, list(zip(mine, theirs))[:5]
