"""Decoding speed and BLEU, side by side: a naive decoder, mt's batched greedy, mt's beam search,
sampling, n-gram blocking and a 2-model ensemble.

    python -m benchmarks.bench_decode RUN [--src FILE --ref FILE] [--limit N] [--naive-limit 200]
        [--beam 5] [--second RUN] [--batch-tokens N] [--repeat 3] [--threads 1,2]
        [--ct2 float32,int8] [--bf16] [--shortlist] [--profile] [--device auto]
    python -m benchmarks.bench_decode RUN --smoke     # 16 toy sentences, 1 round

Defaults to Multi30k test_2016_flickr (1000 sentences, de -> en). The naive decoder is what
annotated-transformer users write: one sentence at a time, and at every step the whole prefix
is decoded again from scratch (a fresh cache, so nothing carries over between steps) and only
its last position is projected to the vocabulary. It follows the same rules as mt's greedy
(argmax, stop at <eos>, same length limit), so its output should match greedy's.
It is slow, so it runs on the first --naive-limit sentences only; its sentences/s come from
that subset, and its BLEU is shown next to greedy's BLEU on the same subset.

Beside greedy and beam search: top-k sampling (k 10), top-p sampling (p 0.9), greedy with
no_repeat_ngram 3, and the ensemble of RUN and --second (RUN with itself without it), greedy
and beam; then their time against greedy's (sampling) and against one model's (ensemble).
With --shortlist, mt's greedy and beam search again with decode.shortlist on (the run's lexical
shortlist, which `mt shortlist RUN` learns for a run without one), and each CTranslate2 column
again with use_vmap (its export's vmap.txt, the same table): their speed and BLEU against the
full projection's.

Each decoder translates a few sentences first, untimed (warm-up). Times include tokenization
and detokenization. The decoders take turns, --repeat rounds of all of them, and each keeps its
fastest round: on a shared machine, noise only ever adds time. This is a benchmark to run by
hand on an otherwise idle machine, not a test.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.harness import TOY, alternate, parse, parser
from mt.checkpoint import load_run
from mt.config import DecodeConfig, override
from mt.data import read_parallel
from mt.decoding.constraints import max_lengths
from mt.decoding.precision import inference_layout
from mt.device import pick_device
from mt.metrics import score
from mt.model import Seq2Seq
from mt.threads import Streams
from mt.translator import Translator
from mt.vocab import EOS, start_id

DATA = Path("data/multi30k")
WARMUP = 8  # sentences translated untimed before each measurement
TOPK, TOPP, NO_REPEAT = 10, 0.9, 3  # the sampling and blocking rows (issue 27's settings)


@torch.no_grad()
def naive_greedy(model: Seq2Seq, src_ids: list[int], cfg: DecodeConfig,
                 device: torch.device) -> list[int]:
    """One sentence; each step re-decodes the whole prefix with a fresh cache (no reuse)."""
    src = torch.tensor([src_ids], device=device)
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)
    limit = int(max_lengths(src_mask, cfg.max_len_a, cfg.max_len_b, model.cfg.max_positions))
    prefix = [start_id(model.cfg.decoder_start)]
    for t in range(limit + 1):
        fresh = model.start_cache(memory, src_mask)
        states, _ = model.decode(torch.tensor([prefix], device=device), fresh)
        scores = model.generator(states[0, -1])  # the last position's logits: all it needs
        if t < cfg.min_len:
            scores[EOS] = float("-inf")
        tok = EOS if t >= limit else int(scores.argmax())
        if tok == EOS:
            break
        prefix.append(tok)
    return prefix[1:]


def naive_translate(translator: Translator, lines: list[str]) -> list[str]:
    run, device = translator.run, translator.device
    out = []
    for line in lines:
        ids = run.src_vocab.encode(translator.src_tok.tokenize(line)[: translator.max_src])
        hyp = naive_greedy(run.model, ids, translator.decoding, device) if ids else []
        out.append(" ".join(translator.tgt_tok.detokenize(run.tgt_vocab.decode(hyp)).split()))
    return out


def timed(contenders: dict, models: list[Seq2Seq], device: torch.device, rounds: int
          ) -> dict[str, tuple[list[str], float, int]]:
    """Run each contender's (fn, lines) in turn, `rounds` rounds; per contender its outputs,
    fastest time and the target positions its decoder computed (rows x new tokens, summed over
    decoder calls)."""
    positions = [0]

    def counting(model):
        decode = model.decode

        def count(tgt, *args, **kwargs):
            positions[0] += tgt.numel()  # tgt (B, T): whichever cache the step runs on
            return decode(tgt, *args, **kwargs)
        return count

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    def translates(fn, lines):
        def run(r: int) -> tuple[list[str], float, int]:
            fn(lines[:WARMUP])
            sync()
            positions[0] = 0
            start = time.perf_counter()
            out = fn(lines)
            sync()
            return out, time.perf_counter() - start, positions[0]
        return run

    models = list({id(m): m for m in models}.values())  # one model may be given twice
    for m in models:
        m.decode = counting(m)
    try:
        return alternate({name: translates(fn, lines) for name, (fn, lines) in contenders.items()},
                         rounds, keep=lambda a, b: min(a, b, key=lambda m: m[1]))
    finally:
        for m in models:
            del m.decode


def profile(name: str, translator: Translator, lines: list[str]) -> None:
    """Where one decoder's time goes, from torch's profiler (self CPU time per op).

    The profiler adds a few microseconds per op, which lands in "outside torch ops"; that
    share is therefore an upper bound on the Python overhead (plus tokenization)."""
    from torch.profiler import ProfilerActivity, record_function
    from torch.profiler import profile as torch_profile

    from mt.model import DecoderCache
    from mt.static_cache import StaticCache

    model = translator.run.model
    project = model.generator.forward
    reorders = {cls: cls.reorder for cls in (DecoderCache, StaticCache)}

    def labelled(label, fn):
        def call(*a, **k):
            with record_function(label):
                return fn(*a, **k)
        return call

    model.generator.forward = labelled("vocab projection", project)
    for cls, reorder in reorders.items():
        cls.reorder = labelled("cache reorder", reorder)
    calls, decode = [0], model.decode

    def counted(*args, **kwargs):
        calls[0] += 1
        return decode(*args, **kwargs)

    model.decode = counted
    try:
        translator.translate(lines[:WARMUP])
        calls[0] = 0
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            start = time.perf_counter()
            outputs = translator.translate(lines)
            wall = time.perf_counter() - start
    finally:
        model.generator.forward = project
        for cls, reorder in reorders.items():
            cls.reorder = reorder
        del model.decode
    events = prof.key_averages()
    self_us = {e.key: e.self_cpu_time_total for e in events}
    total_us = {e.key: e.cpu_time_total for e in events}
    ops = sum(v for k, v in self_us.items() if k.startswith("aten::")) / 1e6
    mm = sum(self_us.get(k, 0) for k in ("aten::addmm", "aten::mm", "aten::bmm")) / 1e6
    attn = sum(v for k, v in self_us.items() if "scaled_dot_product" in k) / 1e6
    parts = [("vocab projection (generator)", total_us.get("vocab projection", 0) / 1e6),
             ("other matrix products", mm - total_us.get("vocab projection", 0) / 1e6),
             ("attention kernels", attn),
             ("cache: self-attention concat (aten::cat)", self_us.get("aten::cat", 0) / 1e6),
             ("cache: reorder (index_select)", total_us.get("cache reorder", 0) / 1e6),
             ("outside torch ops (Python, tokenizing)", wall - ops)]
    rest = wall - sum(t for _, t in parts)
    start = time.perf_counter()
    translator.src_tok.tokenize_many(lines)
    for out in outputs:
        translator.tgt_tok.detokenize(out.split())
    text = time.perf_counter() - start
    print(f"\n{name}: {wall:.2f} s under the profiler, {calls[0]} decoder steps, "
          f"{wall / max(calls[0], 1) * 1e3:.2f} ms per step")
    for label, t in parts + [("other torch ops", rest)]:
        print(f"  {label:<42} {t:7.2f} s {100 * t / wall:5.1f}%")
    print(f"  (tokenizing and detokenizing alone, timed apart: {text:.2f} s; the rest of "
          f"'outside' is Python and profiler overhead, about "
          f"{(parts[-1][1] - text) / max(calls[0], 1) * 1e3:.2f} ms per step)")


def ct2_translators(run, cfgs: dict, threads: int, device: torch.device, model_dirs: dict,
                    streams: Streams | None = None) -> dict:
    """CTranslate2 contenders: Translators whose search is a CTranslate2 model of the same
    weights, one per (quantization, search), with `threads` intra-op threads; given
    `streams`, one replica per stream (inter_threads), each stream's batches on its own."""
    from mt.ct2.search import CTranslate2Engine

    out = {}
    replicas = 1 if streams is None else streams.count
    for quant, model_dir in model_dirs.items():
        search = CTranslate2Engine(model_dir, run.src_vocab, run.tgt_vocab,
                                   run.cfg.model.max_positions, str(device), threads, replicas)
        for kind, cfg in cfgs.items():
            out[(quant, kind)] = Translator(run, cfg, device, search, streams)
    return out


