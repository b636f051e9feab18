"""mt/commands/info.py: `mt info` of runs and checkpoints, good and bad."""

import json

import pytest
import torch

from conftest import assert_user_error, run_mt
from mt.checkpoint import FORMAT, load_checkpoint, load_run
from mt.commands.info import run_info
from mt.errors import CheckpointError


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
