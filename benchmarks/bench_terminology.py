"""Terminology, measured: a glossary built from Multi30k's training data, then the term use rate,
BLEU, chrF and speed of beam 5 without it, with hard constraints, with annotated input (a run
trained with data.terminology) and both; and a wrong but plausible glossary, with examples.

    python -m benchmarks.bench_terminology --build [--data DIR] [--glossaries DIR]
    python -m benchmarks.bench_terminology --lexicon ALIGNED [--data DIR] [--glossaries DIR]
    python -m benchmarks.bench_terminology RUN [--terms-run RUN] [--glossaries DIR] [--beam 5]
        [--threads 1] [--rounds 3] [--split test_2016_flickr]
    python -m benchmarks.bench_terminology RUN --smoke    # the toy corpus, seconds

The glossary (--build, into --glossaries; the measurement builds it first when missing), as
Dinu et al. (ACL 2019) built theirs from dictionaries, from the training pairs only:
  1. every pair tokenized into spaCy words (mt's own tokenizer); a word is a token of letters;
  2. for each source word s and target word t, the Dice coefficient over pairs,
     2 c(s, t) / (c(s) + c(t)), c counting the pairs that hold the word(s);
  3. candidates: pairs seen together in at least MIN_PAIRS pairs, each the other's best partner
     by Dice (mutual best), with Dice at least a threshold;
  4. the threshold: the lowest of THRESHOLDS whose glossary, on the validation set, has its
     target term in the reference for at least PRECISION of the (line, entry) pairs it is
     active for (its active entries' precision). That glossary is train.tsv (data.terminology's
     glossary);
  5. the test glossary (test.tsv; val.tsv the same on the validation set): the entries of
     train.tsv whose source term occurs in some test source line and whose target term occurs
     in the reference of every line where the source term occurs, so that each active entry's
     target term is in that line's reference (Dinu et al. kept a line's entries whose source
     term is in the line and target term in its reference; one glossary for the whole set,
     as `mt translate --glossary` takes it, needs the entry to hold in each line).

The training lexicon (--lexicon, lexicon.tsv; data.terminology's glossary in the recipes): the
training pairs' own aligned words, so that an annotation says which of a word's translations
the reference uses (*Mann -> guy* where it says guy), which the model cannot infer and learns to
copy. ALIGNED is the training targets forced as prefixes with alignments, e.g.
`mt translate RUN -i train.de --prefix train.en --align --beam 1`; each link between two words
(punctuation at their ends dropped, letters only) counts, and a pair is kept when linked in at
least MIN_PAIRS pairs, in at least 1% of its source word's links (rarer translations are what
the annotation teaches) and 10% of its target word's (not a function word linked to all); a source
word's targets, most linked first (annotation takes the first the pair's target holds).

Active entries and occurrences are found as mt does (mt.glossary: whole tokens, longest first).

The measurement: each system translates the set with beam --beam at --threads threads, the
systems taking turns for --rounds rounds, each keeping its fastest (harness.alternate); term
use rate (the share of active test-glossary entries whose target term the output holds as whole
tokens, as `mt eval --glossary` counts it), cased BLEU and chrF; then the time of hard
constraints against no glossary (target at most 1.5x) and the wrong glossary's rows and five
examples. Test sets are scored once, after the choices above are made on validation.
"""

from __future__ import annotations

import collections
import re
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path

import torch

from benchmarks.harness import TOY, alternate, parse, parser, timer
from mt.checkpoint import Run
from mt.config import load_config
from mt.data import read_parallel
from mt.glossary import Glossary, Matcher, occurrences
from mt.metrics import score
from mt.textio import split_path
from mt.token_cache.tokenizer_entries import make_tokenizers
from mt.tokenizers import Tokenizer
from mt.translator import Translator

DATA = Path("data/multi30k")
GLOSSARIES = Path("data/multi30k/terms")
MIN_PAIRS = 5  # a candidate pair of words is seen together in at least this many pairs
THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.85, 0.9)  # Dice thresholds tried on val
# a lexicon pair's share of its source word's alignment links, and of its target word's, at least
LEXICON_SHARE = (0.01, 0.1)
PRECISION = 0.9  # the active entries' precision on the validation set the threshold must reach
# Wrong but plausible, per direction: a word, a near-synonym the references rarely use, and the
# word the model writes for it (what "both" looks for beside the term); half of the de->en
# terms are words the 30-minute recipe's word vocabulary lacks (pooch, lad, edifice, lass)
WRONG = {("de", "en"): (("Mann", "guy", "man"), ("Frau", "lady", "woman"),
                        ("Hund", "pooch", "dog"), ("Straße", "road", "street"),
                        ("Kinder", "kids", "children"), ("Junge", "lad", "boy"),
                        ("Gebäude", "edifice", "building"), ("Mädchen", "lass", "girl")),
         ("en", "de"): (("man", "Typ", "Mann"), ("woman", "Dame", "Frau"),
                        ("dog", "Welpe", "Hund"), ("street", "Gasse", "Straße"),
                        ("children", "Kids", "Kinder"), ("boy", "Kerl", "Junge"))}
