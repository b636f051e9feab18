"""The document path (issue 43) on a trained model: paragraphs split into sentences against one
sentence a line, inline HTML tags put back by the word alignment, numbers and URLs kept from the
model, and what the path costs over plain translation.

    python -m benchmarks.bench_documents RUN [--parts paragraphs,markup,placeholders,speed]
        [--split test|val] [--news-lines 1000] [--snippets 200] [--speed-lines 300]
        [--seed 1] [--threads 1] [--rounds 3] [--examples FILE]
    python -m benchmarks.bench_documents RUN --smoke     # toy sentences, 1 round

The corpora (--split's files): newstest (../shared/data/news-de-en, its first --news-lines
lines) and Multi30k's test_2016_flickr (or val), de -> en; --corpus NAME SRC REF replaces them.

- paragraphs: consecutive lines joined 3-6 at a time (seeded) with a space, as are their
  references. Translated one sentence a line (the outputs joined the same way), as paragraphs
  through mt.document (split, placeholders kept), split without placeholders, and whole (one
  line as one sentence: what mt did before), each scored against the joined references.
- markup: --snippets sentences of each corpus (seeded) with 1-3 random word spans wrapped in
  <b>, <i>, <a href> (distinct in a snippet; nested or side by side), translated as HTML
  documents in one batch as mt serve does. Well-formed: every input tag once in the output,
  properly nested, nothing else. Placement judged by the reference: the reference is
  teacher-forced through the model and aligned as decode.align aligns a translation
  (mt.decoding.align); a tag is right when the words it wraps in the output are the reference words
  aligned to the source words it wrapped (compared lowercased, without punctuation), and
  "comparable" when the output holds all of those words. The same translations placed without
  alignments (words taken to follow in order, as with CTranslate2) are the contrast. BLEU of
  the output with its tags stripped against that of the untagged sentences through the same
  path and translated plainly. --examples FILE writes the first 50 snippets of each corpus
  with their translation and reference, to judge by hand.
- placeholders: the --news-lines lines that hold a placeholder (a number, URL, e-mail,
  template variable), through mt.document with and without masking them (the same splitting),
  scored; and whether each placeholder came back as often as it was in the source.
- speed: the first --speed-lines lines of each corpus translated plainly, with alignments, as
  paragraphs (mt.document.translate_lines) and as HTML snippets (one per sentence), taking
  turns --rounds rounds, each keeping its fastest (benchmarks.harness.alternate).

Scores are sacreBLEU's (mt.metrics.score). One process, torch on --threads threads, decoding
in the calling thread.
"""

from __future__ import annotations

import html
import random
import re
import string
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from html.parser import HTMLParser
from pathlib import Path

import torch

from benchmarks.harness import MULTI30K, ROOT, TOY, alternate, markdown, parse, parser
from mt.data import pad
from mt.decoding import align
from mt.document import Document, Documents, settings, translate_document, translate_lines
from mt.document.placeholders import KINDS, find
from mt.document.segment import split
from mt.document.starters import learn
from mt.metrics import score
from mt.records import Translation
from mt.textio import iter_lines
from mt.token_cache import open_cached_corpora
from mt.translator import Translator

NEWS = ROOT.parent / "shared" / "data" / "news-de-en"
TAGS = (("<b>", "</b>"), ("<i>", "</i>"), ('<a href="https://example.org/p?id=7">', "</a>"))
STRIP = string.punctuation + "„“”‚‘’«»–—…"
Corpus = tuple[str, list[str], list[str]]


EXAMPLES = 50  # snippets of each corpus --examples writes (docs/markup-judged.md judges them)


