"""Reading speed of the corpus formats: the same pairs as plain text, TSV, JSON lines and
Parquet, read alone and cached (the token cache built from them), side by side.

    python -m benchmarks.bench_formats [--pairs 1000000] [--rounds 2] [--workers 0] [--dir /tmp]
    python -m benchmarks.bench_formats --smoke     # the toy corpus, 3,000 pairs, 1 round

Writes --pairs pairs (the training split of --data, Multi30k by default, repeated in a shuffled
order) in each format: plain (two files), tsv, jsonl (Hugging Face's {"translation": {...}}
records) and parquet (a column per language, pyarrow's defaults), then times for each, the
contenders taking turns:
  read   every pair through the format's reader (CorpusSource.pairs), nothing done with them;
  cache  the corpus's token cache entry built as `mt prepare` builds it (open_cached_corpora,
         --workers tokenizer processes, 0: one per core), into an empty cache each round, with
         one SentencePiece model (--vocab pieces) trained beforehand on the --data split and
         given to every build, so that only the reading differs.
A second copy of the plain corpus ("plain, again") is the control: its ratio is how far apart
two builds of the same text come out. Each keeps its fastest round (wall and CPU seconds each:
CPU, of this process and its tokenizer processes, is less blurred by a shared machine's other
jobs), the order rotating from round to round. The ratios are format / plain, below 1 faster
than plain. Everything is written under
a temporary directory in --dir, deleted at the end.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from benchmarks.harness import MULTI30K, ROOT, SMOKE_DATA, alternate, markdown, parse, parser
from mt.config import DataConfig, load_config
from mt.data import corpus_sources
from mt.textio import read_lines, split_path
from mt.token_cache import open_cached_corpora
from mt.token_cache.tokenizer_entries import tokenizer_dir
from mt.tokenizers import tokenizer_files

# "plain, again": a second copy of the plain corpus, the control: how far apart two builds of
# the same text come out is the spread the other ratios are read against.
FORMATS = ("plain", "tsv", "jsonl", "parquet", "plain, again")


def training_pairs(d: DataConfig, data: str, n: int) -> list[tuple[str, str]]:
    """n pairs: the training split's, repeated in a shuffled order; a tab becomes a space, so
    that TSV holds the same pairs (Multi30k train has a few)."""
    sides = [[line.replace("\t", " ") for line in read_lines(split_path(data, d.train, lang))]
             for lang in (d.src_lang, d.tgt_lang)]
    pairs = list(zip(*sides))
    order = [i % len(pairs) for i in range(n)]
    random.Random(0).shuffle(order)
    return [pairs[i] for i in order]


def write(fmt: str, where: Path, pairs: list[tuple[str, str]], langs: tuple[str, str]) -> dict:
    """The pairs as a corpus of format fmt under where; its data.train entry."""
    if fmt == "plain":
        for k, lang in enumerate(langs):
            with open(where / f"corpus.{lang}", "w", encoding="utf-8") as f:
                f.writelines(p[k] + "\n" for p in pairs)
        return {"prefix": "corpus", "dir": str(where)}
    path = where / f"corpus.{fmt}"
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.table({lang: [p[k] for p in pairs] for k, lang in enumerate(langs)}),
                       path)
    else:
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(("\t".join(p) if fmt == "tsv" else json.dumps(
                {"translation": dict(zip(langs, p))}, ensure_ascii=False)) + "\n"
                for p in pairs)
    return {"format": fmt, "path": str(path), "name": "corpus"}


def cache(d: DataConfig, tok_files: dict[str, bytes], workers: int, root: Path
          ) -> Callable[[int], tuple[float, float]]:
    """A contender: wall and CPU seconds (this process and its tokenizer processes) to build
    d's token cache into an empty cache (removed after)."""
    def run(r: int) -> tuple[float, float]:
        os.environ["MT_CACHE_DIR"] = str(root / f"cache.{r}")
        seconds = timed(lambda: open_cached_corpora(d, tok_files, workers))
        shutil.rmtree(root / f"cache.{r}")
        return seconds
    return run