WRONG_TOY = (("cats", "Hunde", "Katzen"), ("dogs", "Katzen", "Hunde"))


def words(lines: list[str], tok: Tokenizer) -> list[set[str]]:
    """Each line's words: its tokens made of letters only (no joiner marks, digits, signs)."""
    return [{t for t in toks if t.isalpha()} for toks in tok.tokenize_many(lines)]


def dice_candidates(src: list[set[str]], tgt: list[set[str]]) -> list[tuple[str, str, float]]:
    """(source word, target word, Dice) of the mutual best partners seen together in at least
    MIN_PAIRS pairs, highest Dice first."""
    cs, ct, both = collections.Counter(), collections.Counter(), collections.Counter()
    for s, t in zip(src, tgt, strict=True):
        cs.update(s)
        ct.update(t)
        both.update((a, b) for a in s for b in t)
    best_t: dict[str, tuple[float, str]] = {}
    best_s: dict[str, tuple[float, str]] = {}
    for (a, b), n in both.items():
        if n >= MIN_PAIRS:
            d = 2 * n / (cs[a] + ct[b])
            best_t[a] = max(best_t.get(a, (0.0, "")), (d, b))
            best_s[b] = max(best_s.get(b, (0.0, "")), (d, a))
    out = [(a, b, d) for a, (d, b) in best_t.items() if best_s[b][1] == a]
    return sorted(out, key=lambda x: (-x[2], x[0]))


def _word(w: str) -> str | None:
    """A whitespace word without the punctuation at its ends, if letters are what is left."""
    while w and unicodedata.category(w[0]).startswith("P"):
        w = w[1:]
    while w and unicodedata.category(w[-1]).startswith("P"):
        w = w[:-1]
    return w if w.isalpha() else None


def lexicon(src: list[str], ref: list[str], aligned: list[str]) -> Glossary:
    """The training lexicon (above) of pairs and their forced translations with alignments
    (`text<TAB>i-j ...` a line)."""
    links: collections.Counter = collections.Counter()
    for s, r, line in zip(src, ref, aligned, strict=True):
        sw, tw = s.split(), r.split()
        for link in line.rpartition("\t")[2].split():
            i, j = map(int, link.split("-"))
            if i < len(sw) and j < len(tw) and (a := _word(sw[i])) and (b := _word(tw[j])):
                links[a, b] += 1
    by_src, by_tgt = collections.Counter(), collections.Counter()
    for (a, b), n in links.items():
        by_src[a] += n
        by_tgt[b] += n
    kept = [(a, b) for (a, b), n in links.most_common() if n >= MIN_PAIRS
            and n >= LEXICON_SHARE[0] * by_src[a] and n >= LEXICON_SHARE[1] * by_tgt[b]]
    return Glossary(tuple(sorted(kept, key=lambda p: (p[0], -links[p]))))


def hits(glossary: Glossary, src: list[str], ref: list[str], src_tok: Tokenizer,
         tgt_tok: Tokenizer) -> tuple[list[list[int]], list[list[bool]]]:
    """Each line's active entries, and whether its reference holds each one's target term."""
    m = Matcher(glossary, src_tok, tgt_tok, _no_vocab())
    refs = tgt_tok.tokenize_many(ref)
    active = [m.active(toks) for toks in src_tok.tokenize_many(src)]
    held = [[bool(occurrences(r, m.target_tokens[e])) for e in a] for a, r in zip(active, refs)]
    return active, held


def _no_vocab():
    """A vocabulary for a Matcher used only for its tokens (its ids are not looked at)."""
    from mt.vocab import SPECIALS, Vocab

    return Vocab(list(SPECIALS))


def held_in_every_line(glossary: Glossary, src, ref, src_tok, tgt_tok) -> Glossary:
    """The entries active in some line whose target term the reference holds in each line."""
    active, held = hits(glossary, src, ref, src_tok, tgt_tok)
    seen, failed = set(), set()
    for a, h in zip(active, held):
        for e, ok in zip(a, h):
            (seen if ok else failed).add(e)
    return Glossary(tuple(g for e, g in enumerate(glossary.entries) if e in seen - failed))


