"""Software strings: translations of held-out packages scored against what a localizer gets
without MT, the translation memory's suggestion, overall and by fuzzy-match band.

    python -m benchmarks.bench_software --data data/software_en_de [--split val]
        [--hyp runs/sw/val.hyp ...] [--band 0.7]
        [--memory tm.db [--run RUN] [--memory-run RUN ...] [--reuse 70 80 90] [--threads 2]]
    python -m benchmarks.bench_software --data DIR --paragraphs RUN [--mask KINDS ...]
    python -m benchmarks.bench_software --po DIR   # PO files mt wrote: msgfmt, placeholders
    python -m benchmarks.bench_software --speed RUN --pot FILE [--beam B] [--rounds 2]
    python -m benchmarks.bench_software --smoke    # a corpus of six tiny catalogues

--data is a corpus `mt data gettext` built (its manifest.json names the languages). For each
entry of --split (one line of {split}.{src}), the translation memory (TM) is the training
split: its suggestion is the training translation of the most similar training msgid
(character-level Levenshtein similarity, 1 - distance / the longer length, insertions,
deletions and substitutions costing 1, by rapidfuzz; an exact msgid is found first, by a dict;
of several translations of one msgid the most frequent, the first of equals; of equally similar
msgids the first in the training file). Each --hyp file (a line per entry, as the model writes
its escaped lines) is scored beside it. Printed, a row per system and band (all entries, and
those whose best TM similarity is >= --band or below it): entries, chrF and BLEU (sacreBLEU as
mt.metrics scores them, over the escaped lines), and the placeholder keep rate (an entry keeps
when its translation has the multiset of its msgid's placeholders, mt.corpora.software's
placeholders): over all entries, and over those whose msgid has any. The reference's own keep
rate is the first row. Scoring the test split is for the final table only: compare on val.

--memory MEMORY (an `mt memory`, e.g. `mt memory add tm.db data/software_en_de/train`) adds a
second table, by the memory's own fuzzy band (each entry's best match percentage,
docs/memory.md: >= 90, 70-90, 50-70, below 50, and all): the memory's suggestion alone (its best
match's target; empty where it has none), and given --run, that run's translations without the
memory ("mt") and with it ("mt + exact reuse": exact matches reused, decode.memory), and given
--memory-run (runs trained with data.memory, several to compare their settings), their
translations with the memory, which they read: with exact matches reused, and with none
reused ("no exact reuse": decode.memory_exact translate, every line read by the model).
--reuse N ... adds a row per N for the last of those runs with decode.memory_reuse N: each
entry whose best match scores N or more is the match's target, the others that run's
translation with the memory (so composed, not decoded again: a reused line is never decoded).
With --run, a third table tests each system against "mt" band by band: the difference in
BLEU and chrF and its paired bootstrap p-value (--bootstrap resamples, sacreBLEU's paired test
as `mt eval --compare` runs it, seed 12345): a band of a few dozen entries moves by several
points between two equally good systems, so a difference there is a difference only where p is
small (0.05 or less, say). A band where a system's outputs are mt's says so instead of a p.

--paragraphs RUN translates the split as a PO file is translated (`mt translate --doc-format
po`): a POT of its msgids (unescaped; each its own msgctxt, so that none merges with another),
each msgid a paragraph (a line break, and a column gap of two spaces or more, end a sentence;
placeholders taken out; printf directives left to the model unless its translation loses one,
docs/documents.md#po-files), beside the same run's plain lines (the escaped line as one
sentence, as `mt translate` without --doc-format reads it), the PO path with every directive
taken out (as before soft directives), and the PO path with each --mask KINDS (decode.mask:
the placeholder kinds; "" for none). Printed: BLEU and chrF, then what a localizer checks:
the columns (the display column each cell after a gap starts at, line by line) as the
reference has them, over the entries whose reference keeps the msgid's columns; every
command-line option of the msgid (the `option` placeholder kind) in the translation; and the
format directives as `msgfmt --check` wants them (mt.l10n.format_strings.unkept), over the
entries that have any.

--po DIR reads the PO files mt wrote (`mt translate --doc-format po`, one a package) and prints
how many pass GNU gettext's `msgfmt --check --use-fuzzy` (mt marks its translations fuzzy,
which msgfmt checks only with --use-fuzzy), and of the entries mt translated (those with its
`# mt:` comment), how many keep every format directive of their msgid in every form
(mt.l10n.format_strings.unkept, by each entry's flags: what msgfmt's check objects to).

--speed RUN --pot FILE times translating a PO or POT file as a document (every entry, as
`--doc-format po --overwrite` does) against translating its msgids (and msgid_plurals) as plain
lines, escaped as `mt data gettext` writes them, with the same Translator: the two take turns
each round, each keeps its fastest; the ratio is the document path's cost.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.harness import markdown, parse, parser
from mt.commands.data import gettext_corpus
from mt.corpora.software import placeholders
from mt.metrics import score
from mt.textio import read_lines


def memory(src: list[str], tgt: list[str]) -> dict[str, str]:
    """msgid -> its most frequent training translation (the first of equals)."""
    seen: dict[str, Counter] = {}
    for s, t in zip(src, tgt):
        seen.setdefault(s, Counter())[t] += 1
    return {s: counts.most_common(1)[0][0] for s, counts in seen.items()}


def suggestions(tm: dict[str, str], queries: list[str]) -> list[tuple[str, float]]:
    """For each query, the TM's suggestion and its msgid's similarity to the query (0..1)."""
    from rapidfuzz import process
    from rapidfuzz.distance import Levenshtein

    choices = list(tm)
    found = []
    for q in queries:
        if q in tm:  # the prefilter: an exact msgid needs no search
            found.append((tm[q], 1.0))
            continue
        # extractOne raises its cutoff to the best score so far, so most choices are dropped
        # by their length alone; a tie keeps the first choice
        best, similarity, _ = process.extractOne(q, choices, processor=None,
                                                 scorer=Levenshtein.normalized_similarity)
        found.append((tm[best], similarity))
    return found


# the memory's fuzzy bands (issue 63): name, and the match percentages [low, high) it holds;
# ">= 0.7" is the two close bands together (a close band alone may hold a few dozen entries)
FUZZY_BANDS = ((">= 0.9", 90.0, 101.0), ("0.7-0.9", 70.0, 90.0), (">= 0.7", 70.0, 101.0),
               ("0.5-0.7", 50.0, 70.0), ("< 0.5", 0.0, 50.0))


def memory_systems(args, src: list[str]) -> tuple[dict[str, list[str]], list[float]]:
    """With --memory: the memory's suggestion for each entry, and --run's and --memory-run's
    translations (see the docstring); and each entry's best match percentage (0: none)."""
    from mt import Translator
    from mt.memory import open_memory

    with open_memory(args.memory) as m:
        found = [next(iter(m.search(s, 1)), None) if s.strip() else None for s in src]
    systems = {"memory suggestion": [f.target if f else "" for f in found]}
    where = str(args.memory)
    if args.run is not None:
        t = Translator.load(args.run, threads=args.threads)
        systems["mt"] = t.translate(src)
        systems["mt + exact reuse"] = t.translate(src, memory=where)
    for run in args.memory_run:  # several: each named by its directory
        t = Translator.load(run, threads=args.threads)
        named = f" ({run.name})" if len(args.memory_run) > 1 else ""
        systems[f"mt trained with data.memory{named} + memory"] = t.translate(src, memory=where)
        # every line through the model, its exact matches read as close ones: a model trained
        # long enough writes the corpus's usual translation where the memory holds another
        systems[f"mt trained with data.memory{named} + memory, no exact reuse"] = t.translate(
            src, memory=where, memory_exact="translate")
    name, last = list(systems.items())[-1]
    for n in args.reuse if len(systems) > 1 else ():  # decode.memory_reuse n, composed
        systems[f"{name}, reuse >= {n:g}"] = [f.target if f and f.score >= n else hyp
                                              for f, hyp in zip(found, last)]
    return systems, [f.score if f else 0.0 for f in found]


