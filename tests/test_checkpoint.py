"""One-file checkpoints (config and vocabularies inside) and `mt info`."""

import json
import shutil

import pytest
import torch

from conftest import TOY, assert_user_error, run_mt
from mt.checkpoint import FORMAT, load_checkpoint, load_run, run_state, save_checkpoint
from mt.commands.evaluate import evaluate
from mt.commands.info import run_info
from mt.errors import CheckpointError
from mt.translator import Translator

TWO_LINES = "Yesterday we saw forty two red dogs.\nI need seven hundred eleven books.\n"


def test_checkpoints_carry_config_and_vocab_as_plain_data(tiny_run):
    for name in ("best.pt", "last.pt"):
        state = load_checkpoint(tiny_run / name)  # weights_only=True inside
        assert state["format"] == FORMAT
        assert state["vocab"]["src"] == (tiny_run / "vocab.src.txt").read_text().splitlines()
        assert state["vocab"]["tgt"] == (tiny_run / "vocab.tgt.txt").read_text().splitlines()
        assert state["config"] == load_run(tiny_run).cfg.to_dict()
        assert state["files"] == {}


def test_moved_checkpoint_translates_and_evaluates_alone(tiny_run, tmp_path):
    alone = tmp_path / "elsewhere" / "model.pt"
    alone.parent.mkdir()
    shutil.copy(tiny_run / "best.pt", alone)
    assert sorted(p.name for p in alone.parent.iterdir()) == ["model.pt"]
    in_run = Translator(load_run(tiny_run)).translate(TWO_LINES.splitlines())
    moved = run_mt("translate", str(alone), input=TWO_LINES)
    assert moved.code == 0, moved.err
    assert moved.out.splitlines() == in_run and "zwei und vierzig" in moved.out
    src, ref = str(TOY / "toy.test.en"), str(TOY / "toy.test.de")
    a = evaluate(tiny_run, src=src, ref=ref)
    r = run_mt("eval", str(alone), "--src", src, "--ref", ref, "--json", cwd=tmp_path)
    assert r.code == 0, r.err
    b = json.loads(r.out)
    assert b["bleu"] == a["bleu"] > 80 and b["chrf"] == a["chrf"]


def test_files_travel_as_bytes(tiny_run, tmp_path):
    run = load_run(tiny_run)
    blob = bytes(range(256)) * 3
    state = run_state(run.model.state_dict(), run.cfg, run.src_vocab, run.tgt_vocab, 7,
                      files={"spm.model": blob, "empty": b""})
    save_checkpoint(tmp_path / "x.pt", state)
    again = load_run(tmp_path / "x.pt")
    assert again.files == {"spm.model": blob, "empty": b""} and again.step == 7


def test_damaged_one_file_checkpoints_are_refused(tiny_run, tmp_path):
    good = load_checkpoint(tiny_run / "best.pt")
    cases = {
        "newer": ({**good, "format": FORMAT + 1}, "format"),
        "vocab": ({**good, "vocab": {"src": good["vocab"]["src"], "tgt": ["x"]}}, "vocabulary"),
        "config": ({**good, "config": {**good["config"], "bogus": 1}}, "bogus"),
        "shape": ({**good, "vocab": {**good["vocab"], "tgt": good["vocab"]["tgt"][:-1]}},
                  "does not match"),
    }
    for name, (state, needle) in cases.items():
        torch.save(state, tmp_path / f"{name}.pt")
        with pytest.raises(CheckpointError, match=needle):
            load_run(tmp_path / f"{name}.pt")
    r = run_mt("translate", str(tmp_path / "vocab.pt"), input="one\n")
    assert_user_error(r, 5, "vocab.pt", "damaged one-file checkpoint")


def test_info_json(tiny_run):
    r = run_mt("info", str(tiny_run), "--json")
    assert r.code == 0, r.err
    info = json.loads(r.out)
    run = load_run(tiny_run)
    assert info["checkpoint"] == str(tiny_run / "best.pt")
    assert info["format"] == FORMAT and info["self_contained"] is True
    assert info["parameters"] == sum(p.numel() for p in run.model.parameters())
    assert info["vocab"] == {"src": len(run.src_vocab), "tgt": len(run.tgt_vocab),
                             "shared": False}
    assert info["model"]["d_model"] == 64 and info["model"]["n_enc_layers"] == 2
    assert info["tokenizer"] == {"kind": "spacy", "src_lang": "en", "tgt_lang": "de",
                                 "lowercase": False}
    last = load_checkpoint(tiny_run / "last.pt")["step"]
    assert info["step"] == run.step and info["steps_trained"] == last
    records = [json.loads(line) for line in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    valid = [e for e in records if e["event"] == "valid"]
    top = max(e["val_bleu"] for e in valid)
    assert info["best"] == {"metric": "val_bleu", "value": top,
                            "step": min(e["step"] for e in valid if e["val_bleu"] == top)}
    assert info["best"]["step"] == run.step  # best.pt is the best validation's checkpoint
    assert {c["name"]: (c["bytes"], c["step"]) for c in info["checkpoints"]} == {
        "best.pt": ((tiny_run / "best.pt").stat().st_size, run.step),
        "last.pt": ((tiny_run / "last.pt").stat().st_size, last)}
    text = run_mt("info", str(tiny_run / "last.pt"))
    assert text.code == 0, text.err
    assert "parameters:" in text.out and f"steps trained: {last}" in text.out
    assert "best:" in text.out and "last.pt:" in text.out and "MiB" in text.out


def test_info_of_missing_truncated_or_foreign_checkpoints(tiny_run, tmp_path):
    cut = tmp_path / "cut.pt"
    cut.write_bytes((tiny_run / "best.pt").read_bytes()[:5000])
    assert_user_error(run_mt("info", str(cut), "--json"), 5, "truncated or corrupted")
    with pytest.raises(CheckpointError, match="none.pt"):
        run_info(tmp_path / "none.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    with pytest.raises(CheckpointError, match="not an mt checkpoint"):
        run_info(foreign)
    old = tmp_path / "old" / "best.pt"  # weights only, and no run directory around it
    old.parent.mkdir()
    state = load_checkpoint(tiny_run / "best.pt")
    torch.save({"model": state["model"], "step": state["step"]}, old)
    with pytest.raises(CheckpointError, match="config missing"):
        run_info(old)


def test_old_weights_only_checkpoints_still_load_from_their_run_directory(tiny_run, tmp_path):
    run_dir = shutil.copytree(tiny_run, tmp_path / "run")
    state = load_checkpoint(run_dir / "best.pt")
    torch.save({"model": state["model"], "step": state["step"]}, run_dir / "best.pt")
    lines = TWO_LINES.splitlines()
    old = load_run(run_dir)
    assert Translator(old).translate(lines) == Translator(load_run(tiny_run)).translate(lines)
    assert run_info(run_dir)["format"] == 0 and not run_info(run_dir)["self_contained"]
