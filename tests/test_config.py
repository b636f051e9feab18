import re
from pathlib import Path

import pytest

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
