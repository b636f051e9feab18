"""mt/config.py: defaults, files and --set overrides, validated at load with errors that blame
the right place."""

import re
from pathlib import Path

import pytest

from conftest import CONFIG, assert_user_error
from mt.config import Config, load_config
from mt.errors import ConfigError


def write(tmp_path, text):
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_defaults_and_file_values(tmp_path):
    cfg = load_config(write(tmp_path, "model:\n  d_model: 64\n  n_heads: 2\ntrain:\n  lr: 1\n"))
    assert cfg.model.d_model == 64 and cfg.model.n_heads == 2
    assert cfg.train.lr == 1.0 and isinstance(cfg.train.lr, float)  # ints widen to float
    assert cfg.decode == Config().decode


def test_unknown_key_names_nearest(tmp_path):
    with pytest.raises(ConfigError, match=r"unknown key 'model.d_modle'.*did you mean 'd_model'"):
        load_config(write(tmp_path, "model:\n  d_modle: 64\n"))
    with pytest.raises(ConfigError, match=r"unknown key 'trian'.*did you mean 'train'"):
        load_config(write(tmp_path, "trian: {}\n"))


def test_wrong_type(tmp_path):
    with pytest.raises(ConfigError, match=r"'model.d_model' must be int, got 'big'"):
        load_config(write(tmp_path, "model:\n  d_model: big\n"))
    with pytest.raises(ConfigError, match=r"'data.lowercase' must be bool"):
        load_config(write(tmp_path, "data:\n  lowercase: 1\n"))