def against_mt(systems: dict[str, list[str]], bands, ref: list[str], lang: str,
               samples: int) -> list[list[str]]:
    """Rows of the paired-bootstrap table: each system but "mt" against it, band by band."""
    from mt.metrics import compare

    base, rows = systems["mt"], []
    others = [(name, hyp) for name, hyp in systems.items() if name != "mt"]
    for band, idx in bands:
        if not idx:
            continue
        picked = [[hyp[i] for i in idx] for _, hyp in others]
        mine = [base[i] for i in idx]
        result = compare([("mt", mine), *zip((n for n, _ in others), picked)],
                         [ref[i] for i in idx], lang, samples=samples)
        first, *rest = result["systems"]
        for (name, _), hyp, r in zip(others, picked, rest):
            # sacreBLEU's test (multeval's) gives identical outputs its smallest p, not 1
            same = hyp == mine
            cells = [f"{r[m]['score'] - first[m]['score']:+.2f} "
                     + ("(same outputs)" if same else f"(p {r[m]['p_value']:.3f})")
                     for m in ("bleu", "chrf")]
            rows.append([name, band, f"{len(idx):,}", *cells])
    return rows


def kept(hyp: str, src: str) -> bool:
    return placeholders(hyp) == placeholders(src)


def row(name: str, band: str, rows: list[int], src, ref, hyp, lang: str) -> list[str]:
    """One line of the table: the system's scores over the entries `rows`."""
    if not rows:
        return [name, band, "0", "-", "-", "-", "-"]
    h, r, s = [hyp[i] for i in rows], [ref[i] for i in rows], [src[i] for i in rows]
    scores = score(h, r, lang)
    with_ph = [i for i, x in enumerate(s) if placeholders(x)]
    all_kept = sum(kept(a, b) for a, b in zip(h, s)) / len(rows)
    some = (f"{sum(kept(h[i], s[i]) for i in with_ph) / len(with_ph):.1%} of {len(with_ph)}"
            if with_ph else "-")
    return [name, band, f"{len(rows):,}", f"{scores['chrf']:.2f}", f"{scores['bleu']:.2f}",
            f"{all_kept:.1%}", some]


