"""`mt eval`: translate a test split (or --src/--ref files) and score it (`mt.metrics.score`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tqdm import tqdm

from mt.commands.options import TranslateOptions
from mt.commands.output import check_output_path, write_output
from mt.data import read_parallel
from mt.ensemble import Paths
from mt.errors import DataError
from mt.log import info
from mt.metrics import full_score
from mt.records import Translation
from mt.textio import split_path

SPLITS = ("val", "test")  # `mt eval --split`: each the DataConfig key naming that split


def evaluate(run_path: Paths, split: str = "test", src: str | None = None,
             ref: str | None = None, output: str | None = None,
             options: TranslateOptions = TranslateOptions(), metrics: Sequence[str] = ()
             ) -> dict:
    """Translate a split of the run's data (or --src/--ref files) and score it; several runs
    (run_path a list) translate as an ensemble, with the first's data and decode settings.

    options: how to make the Translator (for ctranslate2 run_path may be an `mt export`
    directory). metrics: extra metrics beside the BLEU and chrF variants
    (mt.metrics.EXTRA_METRICS).
    """
    if src is not None and ref is None:
        raise DataError(f"--src {src}: no reference translations to score against; add "
                        "--ref FILE")
    if output:
        check_output_path(output)  # before minutes of translating, not after
    glossary = options.load_glossary()
    translator = options.load(run_path)
    translator.matcher(glossary)  # refused (beam 1, CTranslate2) before the data is read
    run = translator.run
    if src is None:
        d = run.cfg.data
        name = getattr(d, split)
        src_path = split_path(d.dir, name, d.src_lang)
        ref_path = split_path(d.dir, name, d.tgt_lang)
    else:
        src_path, ref_path = Path(src), Path(ref)
    src_lines, ref_lines = read_parallel(src_path, ref_path)
    stream = translator.translate_nbest_stream(src_lines, False, glossary=glossary)
    found = [best[0] for best in tqdm(stream, total=len(src_lines), desc="eval",
                                      unit=" lines", disable=None, file=sys.stderr)]
    hyps = [t.text for t in found]
    if output:
        write_output(output, lambda f: f.writelines(h + "\n" for h in hyps))
    result = full_score(hyps, ref_lines, run.cfg.data.tgt_lang, tuple(metrics))
    if "bleu_moses_lc" not in result:
        info('BLEU on lowercased Moses tokens left out: it needs sacremoses '
             '(pip install "mt[moses]")')
    result.update(src=str(src_path), ref=str(ref_path), step=run.step)
    if glossary is not None:
        result.update(term_use(found))
    return result


def term_use(found: list[Translation]) -> dict:
    """The term use rate: the share (%) of the active glossary entries whose target term the
    output holds as whole tokens, and the count of active entries."""
    active = sum(len(t.terms) for t in found)
    held = active - sum(len(t.missing) for t in found)
    return {"term_use": 100.0 * held / active if active else 100.0, "terms_active": active}
