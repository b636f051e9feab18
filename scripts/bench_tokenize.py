"""Does text come back? Round trip detokenize(tokenize(ref)) on Multi30k, before and after.

    python scripts/bench_tokenize.py [--data ../shared/data/multi30k] [--no-spm] [--repeat 3]

For each language (de, en) and split (train, val, test_2016_flickr), compares the untouched
reference lines with detokenize(tokenize(line)) under three schemes:
  before  spaCy tokens joined again by Moses rules (mt before reversible tokenization;
          needs sacremoses: pip install -e '.[moses]')
  after   spaCy tokens with joiner marks (data.tokenizer: spacy, the default)
  spm     SentencePiece, one joint 8k unigram model trained on the training split
          (data.tokenizer: sentencepiece), as configs/multi30k_de_en_spm.yaml trains it
It prints a Markdown table: lines changed, and sacreBLEU of the round-tripped lines against
the references. Then the time to tokenize and detokenize test_2016_flickr, as a ratio to
`before`: the schemes take turns for --repeat rounds and each keeps its fastest.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from sacrebleu.metrics import BLEU

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mt.config import DataConfig  # noqa: E402
from mt.data import split_path  # noqa: E402
from mt.textio import read_lines  # noqa: E402
from mt.tokenizers import build_tokenizers  # noqa: E402
from mt.tokenizers.spacy_words import SpacyTokenizer  # noqa: E402

SPLITS = ("train", "val", "test_2016_flickr")


class MosesBefore:
    """mt's tokenization before this change: spaCy tokens, Moses detokenization."""

    def __init__(self, lang: str):
        import spacy
        from sacremoses import MosesDetokenizer

        self._nlp, self._detok = spacy.blank(lang), MosesDetokenizer(lang=lang)

    def tokenize_many(self, lines):
        return [[t.text for t in doc if not t.is_space] for doc in self._nlp.tokenizer.pipe(lines)]

    def detokenize(self, tokens):
        return self._detok.detokenize(tokens)


def round_trip(tok, lines: list[str]) -> list[str]:
    return [tok.detokenize(tokens) for tokens in tok.tokenize_many(lines)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data" / "multi30k")
    ap.add_argument("--no-spm", action="store_true", help="Leave SentencePiece out.")
    ap.add_argument("--vocab-size", type=int, default=8000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    schemes = {lang: {"before": MosesBefore(lang), "after": SpacyTokenizer(lang)}
               for lang in ("de", "en")}
    if not args.no_spm:
        cfg = DataConfig(src_lang="de", tgt_lang="en", tokenizer="sentencepiece",
                         vocab_size=args.vocab_size, shared_vocab=True)
        with tempfile.TemporaryDirectory() as d:
            de, en = build_tokenizers(cfg, Path(d), split_path(args.data, "train", "de"),
                                      split_path(args.data, "train", "en"))
        schemes["de"]["spm"], schemes["en"]["spm"] = de, en
    names = list(schemes["de"])

    print("| lang | split | lines | irregular whitespace | "
          + " | ".join(f"{n}: changed | {n}: self-BLEU" for n in names) + " |")
    print("|" + "---|" * (4 + 2 * len(names)))
    for lang in ("de", "en"):
        for split in SPLITS:
            refs = read_lines(split_path(args.data, split, lang))
            irregular = sum(" ".join(r.split()) != r for r in refs)
            cells = []
            for name in names:
                back = round_trip(schemes[lang][name], refs)
                changed = sum(b != r for b, r in zip(back, refs))
                bleu = BLEU().corpus_score(back, [refs]).score
                cells += [f"{changed}", f"{bleu:.2f}"]
            print(f"| {lang} | {split} | {len(refs)} | {irregular} | " + " | ".join(cells) + " |")

    print("\ntime to tokenize + detokenize test_2016_flickr, relative to before "
          f"(fastest of {args.repeat} alternating rounds):")
    for lang in ("de", "en"):
        refs = read_lines(split_path(args.data, "test_2016_flickr", lang))
        best = dict.fromkeys(names, float("inf"))
        for _ in range(args.repeat):
            for name in names:
                start = time.perf_counter()
                round_trip(schemes[lang][name], refs)
                best[name] = min(best[name], time.perf_counter() - start)
        print(f"  {lang}: " + ", ".join(f"{n} {best[n] / best['before']:.2f}x "
                                        f"({best[n] * 1000:.0f} ms)" for n in names))


if __name__ == "__main__":
    main()
