"""End to end: a tiny model trained for real on the toy corpus, then the CLI on top of it."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TINY
from mt.checkpoint import load_checkpoint, load_run
from mt.commands.train import train

pytestmark = pytest.mark.slow  # every test here trains a model


def read_metrics(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_tiny_model_learns_the_toy_task(tiny_run):
    events = read_metrics(tiny_run)
    losses = [e["loss"] for e in events if e["event"] == "train"]
    bleus = [e["val_bleu"] for e in events if e["event"] == "valid"]
    assert losses[-1] < losses[0] / 3, losses
    assert bleus[0] < 50 and max(bleus) > 80, bleus
    for name in ("config.yaml", "vocab.src.txt", "vocab.tgt.txt", "best.pt", "last.pt"):
        assert (tiny_run / name).is_file(), name


def test_cli_eval_and_translate(cli, tiny_run, tmp_path):
    r = cli("eval", str(tiny_run), "--split", "test", "--json", "--output",
            str(tmp_path / "hyp.txt"))
    assert r.code == 0, r.err
    result = json.loads(r.out)
    assert result["bleu"] > 80 and result["chrf"] > 90, result
    assert result["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert len((tmp_path / "hyp.txt").read_text().splitlines()) == 300

    plain = cli("eval", str(tiny_run / "best.pt"), "--split", "val")
    assert plain.code == 0 and plain.out.startswith("BLEU = ") and "chrF = " in plain.out

    src = "Yesterday we saw forty two red dogs.\n\nI need seven hundred eleven books.\n\n"
    r = cli("translate", str(tiny_run), stdin=src.encode())
    assert r.code == 0, r.err
    lines = r.out.split("\n")
    assert len(lines) == 5 and lines[1] == "" and lines[3] == "" and lines[4] == ""
    assert "zwei und vierzig" in lines[0] and lines[0].startswith("Gestern")
    assert "sieben hundert elf" in lines[2]

    (tmp_path / "in.txt").write_text(src)
    r = cli("translate", str(tiny_run), "-i", str(tmp_path / "in.txt"), "-o",
            str(tmp_path / "out.txt"))
    assert r.code == 0, r.err
    assert (tmp_path / "out.txt").read_text() == "\n".join(lines[:4]) + "\n"


@pytest.mark.dist
def test_distributed_training_under_torchrun(tmp_path):
    """Two CPU processes (gloo) train one model: rank 0 alone writes the run directory."""
    out = tmp_path / "ddp"
    sets = [*TINY, "train.max_steps=4", "train.eval_bleu=false", "train.metric=loss"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "-m", "mt",
           "train", str(ROOT / "configs/toy.yaml"), "--out", str(out), "--device", "cpu"]
    for s in sets:
        cmd += ["--set", s]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert [json.loads(line)["step"] for line in p.stdout.splitlines()] == [4]
    assert load_checkpoint(out / "last.pt")["step"] == 4
    assert len([e for e in read_metrics(out) if e["event"] == "valid"]) == 1


def test_shared_vocab_with_all_embeddings_tied(tmp_path):
    sets = [*TINY, "train.max_steps=3", "train.eval_bleu=false", "train.metric=loss",
            "data.shared_vocab=true", "model.tie_all=true"]
    train(ROOT / "configs" / "toy.yaml", sets, tmp_path / "shared", "cpu", False)
    src = (tmp_path / "shared" / "vocab.src.txt").read_text()
    assert src == (tmp_path / "shared" / "vocab.tgt.txt").read_text()
    assert "Gestern" in src.split("\n") and "Yesterday" in src.split("\n")  # both sides
    run = load_run(tmp_path / "shared")
    assert run.model.src_embed is run.model.tgt_embed