def corpora(args) -> list[Corpus]:
    """(name, sources, references) of each corpus: --corpus, else newstest (its first
    --news-lines) and Multi30k's flickr set of --split."""
    given = args.corpus or [
        (f"newstest{2014 if args.split == 'test' else 2013} (first {args.news_lines})",
         NEWS / f"{args.split}.de.gz", NEWS / f"{args.split}.en.gz"),
        ("test_2016_flickr" if args.split == "test" else "Multi30k val",
         MULTI30K / f"{'test_2016_flickr' if args.split == 'test' else 'val'}.de.gz",
         MULTI30K / f"{'test_2016_flickr' if args.split == 'test' else 'val'}.en.gz")]
    out = []
    for name, src, ref in given:
        limit = args.news_lines if str(src).startswith(str(NEWS)) else None
        out.append((name, list(iter_lines(src))[:limit], list(iter_lines(ref))[:limit]))
    return out


def groups(n: int, rng: random.Random) -> list[tuple[int, int]]:
    """Consecutive [a, b) ranges of n lines, 3-6 long (the last may be shorter)."""
    out, a = [], 0
    while a < n:
        b = min(n, a + rng.randint(3, 6))
        out.append((a, b))
        a = b
    return out


def joined(lines: Sequence[str], spans: list[tuple[int, int]]) -> list[str]:
    return [" ".join(lines[a:b]) for a, b in spans]


def unmasked(translator: Translator, paragraphs: list[str]) -> list[str]:
    """Paragraphs split as mt.document splits them, each sentence translated as it is
    (placeholders left in), put back together with the whitespace between them."""
    ready = settings(translator)
    found = [split(p, ready.lang, True, ready.too_long, begins=ready.begins) for p in paragraphs]
    outs = iter(translator.translate([p[s.start:s.end] for p, ss in zip(paragraphs, found)
                                      for s in ss]))
    done = []
    for p, ss in zip(paragraphs, found):
        bounds = [0] + [x for s in ss for x in (s.start, s.end)] + [len(p)]
        gaps = [p[a:b] for a, b in zip(bounds[::2], bounds[1::2])]
        done.append("".join(g + next(outs) for g in gaps[:-1]) + gaps[-1])
    return done


def bleu_row(name: str, hyps: list[str], refs: list[str], base: dict | None = None) -> list:
    s = score(hyps, refs, "en")
    delta = "" if base is None else f"{s['bleu'] - base['bleu']:+.2f}"
    return [name, f"{s['bleu']:.2f}", f"{s['chrf']:.2f}", delta], s


def without_starters(translator: Translator, paras: list[str]) -> list[str]:
    """translate_lines' paragraphs as the sentencizer alone splits them."""
    plain = translator.with_options(ignore_starters=True)
    return [d.text for d in translate_lines(plain, paras)]


def paragraphs(translator: Translator, data: list[Corpus], seed: int) -> None:
    print("## Paragraphs\n")
    for name, src, ref in data:
        spans = groups(len(src), random.Random(seed))
        paras, refs = joined(src, spans), joined(ref, spans)
        lines = joined(translator.translate(src), spans)
        docs = list(translate_lines(translator, paras))
        plain = without_starters(translator, paras) if translator.run.starters else None
        rows, base = [], None
        for label, hyps in (("one sentence a line, joined", lines),
                            ("paragraphs, split (mt.document)", [d.text for d in docs]),
                            *([("paragraphs, split without the run's sentence starters",
                                plain)] if plain else []),
                            ("paragraphs, split, no placeholders", unmasked(translator, paras)),
                            ("paragraphs whole (no splitting)", translator.translate(paras))):
            row, s = bleu_row(label, hyps, refs, base)
            base = base or s
            rows.append(row)
        split_into = sum(len(d.sentences) for d in docs)
        # where the splitter finds the sentences as they were, and where it does not
        exact = [k for k, (a, b) in enumerate(spans) if len(docs[k].sentences) == b - a]
        others = [k for k in range(len(spans)) if k not in set(exact)]
        for label, ks in (("split exactly", exact), ("not split exactly", others)):
            if ks:
                line = score([lines[k] for k in ks], [refs[k] for k in ks], "en")["bleu"]
                row, _ = bleu_row(f"paragraphs, split: the {len(ks)} {label}",
                                  [docs[k].text for k in ks], [refs[k] for k in ks],
                                  {"bleu": line})
                rows.append(row)
        print(f"{name}: {len(paras)} paragraphs of {len(src)} sentences (the splitter found "
              f"{split_into}); BLEU and chrF against the joined references\n")
        print(markdown(["translated as", "BLEU", "chrF", "BLEU vs one a line"], rows) + "\n")


