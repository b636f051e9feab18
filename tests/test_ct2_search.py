"""mt/ct2/search.py: CTranslate2 as the search of `mt translate` and `mt eval` (--engine
ctranslate2): the same output and scores as mt's own, an export made on the fly from a run,
and a damaged export or a breaking override refused with one line, nothing written."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from conftest import TOY, assert_user_error, leftovers, snapshot

pytest.importorskip("ctranslate2")


def test_engine_through_the_cli(cli, tiny_run, ct2_export, tmp_path):
    src = str(TOY / "toy.test.en")
    ours = cli("translate", str(tiny_run), "-i", src, "--device", "cpu")
    theirs = cli("translate", "--engine", "ctranslate2", str(ct2_export), "-i", src)
    assert ours.code == 0 and theirs.code == 0, (ours.err, theirs.err)
    assert theirs.out == ours.out and len(ours.out.splitlines()) == 300
    # n-best scores are mt's, from CTranslate2's log-probabilities
    nbest = cli("translate", "--engine", "ctranslate2", str(ct2_export), "--beam", "3",
                "--nbest", "2", "--length-norm", "average", stdin=b"Today you have eight cats.\n")
    mine = cli("translate", str(tiny_run), "--beam", "3", "--nbest", "2", "--length-norm",
               "average", stdin=b"Today you have eight cats.\n")
    assert nbest.code == 0, nbest.err
    first = [line.split("\t") for line in nbest.out.splitlines()][0]
    expect = [line.split("\t") for line in mine.out.splitlines()][0]
    assert first[2] == expect[2] and math.isclose(float(first[1]), float(expect[1]), abs_tol=2e-4)
    # eval of a run directory: exported on the fly, same BLEU as mt's own greedy search
    ev = cli("eval", "--engine", "ctranslate2", str(tiny_run), "--json")
    ev_mt = cli("eval", str(tiny_run), "--json", "--device", "cpu")
    assert ev.code == 0, ev.err
    assert json.loads(ev.out)["bleu"] == json.loads(ev_mt.out)["bleu"] > 90


def _truncate(size):
    return lambda d: (d / "model.bin").write_bytes((d / "model.bin").read_bytes()[:size(d)])


DAMAGE = {  # what is done to a copy of an export -> what the error line names
    "model.bin cut to 0 bytes": (_truncate(lambda d: 0), "model.bin is incomplete"),
    "model.bin cut to 1000 bytes": (_truncate(lambda d: 1000), "invalid payload size"),
    "model.bin cut short by a byte": (_truncate(lambda d: (d / "model.bin").stat().st_size - 1),
                                      "model.bin is incomplete"),
    **{f"{name} missing": (lambda d, name=name: (d / name).unlink(), f"{name} missing")
       for name in ("model.bin", "config.json", "config.yaml", "vocab.src.txt", "vocab.tgt.txt")},
    "source_vocabulary.json missing": (lambda d: (d / "source_vocabulary.json").unlink(),
                                       "source vocabulary"),
    "target_vocabulary.json damaged": (lambda d: (d / "target_vocabulary.json").write_text("x"),
                                       "parse error"),
    "config.yaml damaged": (lambda d: (d / "config.yaml").write_text("model: [\n"), "line 2"),
    "vocab.src.txt damaged": (lambda d: (d / "vocab.src.txt").write_text("a\nb\n"),
                              "not a valid vocabulary"),
    "mt_export.json damaged": (lambda d: (d / "mt_export.json").write_text("{"),
                               "mt_export.json"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_export_is_a_checkpoint_error_that_says_export_again(cli, tiny_run, ct2_export,
                                                                       tmp_path, case):
    damage, needle = DAMAGE[case]
    model = Path(shutil.copytree(ct2_export, tmp_path / "model"))
    damage(model)
    before = snapshot(model)
    src = tmp_path / "in.txt"
    src.write_text("Today you have eight cats.\n")
    out = tmp_path / "out.txt"
    again = ("damaged CTranslate2 export", "export it again: mt export ",
             f"--to ctranslate2 {model} --force")
    if case != "mt_export.json damaged":  # the marker names the checkpoint exported
        again = (*again, f"mt export {tiny_run / 'best.pt'} ")
    r = cli("translate", "--engine", "ctranslate2", model, "-i", src, "-o", out)
    assert_user_error(r, 5, str(model), needle, *again)
    assert r.out == "" and not out.exists() and leftovers(tmp_path) == []
    assert snapshot(model) == before
    if case == "config.yaml damaged":  # eval opens it the same way
        assert_user_error(cli("eval", "--engine", "ctranslate2", model, "--json"), 5, *again)


def test_an_override_that_breaks_a_sound_export_is_a_config_error(cli, ct2_export):
    r = cli("translate", "--engine", "ctranslate2", ct2_export, "--set", "model.bogus=1",
            stdin=b"eight cats\n")
    assert_user_error(r, 3, "--set model.bogus=1", "unknown key")


def repeats(line: str, n: int) -> bool:
    words = line.split()
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return len(grams) != len(set(grams))


def test_no_repeat_ngram_maps_to_the_same_rule(cli, tiny_run, ct2_export):
    """no_repeat_ngram_size: CTranslate2's output is mt's, with and without the option, on
    lines whose greedy output repeats a bigram (the toy model never saw two words alone)."""
    lines = "eight cats\nseven dogs\nforty two red books\nToday you have eight cats.\n"
    outs = {}
    for engine, run in (("mt", tiny_run), ("ctranslate2", ct2_export)):
        for n in ("0", "2"):
            r = cli("translate", "--engine", engine, str(run), "--no-repeat-ngram", n,
                    "--device", "cpu", stdin=lines.encode())
            assert r.code == 0, r.err
            outs[engine, n] = r.out.splitlines()
    for n in ("0", "2"):
        assert outs["ctranslate2", n] == outs["mt", n], n
    assert any(repeats(line, 2) for line in outs["mt", "0"])  # the option has work to do
    assert not any(repeats(line, 2) for line in outs["ctranslate2", "2"])


def test_top_p_maps_to_the_nucleus(cli, tiny_run, ct2_export):
    """sampling_topp: a nucleus of 0.01 holds the most likely token alone, so every sample is
    the greedy translation, however hot the temperature; the whole distribution (topp 1) at
    that temperature gives others."""
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:6]
    text = "".join(f"{line}\n" for line in lines).encode()
    greedy = cli("translate", str(tiny_run), "--device", "cpu", stdin=text).out.splitlines()

    def samples(p: str) -> list[list[str]]:
        r = cli("translate", "--engine", "ctranslate2", str(ct2_export), "--sampling", "topp",
                "--topp", p, "--temperature", "3", "--samples", "3", "--seed", "5",
                stdin=text)
        assert r.code == 0, r.err
        rows = [line.split("\t") for line in r.out.splitlines()]
        return [[t for i, _, t in rows if int(i) == n] for n in range(len(lines))]

    assert samples("0.01") == [[g] * 3 for g in greedy]
    assert any(s != g for drawn, g in zip(samples("1.0"), greedy) for s in drawn)
