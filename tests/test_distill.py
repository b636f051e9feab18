"""mt distill (mt/commands/distill.py): the student's corpus is the teacher's translations, byte
for byte what `mt translate` writes; an interrupted translation resumes from its whole chunks
without translating them again; the student learns from it and its lineage names the teacher;
teachers of other languages, or that cannot be an ensemble, are one line before any work."""

from __future__ import annotations

import copy
import json
import shutil

import pytest

import mt.commands.distill as distill_module
import mt.translator
from conftest import CONFIG, TINY, TOY, assert_user_error, corpus, snapshot
from mt.checkpoint import load_run, run_state, save_checkpoint
from mt.commands.distill import kept_chunks, translate_resumable
from mt.commands.options import TranslateOptions

STUDENT = [f"--set={s}" for s in TINY] + ["--set=model.n_dec_layers=1"]


def test_a_student_learns_from_its_teachers_translations(tiny_run, tmp_path, cli):
    # the toy corpus with its training references garbled (each line's words reversed), so
    # that the teacher's translations differ from them even where it translates perfectly
    data = tmp_path / "toy"
    shutil.copytree(TOY, data)
    refs = (TOY / "toy.train.de").read_text().splitlines()
    (data / "toy.train.de").write_text("".join(" ".join(r.split()[::-1]) + "\n" for r in refs))
    out = tmp_path / "student"
    r = cli("distill", str(CONFIG), str(tiny_run), "--out", str(out), "--beam", "2",
            *STUDENT, "--set", f"data.dir={data}", "--set", "train.max_epochs=3",
            "--device", "cpu")
    assert r.code == 0, r.err
    assert json.loads(r.out.splitlines()[-1])["best"] > 60  # val BLEU: it learned
    assert "toy.train-distilled: 6000 pairs" in r.err  # the audit of the distilled corpus
    distilled = out / "distilled"
    assert (distilled / "toy.train.en").read_text() == (TOY / "toy.train.en").read_text()
    mine = cli("translate", tiny_run, "--beam", "2", "-i", TOY / "toy.train.en")
    assert (distilled / "toy.train.de").read_text() == mine.out
    assert mine.out != (data / "toy.train.de").read_text()  # the teacher's, not the reference
    info = json.loads(cli("info", str(out), "--json").out)
    link = info["lineage"][-1]
    assert link["how"] == "distilled"
    assert [t["path"] for t in link["teachers"]] == [str(tiny_run / "best.pt")]
    assert "distilled from" in cli("info", str(out)).out
    # run again: everything is there; the training resumes and has nothing left to do
    again = cli("distill", str(CONFIG), str(tiny_run), "--out", str(out), "--beam", "2",
                *STUDENT, "--set", f"data.dir={data}", "--set", "train.max_epochs=3",
                "--device", "cpu")
    assert again.code == 0 and "nothing to do" in again.err, again.err
    assert json.loads(again.out.splitlines()[-1])["step"] == json.loads(
        r.out.splitlines()[-1])["step"]  # not one more step (issue 65)


def test_an_interrupted_translation_keeps_its_whole_chunks(tiny_run, tmp_path, monkeypatch, cli):
    monkeypatch.setattr(mt.translator, "CHUNK_LINES", 1000)
    src, tgt = tmp_path / "c.en", tmp_path / "c.de"
    src.write_text((TOY / "toy.train.en").read_text())
    seen = []
    real_chunks = distill_module.chunks

    def interrupted(teachers, lines, options, size):
        for i, chunk in enumerate(real_chunks(teachers, counted(lines), options, size)):
            if i == 3:
                raise KeyboardInterrupt
            yield chunk

    def counted(lines):
        for line in lines:
            seen.append(line)
            yield line

    options = TranslateOptions(overrides=("decode.beam=2",))
    monkeypatch.setattr(distill_module, "chunks", interrupted)
    with pytest.raises(KeyboardInterrupt):
        translate_resumable([tiny_run], src, tgt, options)
    partial = tgt.with_name("c.de.partial")
    assert not tgt.exists() and len(partial.read_text().splitlines()) == 3000
    with open(partial, "a") as f:
        f.write("half a chunk\nand a line cut sho")  # as if stopped during a write
    assert kept_chunks(partial, 1000) == 3000
    seen.clear()
    monkeypatch.setattr(distill_module, "chunks", lambda *a: real_chunks(
        a[0], counted(a[1]), *a[2:]))
    translate_resumable([tiny_run], src, tgt, options)
    assert seen == src.read_text().splitlines()[3000:]  # the rest only
    assert tgt.read_text() == cli("translate", tiny_run, "--beam", "2", "-i", src).out


def changed_run(tiny_run, tmp_path, name, change):
    run = load_run(tiny_run, "cpu")
    cfg = copy.deepcopy(run.cfg)
    change(cfg)
    path = tmp_path / f"{name}.pt"
    save_checkpoint(path, run_state(run.model.state_dict(), cfg, run.src_vocab, run.tgt_vocab,
                                    run.step))
    return path


def test_teachers_of_other_languages_or_no_ensemble_are_one_line(cli, tiny_run, tmp_path):
    def swap(cfg):
        cfg.data.src_lang, cfg.data.tgt_lang = cfg.data.tgt_lang, cfg.data.src_lang

    def lower(cfg):
        cfg.data.lowercase = True

    out = tmp_path / "student"
    r = cli("distill", str(CONFIG), str(changed_run(tiny_run, tmp_path, "de-en", swap)),
            "--out", str(out), *STUDENT)
    assert_user_error(r, 3, "translates de -> en", "the student's config is en -> de")
    r = cli("distill", str(CONFIG), str(tiny_run),
            str(changed_run(tiny_run, tmp_path, "lower", lower)), "--out", str(out), *STUDENT)
    assert_user_error(r, 3, "cannot be ensembled with", "data.lowercase")
    assert not out.exists()  # refused before any work


def test_an_out_distilled_from_another_teacher_is_refused(cli, tiny_run, tmp_path):
    """It used to resume: the first teacher's corpus trained on, and named in the lineage.
    Another checkpoint (here the same weights saved again: another file) is another teacher."""
    data = corpus(tmp_path, n=60)
    for lang in ("en", "de"):  # the audit reads the test set too
        shutil.copy(TOY / f"toy.test.{lang}", data)
    out = tmp_path / "student"
    args = [*STUDENT, "--set", f"data.dir={data}", "--set", "train.max_steps=2",
            "--set", "train.eval_bleu=false", "--set", "train.metric=loss", "--device", "cpu"]
    assert cli("distill", str(CONFIG), str(tiny_run), "--out", str(out), *args).code == 0
    other = changed_run(tiny_run, tmp_path, "other", lambda cfg: None)
    before = snapshot(out)
    r = cli("distill", str(CONFIG), str(other), "--out", str(out), *args)
    assert_user_error(r, 3, f"{out}: distilled from {tiny_run / 'best.pt'} (step ",
                      f"not from {other} (step ", "give another --out, or remove")
    assert snapshot(out) == before
    (out / "distilled" / "teachers.json").unlink()  # a student made before the file: lineage
    r = cli("distill", str(CONFIG), str(other), "--out", str(out), *args)
    assert_user_error(r, 3, f"distilled from {tiny_run / 'best.pt'}")
