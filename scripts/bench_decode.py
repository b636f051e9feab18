"""Decoding speed and BLEU, side by side: a naive decoder, mt's batched greedy, mt's beam search.

    python scripts/bench_decode.py RUN [--src FILE --ref FILE] [--limit N] [--naive-limit 200]
        [--beam 5] [--batch-tokens N] [--repeat 3] [--device auto]

Defaults to Multi30k test_2016_flickr (1000 sentences, de -> en). The naive decoder is what
annotated-transformer users write: one sentence at a time, and at every step the whole prefix
is decoded again from scratch (a fresh cache, so nothing carries over between steps) and only
its last position is projected to the vocabulary. It follows the same rules as mt's greedy
(argmax, stop at <eos>, same length limit), so its output should match greedy's.
It is slow, so it runs on the first --naive-limit sentences only; its sentences/s come from
that subset, and its BLEU is shown next to greedy's BLEU on the same subset.

Each decoder translates a few sentences first, untimed (warm-up). Times include tokenization
and detokenization. The decoders take turns, --repeat rounds of all three, and each keeps its
fastest round: on a shared machine, noise only ever adds time. This is a benchmark to run by
hand on an otherwise idle machine, not a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from mt.checkpoint import load_run
from mt.config import DecodeConfig, override
from mt.data import read_parallel
from mt.decode import max_lengths
from mt.device import pick_device
from mt.metrics import score
from mt.model import Seq2Seq
from mt.translate import Translator
from mt.vocab import BOS, EOS

DATA = Path("data/multi30k")
WARMUP = 8  # sentences translated untimed before each measurement


@torch.no_grad()
def naive_greedy(model: Seq2Seq, src_ids: list[int], cfg: DecodeConfig,
                 device: torch.device) -> list[int]:
    """One sentence; each step re-decodes the whole prefix with a fresh cache (no reuse)."""
    src = torch.tensor([src_ids], device=device)
    src_mask = model.src_mask(src)
    memory = model.encode(src, src_mask)
    limit = int(max_lengths(src_mask, cfg.max_len_a, cfg.max_len_b, model.cfg.max_positions))
    prefix = [BOS]
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
        hyp = naive_greedy(run.model, ids, translator.decode_cfg, device) if ids else []
        out.append(translator._detokenize(hyp))
    return out


def timed(fns: list, model: Seq2Seq, device: torch.device, repeat: int
          ) -> list[tuple[list[str], float, int]]:
    """Run each (fn, lines) in turn, `repeat` rounds; per fn its outputs, fastest time and the
    target positions its decoder computed (rows x new tokens, summed over decoder calls)."""
    positions = [0]

    def count(layer, inputs, output):
        positions[0] += inputs[0].size(0) * inputs[0].size(1)  # x (B, T, D)

    hook = model.decoder[0].register_forward_hook(count)
    best = [(None, float("inf"), 0)] * len(fns)
    for _ in range(repeat):
        for i, (fn, lines) in enumerate(fns):
            fn(lines[:WARMUP])
            if device.type == "cuda":
                torch.cuda.synchronize()
            positions[0] = 0
            start = time.perf_counter()
            out = fn(lines)
            if device.type == "cuda":
                torch.cuda.synchronize()
            best[i] = (out, min(best[i][1], time.perf_counter() - start), positions[0])
    hook.remove()
    return best


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("run", type=Path, help="run directory (uses best.pt) or checkpoint file")
    p.add_argument("--src", type=Path, default=DATA / "test_2016_flickr.de.gz")
    p.add_argument("--ref", type=Path, default=DATA / "test_2016_flickr.en.gz")
    p.add_argument("--limit", type=int, default=0, help="use the first N sentences (0 = all)")
    p.add_argument("--naive-limit", type=int, default=200,
                   help="sentences for the naive decoder (a subset: it is slow)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--batch-tokens", type=int, default=0,
                   help="decode.batch_tokens for greedy and beam (0 = the run's config)")
    p.add_argument("--repeat", type=int, default=3,
                   help="rounds; each decoder's fastest round counts")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    args = p.parse_args()

    device = pick_device(args.device)
    run = load_run(args.run, device)
    src, ref = read_parallel(args.src, args.ref)
    if args.limit:
        src, ref = src[: args.limit], ref[: args.limit]
    n_naive = min(args.naive_limit, len(src)) if args.naive_limit > 0 else 0
    sets = [] if not args.batch_tokens else [f"decode.batch_tokens={args.batch_tokens}"]
    base = override(run.cfg, sets + ["decode.nbest=1"], "bench").decode
    greedy_cfg = override(run.cfg, sets + ["decode.beam=1", "decode.nbest=1"], "bench").decode
    beam_cfg = override(run.cfg, sets + [f"decode.beam={args.beam}", "decode.nbest=1"],
                        "bench").decode
    greedy_tr = Translator(run, greedy_cfg, device)
    beam_tr = Translator(run, beam_cfg, device)

    print(f"checkpoint {args.run} (step {run.step}) on {device}, torch threads "
          f"{torch.get_num_threads()}; {len(src)} sentences from {args.src}")
    print(f"decode: batch_tokens {base.batch_tokens} (x beam for beam search), "
          f"max_len {base.max_len_a} * src + {base.max_len_b}, min_len {base.min_len}, "
          f"beam scores {base.length_norm} (alpha {base.length_penalty}); fastest of "
          f"{args.repeat} rounds", flush=True)

    naive = (lambda x: naive_translate(greedy_tr, x), src[:n_naive])
    fns = [(greedy_tr.translate, src), (beam_tr.translate, src)] + ([naive] if n_naive else [])
    (greedy_hyps, t_greedy, p_greedy), (beam_hyps, t_beam, p_beam), *naive_result = timed(
        fns, run.model, device, args.repeat)
    rows = []
    if n_naive:
        naive_hyps, t_naive, p_naive = naive_result[0]
        rows.append(("naive (no cache, 1 sentence)", n_naive, t_naive, p_naive,
                     score(naive_hyps, ref[:n_naive])["bleu"]))
    rows.append(("mt greedy (batched, cached)", len(src), t_greedy, p_greedy,
                 score(greedy_hyps, ref)["bleu"]))
    rows.append((f"mt beam {args.beam}", len(src), t_beam, p_beam,
                 score(beam_hyps, ref)["bleu"]))

    # positions/sent: target positions the decoder stack computed per sentence
    print(f"\n{'decoder':<30} {'sentences':>9} {'seconds':>9} {'sent/s':>9} "
          f"{'positions/sent':>14} {'BLEU':>7}")
    for name, n, secs, pos, bleu in rows:
        print(f"{name:<30} {n:>9} {secs:>9.2f} {n / secs:>9.1f} {pos / n:>14.1f} {bleu:>7.2f}")
    print()
    greedy_rate = len(src) / t_greedy
    if n_naive:
        same = sum(a == b for a, b in zip(naive_hyps, greedy_hyps, strict=False))
        subset_bleu = score(greedy_hyps[:n_naive], ref[:n_naive])["bleu"]
        speedup = greedy_rate / (n_naive / t_naive)
        print(f"naive: sentences/s measured on the first {n_naive} sentences only; greedy BLEU "
              f"on that subset {subset_bleu:.2f}; identical outputs {same}/{n_naive}")
        print(f"greedy / naive speed      {speedup:8.1f}x   (target >= 30x)")
    print(f"beam {args.beam} / greedy time     {t_beam / t_greedy:8.2f}x   (target <= 3x)")
    gain = rows[-1][-1] - rows[-2][-1]
    print(f"beam {args.beam} - greedy BLEU     {gain:+8.2f}    (target >= 0)")


if __name__ == "__main__":
    sys.exit(main())
