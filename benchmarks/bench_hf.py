"""An OPUS-MT-sized Marian model: mt's decoding against transformers' generate and CTranslate2
on the same weights, and the import's time and memory.

    python -m benchmarks.bench_hf [--src FILE] [--limit 1000] [--threads 1,2] [--beam 4]
        [--length 32] [--batch 32] [--rounds 2] [--vocab 58101] [--dtype bf16] [--ct2 int8]
    python -m benchmarks.bench_hf --smoke     # a tiny model, 16 toy sentences, 1 round

Builds a MarianMTModel with random weights of OPUS-MT's size (d_model 512, 6+6 layers, 8 heads,
FFN 2048, swish, a shared vocabulary of --vocab tokens: a SentencePiece model trained on --src,
its pieces filled up to size) and saves it as an OPUS-MT download is laid out. Then:

- the import: `mt import hf` in a child process, its seconds and peak resident memory (the
  process's whole, Python and torch included) against the size of model.safetensors;
- decoding --src (default: the first 1,000 lines of WMT news val, German) greedy and beam, at
  each --threads count, taking turns, each contender's fastest of --rounds: mt (`Translator`,
  tokenization included), transformers (`generate` on the same ids, batches of --batch lines
  in length order, tokenization not timed: a favour to it) and CTranslate2 (mt's export of the
  import in --ct2's quantization, float32 by default, through mt's engine); mt decodes in
  --dtype (decode.dtype, float32 by default).

Random weights do not end sentences, so every output is --length tokens (mt: max_len_a 0,
max_len_b --length; transformers: max_new_tokens --length + 1, whose last is the forced </s>):
the same work for all three. Beam scores: mt's `average`, transformers' length_penalty 1.0
(the same rule, tests/test_hf_finetune.py). "same as transformers" is the share of lines
identical to transformers' output, and BLEU against it (100: the same output).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import sys
import tempfile
from pathlib import Path

import sacrebleu
import torch

from benchmarks.harness import (
    ROOT,
    TOY,
    alternate,
    cpu_model,
    markdown,
    parse,
    parser,
    timer,
    watched,
)
from mt.checkpoint import load_run
from mt.config import override
from mt.data import pad
from mt.translator import Translator
from mt.vocab import PAD

NEWS = ROOT.parent / "shared" / "data" / "news-de-en" / "val.de.gz"
OPUS = dict(d_model=512, layers=6, heads=8, ffn=2048)
SMOKE = dict(d_model=32, layers=2, heads=4, ffn=64)
SEARCH = ("beam", "max_len_a", "max_len_b", "length_norm")  # what the contenders share


def build(dest: Path, lines: list[str], size: dict, vocab_size: int) -> Path:
    """A random MarianMTModel of `size` with a shared vocabulary of vocab_size in dest."""
    import io

    import sentencepiece as spm
    from transformers import MarianConfig, MarianMTModel

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=min(8000, vocab_size // 2), minloglevel=2,
                                   hard_vocab_limit=False, character_coverage=0.9995)
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    tokens = ["</s>", "<unk>"] + [p for p in pieces if p not in ("<unk>", "<s>", "</s>")]
    tokens += [f"<filler{i}>" for i in range(vocab_size - 1 - len(tokens))] + ["<pad>"]
    dest.mkdir(parents=True)
    for name in ("source.spm", "target.spm"):
        (dest / name).write_bytes(model.getvalue())
    (dest / "vocab.json").write_text(json.dumps({t: i for i, t in enumerate(tokens)}))
    (dest / "tokenizer_config.json").write_text(json.dumps({"source_lang": "de",
                                                            "target_lang": "en"}))
    pad_id = len(tokens) - 1
    config = MarianConfig(
        vocab_size=len(tokens), decoder_vocab_size=len(tokens), d_model=size["d_model"],
        encoder_layers=size["layers"], decoder_layers=size["layers"],
        encoder_attention_heads=size["heads"], decoder_attention_heads=size["heads"],
        encoder_ffn_dim=size["ffn"], decoder_ffn_dim=size["ffn"], activation_function="swish",
        scale_embedding=True, max_position_embeddings=512, pad_token_id=pad_id,
        decoder_start_token_id=pad_id, eos_token_id=0, forced_eos_token_id=0)
    torch.manual_seed(0)
    MarianMTModel(config).save_pretrained(dest)
    return dest


def hf_batches(run, lines: list[str], batch: int) -> list[tuple[list[int], torch.Tensor]]:
    """transformers' inputs: (line numbers, Marian ids) per batch of lines in length order."""
    from mt.hf.export import orders

    src_order = orders(run.files, True)[0]
    ids = [run.src_vocab.encode(t) for t in run.src_tok.tokenize_many(lines)]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    return [(order[i:i + batch], src_order[pad([ids[j] for j in order[i:i + batch]])])
            for i in range(0, len(order), batch)]