def more_translators(run, pair: list[Path], decoding, cfgs: dict, device: torch.device
                     ) -> tuple[dict[str, Translator], Seq2Seq]:
    """Sampling, n-gram blocking, and the ensemble of the `pair` runs with the `cfgs` searches
    (greedy and beam), by row name; and the ensemble's first model, on which its decoder
    positions are counted (one model's work). decoding(*items): a DecodeConfig of the run's."""
    variants = {f"mt top-k {TOPK}": ["decode.sampling=topk", f"decode.topk={TOPK}"],
                f"mt top-p {TOPP}": ["decode.sampling=topp", f"decode.topp={TOPP}"],
                f"mt greedy no_repeat {NO_REPEAT}": [f"decode.no_repeat_ngram={NO_REPEAT}"]}
    out = {name: Translator(run, decoding("decode.beam=1", *items), device)
           for name, items in variants.items()}
    # One load of both models; its search serves the ensemble's greedy and beam Translators.
    ensemble = Translator.load(pair, device)
    for kind, cfg in cfgs.items():
        out[f"ensemble 2 {kind}"] = Translator(ensemble.run, cfg, device, ensemble.engine)
    return out, ensemble.model.models[0]


def add_test_set_args(p) -> None:
    """The run and the test set a decoding benchmark takes (read back by read_test_set)."""
    p.add_argument("run", type=Path, help="run directory (uses best.pt) or checkpoint file")
    p.add_argument("--src", type=Path, default=DATA / "test_2016_flickr.de.gz")
    p.add_argument("--ref", type=Path, default=DATA / "test_2016_flickr.en.gz")
    p.add_argument("--limit", type=int, default=0, help="use the first N sentences (0 = all)")