def snippet(words: list[str], rng: random.Random) -> tuple[str, list[tuple[int, int, int]]]:
    """An HTML snippet of words with 1-3 random spans in distinct TAGS, each span nested in
    another or beside it, never crossing: the HTML and the (first word, end word, tag) of each
    span."""
    spans: list[tuple[int, int, int]] = []
    for kind in rng.sample(range(len(TAGS)), rng.randint(1, len(TAGS))):
        for _ in range(20):
            a = rng.randrange(len(words))
            b = min(len(words), a + rng.choice((1, 1, 2, 2, 3, 4)))
            if all((b <= c or a >= d) or (c <= a and b <= d) or (a <= c and d <= b)
                   for c, d, _ in spans) and (a, b) not in [(c, d) for c, d, _ in spans]:
                spans.append((a, b, kind))
                break
    out = []
    for w, word in enumerate(words + [""]):
        closing = sorted((s for s in spans if s[1] == w), key=lambda s: -s[0])
        opening = sorted((s for s in spans if s[0] == w), key=lambda s: -s[1])
        out.append("".join(TAGS[k][1] for *_, k in closing) + (" " if w else "")
                   + "".join(TAGS[k][0] for *_, k in opening) + html.escape(word, quote=False))
    return "".join(out).strip(), spans


class _Read(HTMLParser):
    """A translated snippet: its text, and each element's (start tag, [start, end) of the
    text); `errors`: what is not well-formed."""

    def __init__(self, source: str):
        super().__init__(convert_charrefs=True)
        self.text, self.stack, self.elements, self.errors = "", [], [], []
        self.feed(source)
        self.close()
        self.errors += [f"{t} not closed" for t, _ in self.stack]

    def handle_starttag(self, tag, attrs):
        self.stack.append((self.get_starttag_text(), len(self.text)))

    def handle_endtag(self, tag):
        if not self.stack or not self.stack[-1][0].startswith(f"<{tag}"):
            self.errors.append(f"</{tag}> out of place")
            return
        start_tag, at = self.stack.pop()
        self.elements.append((start_tag, at, len(self.text)))

    def handle_data(self, data):
        self.text += data


def norm(words: list[str]) -> set[str]:
    return {w.strip(STRIP).lower() for w in words} - {""}


def reference_links(translator: Translator, sources: list[str], refs: list[str]
                    ) -> list[list[int]]:
    """Per reference word, the source word (of the source split at whitespace) the model aligns
    it to when the reference is teacher-forced as decode.align aligns a translation; -1: none."""
    run, model = translator.run, translator.model
    out = []
    for a in range(0, len(sources), 32):
        src_toks = [t[:translator.max_src] for t in translator.src_tok.tokenize_many(
            sources[a:a + 32])]
        ref_toks = [t[:translator.max_src - 1] for t in translator.tgt_tok.tokenize_many(
            refs[a:a + 32])]
        weights = align.cross_attention(model, pad([run.src_vocab.encode(t) for t in src_toks]),
                                        [run.tgt_vocab.encode(t) for t in ref_toks])
        for w, s, r in zip(weights, src_toks, ref_toks):
            tgt = align.token_words(r, translator.tgt_tok)
            links = [-1] * (max(tgt) + 1 if tgt else 0)
            for i, j in align.word_alignment(w, align.token_words(
                    s, translator.src_tok), tgt):
                links[j] = i
            out.append(links)
    return out


