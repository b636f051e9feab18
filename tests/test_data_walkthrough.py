"""docs/data.md's walkthrough, run as written: an OPUS corpus fetched with `mt data opus`, WMT
test sets with `mt data sacrebleu`, the config the page shows, `mt data check`, `mt train` and
`mt eval`, in a directory of its own, on loopback copies of OPUS and sacreBLEU's hosts
(tests/public_corpora.py: toy sentences in their real layouts). Only the training command gets
more: a tiny model, a small SentencePiece vocabulary and a few steps, so that it runs in
seconds."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from conftest import ROOT, TINY, TOY
from public_corpora import md5, moses_zip, url_path, wmt_tarball

pytestmark = pytest.mark.slow
QUICK = [*TINY, "data.tokenizer.vocab_size=330", "train.max_steps=30", "train.max_minutes=0",
         "train.warmup=10", "train.eval_every=30", "train.eval_bleu=false", "train.metric=loss"]


def page_block(name: str, kind: str) -> str:
    text = (ROOT / "docs" / "data.md").read_text(encoding="utf-8")
    block = re.search(rf"<!-- {name}[^>]*-->\n```{kind}\n(.*?)```\n<!-- end of {name}", text,
                      re.S)
    assert block, f"docs/data.md lost its {name} markers"
    return block[1]


def toy(split: str, lang: str, n: int) -> list[str]:
    return (TOY / f"toy.{split}.{lang}").read_text(encoding="utf-8").splitlines()[:n]


def test_the_walkthrough_runs_as_written(cli, opus_host, sacrebleu_host, tmp_path, monkeypatch):
    opus_host(moses=moses_zip(toy("train", "de", 500), toy("train", "en", 500)))
    tarballs = {name: wmt_tarball(name, {"en-de": (toy(split, "en", 100), toy(split, "de", 100))})
                for name, split in (("wmt18", "val"), ("wmt19", "test"))}
    sacrebleu_host({url_path(name): data for name, data in tarballs.items()},
                   {name: md5(data) for name, data in tarballs.items()})
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (work / "news.yaml").write_text(page_block("walkthrough config", "yaml"), encoding="utf-8")
    printed = []
    for line in page_block("walkthrough", "sh").splitlines():
        command = shlex.split(line)
        assert command[0] == "mt"
        args = command[1:] + (sum((["--set", s] for s in QUICK), []) if command[1] == "train"
                              else [])
        r = cli(*args)
        assert r.code == 0, (line, r.err)
        printed.append(r)
    corpus, wmt18, wmt19, check, train, evaluate = printed
    assert json.loads(corpus.out)["pairs"] == 500
    assert (json.loads(wmt18.out)["lines"], json.loads(wmt19.out)["lines"]) == (100, 100)
    opus = Path("data/opus/News-Commentary-v16.en-de")
    assert Path(f"{opus}.en").read_text().splitlines() == toy("train", "en", 500)
    assert Path(f"{opus}.LICENSE").is_file() and Path(f"{opus}.opus.json").is_file()
    assert Path("data/wmt/wmt19.en-de.de").read_text().splitlines() == toy("test", "de", 100)
    assert check.out.startswith("news-commentary: 500 pairs") and "wmt19.en-de" in check.out
    assert json.loads(train.out)["step"] == 30
    assert re.match(r"BLEU = \d+\.\d\d  nrefs:1\|", evaluate.out)
    assert "data/wmt/wmt19.en-de.en" in json.loads(cli("eval", "runs/news", "--json").out)["src"]