# The smoke run's catalogues: each package has the shared strings and one of its own.
OWN = [("Permission denied", "Keine Berechtigung"), ("Network is unreachable",
       "Netzwerk ist nicht erreichbar"), ("Out of memory", "Speicher erschöpft"),
       ("Broken pipe", "Defekte Pipe"), ("Show all processes", "Alle Prozesse anzeigen"),
       ("Pattern is empty", "Das Muster ist leer")]


def smoke_memory(corpus: Path, where: Path) -> Path:
    """The smoke corpus's training split as an mt memory."""
    from mt.memory import open_memory

    with open_memory(where, ("en", "de")) as m:
        m.add(zip(*(read_lines(corpus / f"train.{lang}") for lang in ("en", "de"))))
    return where


def smoke_corpus(where: Path) -> Path:
    """A corpus built by `mt data gettext` from six tiny catalogues compiled by msgfmt: four
    packages fall in train by the split's rule, procps-ng in val, grep in test."""
    strings = [("File %s not found", "Datei %s nicht gefunden"), ("Cancel", "Abbrechen"),
               ("Open the file", "Die Datei öffnen"), ("%d files copied", "%d Dateien kopiert"),
               ("Save the file %s", "Die Datei %s speichern"), ("Quit", "Beenden")]
    lc = where / "locale" / "de" / "LC_MESSAGES"
    lc.mkdir(parents=True)
    for k, package in enumerate(("coreutils", "git", "tar", "sed", "procps-ng", "grep")):
        pairs = [*strings[k:], *strings[:k], OWN[k]]
        po = 'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n' + "".join(
            f'msgid "{s} ({k})"\nmsgstr "{t} ({k})"\n\n' for s, t in pairs)
        (lc / f"{package}.po").write_text(po, encoding="utf-8")
        subprocess.run(["msgfmt", "-o", str(lc / f"{package}.mo"), str(lc / f"{package}.po")],
                       check=True)
    gettext_corpus("en", "de", where / "locale", where / "corpus")
    return where / "corpus"