def hf_translate(model, run, batches, limit: int, beam: int) -> list[str]:
    """transformers' outputs for the batches, detokenized by mt (not timed separately)."""
    from mt.hf.export import orders

    _, tgt_order, _ = orders(run.files, True)
    back = torch.empty_like(tgt_order)
    back[tgt_order] = torch.arange(len(tgt_order))
    pad_id = int(tgt_order[PAD])
    out: dict[int, str] = {}
    with torch.no_grad():
        for rows, ids in batches:
            rule = {} if beam == 1 else dict(length_penalty=1.0, early_stopping="never")
            got = model.generate(input_ids=ids, attention_mask=ids != pad_id, num_beams=beam,
                                 do_sample=False, max_new_tokens=limit + 1,
                                 bad_words_ids=[[pad_id]], **rule)
            for row, seq in zip(rows, got[:, 1:].tolist()):
                toks = run.tgt_vocab.decode([int(back[t]) for t in seq])
                out[row] = run.tgt_tok.detokenize(toks)
    return [out[i] for i in range(len(out))]


def main() -> None:
    p = parser(__doc__, rounds=2, smoke="a tiny model (d_model 32, 2+2 layers) of a 300-token "
               "vocabulary, 16 toy sentences, beam 2, 1 round")
    p.add_argument("--src", type=Path, default=NEWS)
    p.add_argument("--limit", type=int, default=1000)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--beam", type=int, default=4)
    p.add_argument("--length", type=int, default=32, help="output tokens of every sentence")
    p.add_argument("--batch", type=int, default=32, help="transformers' lines per batch")
    p.add_argument("--vocab", type=int, default=58101)
    p.add_argument("--dtype", default="float32", help="mt's decode.dtype")
    p.add_argument("--ct2", default="float32", help="CTranslate2's quantization: float32, int8")
    args = parse(p, {"src": TOY / "toy.test.en", "limit": 16, "threads": "1", "beam": 2,
                     "rounds": 1, "vocab": 300, "length": 8})
    opener = gzip.open if str(args.src).endswith(".gz") else open
    with opener(args.src, "rt", encoding="utf-8") as f:
        lines = f.read().splitlines()[: args.limit]
    size = SMOKE if args.smoke else OPUS
    from transformers import MarianMTModel

    with tempfile.TemporaryDirectory(prefix="bench-hf-") as tmp:
        tmp = Path(tmp)
        directory = build(tmp / "marian", lines, size, args.vocab)
        weights = (directory / "model.safetensors").stat().st_size
        seconds, peak = watched([sys.executable, "-m", "mt", "import", "hf", str(directory),
                                 "--out", str(tmp / "run")], "mt import hf")
        print(f"import: {weights / 2**20:.0f} MiB model.safetensors in {seconds:.1f} s, peak "
              f"{peak / 2**20:.0f} MiB resident ({peak / weights:.2f}x the file)", flush=True)
        run = load_run(tmp / "run")
        base = Translator.load(tmp / "run")  # as mt translate decodes: its own run, in place
        hf = MarianMTModel.from_pretrained(directory).eval()
        from mt.ct2.export import write_model
        from mt.ct2.search import CTranslate2Engine
        (tmp / "ct2").mkdir()
        write_model(run, tmp / "ct2", None if args.ct2 == "float32" else args.ct2)
        print(f"mt in {args.dtype}, CTranslate2 in {args.ct2}; {cpu_model()}")
        print(f"model: {sum(p.numel() for p in run.model.parameters()) / 1e6:.1f}M parameters, "
              f"vocabulary {len(run.tgt_vocab):,}; {len(lines)} sentences from {args.src}; "
              f"{args.length} output tokens each; fastest of {args.rounds} rounds", flush=True)
        batches = hf_batches(run, lines, args.batch)
        rows = []
        for n in [int(t) for t in args.threads.split(",")]:
            torch.set_num_threads(n)
            engine = CTranslate2Engine(tmp / "ct2", run.src_vocab, run.tgt_vocab,
                                       run.cfg.model.max_positions, "cpu", n)
            outputs: dict[str, list[str]] = {}
            contenders = {}
            for beam in (1, args.beam):
                cfg = override(run.cfg, [f"decode.beam={beam}", "decode.max_len_a=0",
                                         f"decode.max_len_b={args.length}",
                                         "decode.length_norm=average"], "bench").decode
                kind = "greedy" if beam == 1 else f"beam {beam}"
                mine = base.with_options(**{k: getattr(cfg, k) for k in SEARCH})
                if args.dtype != "float32":  # its own engine: a model in that dtype
                    mine = Translator(run, dataclasses.replace(mine.decoding, dtype=args.dtype))
                ct2 = Translator(run, cfg, engine=engine)

                def keep(name, fn, outputs=outputs, n=n):
                    def call():
                        outputs[name] = fn()
                    measure = timer(call)

                    def run(r: int) -> float:
                        seconds = measure(r)
                        print(f"  {n} thread(s), round {r + 1}: {name} {seconds:.1f} s",
                              flush=True)
                        return seconds
                    return run
                contenders[f"mt {kind}"] = keep(f"mt {kind}", lambda t=mine: t.translate(lines))
                contenders[f"transformers {kind}"] = keep(
                    f"transformers {kind}",
                    lambda b=beam: hf_translate(hf, run, batches, args.length, b))
                contenders[f"CTranslate2 {kind}"] = keep(f"CTranslate2 {kind}",
                                                          lambda t=ct2: t.translate(lines))
            best = alternate(contenders, args.rounds)
            for beam in (1, args.beam):
                kind = "greedy" if beam == 1 else f"beam {beam}"
                mt_s, hf_s, ct_s = (best[f"{e} {kind}"] for e in ("mt", "transformers",
                                                                  "CTranslate2"))
                mine, theirs = outputs[f"mt {kind}"], outputs[f"transformers {kind}"]
                same = sum(a == b for a, b in zip(mine, theirs)) / len(lines)
                bleu = sacrebleu.corpus_bleu(mine, [theirs]).score
                rows.append([n, kind, f"{len(lines) / mt_s:.1f}", f"{len(lines) / hf_s:.1f}",
                             f"{len(lines) / ct_s:.1f}", f"{hf_s / mt_s:.2f}x",
                             f"{ct_s / mt_s:.2f}x", f"{same:.1%}", f"{bleu:.1f}"])
                print(rows[-1], flush=True)
        print(markdown(["threads", "search", f"mt {args.dtype} sent/s", "transformers sent/s",
                        f"CTranslate2 {args.ct2} sent/s", "mt / transformers", "mt / CTranslate2",
                        "same as transformers", "BLEU vs transformers"], rows))


if __name__ == "__main__":
    main()
