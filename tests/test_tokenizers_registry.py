"""The registry of tokenizer kinds (mt.tokenizers.KINDS): every kind is registered and usable,
config's allowed kinds are the registry's names, and a kind added in one module is picked up
by the registry's functions without touching any other module."""

from __future__ import annotations

import subprocess
import sys
import types
import typing

import pytest

from conftest import ROOT
from mt import tokenizers
from mt.config import DataConfig, TokenizerName, load_config
from mt.errors import ConfigError
from mt.tokenizers import (
    KINDS,
    config_problems,
    load_tokenizers,
    tokenizer_files,
    tokenizer_kind,
)


def test_config_allows_exactly_the_registered_kinds():
    assert typing.get_args(TokenizerName) == tuple(KINDS)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_is_registered_and_complete(name):
    kind = tokenizer_kind(name)
    assert isinstance(kind, tokenizers.TokenizerKind)
    assert type(kind).load is not tokenizers.TokenizerKind.load, "a kind must say how it loads"
    d = DataConfig(tokenizer=name)
    assert all(isinstance(v, str) for v in kind.cache_settings().values())
    assert isinstance(kind.info(d), dict) and list(kind.check(d)) == []
    assert all(isinstance(f, str) for f in kind.files(d))


def test_an_unknown_kind_is_a_config_error():
    with pytest.raises(ConfigError, match="data.tokenizer must be one of spacy, sentencepiece"):
        load_tokenizers(DataConfig(tokenizer="moses"), ROOT)


class _Words:
    fixed_vocab = None

    def __init__(self, upper: bool):
        self.upper = upper

    def tokenize(self, line):
        return self.tokenize_many([line])[0]

    def tokenize_many(self, lines):
        return [(line.upper() if self.upper else line).split() for line in lines]

    def detokenize(self, tokens):
        return " ".join(tokens)


class _FakeKind(tokenizers.TokenizerKind):
    """A kind that needs one file and checks its languages."""

    def load(self, d, directory, files):
        return _Words(upper=False), _Words(upper=(directory / "fake.txt").read_text() == "up")

    def files(self, d):
        return ["fake.txt"]

    def train(self, d, dest_dir, train_src, train_tgt):
        (dest_dir / "fake.txt").write_text("up")

    def check(self, d):
        if d.src_lang == "zz":
            yield "data.src_lang", "data.src_lang: the fake kind refuses 'zz'"


@pytest.fixture
def fake_kind(monkeypatch):
    """A new kind: one module with its KIND, and one line in KINDS; nothing else touched."""
    module = types.ModuleType("fake_kind_module")
    module.KIND = _FakeKind()
    monkeypatch.setitem(sys.modules, "fake_kind_module", module)
    monkeypatch.setitem(KINDS, "fake", "fake_kind_module")
    return module.KIND


def test_a_new_kind_is_usable_by_the_registry_functions(fake_kind, tmp_path):
    d = DataConfig(tokenizer="fake")
    src, tgt = tokenizers.build_tokenizers(d, tmp_path, tmp_path / "a", tmp_path / "b")
    assert src.tokenize("a b") == ["a", "b"] and tgt.tokenize("a b") == ["A", "B"]
    src, tgt = load_tokenizers(d, tmp_path)
    assert tgt.tokenize_many(["x y"]) == [["X", "Y"]]
    assert tokenizer_files(d) == ["fake.txt"]
    assert tokenizer_kind("fake") is fake_kind


def test_a_kinds_check_is_blamed_on_the_set_item_that_gave_the_value(fake_kind, monkeypatch):
    # Config names the kinds it allows itself (it cannot import the registry): the one other
    # line a new kind adds.
    monkeypatch.setattr("mt.config.TokenizerName",
                        typing.Literal["spacy", "sentencepiece", "fake"])
    cfg = load_config(None, ["data.tokenizer=fake", "data.src_lang=xx"], [config_problems])
    assert cfg.data.tokenizer == "fake" and list(config_problems(cfg)) == []
    with pytest.raises(ConfigError) as e:
        load_config(None, ["data.src_lang=zz", "data.tokenizer=fake", "train.lr=0.1"],
                    [config_problems])
    assert str(e.value) == "--set data.src_lang=zz: data.src_lang: the fake kind refuses 'zz'"


def test_spacy_languages_are_checked_only_when_asked_and_blamed_on_set():
    cfg = load_config(None, ["data.src_lang=zz"])  # config alone checks no languages
    assert cfg.data.src_lang == "zz"
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train.lr=0.1", "data.src_lang=zz", "decode.beam=2"],
                    [config_problems])
    assert str(e.value).startswith("--set data.src_lang=zz: data.src_lang: no spaCy tokenizer "
                                   "for language 'zz'")


def test_config_and_a_sentencepiece_config_never_import_spacy():
    code = """
import sys
from mt.config import load_config
from mt.tokenizers import config_problems, tokenizer_files
load_config(None, ["data.src_lang=zz"])
cfg = load_config(None, ["data.tokenizer=sentencepiece", "data.src_lang=zz"], [config_problems])
tokenizer_files(cfg.data)
assert "spacy" not in sys.modules, "spaCy was imported"
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_config_does_not_import_tokenizers():
    code = "import sys, mt.config; assert 'mt.tokenizers' not in sys.modules"
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
