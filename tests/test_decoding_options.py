"""A decoding option is declared once, as a DecodeConfig field with metadata (mt.config.option):
its flags (mt.cli.Decoding), the server's request fields (mt.serve.app.OPTIONS), its range
check and docs/decoding.md's table row all come from that field. docs/development.md's recipe
"A decoding option", as a worked example over every field."""

from __future__ import annotations

import dataclasses
import typing

import pytest
import typer

from mt.cli import app
from mt.config import REQUEST, ConfigError, DecodeConfig, option, option_help, with_decode

FIELDS = dataclasses.fields(DecodeConfig)
COMMANDS = ("translate", "serve", "eval", "calibrate", "distill")


def flags(command: str) -> dict[str, str]:
    """A command's options: --FLAG -> help."""
    params = typer.main.get_command(app).commands[command].params
    return {opt: p.help for p in params for opt in p.opts if opt.startswith("--")}


# mt serve's --memory names a memory per pair (--memory en-de=tm.db), not decode.memory
OWN = {("serve", "--memory")}


@pytest.mark.parametrize("command", COMMANDS)
def test_a_field_is_a_flag_of_the_commands_its_metadata_names(command):
    given = flags(command)
    for f in FIELDS:
        flag = "--" + f.name.replace("_", "-")
        if (command, flag) in OWN:  # the command's own option of that name, not the field's
            assert flag in given and given[flag] != option_help(f, command)
            continue
        assert (flag in given) == (command in f.metadata["commands"]), (command, flag)
        if flag in given:
            assert given[flag] == option_help(f, command), (command, flag)


def test_a_field_is_a_request_field_where_its_metadata_says():
    pytest.importorskip("fastapi")
    from mt.serve.app import OPTIONS, TranslateRequest

    assert OPTIONS == tuple(f.name for f in FIELDS if REQUEST in f.metadata["commands"])
    assert set(OPTIONS) <= set(TranslateRequest.model_fields)
    assert not {"batch_tokens", "dtype"} & set(OPTIONS)  # the server's own


def changed(f: dataclasses.Field) -> str:
    """A value of the field other than its default, as a flag's argument ("" for a bool)."""
    kind = typing.get_type_hints(DecodeConfig)[f.name]
    if typing.get_origin(kind) is typing.Literal:
        return next(a for a in reversed(typing.get_args(kind)) if a != f.default)
    return {bool: "", int: "2", float: "0.5", str: "<x>"}[kind]


def test_mt_translate_flags_reach_the_decode_config(cli, monkeypatch, tmp_path):
    """Every option of mt translate, given as its flag, is in the DecodeConfig the command
    decodes with, typed as the field."""
    import mt.commands.translate

    seen = {}
    monkeypatch.setattr(mt.commands.translate, "translate",
                        lambda runs, src, out, options, pictures: seen.update(options.decode))
    args = []
    for f in FIELDS:
        value = changed(f)
        flag = ("no-" if f.default is True else "") + f.name.replace("_", "-")  # turned off
        args += ["--" + flag, *([value] if value else [])]
    assert cli("translate", tmp_path, *args).code == 0
    assert list(seen) == [f.name for f in FIELDS]
    for f in FIELDS:
        got = getattr(dataclasses.replace(DecodeConfig(), **seen), f.name)
        assert got != f.default and type(got) is type(f.default), (f.name, got)


@pytest.mark.parametrize("args, align", [
    ([], False),
    (["--align"], True),
    (["--set", "decode.align=true"], True),  # the config's way still works
    (["--set", "decode.align=true", "--no-align"], False),  # the flag's off form over it
])
def test_a_bool_field_is_a_flag_with_an_off_form(cli, monkeypatch, tmp_path, args, align):
    import mt.commands.translate
    from mt.config import Config, override

    seen = []
    monkeypatch.setattr(mt.commands.translate, "translate",
                        lambda runs, src, out, options, pictures: seen.append(options))
    assert cli("translate", tmp_path, *args).code == 0
    options = seen[0]
    assert options.decoding(override(Config(), options.overrides, "x").decode).align is align


def test_help_shows_a_flag_without_a_value(cli, monkeypatch):
    """Typer labels a flag `<bool>`, which read as if `--align true` were right; it is not
    (true would be a RUN), so no command's help shows the label."""
    monkeypatch.setenv("COLUMNS", "200")
    for command in (*COMMANDS, "train"):
        r = cli(command, "--help")
        assert r.code == 0 and "<bool>" not in r.out, command
    r = cli("translate", "--help")
    assert "--align" in r.out and "--no-align" in r.out and "--confidence" in r.out


def test_with_decode_types_and_checks_a_field_by_its_metadata():
    assert with_decode(DecodeConfig(), {"temperature": 2}).temperature == 2.0  # an int: float
    with pytest.raises(ConfigError, match=r"^Translator options: decode\.topp must be in "
                                          r"\(0, 1\]$") as e:
        with_decode(DecodeConfig(), {"topp": 1.5})
    assert e.value.key == "topp"
    with pytest.raises(ConfigError, match="decode.nbest .3. must be between 1 and decode.beam"):
        with_decode(DecodeConfig(beam=4), {"nbest": 3, "beam": 2})


def test_a_new_field_with_metadata_is_range_checked_as_declared():
    """What a new option's declaration gives: its range checked, in the words of its bounds."""
    @dataclasses.dataclass
    class WithNew(DecodeConfig):
        diversity: float = option(0.0, "Diverse beam: the penalty.", ge=0, limit=10)

    assert list(WithNew(diversity=-1.0).problems()) == [
        ("decode.diversity", "decode.diversity must be 0 or positive")]
    assert not list(WithNew(diversity=1.0).problems())
