"""mt/commands/evaluate.py: `mt eval`: its scores, and its output path checked before any work;
a split, --src/--ref or a --pairs file of any corpus format."""

import importlib.util
import json
from pathlib import Path

from conftest import TOY, assert_user_error, leftovers, snapshot, write_as
from mt.textio import read_lines
from mt.translator import Translator


def test_eval_checks_its_output_path_before_loading_or_translating(cli, tmp_path, tiny_run,
                                                                    monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("translated although the output path was bad")

    monkeypatch.setattr(Translator, "translate_stream", never)
    missing = tmp_path / "missing" / "dir" / "hyp.txt"
    for run in (tmp_path / "no-such-run", tiny_run):  # no run: the path check comes first
        before = snapshot(tmp_path)
        assert_user_error(cli("eval", run, "--output", tmp_path), 4, str(tmp_path),
                          "is a directory", "; give a file name")
        r = cli("eval", run, "--output", missing)
        assert_user_error(r, 4, str(missing), f"output directory {missing.parent} does not "
                          "exist", "; create it or choose another path")
        assert not (tmp_path / "missing").exists()
        assert snapshot(tmp_path) == before and leftovers(tmp_path) == []


def test_eval_cli_prints_every_score_and_json_holds_them(cli, tiny_run):
    r = cli("eval", str(tiny_run), "--split", "val", "--metrics", "ter")
    assert r.code == 0, r.err
    names = [line.split(" = ")[0] for line in r.out.splitlines()]
    assert names == ["BLEU", "chrF", "BLEU lowercased", "BLEU tokenized lowercased",
                     "BLEU Moses-tokenized lowercased", "TER"]
    r = cli("eval", str(tiny_run), "--split", "val", "--json")
    result = json.loads(r.out)
    for key in ("bleu", "chrf", "bleu_lc", "bleu_tok_lc", "bleu_moses_lc"):
        assert isinstance(result[key], float) and result[key + "_signature"], key
    assert result["bleu_lc"] >= result["bleu"] - 1e-9
    assert_user_error(cli("eval", str(tiny_run), "--metrics", "meteor"), 2, "--metrics")


def test_eval_without_the_moses_extra_leaves_that_score_out_and_says_so(tiny_run, monkeypatch,
                                                                       capsys):
    import sys

    from mt import metrics
    from mt.commands.evaluate import evaluate

    with_moses = evaluate(tiny_run, split="val")
    monkeypatch.setitem(sys.modules, "sacremoses", None)  # `import sacremoses` fails
    metrics._moses_words.cache_clear()  # the splitter is looked up once per language
    try:
        without = evaluate(tiny_run, split="val")
    finally:
        metrics._moses_words.cache_clear()
    assert "bleu_moses_lc" in with_moses and "bleu_moses_lc" not in without
    assert without["bleu"] == with_moses["bleu"]
    assert capsys.readouterr().err.count('pip install "mt[moses]"') == 1


def test_eval_compare_is_each_run_alone_against_the_first(cli, tiny_run, other_run, tmp_path):
    from mt.commands.evaluate import evaluate
    from mt.metrics import compare

    r = cli("eval", tiny_run, other_run, "--compare", "--split", "val", "--json",
            "--bootstrap", "200", "--bootstrap-seed", "3")
    assert r.code == 0, r.err
    result = json.loads(r.out)
    systems = []
    for run in (tiny_run, other_run):  # each alone, not as an ensemble
        out = tmp_path / f"{run.name}.txt"
        evaluate(run, split="val", output=str(out))
        systems.append((str(run), out.read_text().splitlines()))
    refs = Path(result["ref"]).read_text().splitlines()
    expected = compare(systems, refs, "de", samples=200, seed=3)
    assert result["systems"] == expected["systems"]
    assert result["systems"][1]["bleu"]["p_value"] is not None
    table = cli("eval", tiny_run, other_run, "--compare", "--split", "val", "--bootstrap", "200")
    lines = table.out.splitlines()
    assert lines[0].split() == ["system", "BLEU", "95%", "CI", "p", "chrF", "95%", "CI", "p"]
    assert lines[1].startswith(str(tiny_run)) and lines[2].startswith(str(other_run))


def test_eval_compare_needs_two_runs_and_no_output(cli, tmp_path):
    assert_user_error(cli("eval", tmp_path / "a", "--compare"), 2, "'--compare'", "two or more")
    # a resample count beyond the bound (docs/configuration.md#bounds), before any work
    assert_user_error(cli("eval", tmp_path / "a", tmp_path / "b", "--compare", "--bootstrap",
                          "1000000000000"), 2, "'--bootstrap'", "less than or equal to 10000")
    assert_user_error(cli("eval", tmp_path / "a", tmp_path / "b", "--compare", "--output",
                          tmp_path / "o.txt"), 2, "not with --output")


def test_eval_pairs_scores_one_file_of_any_format_as_src_and_ref(cli, tiny_run, tmp_path):
    from mt.commands.evaluate import evaluate

    pairs = list(zip(*(read_lines(TOY / f"toy.test.{lang}")[:40] for lang in ("en", "de"))))
    write_as("plain", tmp_path / "t", pairs)
    want = evaluate(tiny_run, src=str(tmp_path / "t.en"), ref=str(tmp_path / "t.de"))
    formats = ["tsv", "jsonl"] + (["parquet"] if importlib.util.find_spec("pyarrow") else [])
    for fmt in formats:
        path = tmp_path / f"t.{fmt}"
        write_as(fmt, path, pairs)
        r = cli("eval", tiny_run, "--pairs", path, "--json")
        assert r.code == 0, r.err
        got = json.loads(r.out)
        assert (got["bleu"], got["chrf"], got["src"]) == (want["bleu"], want["chrf"], str(path))
    # the run's test split as a corpus of its own format, through the run's config
    r = cli("eval", tiny_run, "--json", "--set",
            f"data.test={{format: jsonl, path: {tmp_path / 't.jsonl'}}}")
    assert r.code == 0, r.err
    assert json.loads(r.out)["bleu"] == want["bleu"]


def test_eval_pairs_is_refused_with_src_or_a_name_that_says_no_format(cli, tmp_path):
    for args in (["--pairs", "t.tsv", "--src", "a.en", "--ref", "a.de"],
                 ["--pairs", "t.tsv", "--ref", "a.de"]):
        assert_user_error(cli("eval", tmp_path / "run", *args), 2, "'--pairs'",
                          "give --pairs FILE or --src and --ref, not both")
    assert_user_error(cli("eval", tmp_path / "run", "--pairs", "t.csv"), 2, "'--pairs'",
                      "t.csv: its name says its format; end it in one of .tsv, .tsv.gz, "
                      ".jsonl, .jsonl.gz, .json, .json.gz, .parquet")


def test_eval_compare_takes_systems_already_translated_as_hyp_files(cli, tiny_run, other_run,
                                                                   tmp_path):
    """--hyp FILE: a system mt eval does not translate itself (here another run's output),
    compared as if it had: the same figures as sacreBLEU's paired bootstrap on the files."""
    from mt.commands.evaluate import evaluate
    from mt.metrics import compare

    mine, theirs = tmp_path / "tiny.txt", tmp_path / "other.txt"
    evaluate(tiny_run, split="val", output=str(mine))
    evaluate(other_run, split="val", output=str(theirs))
    r = cli("eval", tiny_run, "--compare", "--split", "val", "--hyp", theirs, "--json",
            "--bootstrap", "200", "--bootstrap-seed", "5")
    assert r.code == 0, r.err
    result = json.loads(r.out)
    refs = Path(result["ref"]).read_text().splitlines()
    expected = compare([(str(tiny_run), mine.read_text().splitlines()),
                        (str(theirs), theirs.read_text().splitlines())], refs, "de",
                       samples=200, seed=5)
    assert result["systems"] == expected["systems"]
    assert [s["name"] for s in result["systems"]] == [str(tiny_run), str(theirs)]
    short = tmp_path / "short.txt"
    short.write_text("Hallo.\n")
    assert_user_error(cli("eval", tiny_run, "--compare", "--split", "val", "--hyp", short), 4,
                      f"--hyp {short}: 1 lines, but", "one translation per source line")
    assert_user_error(cli("eval", tiny_run, "--hyp", theirs), 2, "'--hyp'", "add --compare")
    assert_user_error(cli("eval", tiny_run, "--compare"), 2, "'--compare'", "two or more")
