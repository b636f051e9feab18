"""docs/ against the code. docs/decoding.md's table of decoding options is the one list of them:
one row for each field of mt.config.DecodeConfig and none other, with its default (as `--set`
would read it) and its command-line option on the commands that take it; the other pages that
name decoding options link to it instead of copying it. docs/commands.md gives `mt plot`'s
picture size as mt/commands/plot.py makes it (and so does its --help), and every key of
`mt info --json`."""

import dataclasses
import os
import re
import shutil

import pytest
import typer
import yaml

from conftest import ROOT
from mt.cli import app
from mt.config import DecodeConfig

# The pages that once copied the list (and fell behind it): each now links to the table.
LINKING = ["README.md", "docs/commands.md", "docs/python.md", "docs/serve.md",
           "docs/ctranslate2.md", "docs/configuration.md"]


def cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split(" | ")]


def section(page: str, heading: str) -> str:
    """The text of a page under `## heading`, up to the next heading of that level."""
    text = (ROOT / page).read_text(encoding="utf-8")
    assert f"\n## {heading}\n" in text, f"{page} has no '## {heading}' section"
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def options_table() -> dict[str, dict[str, str]]:
    """The table under decoding.md's `## Options`: {field name: its row's cells by column}."""
    lines = [line for line in section("docs/decoding.md", "Options").splitlines()
             if line.startswith("|")]
    header = cells(lines[0])
    assert header == ["key", "option", "default", "meaning"], header
    assert set(lines[1]) <= set("|-"), lines[1]  # the separator: one table, not two
    rows = {}
    for line in lines[2:]:
        row = dict(zip(header, cells(line), strict=True))
        key = re.fullmatch(r"`decode\.(\w+)`", row["key"])
        assert key, f"one `decode.KEY` per row: {row['key']}"
        assert key[1] not in rows, f"decode.{key[1]}: two rows"
        rows[key[1]] = row
    return rows


def default(cell: str):
    """A default cell, `VALUE`, read as `--set decode.KEY=VALUE` reads VALUE (YAML)."""
    value = re.fullmatch(r"`([^`]*)`", cell)
    assert value, f"a default in backticks: {cell}"
    return yaml.safe_load(value[1])


def flags(command: str) -> set[str]:
    params = typer.main.get_command(app).commands[command].params
    return {opt for p in params for opt in p.opts if opt.startswith("--")}


def test_every_decode_config_field_has_one_row_with_its_default():
    rows = options_table()
    fields = {f.name: f.default for f in dataclasses.fields(DecodeConfig)}
    assert sorted(rows) == sorted(fields), (
        f"in DecodeConfig, not in the table: {sorted(fields.keys() - rows.keys())}; "
        f"in the table, not in DecodeConfig: {sorted(rows.keys() - fields.keys())}")
    for key, value in fields.items():
        documented = default(rows[key]["default"])
        kinds = (int, float) if type(value) is float else (type(value),)  # `1` for 1.0 reads
        assert documented == value and type(documented) in kinds, (key, documented, value)


def test_each_option_is_its_keys_flag_on_the_commands_that_take_it():
    translate, serve, evaluate = flags("translate"), flags("serve"), flags("eval")
    fields = {f.name: f for f in dataclasses.fields(DecodeConfig)}
    for key, row in options_table().items():
        flag = re.match(r"`(--[a-z-]+)", row["option"])
        assert flag and flag[1] == "--" + key.replace("_", "-"), (key, row["option"])
        assert flag[1] in translate and flag[1] in serve, flag[1]
        not_eval = "(not `mt eval`)" in row["option"]
        assert (flag[1] in evaluate) != not_eval, (flag[1], "mt eval", row["option"])
        assert ("eval" in fields[key].metadata["commands"]) != not_eval, (key, "metadata")


@pytest.mark.parametrize("page", LINKING)
def test_pages_link_to_the_table(page):
    assert "decoding.md#options" in (ROOT / page).read_text(encoding="utf-8"), page


def test_mt_plots_size_is_the_one_its_help_and_commands_md_give():
    from mt.commands.plot import DPI, HEIGHT, WIDTH

    width, height = WIDTH * DPI, HEIGHT * DPI
    assert f"{width} x {height} pixels" in typer.main.get_command(app).commands["plot"].help
    assert f"{width} × {height} pixels" in section("docs/commands.md", "mt plot")


def test_every_key_of_mt_info_json_is_in_commands_md(tiny_run):
    from mt.commands.info import run_info

    rows = [cells(line) for line in section("docs/commands.md", "mt info").splitlines()
            if line.startswith("| `")]
    documented = [re.fullmatch(r"`(\w+)`", row[0])[1] for row in rows]
    assert documented == list(run_info(tiny_run)), "docs/commands.md#mt-info: the --json keys"


def test_setup_sh_says_each_step_before_it_runs(tmp_path):
    """pip runs quietly there: without a line per step the script was silent for over a
    minute and a half (issue 65). Run with stand-ins for python3 and python that log their
    commands: each one comes after a `setup:` line."""
    import subprocess

    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "setup.sh", tmp_path / "scripts")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("python3", "python"):
        fake = bin_dir / name
        fake.write_text('#!/bin/sh\necho "RAN $*" >&2\n'
                        '[ "$2" = venv ] && mkdir -p .venv/bin && : > .venv/bin/activate\n'
                        'exit 0\n')
        fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    p = subprocess.run(["bash", str(tmp_path / "scripts" / "setup.sh")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert [line.split()[0] for line in lines] == ["setup:", "RAN"] * 4 + ["setup:"], lines
    assert "torch" in lines[4] and "pip install -q torch==2.13.0" in lines[5]
