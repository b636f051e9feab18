"""mt/cli.py: the one error path. Usage errors, --debug and MT_DEBUG, exit codes, and error
lines that say where, what and what to do; OS errors from anywhere become user errors.

Most cases run `mt` in this process (the `cli` fixture), which is the same `main()` as the
command but spares a Python start per case; --debug runs it in a subprocess."""

import errno
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

import mt.commands.translate
from conftest import CONFIG, Result, assert_user_error, make_weights_only, own_signals, run_mt
from mt.cli import main
from mt.threads import KERNEL_CACHES


@pytest.mark.parametrize("args, needle", [
    (["train", CONFIG, "--bogus"], "No such option: --bogus"),
    (["translate"], "Missing argument"),
    (["translate", "run", "--device"], "--device"),
    (["eval", "run", "--split", "dev"], "--split"),
    (["translate", "run", "--format", "xml"], "'xml': expected one of text, jsonl, html"),
    (["translate", "run", "--format", "jsonl", "--attention", "dir"], "not with --format jsonl"),
])
def test_usage_errors_are_one_line_with_exit_2(cli, args, needle):
    r = cli(*args)
    assert_user_error(r, 2, needle, "--help")
    assert "Usage:" not in r.err and "╭" not in r.err  # no Click/Rich box, just the line


def debug_error(r: Result, code: int, *needles: str) -> None:
    """--debug: the traceback, then the same one `error:` line (last) and the same exit code."""
    assert r.code == code, r
    assert "Traceback" in r.err, r.err
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and r.err.splitlines()[-1] == errors[0], r.err
    assert all(n in errors[0] for n in needles), (needles, errors[0])


@pytest.mark.slow
def test_debug_adds_the_traceback_and_keeps_the_exit_code_and_error_line(cli, tmp_path):
    missing = tmp_path / "nope.yaml"
    plain = run_mt("train", str(missing))
    assert_user_error(plain, 3, str(missing), "not found")
    r = run_mt("--debug", "train", str(missing))
    debug_error(r, 3, str(missing), "not found")
    assert "ConfigError" in r.err
    assert r.err.splitlines()[-1] == plain.err.splitlines()[-1]
    assert not missing.exists()
    # Usage errors (exit 2) and data errors (exit 4) keep theirs too.
    debug_error(cli("--debug", "train", missing, "--bogus"), 2, "--bogus")
    debug_error(cli("--debug", "translate", "run", "-i", tmp_path / "no.txt"), 4, "no.txt",
                "not found")
    assert list(tmp_path.iterdir()) == []


def test_mt_debug_env_is_the_same_as_debug(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["mt", "train", "/nonexistent/c.yaml"])
    monkeypatch.setenv("MT_DEBUG", "1")
    with pytest.raises(SystemExit) as e, own_signals():
        main()
    err = capsys.readouterr().err
    debug_error(Result(e.value.code, "", err), 3, "/nonexistent/c.yaml", "not found")


def test_error_lines_say_what_to_do(cli, tmp_path, run_copy):
    """`error: <where>: <what is wrong>; <what to do>`, as the README promises."""
    bad_yaml, a_list, src = tmp_path / "bad.yaml", tmp_path / "list.yaml", tmp_path / "in.txt"
    bad_yaml.write_text("model:\n  d_model: [\n")
    a_list.write_text("- 1\n")
    src.write_text("one\n")
    empty_run = tmp_path / "empty"
    empty_run.mkdir()
    no_vocab = Path(shutil.copytree(run_copy, tmp_path / "v"))
    no_config = Path(shutil.copytree(run_copy, tmp_path / "c"))
    for old in (no_vocab, no_config):  # checkpoints that need the files beside them
        make_weights_only(old)
    (no_vocab / "vocab.tgt.txt").unlink()
    (no_config / "config.yaml").unlink()
    cases = [
        (["train", tmp_path / "none.yaml"], 3, "; check the path"),
        (["train", bad_yaml], 3, "; fix the YAML there"),
        (["train", a_list], 3, "; see configs/ for examples"),
        (["train", CONFIG, "--set", "train.lr.x=1"], 3, "; give section.key=value"),
        (["train", CONFIG, "--out", tmp_path / "r", "--set", f"data.dir={tmp_path / 'no'}"], 4,
         "; check the path"),
        (["translate", tmp_path / "no-run", "-i", src], 5, "; check the path"),
        (["translate", empty_run, "-i", src], 5, "; train it first, or give a .pt file"),
        (["translate", no_vocab, "-i", src], 5, "; copy it from the run"),
        (["translate", no_config, "-i", src], 5, "; copy it from the run"),
        (["translate", run_copy, "-i", tmp_path / "no.txt"], 4, "; check the path"),
        (["eval", run_copy, "--src", src], 4, "; add --ref FILE"),
    ]
    for args, code, advice in cases:
        r = cli(*args)
        assert_user_error(r, code, advice)
        assert re.fullmatch(r"error: \S.*: .+; \w.+", r.err.strip().splitlines()[-1]), r.err


