"""`mt distill CONFIG TEACHER...`: sequence-level knowledge distillation (Kim & Rush, 2016) in
one command. The teacher (a run, or several as an ensemble) translates the source side of each
training corpus of the student's config; the translations, audited as `mt data check` audits a
corpus, become the student's training corpora (with the originals too, at a weight, when
asked); then the student trains on them, its lineage naming the teachers and the distilled
corpus's hash (docs/distill.md).

Everything lives in the student's run directory: RUN/distilled holds the corpora. Run the
same command again after an interruption: chunks already translated are kept (up to the last
whole chunk), and a started training resumes."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from tqdm import tqdm

import mt.translator
from mt.audit import AUDIT_RATIO, audit, held_out
from mt.checkpoint import LAST, find_checkpoint, load_checkpoint
from mt.commands.formats import formatted
from mt.commands.options import TranslateOptions
from mt.config import Config, CorpusConfig, corpus_configs, load_config, override
from mt.corpus_formats import corpus_format
from mt.data import corpus_sources
from mt.errors import ConfigError, RunError
from mt.log import info
from mt.runs import Paths, as_paths, open_runs
from mt.textio import atomic_write
from mt.tokenizers import config_problems
from mt.train.lineage import record, sha256_of
from mt.train.loop import Trainer

CORPORA = "distilled"  # RUN/distilled: the teachers' translations, a plain corpus each
TEACHERS = "teachers.json"  # in RUN/distilled: what made them (record() of each teacher)
PARTIAL = ".partial"  # a target file while it is being written (kept: a rerun resumes it)


def distill(config: Path, teachers: Paths, out: Path, options: TranslateOptions,
            sets: list[str] = (), original: float = 0.0) -> dict:
    """Translate, audit, train; returns the training's summary (as mt train's).

    options: how the teachers translate (decode options over the first teacher's config,
    --workers, --threads, --device). sets: `key=value` items over the student's config.
    original: the original corpora join the distilled ones at this weight times their own
    (0: distilled only)."""
    teachers = as_paths(teachers)
    cfg = load_config(config, list(sets), [config_problems])
    check_teachers(cfg, teachers, options)
    records = [record_teacher(p) for p in teachers]
    claim_out(out, records)
    corpora_dir = out / CORPORA
    made = []
    for c, source in zip(corpus_configs(cfg.data), corpus_sources(cfg.data), strict=True):
        src, tgt = (corpora_dir / f"{c.name}.{lang}" for lang in
                    (cfg.data.src_lang, cfg.data.tgt_lang))
        write_sources(corpus_format(source.format).pairs(
            source.paths, (cfg.data.src_lang, cfg.data.tgt_lang)), src)
        translate_resumable(teachers, src, tgt, options)
        made.append(dataclasses.replace(c, name=f"{c.name}-distilled", format="plain",
                                        dir=str(corpora_dir), prefix=c.name, src="", tgt="",
                                        path=""))
    originals = [dataclasses.replace(c, weight=c.weight * original)
                 for c in corpus_configs(cfg.data)] if original > 0 else []
    student = with_corpora(cfg, made + originals, config)
    found = audit(corpus_sources(student.data)[: len(made)], held_out(student.data),
                  student.data.max_len, student.data.filter.max_ratio or AUDIT_RATIO)
    print(found.report(), file=sys.stderr)
    if not any(student.data.filter.__dict__.values()):
        info("distill: the audit above is for reading; set data.filter in the student's "
             "config to drop what it found (docs/data.md#the-audit-and-the-filters)")
    distilled = {"teachers": records,
                 "corpora": [{"name": c.name, "sha256": sha256_of(corpora_dir /
                                                                  f"{c.prefix}.{cfg.data.tgt_lang}")}
                             for c in made],
                 "original_weight": original}
    resume = (out / LAST).exists()
    return Trainer(student, out, options.device, resume, distilled=distilled).fit()


def check_teachers(cfg: Config, teachers: list[Path], options: TranslateOptions) -> None:
    """Teachers that translate the student's languages, make an ensemble together and take
    the decoding options given: else a ConfigError before any work."""
    runs = open_runs(teachers)  # several: checked as an ensemble (mt.ensemble)
    options.decoding(runs[0].cfg.decode)
    want = (cfg.data.src_lang, cfg.data.tgt_lang)
    for path, run in zip(teachers, runs, strict=True):
        have = (run.cfg.data.src_lang, run.cfg.data.tgt_lang)
        if have != want:
            raise ConfigError(f"teacher {path} translates {have[0]} -> {have[1]}; the student's "
                              f"config is {want[0]} -> {want[1]}: give a teacher of its "
                              "languages")


def claim_out(out: Path, records: list[dict]) -> None:
    """Refuse an --out distilled from other teachers (its corpora and training are theirs:
    resuming would train on them and name them), else record these teachers in it, so that
    a rerun can tell; before any work."""
    made = made_by(out)
    if made is not None:
        if [t["sha256"] for t in made] != [t["sha256"] for t in records]:
            raise ConfigError(f"{out}: distilled from {show_teachers(made)}, not from "
                              f"{show_teachers(records)}; its corpora and training are those "
                              f"teachers': give another --out, or remove {out} to start over")
        return
    path = out / CORPORA / TEACHERS
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda tmp: Path(tmp).write_text(json.dumps(records), encoding="utf-8"))


def made_by(out: Path) -> list[dict] | None:
    """The teachers an --out was distilled from: its teachers.json, else (a run distilled
    before there was one) its last.pt's lineage; None for a new --out."""
    path = out / CORPORA / TEACHERS
    if path.exists():
        try:
            made = json.loads(path.read_text(encoding="utf-8"))
            if all(isinstance(t["sha256"], str) for t in made):
                return made
        except (ValueError, TypeError, KeyError):
            pass
        raise RunError(f"{path}: damaged (not the teachers' records mt distill writes); "
                       f"remove {out} to start over")
    if (out / LAST).exists():
        lineage = load_checkpoint(out / LAST).get("lineage") or {}
        return (lineage.get("distilled") or {}).get("teachers")
    return None