def build(data: Path, out: Path, splits: tuple[str, str, str], langs: tuple[str, str],
          ) -> dict[str, Glossary]:
    """The glossaries train.tsv, val.tsv and test.tsv (above) in out; prints what it chose."""
    cfg = load_config(None, [f"data.src_lang={langs[0]}", f"data.tgt_lang={langs[1]}"])
    src_tok, tgt_tok = make_tokenizers(cfg.data, Path("."))
    train, val, test = ((*read_parallel(split_path(data, s, langs[0]), split_path(data, s,
                                                                                 langs[1])),)
                        for s in splits)
    cands = dice_candidates(words(train[0], src_tok), words(train[1], tgt_tok))
    print(f"{len(train[0])} training pairs: {len(cands)} mutual-best word pairs seen together "
          f"in {MIN_PAIRS}+ pairs")
    print("| Dice at least | entries | active on val | precision on val |\n|---|---|---|---|")
    chosen = None
    for th in THRESHOLDS:
        g = Glossary(tuple((a, b) for a, b, d in cands if d >= th))
        _, held = hits(g, *val, src_tok, tgt_tok)
        n = sum(len(h) for h in held)
        p = sum(map(sum, held)) / max(n, 1)
        print(f"| {th} | {len(g)} | {n} | {p:.1%} |")
        if chosen is None and p >= PRECISION:
            chosen = th, g
    if chosen is None:
        raise SystemExit(f"no threshold reaches {PRECISION:.0%} precision on validation")
    th, g = chosen
    out.mkdir(parents=True, exist_ok=True)
    glossaries = {"train": g, "val": held_in_every_line(g, *val, src_tok, tgt_tok),
                  "test": held_in_every_line(g, *test, src_tok, tgt_tok)}
    for name, gl in glossaries.items():
        (out / f"{name}.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in gl.entries),
                                         encoding="utf-8")
    print(f"chosen: Dice >= {th} (the lowest with {PRECISION:.0%} precision on val); "
          + ", ".join(f"{out / n}.tsv {len(gl)} entries" for n, gl in glossaries.items()))
    return glossaries


def term_use(glossary: Glossary, src: list[str], out: list[str], run: Run) -> tuple[float, int]:
    """The share (%) of active entries whose target term the output holds as whole tokens, and
    the count of active entries (as `mt eval --glossary` counts them)."""
    active, held = hits(glossary, src, out, run.src_tok, run.tgt_tok)
    n = sum(len(h) for h in held)
    return 100.0 * sum(map(sum, held)) / max(n, 1), n


def unwritable(glossary: Glossary, tr: Translator) -> set[str]:
    """The glossary's target terms with a word the run's target vocabulary lacks."""
    return set(Matcher(glossary, tr.src_tok, tr.tgt_tok, tr.run.tgt_vocab).unwritable)


def both(entries, src: list[str], out: list[str]) -> str:
    """Of the (line, entry) pairs where a wrong entry's source word occurs once in the line,
    how many outputs hold its term and also the model's own word for it (case aside), as
    "n of N (x%)"."""
    src_words = [re.findall(r"\w+", line.casefold()) for line in src]  # words, any run
    out_words = [re.findall(r"\w+", line.casefold()) for line in out]
    pairs = doubled = 0
    for a, term, own in entries:
        a, term, own = a.casefold(), term.casefold().split(), own.casefold()
        for s, o in zip(src_words, out_words, strict=True):
            if s.count(a) == 1:
                pairs += 1
                doubled += bool(occurrences(o, term)) and own in o
    return f"{doubled} of {pairs} ({100 * doubled / max(1, pairs):.1f}%)"


