"""docs/hf.md's walkthrough, run as written: its commands in order, in a directory laid out as
the page says (data/mydomain: a slice of the toy corpus; configs/ the repository's), on a Marian
model built here in place of the Hub id; each prints what the page says it prints. mt runs in
this process (the cli fixture, from that directory), but for `mt serve`: a server of its own."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from hf_models import build_marian  # noqa: E402

from benchmarks.bench_serve import Client, Served  # noqa: E402
from conftest import ROOT, THREADS, TOY  # noqa: E402

pytestmark = pytest.mark.slow
HUB_ID = "Helsinki-NLP/opus-mt-en-de"


def walkthrough() -> list[list[str]]:
    text = (ROOT / "docs" / "hf.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- walkthrough -->\n```sh\n(.*?)```\n<!-- end of walkthrough -->",
                      text, re.S)
    assert block, "docs/hf.md lost its walkthrough markers"
    return [shlex.split(line) for line in block[1].splitlines() if line.strip()]


def _domain(root: Path) -> None:
    """data/mydomain/{train,val,test}.{en,de}: 500 toy pairs, 100 for validation and test."""
    (root / "data" / "mydomain").mkdir(parents=True)
    for split, source, n in (("train", "train", 500), ("val", "val", 100),
                             ("test", "test", 100)):
        for lang in ("en", "de"):
            lines = (TOY / f"toy.{source}.{lang}").read_text(encoding="utf-8").splitlines()[:n]
            (root / "data" / "mydomain" / f"{split}.{lang}").write_text(
                "".join(f"{line}\n" for line in lines), encoding="utf-8")
    (root / "configs").symlink_to(ROOT / "configs")


def test_the_walkthrough_runs_as_written(tmp_path, cli, monkeypatch):
    model = build_marian(tmp_path / "download", d_model=64, ffn=128, init_std=0.05)
    work = tmp_path / "work"
    work.mkdir()
    _domain(work)
    monkeypatch.chdir(work)  # the commands' relative paths are the page's
    printed = []
    for command in walkthrough():
        assert command[0] == "mt"
        args = [str(model) if a == HUB_ID else a for a in command[1:]]
        if args[0] == "serve":
            with Served(work / args[1], env=THREADS) as served:
                got = Client(served.url).translate(["Today you have eight cats."])
                assert served.stop() == 0
            printed.append(got)
            continue
        r = cli(*args)
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
