"""Does text come back? Round trip detokenize(tokenize(ref)) on Multi30k, before and after.

    python -m benchmarks.bench_tokenize [--data ../shared/data/multi30k] [--no-spm] [--repeat 3]
    python -m benchmarks.bench_tokenize --smoke     # the toy corpus, 1 round

For each language (de, en) and split (--splits: train, val, test_2016_flickr), compares the
untouched reference lines with detokenize(tokenize(line)) under three schemes:
  before  spaCy tokens joined again by Moses rules (mt before reversible tokenization;
          needs sacremoses: pip install -e '.[moses]')
  after   spaCy tokens with joiner marks (data.tokenizer: spacy, the default)
  spm     SentencePiece, one joint 8k unigram model trained on the training split
          (data.tokenizer: sentencepiece), as configs/multi30k_de_en_spm.yaml trains it
It prints a Markdown table: lines changed, and sacreBLEU of the round-tripped lines against
the references. Then the time to tokenize and detokenize the last split (test_2016_flickr),
as a ratio to `before`: the schemes take turns for --repeat rounds and each keeps its fastest.
"""

from __future__ import annotations

import tempfile
from functools import partial
from pathlib import Path

from sacrebleu.metrics import BLEU

from benchmarks.harness import MULTI30K, TOY, alternate, markdown, parse, parser, timer
from mt.config import DataConfig
from mt.textio import read_lines, split_path
from mt.tokenizers import build_tokenizers
from mt.tokenizers.spacy_words import SpacyTokenizer
from mt.tokenizers.subword import SentencePieceSettings

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
    ap = parser(__doc__, rounds=3, smoke="the toy corpus, a 330-piece model, 1 round")
    ap.add_argument("--data", type=Path, default=MULTI30K)
    ap.add_argument("--splits", nargs="+", default=list(SPLITS),
                    help="file stems of the splits; the last one is timed")
    ap.add_argument("--no-spm", action="store_true", help="Leave SentencePiece out.")
    ap.add_argument("--vocab-size", type=int, default=8000)
    args = parse(ap, {"data": TOY, "splits": ["toy.train", "toy.val", "toy.test"],
                      "vocab_size": 330, "rounds": 1})

    schemes = {lang: {"before": MosesBefore(lang), "after": SpacyTokenizer(lang)}
               for lang in ("de", "en")}
    if not args.no_spm:
        cfg = DataConfig(src_lang="de", tgt_lang="en", shared_vocab=True,
                         tokenizer=SentencePieceSettings(vocab_size=args.vocab_size))
        train = args.splits[0]
        with tempfile.TemporaryDirectory() as d:
            de, en = build_tokenizers(cfg, Path(d), split_path(args.data, train, "de"),
                                      split_path(args.data, train, "en"))
        schemes["de"]["spm"], schemes["en"]["spm"] = de, en
    names = list(schemes["de"])

    rows = []
    for lang in ("de", "en"):
        for split in args.splits:
            refs = read_lines(split_path(args.data, split, lang))
            irregular = sum(" ".join(r.split()) != r for r in refs)
            cells = []
            for name in names:
                back = round_trip(schemes[lang][name], refs)
                changed = sum(b != r for b, r in zip(back, refs))
                bleu = BLEU().corpus_score(back, [refs]).score
                cells += [f"{changed}", f"{bleu:.2f}"]
            rows.append([lang, split, len(refs), irregular, *cells])
    print(markdown(["lang", "split", "lines", "irregular whitespace",
                    *(f"{n}: {what}" for n in names for what in ("changed", "self-BLEU"))], rows))

    timed = args.splits[-1]
    print(f"\ntime to tokenize + detokenize {timed}, relative to before "
          f"(fastest of {args.rounds} alternating rounds):")
    for lang in ("de", "en"):
        refs = read_lines(split_path(args.data, timed, lang))
        best = alternate({n: timer(partial(round_trip, schemes[lang][n], refs)) for n in names},
                         args.rounds)
        print(f"  {lang}: " + ", ".join(f"{n} {best[n] / best['before']:.2f}x "
                                        f"({best[n] * 1000:.0f} ms)" for n in names))


if __name__ == "__main__":
    main()
