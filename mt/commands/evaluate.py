"""`mt eval`: translate a test split (or --src/--ref files, or a --pairs file) and score it
(`mt.metrics.score`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from mt.commands.options import TranslateOptions
from mt.commands.output import check_output_path, write_output
from mt.corpus_formats import FORMATS, CorpusSource, corpus_format, format_of
from mt.data import read_pairs, split_source
from mt.errors import DataError, UsageError
from mt.log import info
from mt.metrics import compare, full_score
from mt.records import Translation
from mt.runs import Paths
from mt.textio import read_lines

SPLITS = ("val", "test")  # `mt eval --split`: each the DataConfig key naming that split


def eval_command(runs: Sequence[Path], split: str, src: str | None, ref: str | None,
                 pairs: str | None, output: str | None, options: TranslateOptions,
                 metrics: Sequence[str], compare: bool, resamples: int, seed: int,
                 hyps: Sequence[str]) -> dict:
    """`mt eval`: evaluate, or with compare compare_runs; the options that cannot go together
    are a UsageError first."""
    if hyps and not compare:
        raise UsageError("eval", "'--hyp'", "it gives a system to compare: add --compare")
    if not compare:
        return evaluate(runs, split, src, ref, output, options, metrics, pairs)
    if len(runs) + len(hyps) < 2:
        raise UsageError("eval", "'--compare'", "give two or more systems (RUNs, then --hyp "
                         "files), the first the baseline")
    if output or metrics:
        raise UsageError("eval", "'--compare'", "not with --output or --metrics")
    return compare_runs(runs, split, src, ref, options, resamples, seed, hyps, pairs)


SCORES = (("bleu", "BLEU"), ("chrf", "chrF"), ("bleu_lc", "BLEU lowercased"),
          ("bleu_tok_lc", "BLEU tokenized lowercased"),
          ("bleu_moses_lc", "BLEU Moses-tokenized lowercased"), ("ter", "TER"))


def report(r: dict) -> str:
    """eval_command's result as text (without --json): compare_table's, or a line per score."""
    if "systems" in r:
        return compare_table(r)
    lines = [f"{name} = {r[key]:.2f}  {r[key + '_signature']}" for key, name in SCORES
             if key in r]
    if "term_use" in r:
        lines.append(f"term use rate = {r['term_use']:.2f}%  ({r['terms_active']} active "
                     "glossary entries)")
        if r["terms_active_unk"]:
            lines.append(f"  of which {r['terms_active_unk']} with a word the vocabulary lacks: "
                         f"{r['term_use_unk']:.2f}%; the others {r['term_use_known']:.2f}%")
    if r.get("unknowns"):
        lines.append(f"<unk> replaced = {r['unknowns']} in {r['unknown_lines']} line(s) "
                     "(decode.unk; what was written: --format jsonl's \"unknowns\")")
    return "\n".join(lines)


def evaluate(run_path: Paths, split: str = "test", src: str | None = None,
             ref: str | None = None, output: str | None = None,
             options: TranslateOptions = TranslateOptions(), metrics: Sequence[str] = (),
             pairs: str | None = None) -> dict:
    """Translate a split of the run's data (or --src/--ref files, or a --pairs file) and score
    it; several runs (run_path a list) translate as an ensemble, with the first's data and
    decode settings.

    options: how to make the Translator (for ctranslate2 run_path may be an `mt export`
    directory). metrics: extra metrics beside the BLEU and chrF variants
    (mt.metrics.EXTRA_METRICS).
    """
    check_files(src, ref, pairs)
    if output:
        check_output_path(output)  # before minutes of translating, not after
    glossary = options.load_glossary()
    translator = options.load(run_path)
    translator.matcher(glossary)  # refused (beam 1, CTranslate2) before the data is read
    run = translator.run
    source = eval_source(translator, split, src, ref, pairs)
    src_lines, ref_lines = read_pairs(source)
    found = _translated(translator, src_lines, glossary)
    hyps = [t.text for t in found]
    if output:
        write_output(output, lambda f: f.writelines(h + "\n" for h in hyps))
    result = full_score(hyps, ref_lines, run.cfg.data.tgt_lang, tuple(metrics))
    if "bleu_moses_lc" not in result:
        info('BLEU on lowercased Moses tokens left out: it needs sacremoses '
             '(pip install "mt[moses]")')
    result.update(src=str(source.paths[0]), ref=str(source.paths[-1]), step=run.step,
                  unknowns=sum(len(t.unknowns or ()) for t in found),
                  unknown_lines=sum(bool(t.unknowns) for t in found))
    if glossary is not None:
        result.update(term_use(found, set(translator.matcher(glossary).unwritable)))
    return result


def term_use(found: list[Translation], outside: set[str] = frozenset()) -> dict:
    """The term use rate: the share (%) of the active glossary entries whose target term the
    output holds as whole tokens, and the count of active entries; the same for those whose
    target term has a word the vocabulary lacks (outside: those terms) and for the others."""
    out = {}
    for suffix, which in (("", lambda term: True), ("_unk", lambda term: term in outside),
                          ("_known", lambda term: term not in outside)):
        active = sum(sum(which(target) for _, target in t.terms) for t in found)
        held = active - sum(sum(which(term) for term in t.missing) for t in found)
        out.update({f"term_use{suffix}": 100.0 * held / active if active else 100.0,
                    f"terms_active{suffix}": active})
    return out


def check_files(src: str | None, ref: str | None, pairs: str | None) -> None:
    """--src, --ref and --pairs as they may go together, before any model is loaded."""
    if pairs is not None and (src is not None or ref is not None):
        raise UsageError("eval", "'--pairs'", "give --pairs FILE or --src and --ref, not both")
    if pairs is not None and format_of(pairs) is None:
        endings = ", ".join(e for f in FORMATS for e in corpus_format(f).suffixes)
        raise UsageError("eval", "'--pairs'", f"{pairs}: its name says its format; end it in "
                         f"one of {endings}")
    if src is not None and ref is None:
        raise DataError(f"--src {src}: no reference translations to score against; add "
                        "--ref FILE")


def eval_source(translator, split: str, src: str | None, ref: str | None,
                pairs: str | None = None) -> CorpusSource:
    """The sources and references: --pairs (one file, its format by its name), --src/--ref,
    else the run's split (plain files or a corpus of any format)."""
    d = translator.run.cfg.data
    langs = (d.src_lang, d.tgt_lang)
    if pairs is not None:
        return CorpusSource(pairs, format_of(pairs), (Path(pairs),), langs)
    if src is not None:
        return CorpusSource(src, "plain", (Path(src), Path(ref)), langs)
    return split_source(d, split)


