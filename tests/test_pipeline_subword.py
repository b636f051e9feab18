"""End to end with SentencePiece: a tiny joint model trained for real on the toy corpus, then
eval, translate and `mt tokenize` on top of it (mt in-process: the cli fixture); and `mt tokenize
--lang` on its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, SPM, THREADS, assert_user_error, make_weights_only
from mt.tokenizers.subword import JOINT
from mt.tokenizers.text import MARK, normalize

pytestmark = pytest.mark.slow  # every test here trains a model or runs mt many times

ODD = f"Zwei {MARK} und ▁ vierzig \uffee\t😀  e\u0301 <unk>"


def sets(*overrides: str) -> list[str]:
    return [arg for s in overrides for arg in ("--set", s)]


def test_sentencepiece_run_learns_and_keeps_its_model(spm_run):
    events = [json.loads(line) for line in (spm_run / "metrics.jsonl").read_text().splitlines()]
    bleus = [e["val_bleu"] for e in events if e["event"] == "valid"]
    assert len(bleus) >= 3 and max(bleus) > bleus[0] + 10, bleus
    assert (spm_run / JOINT).is_file()
    src_vocab = (spm_run / "vocab.src.txt").read_text().splitlines()
    assert src_vocab == (spm_run / "vocab.tgt.txt").read_text().splitlines()
    assert src_vocab[:4] == ["<pad>", "<unk>", "<bos>", "<eos>"] and len(src_vocab) == 330


def test_info_names_the_sentencepiece_model(cli, spm_run):
    r = cli("info", str(spm_run), "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["tokenizer"] == {
        "kind": "sentencepiece", "src_lang": "en", "tgt_lang": "de", "lowercase": False,
        "model_type": "unigram", "vocab_size": 330, "joint": True}
    r = cli("info", str(spm_run))
    assert "tokenizer:     sentencepiece en -> de (joint unigram, 330 pieces)\n" in r.out, r.out


def test_sentencepiece_run_evaluates_translates_and_tokenizes(cli, spm_run, tmp_path):
    r = cli("eval", str(spm_run), "--split", "test", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["bleu"] > 10

    src = "Yesterday we saw forty two red dogs.\n\nI need seven hundred eleven books.\n"
    r = cli("translate", str(spm_run), stdin=src.encode())
    assert r.code == 0, r.err
    lines = r.out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[0] and lines[2], lines
    assert "▁" not in r.out and "<0x" not in r.out  # plain text, not pieces

    text = f"{ODD}\n\n  Gestern sahen wir zwei Hunde.\n"
    r = cli("tokenize", str(spm_run), "--side", "tgt", stdin=text.encode())
    assert r.code == 0, r.err
    tokens = r.out.split("\n")
    assert len(tokens) == 4 and tokens[1] == "" and "▁" in tokens[2], tokens
    (tmp_path / "tok.txt").write_text(r.out)
    r = cli("tokenize", str(spm_run / "best.pt"), "--detok", "-i", str(tmp_path / "tok.txt"),
            "-o", str(tmp_path / "back.txt"))
    assert r.code == 0, r.err
    back = (tmp_path / "back.txt").read_text().split("\n")
    assert back == [normalize(line) for line in text.split("\n")]


def test_sentencepiece_run_loads_without_spacy(spm_run):
    code = f"""
import sys
from pathlib import Path
from mt.checkpoint import load_run
from mt.translator import Translator
from mt.commands.tokenize import pick_tokenizer
run = load_run(Path({str(spm_run)!r}))
assert len(Translator(run).translate(["one two", ""])) == 2
pick_tokenizer(Path({str(spm_run)!r}), "tgt").tokenize("ein Test")
assert "spacy" not in sys.modules, "spaCy was imported"
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, **THREADS})
    assert p.returncode == 0, p.stderr