def check_po(where: Path) -> None:
    """The table of --po: msgfmt's verdict per file, directives kept per entry."""
    from mt.l10n import po
    from mt.l10n.format_strings import unkept

    files = sorted(where.glob("*.po"))
    if not files:
        raise SystemExit(f"{where}: no .po files")
    passed, entries, kept, lost = 0, 0, 0, []
    for path in files:
        done = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null",
                               str(path)], capture_output=True, text=True)
        passed += done.returncode == 0
        for entry in po.read_file(path).entries:
            e = entry.po
            if not any(c.startswith("mt:") for c in e.tcomment.splitlines()):
                continue
            entries += 1
            forms = e.msgstr_plural.values() if e.msgid_plural else [e.msgstr]
            # a form keeps what msgid_plural holds, or (a form for n = 1 alone) msgid's
            bad = [x for form in forms for x in min(
                (unkept(s, form, e.flags) for s in (e.msgid_plural, e.msgid) if s), key=len)]
            kept += not bad
            lost += [f"{path.name}: {e.msgid[:60]!r}: {', '.join(bad)}"] if bad else []
    print(markdown(["PO files", "msgfmt --check --use-fuzzy passes", "entries mt translated",
                    "keep every directive"],
                   [[len(files), f"{passed} ({passed / len(files):.0%})", f"{entries:,}",
                     f"{kept:,} ({kept / max(1, entries):.2%})"]]))
    for line in lost[:20]:
        print("- " + line)


def speed(args) -> None:
    """The table of --speed."""
    from benchmarks.harness import alternate, timer
    from mt.corpora.software import escape
    from mt.document import translate_document
    from mt.l10n import po
    from mt.translator import Translator

    text = args.pot.read_text(encoding="utf-8")
    entries = [e.po for e in po.read(text, str(args.pot)).entries if not e.po.obsolete]
    lines = [escape(s) for e in entries for s in (e.msgid, e.msgid_plural) if s]
    options = {"beam": args.beam} if args.beam else {}
    t = Translator.load(args.speed, threads=args.threads, **options)
    best = alternate({
        "PO document": timer(lambda: translate_document(t, text, "po", overwrite=True)),
        "its msgids as plain lines": timer(lambda: t.translate(lines)),
    }, args.rounds)
    print(f"{args.pot}: {len(entries):,} entries, {len(lines):,} msgids; beam "
          f"{t.decoding.beam}, {args.threads} thread(s), fastest of {args.rounds} rounds")
    print(markdown(["contender", "seconds", "entries/s"],
                   [[name, f"{s:.2f}", f"{len(entries) / s:.1f}"] for name, s in best.items()]))
    ratio = best["PO document"] / best["its msgids as plain lines"]
    print(f"PO document / plain lines time: {ratio:.2f}x (target <= 1.1x)")