def _translated(translator, src_lines: list[str], glossary) -> list[Translation]:
    stream = translator.translate_nbest_stream(src_lines, False, glossary=glossary)
    return [best[0] for best in tqdm(stream, total=len(src_lines), desc="eval",
                                     unit=" lines", disable=None, file=sys.stderr)]


def compare_runs(run_paths: Sequence[Path], split: str = "test", src: str | None = None,
                 ref: str | None = None, options: TranslateOptions = TranslateOptions(),
                 samples: int = 1000, seed: int = 12345, hyps: Sequence[str] = (),
                 pairs: str | None = None) -> dict:
    """`mt eval --compare`: each run a system, translated with its own decode settings, on the
    first run's split (or --src/--ref, or --pairs), then each file of hyps (`--hyp`) a system
    already translated; their BLEU and chrF with 95% confidence intervals and the paired
    bootstrap p-value of each against the first (mt.metrics.compare)."""
    check_files(src, ref, pairs)
    glossary = options.load_glossary()
    translators = [options.load(p) for p in run_paths]  # every run opened before any work
    langs = {t.run.cfg.data.tgt_lang for t in translators}
    if len(langs) > 1:
        raise DataError(f"--compare: the runs translate into {', '.join(sorted(langs))}; "
                        "compare systems of one target language")
    for t in translators:
        t.matcher(glossary)
    source = eval_source(translators[0], split, src, ref, pairs)
    src_lines, ref_lines = read_pairs(source)
    given = [(h, read_lines(h)) for h in hyps]  # read, and checked, before any translating
    for h, lines in given:
        if len(lines) != len(ref_lines):
            raise DataError(f"--hyp {h}: {len(lines)} lines, but {source.paths[-1]} has "
                            f"{len(ref_lines)}; give one translation per source line")
    systems = [(str(p), [t.text for t in _translated(tr, src_lines, glossary)])
               for p, tr in zip(run_paths, translators, strict=True)] + given
    result = compare(systems, ref_lines, langs.pop(), samples, seed)
    result.update(src=str(source.paths[0]), ref=str(source.paths[-1]))
    return result


def compare_table(result: dict) -> str:
    """`mt eval --compare`'s table: per system, each metric's score, the bootstrap's 95%
    confidence interval (mean ± half-width) and the p-value against the first system."""
    width = max(len("system"), *(len(r["name"]) for r in result["systems"]))
    head = f"{'system':<{width}}  {'BLEU':>6} {'95% CI':>14} {'p':>7}  " \
           f"{'chrF':>6} {'95% CI':>14} {'p':>7}"
    lines = [head]
    for r in result["systems"]:
        cells = []
        for key in ("bleu", "chrf"):
            m = r[key]
            ci = f"{m['mean']:.2f} ± {m['ci']:.2f}"
            p = "-" if m["p_value"] is None else f"{m['p_value']:.4f}"
            cells.append(f"{m['score']:>6.2f} {ci:>14} {p:>7}")
        lines.append(f"{r['name']:<{width}}  " + "  ".join(cells))
    lines.append(f"paired bootstrap, {result['samples']} resamples, seed {result['seed']}, "
                 f"{result['sentences']} sentences; p: against {result['systems'][0]['name']}")
    lines += [result["bleu_signature"], result["chrf_signature"]]
    return "\n".join(lines)