def read(d: DataConfig) -> Callable[[int], tuple[float, float]]:
    """A contender: wall and CPU seconds to read every pair of d's corpus."""
    (source,) = corpus_sources(d)

    def drain() -> None:
        for _ in source.pairs():
            pass
    return lambda r: timed(drain)


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of fn(), the CPU's of this process and the children it waited for
    (CPU time: what the reading costs, less blurred by the machine's other jobs)."""
    def cpu() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    wall, used = time.perf_counter(), cpu()
    fn()
    return time.perf_counter() - wall, cpu() - used


def fastest(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return min(a[0], b[0]), min(a[1], b[1])


def main() -> None:
    ap = parser(__doc__, rounds=2, smoke="the toy corpus, 3,000 pairs, 1 round, 1 worker")
    ap.add_argument("--pairs", type=int, default=1_000_000, help="pairs (default 1,000,000)")
    ap.add_argument("--config", default=str(ROOT / "configs" / "multi30k_de_en.yaml"))
    ap.add_argument("--data", default=str(MULTI30K))
    ap.add_argument("--vocab", type=int, default=8000, help="SentencePiece pieces (8000)")
    ap.add_argument("--workers", type=int, default=0, help="tokenizer processes (0: all cores)")
    ap.add_argument("--dir", default=None, help="where the files are written (default: TMP)")
    args = parse(ap, {**SMOKE_DATA, "pairs": 3000, "rounds": 1, "vocab": 330, "workers": 1})

    base = load_config(args.config, [f"data.dir={args.data}"]).data
    langs = (base.src_lang, base.tgt_lang)
    pairs = training_pairs(base, args.data, args.pairs)
    with tempfile.TemporaryDirectory(dir=args.dir, prefix="bench_formats.") as tmp:
        root = Path(tmp)
        configs, sizes, dirs = {}, {}, {}
        for fmt in FORMATS:
            where = dirs[fmt] = root / fmt.replace(", ", "_")
            where.mkdir()
            entry = write(fmt.split(",")[0], where, pairs, langs)
            sizes[fmt] = sum(f.stat().st_size for f in where.iterdir())
            configs[fmt] = load_config(args.config, [
                f"data.dir={args.data}", f"data.train={json.dumps([entry])}",
                f"data.tokenizer={{kind: sentencepiece, vocab_size: {args.vocab}}}",
                "data.shared_vocab=true"]).data
        del pairs
        os.environ["MT_CACHE_DIR"] = str(root / "spm")  # one model, from the --data split
        d = replace(configs["plain"], train=base.train)
        spm = tokenizer_dir(d, corpus_sources(d))
        tok_files = {name: (spm / name).read_bytes() for name in tokenizer_files(d)}
        contenders = {}
        for fmt in FORMATS:
            (source,) = corpus_sources(configs[fmt])
            next(iter(source.pairs()))  # untimed: the reader's imports (pyarrow's, ...)
            contenders[f"read {fmt}"] = read(configs[fmt])
            contenders[f"cache {fmt}"] = cache(configs[fmt], tok_files, args.workers,
                                               dirs[fmt])
        best = alternate(contenders, args.rounds, keep=fastest, rotate=True)
    report(best, sizes, args)


def report(best: dict[str, tuple[float, float]], sizes: dict[str, int], args) -> None:
    n = args.pairs
    print(f"{n:,} pairs; fastest of {args.rounds} round(s) each, rotating the order; cache: "
          f"SentencePiece {args.vocab}, {args.workers or len(os.sched_getaffinity(0))} "
          "worker(s)\n")
    rows = []
    plain_read, plain_cache = best["read plain"], best["cache plain"]
    for fmt in FORMATS:
        (r, _), (c, cpu) = best[f"read {fmt}"], best[f"cache {fmt}"]
        rows.append([fmt, f"{sizes[fmt] / 2**20:,.1f}", f"{r:.2f}", f"{c:.2f}", f"{cpu:.2f}",
                     f"{n / c:,.0f}", f"{r / plain_read[0]:.2f}", f"{c / plain_cache[0]:.2f}",
                     f"{cpu / plain_cache[1]:.2f}"])
    print(markdown(["format", "MiB", "read, s", "cache, s", "cache CPU, s", "cache pairs/s",
                    "read / plain", "cache / plain", "cache CPU / plain"], rows))
    print("\nratio cache time format / plain (wall; CPU): " + ", ".join(
        f"{fmt} {best[f'cache {fmt}'][0] / plain_cache[0]:.2f}; "
        f"{best[f'cache {fmt}'][1] / plain_cache[1]:.2f}" for fmt in FORMATS[1:]))


if __name__ == "__main__":
    main()