def main() -> None:
    ap = parser(__doc__, rounds=1, smoke="six catalogues of six strings, the TM alone")
    ap.add_argument("--data", type=Path, help="a corpus `mt data gettext` wrote")
    ap.add_argument("--split", default="val", help="val (default) or test")
    ap.add_argument("--hyp", type=Path, nargs="*", default=[],
                    help="translations of the split's source, a line per entry")
    ap.add_argument("--band", type=float, default=0.7, help="the close-match threshold")
    ap.add_argument("--po", type=Path, help="a directory of PO files mt translated: check them")
    ap.add_argument("--speed", type=Path, help="a run: time a PO file through it (--pot)")
    ap.add_argument("--pot", type=Path, help="the PO or POT file --speed translates")
    ap.add_argument("--beam", type=int, default=0, help="--speed's beam (0: the run's)")
    ap.add_argument("--threads", type=int, default=2, help="--speed's (and --run's) torch "
                    "threads")
    ap.add_argument("--memory", type=Path, help="an mt memory: a table by its fuzzy bands")
    ap.add_argument("--run", type=Path, help="with --memory: a run without data.memory")
    ap.add_argument("--reuse", type=float, nargs="*", default=[],
                    help="with --memory: rows with decode.memory_reuse at these percentages")
    ap.add_argument("--memory-run", type=Path, nargs="*", default=[],
                    help="with --memory: runs trained with data.memory (--reuse: the last)")
    ap.add_argument("--paragraphs", type=Path, help="a run: entries as paragraphs (columns, "
                    "placeholders) against plain lines")
    ap.add_argument("--mask", nargs="*", default=[],
                    help="with --paragraphs: a row per decode.mask (comma-separated kinds)")
    ap.add_argument("--bootstrap", type=int, default=1000,
                    help="with --memory and --run: paired bootstrap resamples (0: no test)")
    args = parse(ap, {})
    if args.po is not None:
        check_po(args.po)
    elif args.speed is not None:
        if args.pot is None:
            ap.error("--speed needs --pot FILE")
        speed(args)
    elif args.smoke:
        with tempfile.TemporaryDirectory(prefix="bench_software.") as scratch:
            args.data = smoke_corpus(Path(scratch))
            args.memory = smoke_memory(args.data, Path(scratch) / "tm.db")
            report(args)
    elif args.data is None:
        ap.error("give --data (or --smoke)")
    elif args.paragraphs is not None:
        layout(args)
    else:
        report(args)


def columns(text: str) -> list[list[int]]:
    """Each line's cells after a column gap: the display column each starts at."""
    from mt.document.segment import COLUMN, LINE_BREAK, width

    return [[width(line[:m.end()]) for m in COLUMN.finditer(line) if "\t" not in m.group()]
            for line in LINE_BREAK.split(text)]


def layout(args) -> None:
    """--paragraphs: the split's entries through the document path against plain lines."""
    from dataclasses import replace

    import polib

    from mt import Translator
    from mt.corpora.software import escape, unescape
    from mt.document import Document, settings, translate_inputs
    from mt.document.placeholders import KINDS
    from mt.l10n.format_strings import unkept

    about = json.loads((args.data / "manifest.json").read_text(encoding="utf-8"))
    src, ref = (read_lines(args.data / f"{args.split}.{lang}") for lang in (about["src"],
                                                                           about["tgt"]))
    raw_src, raw_ref = [unescape(x) for x in src], [unescape(x) for x in ref]
    t = Translator.load(args.paragraphs, threads=args.threads)
    pot = polib.POFile()
    pot.metadata = {"Content-Type": "text/plain; charset=UTF-8"}
    for i, x in enumerate(raw_src):
        pot.append(polib.POEntry(msgctxt=str(i), msgid=x, msgstr=""))

    def through_po(soft: bool, **decode) -> list[str]:
        doc = Document(str(pot), "po", replace(settings(t, cfg=t.check_options(**decode)),
                                                soft=soft))
        out = polib.pofile(doc.render(translate_inputs(t, [doc], **decode)).text)
        return [e.msgstr for e in sorted(out, key=lambda e: int(e.msgctxt))]

    systems = {"plain lines": [unescape(x) for x in t.translate(src)],
               "PO, every directive taken out": through_po(False)}
    for mask in args.mask or [None]:
        decode = {} if mask is None else {"mask": mask}
        systems["PO" + ("" if mask is None else f", mask {mask!r}")] = through_po(True, **decode)
    kept = [i for i, x in enumerate(raw_src) if any(columns(x)) and
            columns(x) == columns(raw_ref[i])]
    options = [i for i, x in enumerate(raw_src) if KINDS["option"].search(x)]
    formats = [i for i, x in enumerate(raw_src) if placeholders(x)]  # printf directives
    print(f"{args.data} {args.split}: {len(src):,} entries; {len(kept)} whose reference keeps "
          f"the msgid's columns; {len(options)} with a command-line option; {args.paragraphs}\n")
    rows = []
    for name, hyp in systems.items():
        scores = score([escape(h) for h in hyp], ref, about["tgt"])
        lined = sum(columns(hyp[i]) == columns(raw_ref[i]) for i in kept)
        opts = sum(Counter(KINDS["option"].findall(hyp[i])) ==
                   Counter(KINDS["option"].findall(raw_src[i])) for i in options)
        directives = sum(not unkept(raw_src[i], hyp[i]) for i in formats)
        rows.append([name, f"{scores['bleu']:.2f}", f"{scores['chrf']:.2f}",
                     f"{lined} of {len(kept)}", f"{opts} of {len(options)}",
                     f"{directives} of {len(formats)}"])
    print(markdown(["system", "BLEU", "chrF", "columns as the reference", "options kept",
                    "format directives kept"], rows))