@pytest.mark.parametrize("err, needles", [
    (PermissionError(errno.EACCES, "Permission denied", "/x/out.txt"),
     ["/x/out.txt: Permission denied", "check the permissions"]),
    (OSError(errno.ENOSPC, "No space left on device", "/x/out.txt"),
     ["/x/out.txt: No space left on device", "free some disk space"]),
])
def test_os_errors_from_anywhere_are_user_errors_with_exit_7(cli, monkeypatch, err, needles):
    def fail(*args, **kwargs):
        raise err

    monkeypatch.setattr(mt.commands.translate, "translate_file", fail)
    assert_user_error(cli("translate", "run"), 7, *needles)


def test_internal_errors_keep_their_traceback(cli, monkeypatch):
    def bug(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(mt.commands.translate, "translate_file", bug)
    r = cli("translate", "run")
    assert r.code == 1
    assert "Traceback" in r.err and "ValueError: a bug" in r.err
    assert "internal error" in r.err and not r.err.startswith("error:")


def help_texts(command, path=()):
    """(command path, help text) for a click command, its parameters and its subcommands."""
    for item in (command, *command.params):
        if getattr(item, "help", None):
            yield path, item.help
    for name, sub in getattr(command, "commands", {}).items():
        yield from help_texts(sub, (*path, name))


def test_every_help_text_is_shown_as_written(cli, monkeypatch):
    """Typer renders help as Rich markup, which would drop `[ctranslate2]` from
    `pip install "mt[ctranslate2]"`: every line of every help text appears in --help."""
    import typer

    from mt.cli import app

    monkeypatch.setenv("COLUMNS", "1000")  # one line per option: nothing wraps
    texts = list(help_texts(typer.main.get_command(app)))
    assert any("[" in text for _, text in texts)  # what the test is about is there
    shown = {}
    for path, text in texts:
        if path not in shown:
            r = cli(*path, "--help")
            assert r.code == 0, r
            shown[path] = " ".join(re.sub(r"\x1b\[[0-9;]*m", "", r.out).split())
        for line in text.splitlines():
            assert " ".join(line.split()) in shown[path], (path, line)


def test_each_command_is_one_line_in_the_list_of_commands(cli, monkeypatch):
    """A docstring's first paragraph wraps in the source; in `mt --help` (wide enough) it is
    one line, not the source's line breaks."""
    import typer

    from mt.cli import app

    monkeypatch.setenv("COLUMNS", "1000")
    group = typer.main.get_command(app)
    groups = [((), group)] + [((n,), c) for n, c in group.commands.items()
                              if hasattr(c, "commands")]
    firsts = {}
    for path, sub in groups:
        shown = [" ".join(line.strip("│ ").split())
                 for line in cli(*path, "--help").out.splitlines()]
        for name, command in sub.commands.items():
            firsts[name] = command.help.split("\n\n")[0]
            assert f"{name} {' '.join(firsts[name].split())}" in shown, (path, name)
    assert any("\n" in first for first in firsts.values())  # what the test is about is there


def test_mt_version_prints_the_packages_version(cli):
    from mt import __version__

    r = cli("--version")
    assert r.code == 0 and r.out == f"mt {__version__}\n" and r.err == ""


def test_confidence_without_jsonl_of_lines_says_it_shows_nowhere(cli, tmp_path):
    warning = "--confidence: only --format jsonl of lines shows it"
    for args in ([], ["--split-sentences", "--format", "jsonl"]):
        r = cli("translate", tmp_path / "no-run", "--confidence", *args, stdin=b"x\n")
        assert warning in r.err, args
    r = cli("translate", tmp_path / "no-run", "--confidence", "--format", "jsonl", stdin=b"x\n")
    assert warning not in r.err and r.code != 0  # the run is missing: only that is said


def test_pointers_to_the_docs_name_files_that_exist():
    """Help texts, docstrings and comments point to docs/*.md (the README's sections moved)."""
    root = Path(__file__).resolve().parents[1]
    named = {m for p in (root / "mt").rglob("*.py")
             for m in re.findall(r"docs/[\w-]+\.md", p.read_text(encoding="utf-8"))}
    assert named and all((root / m).is_file() for m in named), named


@pytest.mark.parametrize("given", [None, "512"])
def test_kernel_caches_are_bounded_unless_the_environment_says(monkeypatch, given):
    """mt bounds oneDNN's and ideep's kernel caches for its own process (docs/training.md#memory);
    a value in the environment wins."""
    for name, _ in KERNEL_CACHES:
        monkeypatch.delenv(name, raising=False)
        if given:
            monkeypatch.setenv(name, given)
    monkeypatch.setattr(sys, "argv", ["mt", "--help"])
    with pytest.raises(SystemExit), own_signals():
        main()
    assert [os.environ[name] for name, _ in KERNEL_CACHES] == [given or "16", given or "16"]
    assert [name for name, _ in KERNEL_CACHES] == ["ONEDNN_PRIMITIVE_CACHE_CAPACITY",
                                                   "LRU_CACHE_CAPACITY"]