def main() -> None:
    p = parser(__doc__, rounds=3, smoke="the toy corpus (en -> de), its first 40 test lines, "
               "beam 2, 1 round")
    p.add_argument("run", type=Path, nargs="?", help="the run without terminology (best.pt)")
    p.add_argument("--terms-run", type=Path, default=None,
                   help="a run trained with data.terminology: the annotated rows")
    p.add_argument("--build", action="store_true", help="(re)build the glossaries, then stop "
                   "unless RUN is given")
    p.add_argument("--lexicon", type=Path, default=None, metavar="ALIGNED",
                   help="build the training lexicon (lexicon.tsv) from the training pairs and "
                   "these forced alignments, then stop unless RUN is given")
    p.add_argument("--data", type=Path, default=DATA)
    p.add_argument("--glossaries", type=Path, default=GLOSSARIES)
    p.add_argument("--splits", default="train,val,test_2016_flickr",
                   help="training, validation and test split names")
    p.add_argument("--langs", default="de,en")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--limit", type=int, default=0, help="the first N test lines (0: all)")
    args = parse(p, {"data": TOY, "splits": "toy.train,toy.val,toy.test", "langs": "en,de",
                     "beam": 2, "limit": 40, "rounds": 1})
    splits, langs = tuple(args.splits.split(",")), tuple(args.langs.split(","))
    glossaries = args.glossaries if not args.smoke else Path(args.glossaries) / "smoke"
    if args.build or not (glossaries / "test.tsv").is_file():
        build(args.data, glossaries, splits, langs)
    if args.lexicon:
        train = read_parallel(*(split_path(args.data, splits[0], lang) for lang in langs))
        lex = lexicon(*train, args.lexicon.read_text(encoding="utf-8").splitlines())
        (glossaries / "lexicon.tsv").write_text("".join(f"{a}\t{b}\n" for a, b in lex.entries),
                                                encoding="utf-8")
        print(f"{glossaries / 'lexicon.tsv'}: {len(lex)} pairs, "
              f"{len({a for a, _ in lex.entries})} source words")
    if args.run is None:
        return
    torch.set_num_threads(args.threads)
    test = Glossary.load(glossaries / "test.tsv")
    wrong_terms = WRONG_TOY if args.smoke else WRONG.get(langs)  # no sanity rows without one
    wrong = Glossary.of([(a, b) for a, b, _ in wrong_terms]) if wrong_terms else None
    src, ref = read_parallel(split_path(args.data, splits[2], langs[0]),
                             split_path(args.data, splits[2], langs[1]))
    if args.limit:
        src, ref = src[:args.limit], ref[:args.limit]
    beam = {"beam": args.beam, "nbest": 1}
    base = Translator.load(args.run, **beam)
    systems = {"no glossary": (base, None, "constrain"),
               "hard constraints": (base, test, "constrain")}
    terms_run = args.terms_run
    if terms_run is not None:
        annotated = Translator.load(terms_run, **beam)
        systems.update({"trained with data.terminology, no glossary": (annotated, None,
                                                                        "constrain"),
                        "trained with data.terminology, annotated input": (annotated, test,
                                                                            "annotate"),
                        "both": (annotated, test, "both")})
    sanity = {} if wrong is None else {
        "wrong glossary, hard constraints": (base, wrong, "constrain"),
        "wrong glossary, hard constraints, own words not blocked": (
            base.with_options(glossary_replace=False), wrong, "constrain")}
    if terms_run is not None and wrong is not None:
        sanity["wrong glossary, annotated input"] = (annotated, wrong, "annotate")
    outputs: dict[str, list[str]] = {}

    def contender(name: str, system: tuple) -> Callable[[int], float]:
        tr, glossary, mode = system

        def run() -> None:
            outputs[name] = tr.translate(src, glossary=glossary, glossary_mode=mode)
        return timer(run)

    every = {**systems, **sanity}
    for tr, glossary, mode in every.values():  # warm-up, untimed
        tr.translate(src[:8], glossary=glossary, glossary_mode=mode)
    best = alternate({n: contender(n, s) for n, s in every.items()}, args.rounds)
    print(f"\n{args.run}" + (f", terms run {terms_run}" if terms_run else "")
          + f": {len(src)} lines of {splits[2]}, beam {args.beam}, {args.threads} thread(s), "
          f"fastest of {args.rounds} rounds; test glossary {len(test)} entries")
    print("| system | term use rate | active entries | of which the vocabulary lacks a word | "
          "their term use | lines with the term and the model's own word | BLEU | chrF | "
          "sentences/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, (tr, _, _) in every.items():
        g = wrong if name in sanity else test
        use, n = term_use(g, src, outputs[name], tr.run)
        lacking = Glossary.of([e for e in g.entries if e[1] in unwritable(g, tr)])
        use_unk, n_unk = term_use(lacking, src, outputs[name], tr.run) if lacking else (100, 0)
        doubled = both(wrong_terms, src, outputs[name]) if name in sanity else ""
        s = score(outputs[name], ref, langs[1])
        print(f"| {name} | {use:.2f}% | {n} | {n_unk} | {use_unk:.2f}% | {doubled} | "
              f"{s['bleu']:.2f} | {s['chrf']:.2f} | {len(src) / best[name]:.1f} |")
    ratio = best["hard constraints"] / best["no glossary"]
    print(f"\nhard constraints / no glossary time, beam {args.beam}, {args.threads} thread(s): "
          f"{ratio:.2f}x (target <= 1.5x)")
    if wrong is None:
        return
    matcher = Matcher(wrong, base.src_tok, base.tgt_tok, base.run.tgt_vocab)
    shown = [i for i, toks in enumerate(base.src_tok.tokenize_many(src))
             if matcher.active(toks)][:5]
    print(f"\nwrong glossary ({'; '.join(f'{a} -> {b}' for a, b in wrong.entries)}): five "
          "lines where it is active")
    for i in shown:
        print(f"- src: {src[i]}\n  ref: {ref[i]}\n  no glossary: {outputs['no glossary'][i]}")
        for n in sanity:
            print(f"  {n}: {outputs[n][i]}")


if __name__ == "__main__":
    sys.exit(main())