def show_teachers(records: list[dict]) -> str:
    return " + ".join(f"{t['path']} (step {t['step']}, sha256 {t['sha256'][:12]})"
                      for t in records)


def write_sources(pairs: Iterator[tuple[str, str]], src: Path) -> None:
    """A corpus's source side as a plain file, once (what the teachers translate and the
    student reads); atomic, so an interrupted write is written again."""
    if src.exists():
        return
    src.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.writelines(s + "\n" for s, _ in pairs)
    atomic_write(src, write)


def translate_resumable(teachers: list[Path], src: Path, tgt: Path,
                        options: TranslateOptions) -> None:
    """src's lines translated into tgt, as `mt translate TEACHERS -i src -o tgt` with the same
    options writes them. Written a chunk (mt.translator.CHUNK_LINES lines) at a time to
    tgt.partial and synced; a rerun keeps its whole chunks and translates the rest, which
    starts on a chunk boundary, so its batches, hence its lines, are those of a run that was
    never interrupted."""
    if tgt.exists():
        return
    partial = tgt.with_name(tgt.name + PARTIAL)
    size = mt.translator.CHUNK_LINES
    done = kept_chunks(partial, size)
    with open(src, encoding="utf-8") as f:
        total = sum(1 for _ in f)
    if done:
        info(f"distill: {tgt.name}: {done} of {total} lines translated before; translating "
             "the rest")
    with open(src, encoding="utf-8") as f:
        lines = (line.rstrip("\n") for line in itertools.islice(f, done, None))
        bar = tqdm(desc=f"distill {tgt.name}", total=total, initial=done, unit=" lines",
                   file=sys.stderr)
        with open(partial, "a", encoding="utf-8") as out:
            for texts in chunks(teachers, lines, options, size):
                out.writelines(texts)
                out.flush()
                os.fsync(out.fileno())
                bar.update(len(texts))
        bar.close()
    os.replace(partial, tgt)


def kept_chunks(partial: Path, size: int) -> int:
    """The lines of partial's whole chunks; the file cut back to them (read a line at a time:
    a distilled corpus may not fit in memory)."""
    if not partial.exists():
        return 0
    keep = end = 0
    with open(partial, "r+b") as f:
        for n, line in enumerate(f, 1):
            if line.endswith(b"\n") and n % size == 0:
                keep, end = n, f.tell()
        f.truncate(end)
    return keep


def chunks(teachers: list[Path], lines: Iterator[str], options: TranslateOptions, size: int
           ) -> Iterator[list[str]]:
    """The translations of lines, a list of `size` output lines at a time (the last shorter),
    from options.workers processes or this one."""
    if options.workers > 1:
        from mt.commands.parallel import parallel_formatted

        yield from parallel_formatted(teachers, options, lines, False)
        return
    translator = options.load(teachers)
    out = formatted(translator, lines, "text", False)
    while batch := list(itertools.islice(out, size)):
        yield batch


def record_teacher(path: Path) -> dict:
    """What the student's lineage keeps of a teacher, as of any parent (lineage.record)."""
    ckpt = find_checkpoint(path)
    return record(ckpt, load_checkpoint(ckpt))


def with_corpora(cfg: Config, corpora: list[CorpusConfig], config: Path) -> Config:
    """cfg training on these corpora, checked again as a config is."""
    d = dataclasses.replace(cfg.data, train=corpora)
    return override(dataclasses.replace(cfg, data=d), (), f"{config} with the distilled corpora")