@pytest.mark.parametrize("override, message", [
    ("model.dropout=1.0", "dropout must be in [0, 1)"),
    ("model.attention_dropout=1.0", "model.attention_dropout must be in [0, 1)"),
    ("model.activation_dropout=-0.1", "model.activation_dropout must be in [0, 1)"),
    ("model.n_heads=3", "divisible by model.n_heads"),
    ("train.max_tokens=-5", "max_tokens must be positive"),
    ("train.metric=bleu_score", "train.metric must be"),
    ("data.min_freq=0", "min_freq must be at least 1"),
    ("train.schedule=step", "train.schedule must be one of inverse_sqrt, cosine, linear"),
    ("train.schedule=cosine", "cosine decays to zero at train.max_steps or train.max_minutes"),
])
def test_out_of_range(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(None, [override])


def test_set_overrides_are_validated_like_the_file(tmp_path):
    cfg = load_config(write(tmp_path, "train:\n  lr: 0.1\n"), ["train.lr=3e-4", "data.dir=x/y"])
    assert cfg.train.lr == pytest.approx(3e-4) and cfg.data.dir == "x/y"
    with pytest.raises(ConfigError, match="unknown key 'train.lrate'.*did you mean 'lr'"):
        load_config(None, ["train.lrate=1"])
    with pytest.raises(ConfigError, match="unknown key 'train.learning_rate'.*valid keys: seed"):
        load_config(None, ["train.learning_rate=1"])
    with pytest.raises(ConfigError, match="expected key=value"):
        load_config(None, ["train.lr"])


def test_set_reaches_into_a_list_of_corpora(tmp_path):
    path = write(tmp_path, "data:\n  train:\n    - {prefix: a}\n    - {prefix: b, tag: <bt>}\n")
    cfg = load_config(path, ["data.train[1].weight=2.5", "data.train[1].tag="])
    assert [(c.prefix, c.weight, c.tag) for c in cfg.data.train] == [("a", 1.0, ""), ("b", 2.5, "")]
    with pytest.raises(ConfigError, match=r"'train' has no item 2 .*items count from 0"):
        load_config(path, ["data.train[2].weight=1"])
    with pytest.raises(ConfigError, match=r"'val' has no item 0"):
        load_config(path, ["data.val[0].weight=1"])
    with pytest.raises(ConfigError, match="bad key part 'train\\[x\\]'"):
        load_config(path, ["data.train[x].weight=1"])


def test_invalid_yaml_reports_line(tmp_path):
    with pytest.raises(ConfigError, match=r"c.yaml: line 3"):
        load_config(write(tmp_path, "model:\n  d_model: 64\n  n_heads: 2: 3\n"))


def test_saved_config_round_trips(tmp_path):
    cfg = load_config(None, ["model.d_model=32", "model.n_heads=2", "decode.beam=3"])
    cfg.save(tmp_path / "saved.yaml")
    assert load_config(tmp_path / "saved.yaml") == cfg


@pytest.mark.parametrize("path", sorted((Path(__file__).parents[1] / "configs").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_shipped_configs_are_valid(path):
    """Every config in configs/ loads and passes validation (the recipes are run by hand)."""
    cfg = load_config(path)
    assert cfg.data.src_lang != cfg.data.tgt_lang


@pytest.mark.parametrize("yaml_text, sets, needles", [
    ("model:\n  d_model: 64\n n_heads: [\n", [], ["line 3"]),
    ("model:\n  d_modle: 64\n", [], ["model.d_modle", "did you mean 'd_model'"]),
    ("train:\n  lr: fast\n", [], ["train.lr", "must be float", "'fast'"]),
    ("train:\n  max_tokens: 2.5\n", [], ["train.max_tokens", "must be int"]),
    ("model:\n  d_ff: -1\n", [], ["model.d_ff must be positive"]),
    ("model:\n  dropout: 1.0\n", [], ["model.dropout must be in [0, 1)"]),
    ("model:\n  d_model: 100\n  n_heads: 3\n", [], ["divisible", "model.n_heads (3)"]),
    ("data:\n  src_lang: zz\n", [], ["data.src_lang", "'zz'", "spaCy"]),
    ("", ["trian.lr=1"], ["--set trian.lr=1", "did you mean 'train'"]),
    ("", ["train.max_tokens=abc"], ["--set train.max_tokens=abc", "must be int"]),
    ("", ["model.dropout=1.5"], ["model.dropout must be in [0, 1)"]),
    ("", ["data.tgt_lang=zz"], ["data.tgt_lang", "'zz'"]),
    ("", ["train.lr"], ["--set 'train.lr'", "key=value"]),
    # bounds (docs/configuration.md#bounds): before any arithmetic, not an OverflowError
    ("data:\n  train:\n    - {prefix: toy.train, weight: .inf}\n", [],
     ["data.train[0].weight must be a finite number"]),
    ("data:\n  train:\n    - {prefix: toy.train, weight: 1.0e9}\n", [],
     ["data.train[0].weight must be at most 100"]),
    ("", ["data.train=[{prefix: a}, {prefix: b, weight: 101}]"], ["--set data.train",
                                                                   "data.train[1].weight"]),
    ("", ["decode.beam=99999999999999999999"], ["--set decode.beam", "at most 1,024"]),
    ("", ["decode.max_len_b=99999999999999999999"], ["decode.max_len_b",
                                                     "at most 2,147,483,647"]),
    ("", ["train.lr=nan"], ["train.lr must be a finite number"]),
    ("", ["model.d_model=-99999999999999999999"], ["model.d_model must be at least -2,147"]),
])
def test_config_errors_are_caught_at_load_before_any_work(cli, tmp_path, yaml_text, sets,
                                                          needles):
    config = tmp_path / "c.yaml"
    config.write_text(yaml_text)
    out = tmp_path / "run"
    r = cli("train", config, "--out", out, *[a for s in sets for a in ("--set", s)])
    assert_user_error(r, 3, *needles)
    assert not out.exists()  # refused before the run directory was made


def test_error_stays_on_one_line_whatever_it_quotes(cli):
    r = cli("train", CONFIG, "--set", "model.d_model=a\u2028b\nc\x85d")
    assert_user_error(r, 3, "--set model.d_model=a\\u2028b\\nc\\x85d", "must be int")


def test_missing_config_is_named(cli, tmp_path):
    assert_user_error(cli("train", tmp_path / "none.yaml"), 3, "none.yaml", "not found")


@pytest.mark.parametrize("sets, blamed, needle", [
    (["train.max_steps=-1"], "train.max_steps=-1", "train.max_steps must be 0 (no limit) or"),
    (["train.lr=0.001", "model.n_heads=3"], "model.n_heads=3", "divisible by model.n_heads"),
    (["data.src_lang=zz"], "data.src_lang=zz", "no spaCy tokenizer"),
    (["decode.max_len_b=-1"], "decode.max_len_b=-1", "must be non-negative"),
])
def test_out_of_range_set_value_is_blamed_on_set_not_the_file(cli, tmp_path, sets, blamed,
                                                              needle):
    out = tmp_path / "run"
    r = cli("train", CONFIG, "--out", out, *[a for s in sets for a in ("--set", s)])
    assert_user_error(r, 3, needle)
    assert r.err.startswith(f"error: --set {blamed}: "), r.err
    assert str(CONFIG) not in r.err
    assert not out.exists()


def test_out_of_range_value_in_the_file_is_still_blamed_on_the_file(cli, tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("train:\n  max_steps: -1\n")
    r = cli("train", config, "--out", tmp_path / "run", "--set", "train.lr=0.001")
    assert_user_error(r, 3, "train.max_steps must be")
    assert r.err.startswith(f"error: {config}: "), r.err


@pytest.mark.parametrize("setting,needle", [
    ("decode.nbest=3", "decode.nbest"), ("decode.length_norm=mean", "decode.length_norm"),
    ("decode.length_penalty=-1", "decode.length_penalty"), ("decode.min_len=-1", "min_len")])
def test_decode_config_is_validated(setting, needle):
    with pytest.raises(ConfigError, match=needle):
        load_config(None, ["decode.beam=2", setting])