def test_missing_or_damaged_tokenizer_model_is_a_checkpoint_error(cli, spm_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(spm_run, run)
    model = (run / JOINT).read_bytes()
    (run / JOINT).write_bytes(model[: len(model) // 3])
    # best.pt carries its own copy of the model: the run directory's does not matter to it.
    r = cli("translate", str(run), stdin=b"one\n")
    assert r.code == 0 and r.out.count("\n") == 1, r
    make_weights_only(run)  # as checkpoints were before: the tokenizer from the run directory
    assert_user_error(cli("translate", str(run), stdin=b"one\n"), 5, JOINT, "corrupted")
    (run / JOINT).unlink()
    assert_user_error(cli("eval", str(run)), 5, JOINT, "missing")
    assert_user_error(cli("tokenize", str(run)), 5, JOINT, "missing")
    (run / JOINT).write_bytes(model)
    vocab = (run / "vocab.tgt.txt").read_text().splitlines()
    vocab[10], vocab[11] = vocab[11], vocab[10]
    (run / "vocab.tgt.txt").write_text("\n".join(vocab) + "\n")
    assert_user_error(cli("translate", str(run), stdin=b"one\n"), 5, "vocab.tgt.txt",
                      "does not match")


def test_a_run_without_its_model_file_tokenizes_from_its_checkpoint(cli, spm_run, tmp_path):
    # best.pt carries the SentencePiece model: tokenize, like translate, needs nothing else
    run = tmp_path / "run"
    shutil.copytree(spm_run, run)
    (run / JOINT).unlink()
    text = "Ein Mann fährt Fahrrad.\n"
    for side in ("src", "tgt"):
        alone = cli("tokenize", str(run), "--side", side, stdin=text.encode())
        assert alone.code == 0, alone
        assert alone.out == cli("tokenize", str(spm_run), "--side", side, stdin=text.encode()).out
        assert alone.out.strip() and alone.out != text


def test_an_export_with_a_damaged_tokenizer_model_says_export_it_again(cli, spm_run, tmp_path):
    pytest.importorskip("ctranslate2")
    model = tmp_path / "model"
    assert cli("export", str(spm_run), "--to", "ctranslate2", str(model)).code == 0
    proto = (model / JOINT).read_bytes()
    (model / JOINT).write_bytes(proto[: len(proto) // 3])
    again = ("damaged CTranslate2 export", JOINT, "export it again", f"{model} --force")
    r = cli("translate", "--engine", "ctranslate2", str(model), stdin=b"one\n")
    assert_user_error(r, 5, *again, "corrupted")
    (model / JOINT).unlink()
    r = cli("translate", "--engine", "ctranslate2", str(model), stdin=b"one\n")
    assert_user_error(r, 5, *again, "missing")
    assert r.out == "" and sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_sentencepiece_training_errors(cli, tmp_path):
    cfg = str(ROOT / "configs" / "toy.yaml")
    r = cli("train", cfg, "--out", str(tmp_path / "big"), "--device", "cpu",
            *sets(*SPM, "data.vocab_size=100000"))
    assert_user_error(r, 3, "data.tokenizer.vocab_size 100000", "largest usable size is")
    data = tmp_path / "blank"
    data.mkdir()
    for split in ("toy.train", "toy.val"):
        for lang in ("en", "de"):
            shutil.copy(ROOT / "data" / "toy" / f"{split}.{lang}", data)
    for lang in ("en", "de"):
        (data / f"toy.train.{lang}").write_text(" \n\t\n")
    r = cli("train", cfg, "--out", str(tmp_path / "blank_run"), "--device", "cpu",
            *sets(*SPM, f"data.dir={data}"))
    assert_user_error(r, 4, "no text to train SentencePiece")
    for lang in ("en", "de"):
        (data / f"toy.train.{lang}").write_text("")
    r = cli("train", cfg, "--out", str(tmp_path / "empty_run"), "--device", "cpu",
            *sets(*SPM, f"data.dir={data}"))
    assert_user_error(r, 4, "empty")


def test_tokenize_with_a_spacy_language(cli, tmp_path):
    text = "Kids' Food Basket, a father-figure.\n\n\tKeks .  \n" + ODD + "\n"
    r = cli("tokenize", "--lang", "en", stdin=text.encode())
    assert r.code == 0, r.err
    out = r.out.split("\n")
    assert len(out) == 5 and out[1] == "" and out[4] == ""
    assert out[0].split() == ["Kids", MARK + "'", "Food", "Basket", MARK + ",", "a", "father",
                              MARK + "-" + MARK, "figure", MARK + "."]
    (tmp_path / "tok.txt").write_text(r.out)
    r = cli("tokenize", "--lang", "en", "--detok", "-i", str(tmp_path / "tok.txt"))
    assert r.code == 0, r.err
    assert r.out.split("\n") == [normalize(line) for line in text.split("\n")]

    r = cli("tokenize", "--lang", "de", "--detok", stdin="Ein Satz , nie tokenisiert .\n"
            f"{MARK}{MARK} \uffee x\uffee\n".encode())  # never tokenized: best effort, no traceback
    assert r.code == 0 and r.out.count("\n") == 2 and "Ein Satz" in r.out, r
    r = cli("tokenize", "--lang", "de", "--lowercase", "-i", str(tmp_path / "tok.txt"), "-o",
            str(tmp_path / "low.txt"))
    assert r.code == 0 and (tmp_path / "low.txt").read_text().startswith("kids ")

    assert_user_error(cli("tokenize", "--lang", "klingon", stdin=b"x\n"), 3, "klingon")
    assert_user_error(cli("tokenize", stdin=b"x\n"), 2, "--lang")
    assert_user_error(cli("tokenize", "--lang", "en", "-i", str(tmp_path / "nope")), 4)
    assert_user_error(cli("tokenize", str(tmp_path / "nope")), 5)


def test_a_run_older_than_reversible_tokenization_is_flagged(cli, tiny_run, tmp_path):
    run = tmp_path / "old"
    shutil.copytree(tiny_run, run)
    make_weights_only(run)  # old runs' checkpoints held no config of their own
    config = (run / "config.yaml").read_text()
    assert "tokenizer: spacy\n" in config
    (run / "config.yaml").write_text(config.replace("  tokenizer: spacy\n", ""))
    r = cli("translate", str(run), stdin=b"one\n")
    assert r.code == 0 and "trained before reversible tokenization" in r.err, r