def read_test_set(args) -> tuple[list[str], list[str]]:
    """The source and reference lines add_test_set_args asked for (the first --limit)."""
    src, ref = read_parallel(args.src, args.ref)
    return (src[: args.limit], ref[: args.limit]) if args.limit else (src, ref)


def main() -> None:
    p = parser(__doc__, rounds=3, smoke="the first 16 toy test sentences (en -> de), naive on 4, "
               "beam 2, no CTranslate2, 1 round; the ensemble is RUN with itself")
    add_test_set_args(p)
    p.add_argument("--naive-limit", type=int, default=200,
                   help="sentences for the naive decoder (a subset: it is slow; 0 = skip it)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--second", type=Path, default=None,
                   help="the ensemble's second run or checkpoint (default: RUN again)")
    p.add_argument("--batch-tokens", type=int, default=0,
                   help="decode.batch_tokens for greedy and beam (0 = the run's config)")
    p.add_argument("--threads", default="",
                   help="comma-separated CPU thread counts to measure at, e.g. 1,2 "
                        "(default: torch's)")
    p.add_argument("--ct2", default="float32,int8",
                   help="CTranslate2 columns: comma-separated weight types (float32, int8, ...; "
                        "'' = none); needs the ctranslate2 extra")
    p.add_argument("--bf16", action="store_true",
                   help="also time mt's greedy and beam search with decode.dtype bf16")
    p.add_argument("--shortlist", action="store_true",
                   help="also time mt's greedy and beam search, and CTranslate2's, over the "
                        "run's lexical shortlist (decode.shortlist on; CTranslate2's use_vmap)")
    p.add_argument("--profile", action="store_true",
                   help="also show where mt's greedy and beam search spend their time")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    args = parse(p, {"src": TOY / "toy.test.en", "ref": TOY / "toy.test.de", "limit": 16,
                     "naive_limit": 4, "beam": 2, "ct2": "", "rounds": 1})

    device = pick_device(args.device)
    run = load_run(args.run, device)
    inference_layout(run.model)  # as Translator.load lays out what mt translate decodes with
    src, ref = read_test_set(args)
    n_naive = min(args.naive_limit, len(src)) if args.naive_limit > 0 else 0
    sets = [] if not args.batch_tokens else [f"decode.batch_tokens={args.batch_tokens}"]

    def decoding(*items: str) -> DecodeConfig:
        return override(run.cfg, sets + ["decode.nbest=1", *items], "bench").decode

    base = decoding()
    cfgs = {"greedy": decoding("decode.beam=1"),
            f"beam {args.beam}": decoding(f"decode.beam={args.beam}")}
    greedy_tr, beam_tr = (Translator(run, c, device) for c in cfgs.values())
    more_trs, pair_first = more_translators(run, [args.run, args.second or args.run], decoding,
                                            cfgs, device)
    bf16_trs = ([Translator(run, dataclasses.replace(c, dtype="bf16"), device)
                 for c in cfgs.values()] if args.bf16 else [])
    listed = ({k: dataclasses.replace(c, shortlist="on") for k, c in cfgs.items()}
              if args.shortlist else {})
    if listed and run.shortlist is None:
        sys.exit(f"{args.run}: no lexical shortlist to time; learn one: mt shortlist RUN")
    quants = [q for q in args.ct2.split(",") if q]
    model_dirs, tmp = {}, None
    if quants:
        from mt.ct2.export import check_quantization, write_model

        tmp = tempfile.TemporaryDirectory(prefix="bench-ct2-")
        for q in quants:
            check_quantization(None if q == "float32" else q)
            model_dirs[q] = Path(tmp.name) / q
            model_dirs[q].mkdir()
            write_model(run, model_dirs[q], None if q == "float32" else q)

    print(f"checkpoint {args.run} (step {run.step}) on {device}; {len(src)} sentences from "
          f"{args.src}")
    print(f"decode: batch_tokens {base.batch_tokens} (x beam for beam search), "
          f"max_len {base.max_len_a} * src + {base.max_len_b}, min_len {base.min_len}, "
          f"beam scores {base.length_norm} (alpha {base.length_penalty}; CTranslate2: "
          f"length^alpha); fastest of {args.rounds} rounds")
    print(f"ensemble: {args.run} + {args.second}" if args.second else
          f"ensemble: {args.run} with itself (no --second: the same run twice)", flush=True)
    threads = [int(t) for t in args.threads.split(",") if t] or [torch.get_num_threads()]
    for n in threads:
        torch.set_num_threads(n)
        ct2 = ct2_translators(run, cfgs, n, device, model_dirs) if quants else {}
        ct2_listed = ct2_translators(run, listed, n, device, model_dirs) if quants else {}
        contenders = {"mt greedy (batched, cached)": (greedy_tr.translate, src),
                      f"mt beam {args.beam}": (beam_tr.translate, src)}
        if bf16_trs:
            contenders["mt greedy bf16"] = (bf16_trs[0].translate, src)
            contenders[f"mt beam {args.beam} bf16"] = (bf16_trs[1].translate, src)
        for kind, cfg in listed.items():
            contenders[f"mt {kind} shortlist"] = (Translator(run, cfg, device).translate, src)
        for name, tr in more_trs.items():
            contenders[name] = (tr.translate, src)
        for (quant, kind), tr in ct2.items():
            contenders[f"CTranslate2 {quant} {kind}"] = (tr.translate, src)
        for (quant, kind), tr in ct2_listed.items():
            contenders[f"CTranslate2 {quant} {kind} vmap"] = (tr.translate, src)
        if n_naive:
            contenders["naive (no cache, 1 sentence)"] = (
                lambda x: naive_translate(greedy_tr, x), src[:n_naive])
        models = [run.model, pair_first] + [tr.model for tr in bf16_trs]
        results = timed(contenders, models, device, args.rounds)
        report(contenders, results, ref, n, n_naive, args.beam, quants)
        if args.profile:
            profile(f"mt greedy, {n} thread(s)", greedy_tr, src)
            profile(f"mt beam {args.beam}, {n} thread(s)", beam_tr, src)