def judge(output: str, spans, links: list[int], ref: str) -> list[tuple[str, float | None]]:
    """Per span: "right", "wrong" or "no reference words", whether the output holds all the
    reference's words for it ("comparable"), and the F1 of the words it wraps."""
    read = _Read(output)
    words = [(m.start(), m.end(), m.group()) for m in re.finditer(r"\S+", read.text)]
    ref_words = ref.split()
    have = norm([w for *_, w in words])
    verdicts = []
    for a, b, kind in spans:
        expected = norm([ref_words[j] for j, i in enumerate(links)
                         if a <= i < b and j < len(ref_words)])
        placed = [(x, y) for tag, x, y in read.elements if tag == TAGS[kind][0]]
        got = norm([w for x, y, w in words if placed and x < placed[0][1] and y > placed[0][0]])
        if not expected:
            verdicts.append(("none", False, None))
            continue
        common = len(expected & got)
        f1 = 2 * common / (len(expected) + len(got)) if got else 0.0
        verdicts.append(("right" if got == expected else "wrong", expected <= have, f1))
    return verdicts


def well_formed(source: str, output: str) -> bool:
    """Every start tag of source once in output, properly nested, and no other tag."""
    read = _Read(output)
    tags = Counter(t for t, *_ in read.elements)
    return not read.errors and tags == Counter(t for t, *_ in _Read(source).elements)


def html_batch(translator: Translator, texts: list[str], aligned: bool = True
               ) -> list[str]:
    """HTML documents translated in one batch, as mt serve does; aligned False: placed as if
    the engine gave no alignments (words in order)."""
    docs = Documents([Document(t, "html", settings(translator)) for t in texts])
    found = translator.translate_nbest(docs.inputs, **docs.options(translator))
    out = []
    for d, share in docs.shares(found):
        mine = [f[0] for f in share]
        if not aligned:
            mine = [Translation(t.text, t.score) for t in mine]
        out.append(d.render(mine).text)
    return out


def stripped(output: str) -> str:
    return " ".join(_Read(output).text.split())


def markup(translator: Translator, data: list[Corpus], count: int, seed: int,
           examples: Path | None) -> None:
    print("## Markup\n")
    rows, shown, judged = [], [], Counter()
    for name, src, ref in data:
        rng = random.Random(seed)
        picked = sorted(rng.sample(range(len(src)), min(count, len(src))))
        sources, refs = [src[i] for i in picked], [ref[i] for i in picked]
        made = [snippet(s.split(), rng) for s in sources]
        tagged = [h for h, _ in made]
        outputs = html_batch(translator, tagged)
        in_order = html_batch(translator, tagged, aligned=False)
        links = reference_links(translator, sources, refs)
        plain = html_batch(translator, [html.escape(s, quote=False) for s in sources])
        formed = sum(well_formed(t, o) for t, o in zip(tagged, outputs))
        tally = {}
        for label, outs in (("alignment", outputs), ("in order", in_order)):
            v = [x for o, (_, spans), ln, r in zip(outs, made, links, refs)
                 for x in judge(o, spans, ln, r)]
            scored = [x for x in v if x[0] != "none"]
            comparable = [x for x in scored if x[1]]
            tally[label] = (len(v), len(scored), sum(x[0] == "right" for x in scored),
                            len(comparable), sum(x[0] == "right" for x in comparable),
                            sum(x[2] for x in comparable) / max(1, len(comparable)))
        bleu = {k: score(h, refs, "en") for k, h in (
            ("tagged", [stripped(o) for o in outputs]), ("untagged", [stripped(o) for o in plain]),
            ("plain", translator.translate(sources)))}
        rows.append((name, len(tagged), formed, tally, bleu))
        judged.update({"tags": tally["alignment"][0]})
        for t, o, r in list(zip(tagged, outputs, refs))[:EXAMPLES]:
            shown.append(f"[{name}]\nsource: {t}\noutput: {o}\nreference: {r}\n")
    print(markdown(["corpus", "snippets", "well-formed, every tag once"],
                   [[n, k, f"{f} ({f / k:.1%})"] for n, k, f, *_ in rows]) + "\n")
    print("Tags placed around the reference's words (the reference aligned by the model, "
          "teacher-forced); comparable: the output holds all of those words\n")
    print(markdown(["corpus", "placed by", "tags", "judged", "right", "comparable",
                    "right of comparable", "word F1, comparable"],
                   [[n, label, t[0], t[1], f"{t[2] / max(1, t[1]):.1%}", t[3],
                     f"{t[4] / max(1, t[3]):.1%}", f"{t[5]:.2f}"]
                    for n, _, _, tally, _ in rows for label, t in tally.items()]) + "\n")
    print("BLEU of the output without its tags against the untagged sentences' (chrF in "
          "brackets)\n")
    print(markdown(["corpus", "tagged, tags stripped", "untagged, same path", "plain translate",
                    "tagged - untagged"],
                   [[n, *(f"{b[k]['bleu']:.2f} ({b[k]['chrf']:.2f})"
                          for k in ("tagged", "untagged", "plain")),
                     f"{b['tagged']['bleu'] - b['untagged']['bleu']:+.2f}"]
                    for n, _, _, _, b in rows]) + "\n")
    if examples is not None:
        examples.write_text("\n".join(shown), encoding="utf-8")
        print(f"{len(shown)} examples written to {examples}\n")