def report(args) -> None:
    """The table for args.data's args.split."""
    about = json.loads((args.data / "manifest.json").read_text(encoding="utf-8"))
    sl, tl = about["src"], about["tgt"]
    tm = memory(*(read_lines(args.data / f"train.{lang}") for lang in (sl, tl)))
    src, ref = (read_lines(args.data / f"{args.split}.{lang}") for lang in (sl, tl))
    start = time.perf_counter()
    suggested = suggestions(tm, src)
    seconds = time.perf_counter() - start
    systems = {"reference": ref, "TM suggestion": [t for t, _ in suggested]}
    for path in args.hyp:
        systems[path.name] = read_lines(path)
        if len(systems[path.name]) != len(src):
            raise SystemExit(f"{path}: {len(systems[path.name])} lines, but {args.split} has "
                             f"{len(src)} entries")
    close = [i for i, (_, sim) in enumerate(suggested) if sim >= args.band]
    far = [i for i, (_, sim) in enumerate(suggested) if sim < args.band]
    print(f"{args.data} {args.split}: {len(src):,} entries ({sl}->{tl}); TM of {len(tm):,} "
          f"msgids, searched in {seconds:.1f} s; exact msgid found for "
          f"{sum(sim == 1.0 for _, sim in suggested):,}\n")
    bands = (("all", range(len(src))), (f">= {args.band}", close), (f"< {args.band}", far))
    header = ["system", "band", "entries", "chrF", "BLEU", "placeholders kept",
              "kept, entries with placeholders"]
    print(markdown(header, [row(name, band, list(rows), src, ref, hyp, tl)
                            for name, hyp in systems.items() for band, rows in bands]))
    if args.memory is None:
        return
    start = time.perf_counter()
    more, scores = memory_systems(args, src)
    print(f"\nBy {args.memory}'s fuzzy bands (its best match %; {time.perf_counter() - start:.1f}"
          " s with the translations):\n")
    bands = (("all", range(len(src))), *((name, [i for i, x in enumerate(scores) if lo <= x < hi])
                                         for name, lo, hi in FUZZY_BANDS))
    print(markdown(header, [row(name, band, list(rows), src, ref, hyp, tl)
                            for name, hyp in more.items() for band, rows in bands]))
    if "mt" in more and args.bootstrap > 0:
        print(f"\nAgainst mt, by the same bands (paired bootstrap, {args.bootstrap} resamples, "
              "seed 12345):\n")
        print(markdown(["system", "band", "entries", "BLEU - mt (p)", "chrF - mt (p)"],
                       against_mt(more, [(b, list(r)) for b, r in bands], ref, tl,
                                  args.bootstrap)))


if __name__ == "__main__":
    main()
