"""mt/commands/calibrate.py: `mt calibrate` on the toy model, what it stores and shows, and
what uses it (`--confidence`, `--min-confidence`, `mt info`); its one-line errors. Also the
toy model's coverage against a planted omission."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import TOY, assert_user_error
from mt.checkpoint import load_run
from mt.commands.calibrate import one_sided
from mt.confidence import CALIBRATION, features
from mt.data import pad


def bad_refs(tmp_path) -> Path:
    """toy val's references, every third replaced by another line's: the toy model translates
    val perfectly, and a calibration needs lines on both sides of its threshold."""
    refs = (TOY / "toy.val.de").read_text().splitlines()
    path = tmp_path / "val.de"
    path.write_text("".join((refs[i - 1] if i % 3 == 0 else r) + "\n"
                            for i, r in enumerate(refs)))
    return path


def test_calibrate_then_min_confidence_rejects_exactly_the_lines_below(cli, run_copy, tmp_path):
    r = cli("calibrate", str(run_copy), "--src", str(TOY / "toy.val.en"), "--ref",
            str(bad_refs(tmp_path)), "--json")
    assert r.code == 0, r.err
    fitted = json.loads(r.out)
    assert fitted["lines"] == 300 and (run_copy / CALIBRATION).is_file()
    info = cli("info", str(run_copy))
    assert "calibration:" in info.out and "fitted on 300 lines" in info.out
    assert json.loads(cli("info", str(run_copy), "--json").out)["calibration"]["applies"]

    src = tmp_path / "in.en"
    lines = (TOY / "toy.test.en").read_text().splitlines()[:60]
    src.write_text("\n".join(lines) + "\n")
    j = cli("translate", str(run_copy), "-i", str(src), "--format", "jsonl", "--confidence")
    assert j.code == 0, j.err
    records = [json.loads(line) for line in j.out.splitlines()]
    conf = [rec["confidence"] for rec in records]
    assert all(0 < c < 1 for c in conf) and len(set(conf)) > 5, conf
    assert set(records[0]["features"]) >= {"mean_logprob", "coverage", "repetition"}
    assert [w for w, _ in records[0]["words"]] == records[0]["text"].split()
    bounds = json.loads((run_copy / CALIBRATION).read_text())["calibration"]["bounds"]
    for rec in records:  # a flag exactly where a feature is outside the held-out set's range
        f = rec["features"]
        expected = [k for k, (lo, hi) in bounds.items()
                    if (lo is not None and f[k] < lo) or (hi is not None and f[k] > hi)]
        assert rec["flags"] == expected
    x = sorted(conf)[len(conf) // 2]  # the median: about half rejected
    t = cli("translate", str(run_copy), "-i", str(src), "--min-confidence", str(x))
    assert t.code == 0, t.err
    out = t.out.splitlines()
    expected = ["" if c < x else rec["text"] for c, rec in zip(conf, records, strict=True)]
    assert out == expected
    rejected = sum(c < x for c in conf)
    assert 0 < rejected < len(conf)
    assert f"{rejected} of {len(conf)} line(s) below it, written empty" in t.err
    t = cli("translate", str(run_copy), "-i", str(src), "--min-confidence", str(x),
            "--format", "jsonl")
    strict = [json.loads(line, parse_constant=pytest.fail) for line in t.out.splitlines()]
    assert [rec["score"] for rec in strict] == [rec["score"] for rec in records]  # not NaN
    assert sum(rec.get("rejected", False) for rec in strict) == rejected
    again = cli("translate", str(run_copy), "-i", str(src), "--format", "jsonl", "--confidence")
    assert again.out == j.out  # deterministic


def test_calibrate_and_min_confidence_errors_are_one_line(cli, run_copy, tmp_path):
    short = tmp_path / "short.en"
    short.write_text("Yesterday we saw forty two red dogs.\n" * 20)
    short_ref = tmp_path / "short.de"
    short_ref.write_text("Gestern sahen wir zwei und vierzig rote Hunde.\n" * 20)
    assert_user_error(cli("calibrate", str(run_copy), "--src", str(short), "--ref",
                          str(short_ref)), 4, "at least 100 held-out lines")
    assert_user_error(cli("calibrate", str(run_copy), "--src", str(TOY / "toy.val.en"),
                          "--ref", str(short_ref)), 4)
    assert_user_error(cli("calibrate", str(run_copy), "--src", str(TOY / "toy.val.en"),
                          "--ref", str(TOY / "toy.val.de")), 4, "every line reaches chrF 50,"
                      " so the set has no line below it to tell apart from the rest (every line "
                      "scores 100.0); give a harder held-out set")
    src = tmp_path / "in.en"
    src.write_text("Yesterday we saw forty two red dogs.\n")
    assert_user_error(cli("translate", str(run_copy), "-i", str(src), "--min-confidence",
                          "0.5"), 3, "has no calibration", "mt calibrate")
    assert_user_error(cli("translate", str(run_copy), "-i", str(src), "--min-confidence",
                          "0.5", "--nbest", "2", "--beam", "2"), 2, "not with --nbest")
    (run_copy / CALIBRATION).write_text('{"format": 1, "crc32": 0, "calibration": {}}')
    for args in (["translate", str(run_copy), "-i", str(src), "--confidence"],
                 ["info", str(run_copy)]):
        assert_user_error(cli(*args), 5, "damaged calibration", "mt calibrate again")


def test_a_set_on_one_side_of_the_threshold_is_told_what_it_lacks():
    """Advice that can be followed: a threshold only where the scores differ (issue 65: it
    said "between its lines' scores (100.0 to 100.0)")."""
    assert one_sided([40.0, 60.0], 50) is None
    assert one_sided([100.0] * 3, 50) == ("every line reaches chrF 50, so the set has no line "
                                          "below it to tell apart from the rest (every line "
                                          "scores 100.0); give a harder held-out set")
    assert one_sided([60.0, 100.0], 50).endswith(
        "; give a harder held-out set, or a --threshold above some lines' scores (they range "
        "from 60.0 to 100.0)")
    assert one_sided([0.0, 20.0], 50).startswith(
        "no line reaches chrF 50, so the set has no line at or above it")
    assert "a --threshold at or below some lines' scores (they range from 0.0 to 20.0)" in \
        one_sided([0.0, 20.0], 50)
    assert "--threshold" not in one_sided([0.0, 0.0], 50)


def test_coverage_drops_where_the_output_leaves_a_source_word_out(tiny_run):
    run = load_run(tiny_run)
    source = run.src_tok.tokenize("Yesterday we saw forty two red dogs.")
    out_full = run.tgt_tok.tokenize("Gestern sahen wir zwei und vierzig rote Hunde.")
    out_omitted = [w for w in out_full if w != "rote"]  # the planted omission: "red"
    assert len(out_omitted) == len(out_full) - 1
    src = pad([run.src_vocab.encode(source)] * 2)
    found, _ = features(run.model, src, [run.tgt_vocab.encode(out_full),
                                         run.tgt_vocab.encode(out_omitted)])
    assert found[1]["coverage"] < found[0]["coverage"] - 0.02
    assert found[1]["mean_logprob"] < found[0]["mean_logprob"]


def test_mc_dropout_gives_each_line_the_mean_and_variance_of_its_passes(cli, tiny_run, tmp_path):
    """--mc-dropout N: N passes with the model's dropout on, seeded (decode.seed), so the same
    command gives the same figures; the toy model trained without dropout is told so."""
    src = tmp_path / "in.en"
    src.write_text("Yesterday zebras bought forty two red dogs.\nYou see four red cats.\n")
    args = ["translate", str(tiny_run), "-i", str(src), "--format", "jsonl", "--confidence",
            "--mc-dropout", "4", "--set", "model.dropout=0.2"]
    runs = [cli(*args) for _ in range(2)]
    assert all(r.code == 0 for r in runs), runs[0].err
    first = [json.loads(line) for line in runs[0].out.splitlines()]
    assert runs[0].out == runs[1].out  # seeded: the same passes
    for rec in first:
        f = rec["features"]
        assert f["mc_dropout_variance"] > 0 and f["mc_dropout_logprob"] < 0
        assert set(f) >= {"mean_logprob", "coverage"}  # beside the search's features
    plain = cli("translate", str(tiny_run), "-i", str(src), "--format", "jsonl",
                "--confidence", "--mc-dropout", "3")
    assert plain.code == 0 and "the model has no dropout" in plain.err
    assert all(json.loads(line)["features"]["mc_dropout_variance"] < 1e-20  # rounding only
               for line in plain.out.splitlines())
    assert_user_error(cli("translate", str(tiny_run), "-i", str(src), "--mc-dropout", "4"),
                      3, "--mc-dropout 4", "needs decode.confidence")
