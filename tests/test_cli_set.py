"""`--set KEY=VALUE` on the commands that open a run, the decoding options as shortcuts for it,
and the options with a fixed set of values: each error is one line blaming what was typed."""

from __future__ import annotations

import json

import pytest

from conftest import assert_user_error

TWO = b"Today you have eight cats.\nYesterday we had sixty houses.\n"


def test_set_takes_any_key_of_the_run_config(cli, tiny_run):
    by_split = cli("eval", str(tiny_run), "--split", "val", "--json")
    by_set = cli("eval", str(tiny_run), "--set", "data.test=toy.val", "--json")
    assert by_split.code == 0 and by_set.code == 0, (by_split.err, by_set.err)
    a, b = json.loads(by_split.out), json.loads(by_set.out)
    assert a["src"] == b["src"] == "data/toy/toy.val.en" and a["bleu"] == b["bleu"]


def test_decoding_options_are_the_same_as_their_set_items(cli, tiny_run):
    options = cli("translate", str(tiny_run), "--beam", "3", "--nbest", "2",
                  "--length-norm", "average", "--max-len-b", "6", stdin=TWO)
    sets = cli("translate", str(tiny_run), "--set", "decode.beam=3", "--set", "decode.nbest=2",
               "--set", "decode.length_norm=average", "--set", "decode.max_len_b=6", stdin=TWO)
    assert options.code == 0 and sets.code == 0, (options.err, sets.err)
    assert options.out == sets.out and len(options.out.splitlines()) == 4  # the n-best format
    # the options come after the --set items: the option wins (else nbest 3 > beam 1)
    r = cli("translate", str(tiny_run), "--set", "decode.beam=1", "--beam", "3", "--nbest",
            "3", stdin=TWO)
    assert r.code == 0 and len(r.out.splitlines()) == 6, r.err


@pytest.mark.parametrize("args, start, needle", [
    (["--set", "decode.beam=0"], "--set decode.beam=0: ", "decode.beam must be at least 1"),
    (["--beam", "0"], "--beam 0: ", "decode.beam must be at least 1"),
    (["--set", "decode.beam=abc"], "--set decode.beam=abc: ", "must be int"),
    (["--set", "decode.beem=2"], "--set decode.beem=2: ", "did you mean 'beam'"),
    (["--set", "decode.beam"], "--set 'decode.beam': ", "key=value"),
    (["--beam", "2", "--nbest", "3"], "--nbest 3: ", "decode.nbest (3)"),
    (["--length-norm", "mean"], "--length-norm mean: ", "decode.length_norm"),
])
def test_errors_blame_the_set_item_or_the_option(cli, tiny_run, args, start, needle):
    r = cli("translate", str(tiny_run), *args, stdin=b"one\n")
    assert_user_error(r, 3, needle)
    assert r.err.splitlines()[-1].startswith(f"error: {start}"), r.err


def test_eval_and_attention_take_set_too(cli, tiny_run, tmp_path):
    r = cli("eval", str(tiny_run), "--set", "decode.min_len=-1")
    assert_user_error(r, 3, "decode.min_len")
    assert r.err.startswith("error: --set decode.min_len=-1: "), r.err
    r = cli("translate", str(tiny_run), "--attention", str(tmp_path / "a"), "--set",
            "decode.dtype=fp8", stdin=TWO)
    assert_user_error(r, 3, "--set decode.dtype=fp8",
                      "decode.dtype must be one of float32, bf16, int8")
    r = cli("translate", str(tiny_run), "--attention", str(tmp_path / "a"), "--set",
            "decode.nbest=2", stdin=TWO)
    assert_user_error(r, 2, "--attention", "not with --nbest")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("args, option, needle", [
    (["eval", "run", "--split", "dev"], "--split", "'dev': expected val or test"),
    (["eval", "run", "--metrics", "ter", "--metrics", "meteor"], "--metrics",
     "'meteor': expected ter"),
    (["eval", "run", "--engine", "onnx"], "--engine", "'onnx': expected mt or ctranslate2"),
    (["translate", "run", "--engine", "onnx"], "--engine", "'onnx': expected mt or ctranslate2"),
    (["export", "run", "out", "--to", "onnx"], "--to", "'onnx': expected ctranslate2"),
    (["export", "run", "out", "--to", "ctranslate2", "--quantization", "int3"], "--quantization",
     "'int3': expected one of int8, int8_float32, bfloat16, float16"),
    (["tokenize", "run", "--side", "both"], "--side", "'both': expected src or tgt"),
])
def test_values_outside_an_options_set_are_usage_errors(cli, monkeypatch, tmp_path, args, option,
                                                        needle):
    monkeypatch.chdir(tmp_path)  # where "out" would be written
    r = cli(*args)
    assert_user_error(r, 2, f"'{option}'", needle, "--help")
    assert not (tmp_path / "out").exists()