def report(contenders, results, ref, threads, n_naive, beam, quants) -> None:
    """The table for one thread count, then the ratios."""
    print(f"\n{threads} thread(s)")
    print(f"{'decoder':<34} {'sentences':>9} {'seconds':>9} {'sent/s':>9} "
          f"{'positions/sent':>14} {'BLEU':>7}")
    rate, bleu, hyps = {}, {}, {}
    for name, (_, lines) in contenders.items():
        (out, secs, pos), n = results[name], len(lines)
        rate[name], hyps[name] = n / secs, out
        bleu[name] = score(out, ref[:n])["bleu"]
        # CTranslate2 runs outside torch: its positions are not counted
        shown = f"{pos / n:>14.1f}" if not name.startswith("CTranslate2") else f"{'-':>14}"
        print(f"{name:<34} {n:>9} {secs:>9.2f} {n / secs:>9.1f} {shown} {bleu[name]:>7.2f}")
    print()
    g, b = "mt greedy (batched, cached)", f"mt beam {beam}"
    if n_naive:
        naive = "naive (no cache, 1 sentence)"
        same = sum(a == c for a, c in zip(hyps[naive], hyps[g], strict=False))
        subset_bleu = score(hyps[g][:n_naive], ref[:n_naive])["bleu"]
        print(f"naive: sentences/s measured on the first {n_naive} sentences only; greedy BLEU "
              f"on that subset {subset_bleu:.2f}; identical outputs {same}/{n_naive}")
        print(f"greedy / naive speed      {rate[g] / rate[naive]:8.1f}x   (target >= 30x)")
    print(f"beam {beam} / greedy time     {rate[g] / rate[b]:8.2f}x   (target <= 3x)")
    print(f"beam {beam} - greedy BLEU     {bleu[b] - bleu[g]:+8.2f}    (target >= 0)")
    for name in (f"mt top-k {TOPK}", f"mt top-p {TOPP}"):
        print(f"{name[3:] + ' / greedy time':<25}{rate[g] / rate[name]:8.2f}x   (target <= 1.15)")
    print(f"ensemble 2 / one model time greedy {rate[g] / rate['ensemble 2 greedy']:5.2f}x  "
          f"beam {beam} {rate[b] / rate[f'ensemble 2 beam {beam}']:5.2f}x   (target <= 2.2)")
    for kind, full in (("greedy", g), (f"beam {beam}", b)):
        if (name := f"mt {kind} shortlist") in rate:
            print(f"shortlist / full {kind:<8} speed {rate[name] / rate[full]:5.2f}x   BLEU "
                  f"{bleu[name] - bleu[full]:+.2f}   (BLEU target >= -0.3)")
    bg, bb = "mt greedy bf16", f"mt beam {beam} bf16"
    if bg in rate:
        print(f"mt bf16 / mt float32 speed greedy {rate[bg] / rate[g]:5.2f}  beam {beam} "
              f"{rate[bb] / rate[b]:5.2f}; BLEU greedy {bleu[bg] - bleu[g]:+5.2f}  beam {beam} "
              f"{bleu[bb] - bleu[b]:+5.2f}   (target: within 0.1)")
    for q in quants:
        cg, cb = f"CTranslate2 {q} greedy", f"CTranslate2 {q} beam {beam}"
        if bg in rate and q == "float32":
            print(f"mt bf16 / CT2 float32 speed greedy {rate[bg] / rate[cg]:5.2f}  beam {beam} "
                  f"{rate[bb] / rate[cb]:5.2f}   (target >= 1)")
        target = ("   (target >= 0.9 / >= 0.8)" if q == "float32" else "")
        same = sum(a == c for a, c in zip(hyps[cg], hyps[g], strict=True))
        print(f"mt / CT2 {q:<8} speed     greedy {rate[g] / rate[cg]:5.2f}  beam {beam} "
              f"{rate[b] / rate[cb]:5.2f}{target}")
        print(f"CT2 {q:<8} - mt BLEU      greedy {bleu[cg] - bleu[g]:+5.2f}  beam {beam} "
              f"{bleu[cb] - bleu[b]:+5.2f}; greedy outputs identical to mt's "
              f"{same}/{len(hyps[g])}")


if __name__ == "__main__":
    sys.exit(main())
