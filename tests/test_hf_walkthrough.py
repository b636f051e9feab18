"""docs/hf.md's walkthrough, run as written, without the Hub: the page's "Without the Hub"
commands (a slice of the toy corpus as data/mydomain, a Marian model built by
scripts/make_marian.py, imported) in place of its first, then the rest in order, in a
directory laid out as the repository (configs/, scripts/, data/toy); each prints what the
page says it prints, and the fine-tuning lowers the validation loss. mt runs in this process
(the cli fixture, from that directory), but for `mt serve`: a server of its own; the shell
lines in bash."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from benchmarks.bench_serve import Client, Served  # noqa: E402
from conftest import ROOT, THREADS  # noqa: E402
from mt.checkpoint import load_checkpoint  # noqa: E402

pytestmark = pytest.mark.slow
HUB_IMPORT = "mt import hf Helsinki-NLP/opus-mt-en-de --out runs/opus-en-de"


def block(name: str) -> list[str]:
    """The lines of docs/hf.md's sh block between <!-- name --> and <!-- end of name -->."""
    text = (ROOT / "docs" / "hf.md").read_text(encoding="utf-8")
    found = re.search(rf"<!-- {name} -->\n```sh\n(.*?)```\n<!-- end of {name} -->", text, re.S)
    assert found, f"docs/hf.md lost its {name} markers"
    return [line for line in found[1].splitlines() if line.strip()]


def _repository(work: Path) -> None:
    """work laid out as the repository's root, where the page's commands run."""
    (work / "data").mkdir(parents=True)
    (work / "data" / "toy").symlink_to(ROOT / "data" / "toy")
    for name in ("configs", "scripts"):
        (work / name).symlink_to(ROOT / name)


def _shell(line: str, work: Path) -> None:
    """A line that is not mt's, in bash, with this interpreter as `python` and this tree's mt."""
    env = {**os.environ, **THREADS, "PYTHONPATH": str(ROOT),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    p = subprocess.run(["bash", "-ec", line], cwd=work, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, (line, p.stderr)


def test_the_walkthrough_runs_as_written_without_the_hub(tmp_path, cli, monkeypatch):
    walkthrough, offline = block("walkthrough"), block("walkthrough without the hub")
    assert walkthrough[0] == HUB_IMPORT  # the offline lines replace it: the same --out
    assert re.fullmatch(r"mt import hf \S+ --out runs/opus-en-de", offline[-1])
    work = tmp_path / "work"
    _repository(work)
    monkeypatch.chdir(work)  # the commands' relative paths are the page's
    printed = []
    for line in offline + walkthrough[1:]:
        command = shlex.split(line)
        if command[0] != "mt":
            _shell(line, work)
        elif command[1] == "serve":
            with Served(work / command[2], env=THREADS) as served:
                got = Client(served.url).translate(["Today you have eight cats."])
                assert served.stop() == 0
            printed.append(got)
        else:
            r = cli(*command[1:])
            assert r.code == 0, (command, r.err)
            printed.append((r.out, r.err))
    imported, info, check, before, train, after, served, ct2, hf = printed
    assert json.loads(imported[0])["languages"] == "en-de"
    assert "imported from" in info[0] and "marian en -> de" in info[0]
    assert "pairs" in check[0] + check[1]
    assert "BLEU" in before[0] and "BLEU" in after[0]
    assert "model: the parent's" in train[1] and re.search(r"step 0 \| val_loss", train[1])
    assert served[0]["text"]
    assert json.loads(ct2[0])["to"] == "ctranslate2" and json.loads(hf[0])["to"] == "hf"
    from transformers import MarianMTModel, MarianTokenizer
    MarianMTModel.from_pretrained(work / "exports" / "opus-en-de-mydomain-hf")
    MarianTokenizer.from_pretrained(work / "exports" / "opus-en-de-mydomain-hf")
    lineage = cli("info", "runs/opus-en-de-mydomain").out
    assert "imported from" in lineage and "-> fine-tuned on" in lineage
    _fine_tuning_helped(work / "runs" / "opus-en-de-mydomain")


def _fine_tuning_helped(run: Path) -> None:
    """The validation loss fell from step 0's (the imported model's), and best.pt followed it,
    though BLEU stayed 0 (the page's claim: a random model)."""
    valid = [r for line in (run / "metrics.jsonl").open()
             if (r := json.loads(line))["event"] == "valid"]
    assert valid[0]["step"] == 0 and valid[-1]["val_loss"] < valid[0]["val_loss"]
    assert load_checkpoint(run / "best.pt")["step"] == valid[-1]["step"] > 0
