"""The registry of tokenizer kinds (mt.tokenizers.KINDS): every kind is registered and usable,
owns its settings (data.tokenizer: a name, or {kind: NAME, ...}; the old flat keys an alias),
and a kind added in one module is picked up by config and the registry's functions without
touching any other module."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Iterator

import pytest

from conftest import ROOT, register
from mt import tokenizers
from mt.config import DataConfig, config_from_dict, load_config
from mt.errors import ConfigError
from mt.tokenizers import (
    FLAT_KEYS,
    KINDS,
    Sampling,
    config_problems,
    load_tokenizers,
    tokenizer_files,
    tokenizer_kind,
)
from mt.tokenizers.spacy_words import SpacySettings
from mt.tokenizers.subword import SentencePieceSettings


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_is_registered_and_complete(name):
    kind = tokenizer_kind(name)
    assert isinstance(kind, tokenizers.TokenizerKind)
    assert type(kind).load is not tokenizers.TokenizerKind.load, "a kind must say how it loads"
    assert issubclass(kind.settings, tokenizers.TokenizerSettings)
    assert kind.settings().kind == name and list(kind.settings().problems()) == []
    d = DataConfig(tokenizer=kind.settings())
    # model.decoder_start: pad suits every kind (and marian needs it: its vocabulary has no <bos>)
    assert load_config(None, [f"data.tokenizer={name}", "model.decoder_start=pad"]).data == d
    assert all(isinstance(v, str) for v in kind.cache_settings().values())
    assert isinstance(kind.info(d), dict) and list(kind.check(d)) == []
    assert all(isinstance(f, str) for f in kind.files(d))


def test_an_unknown_kind_is_a_config_error():
    with pytest.raises(ConfigError, match="data.tokenizer must be one of spacy, sentencepiece"):
        tokenizer_kind("moses")
    with pytest.raises(ConfigError, match="--set data.tokenizer=moses: data.tokenizer must be "
                                          "one of spacy, sentencepiece, marian, got 'moses'"):
        load_config(None, ["data.tokenizer=moses"])


def test_a_kind_is_written_as_its_name_or_its_section():
    assert load_config(None).to_dict()["data"]["tokenizer"] == "spacy"
    cfg = load_config(None, ["data.tokenizer={kind: sentencepiece, vocab_size: 500}"])
    assert cfg.data.tokenizer == SentencePieceSettings(vocab_size=500)
    assert cfg.to_dict()["data"]["tokenizer"] == {
        "kind": "sentencepiece", "model_type": "unigram", "vocab_size": 500,
        "max_sentences": 1000000, "alpha": 0.0, "nbest": -1, "samples": 8}
    assert config_from_dict(cfg.to_dict()) == cfg


def test_set_reaches_into_the_section_and_a_name_keeps_its_kinds_settings():
    cfg = load_config(None, ["data.tokenizer=sentencepiece", "data.tokenizer.alpha=0.1",
                             "data.tokenizer=sentencepiece"])
    assert cfg.data.tokenizer == SentencePieceSettings(alpha=0.1)
    cfg = load_config(None, ["data.tokenizer={kind: sentencepiece, vocab_size: 500}",
                             "data.tokenizer=spacy"])
    assert cfg.data.tokenizer == SpacySettings()
    with pytest.raises(ConfigError, match="unknown key 'data.tokenizer.vocab_size'"):
        load_config(None, ["data.tokenizer.vocab_size=500"])  # spacy has no such setting


def old_form(settings: dict) -> dict:
    """A data section as configs said it before data.tokenizer held its kind's settings: every
    flat key, the defaults where not given (saved configs hold every key)."""
    flat = {key: settings.get(name, default) for key, (_, name, default) in FLAT_KEYS.items()}
    return {"tokenizer": settings.get("kind", "spacy"), **flat}


@pytest.mark.parametrize("settings", [
    {"kind": "sentencepiece", "model_type": "bpe", "vocab_size": 500, "max_sentences": 0,
     "alpha": 0.1, "nbest": 10, "samples": 3},
    {"kind": "sentencepiece"},
    {"kind": "spacy"},
])
def test_the_old_flat_keys_give_the_settings_of_the_new_form(settings):
    new = config_from_dict({"data": {"tokenizer": settings}})
    assert config_from_dict({"data": old_form(settings)}) == new
    assert load_config(None, [f"data.{k}={v}" for k, v in old_form(settings).items()]) == new


def test_an_old_key_of_another_kind_must_hold_its_old_default():
    assert load_config(None, ["data.vocab_size=8000"]).data.tokenizer == SpacySettings()
    with pytest.raises(ConfigError, match="--set data.spm_alpha=0.1: data.spm_alpha is a setting "
                                          "of the sentencepiece tokenizer"):
        load_config(None, ["data.spm_alpha=0.1"])


def test_only_a_sampling_kind_samples(tmp_path):
    spacy, _ = load_tokenizers(DataConfig(), tmp_path)
    assert not isinstance(spacy, Sampling) and tokenizers.samples(spacy) == 0


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


@dataclasses.dataclass
class _FakeSettings(tokenizers.TokenizerSettings):
    kind: str = "fake"
    upper: bool = True  # the target side upper-cased

    def problems(self) -> Iterator[tuple[str, str]]:
        if not self.upper:
            yield "data.tokenizer.upper", "data.tokenizer.upper: the fake kind needs it"


class _FakeKind(tokenizers.TokenizerKind):
    """A kind with a setting, that needs one file and checks its languages."""

    settings = _FakeSettings

    def load(self, d, directory, files):
        return _Words(upper=False), _Words(upper=(directory / "fake.txt").read_text() == "up")

    def files(self, d):
        return ["fake.txt"]

    def train(self, d, dest_dir, train_src, train_tgt):
        (dest_dir / "fake.txt").write_text("up" if d.tokenizer.upper else "down")

    def check(self, d):
        if d.src_lang == "zz":
            yield "data.src_lang", "data.src_lang: the fake kind refuses 'zz'"


@pytest.fixture
def fake_kind(monkeypatch):
    """A new kind: one module with its settings and KIND, and one line in KINDS; nothing else."""
    kind = _FakeKind()
    register(monkeypatch, KINDS, "fake", "KIND", kind)
    return kind


def test_a_new_kind_is_usable_by_config_and_the_registry_functions(fake_kind, tmp_path):
    d = load_config(None, ["data.tokenizer={kind: fake, upper: true}"]).data
    assert d.tokenizer == _FakeSettings()
    src, tgt = tokenizers.build_tokenizers(d, tmp_path, tmp_path / "a", tmp_path / "b")
    assert src.tokenize("a b") == ["a", "b"] and tgt.tokenize("a b") == ["A", "B"]
    src, tgt = load_tokenizers(d, tmp_path)
    assert tgt.tokenize_many(["x y"]) == [["X", "Y"]]
    assert tokenizer_files(d) == ["fake.txt"]
    assert tokenizer_kind("fake") is fake_kind


def test_a_kinds_checks_are_blamed_on_the_set_item_that_gave_the_value(fake_kind):
    cfg = load_config(None, ["data.tokenizer=fake", "data.src_lang=xx"], [config_problems])
    assert cfg.data.tokenizer.kind == "fake" and list(config_problems(cfg)) == []
    with pytest.raises(ConfigError) as e:
        load_config(None, ["data.src_lang=zz", "data.tokenizer=fake", "train.lr=0.1"],
                    [config_problems])
    assert str(e.value) == "--set data.src_lang=zz: data.src_lang: the fake kind refuses 'zz'"
    with pytest.raises(ConfigError) as e:
        load_config(None, ["data.tokenizer=fake", "data.tokenizer.upper=false", "train.lr=0.1"])
    assert str(e.value) == ("--set data.tokenizer.upper=false: data.tokenizer.upper: the fake "
                            "kind needs it")


def test_spacy_languages_are_checked_only_when_asked_and_blamed_on_set():
    cfg = load_config(None, ["data.src_lang=zz"])  # config alone checks no languages
    assert cfg.data.src_lang == "zz"
    with pytest.raises(ConfigError) as e:
        load_config(None, ["train.lr=0.1", "data.src_lang=zz", "decode.beam=2"],
                    [config_problems])
    assert str(e.value).startswith("--set data.src_lang=zz: data.src_lang: no spaCy tokenizer "
                                   "for language 'zz'")


def test_config_imports_no_tokenizer_library_and_sentencepiece_never_spacy():
    code = """
import sys
from mt.config import load_config
from mt.tokenizers import config_problems, tokenizer_files
load_config(None, ["data.src_lang=zz"])
assert "spacy" not in sys.modules and "sentencepiece" not in sys.modules, "a library imported"
cfg = load_config(None, ["data.tokenizer=sentencepiece", "data.src_lang=zz"], [config_problems])
tokenizer_files(cfg.data)
assert "spacy" not in sys.modules, "spaCy was imported"
"""
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