def unread_masked(translator: Translator, sources: list[str]) -> list[str]:
    """Each paragraph with only the numbers that hold a token outside the model's source
    vocabulary masked (as --keep patterns of their own), the other numbers left in."""
    vocab, tok = translator.run.src_vocab.stoi, translator.src_tok
    out = []
    for s in sources:
        unread = [s[a:b] for a, b in find(s, masked=("number",))
                  if any(t not in vocab for t in tok.tokenize(s[a:b]))]
        keep = [re.escape(n) for n in dict.fromkeys(unread)]
        out.append(translate_document(translator, s, keep=keep).text)
    return out


def placeholders(translator: Translator, data: list[Corpus]) -> None:
    print("## Placeholders\n")
    for name, src, ref in data:
        found = [(s, r, find(s)) for s, r in zip(src, ref)]
        held = [(s, r, [s[a:b] for a, b in f]) for s, r, f in found if f]
        if not held:
            continue
        kinds = Counter(k for s, _, ps in held for p in ps for k, pat in KINDS.items()
                        if pat.fullmatch(p))
        sources, refs = [s for s, *_ in held], [r for _, r, _ in held]
        raw = translator.with_options(unk="show")
        masked = translator.with_options(mask="template,url,email,number")
        left = translator.with_options(unk="replace", mask="template,url,email")
        rows, base = [], None
        for label, hyps in (
                ("not masked, as the model writes them", unmasked(raw, sources)),
                ("masked, put back by the alignment",
                 [d.text for d in translate_lines(masked, sources)]),
                ("numbers left in, those it cannot read copied (mt.unknowns)",
                 [d.text for d in translate_lines(left, sources)]),
                ("numbers it cannot read masked, the others left in",
                 unread_masked(left, sources))):
            row, s = bleu_row(label, hyps, refs, base)
            base = base or s
            rows.append(row + [sum(all(h.count(p) == s_.count(p) for p in ps)
                                   for h, (s_, _, ps) in zip(hyps, held))])
        print(f"{name}: {len(held)} of {len(src)} lines hold a placeholder "
              f"({', '.join(f'{n} {k}' for k, n in kinds.most_common())})\n")
        print(markdown(["placeholders", "BLEU", "chrF", "BLEU vs not masked",
                        f"lines with each one back as often (of {len(held)})"], rows) + "\n")


def clocked(fn: Callable[[], object]) -> Callable[[int], tuple[float, float]]:
    """A contender for alternate() measuring (wall seconds, this process's CPU seconds) of
    fn(): on one thread, CPU time barely moves when neighbours share the cores."""
    def run(r: int) -> tuple[float, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - wall, time.process_time() - cpu
    return run


def contenders(translator: Translator, sents: list[str], paras: list[str],
               snippets: list[str]) -> dict:
    """The same sentences translated plainly, with alignments, as paragraphs and as HTML."""
    return {
        "plain (Translator.translate)": clocked(lambda: translator.translate(sents)),
        "with alignments (align=True)": clocked(
            lambda: translator.translate_nbest(sents, align=True)),
        "paragraphs (translate_lines)": clocked(
            lambda: list(translate_lines(translator, paras))),
        "HTML snippets (Document, one batch)": clocked(lambda: html_batch(translator,
                                                                          snippets)),
    }


def speed(translator: Translator, data: list[Corpus], lines: int, rounds: int, seed: int
          ) -> None:
    print("## Speed\n")
    for name, src, _ in data:
        sents = src[:lines]
        paras = joined(sents, groups(len(sents), random.Random(seed)))
        rng = random.Random(seed)
        snippets = [snippet(s.split(), rng)[0] for s in sents]
        translator.translate(sents[:8])  # warm-up
        best = alternate(contenders(translator, sents, paras, snippets), rounds,
                         keep=lambda a, b: (min(a[0], b[0]), min(a[1], b[1])))
        wall, cpu = best["plain (Translator.translate)"]
        print(f"{name}: {len(sents)} sentences ({len(paras)} paragraphs), fastest of {rounds} "
              f"round(s) (wall and CPU each), {torch.get_num_threads()} thread(s)\n")
        print(markdown(["translated as", "wall, s", "CPU, s", "sentences/s (CPU)",
                        "wall vs plain", "CPU vs plain"],
                       [[k, f"{w:.2f}", f"{c:.2f}", f"{len(sents) / c:.1f}", f"{w / wall:.3f}",
                         f"{c / cpu:.3f}"] for k, (w, c) in best.items()]) + "\n")


def main(argv: list[str] | None = None) -> None:
    ap = parser(__doc__, rounds=3, smoke="30 toy sentences, 1 round")
    ap.add_argument("run", help="a run directory or checkpoint")
    ap.add_argument("--parts", default="paragraphs,markup,placeholders,speed",
                    help="what to measure (default all four)")
    ap.add_argument("--split", choices=("test", "val"), default="test")
    ap.add_argument("--corpus", nargs=3, action="append", metavar=("NAME", "SRC", "REF"),
                    help="a corpus instead of newstest and Multi30k (repeatable)")
    ap.add_argument("--news-lines", type=int, default=1000, help="newstest's first lines")
    ap.add_argument("--snippets", type=int, default=200, help="HTML snippets of each corpus")
    ap.add_argument("--speed-lines", type=int, default=300, help="sentences timed per corpus")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--examples", type=Path, help="write snippets to judge by hand here")
    ap.add_argument("--learn-starters", action="store_true",
                    help="a run trained before checkpoints carried sentence starters: learn "
                    "them from its training corpora's token cache, as training does")
    toy = [["toy", str(TOY / "toy.test.en"), str(TOY / "toy.test.de")]]
    args = parse(ap, {"rounds": 1, "corpus": toy, "snippets": 30, "speed_lines": 30}, argv)
    torch.set_num_threads(args.threads)
    translator = Translator.load(args.run)
    if args.learn_starters and not translator.run.starters:
        run = translator.run
        run.starters = learn(open_cached_corpora(run.cfg.data, run.files).entries)
        print(f"sentence starters learned from the training corpora: "
              f"{len(run.starters)} ({', '.join(run.starters[:8])}, ...)\n")
    data = corpora(args)
    print(f"{args.run}: {', '.join(f'{n} ({len(s)} lines)' for n, s, _ in data)}; beam "
          f"{translator.decoding.beam}; {args.threads} thread(s)\n", flush=True)
    parts = args.parts.split(",")
    for part in parts:
        if part not in ("paragraphs", "markup", "placeholders", "speed"):
            sys.exit(f"--parts: {part}? expected paragraphs, markup, placeholders, speed")
    if "paragraphs" in parts:
        paragraphs(translator, data, args.seed)
    if "markup" in parts:
        markup(translator, data, args.snippets, args.seed, args.examples)
    if "placeholders" in parts:
        placeholders(translator, data)
    if "speed" in parts:
        speed(translator, data, args.speed_lines, args.rounds, args.seed)


if __name__ == "__main__":
    main()
