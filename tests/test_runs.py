"""mt/runs.py: runs that cannot be ensembled are refused, naming the first difference (tokenizer
settings, tokenizer files, vocabularies), and an export is no member of an ensemble."""

from __future__ import annotations

import pytest

from conftest import assert_user_error
from mt.checkpoint import Run
from mt.config import Config
from mt.errors import ConfigError
from mt.runs import check_ensemble
from mt.translator import Translator
from mt.vocab import SPECIALS, Vocab


def _run(src: list[str], tgt: list[str], **data) -> Run:
    cfg = Config()
    for key, value in data.items():
        setattr(cfg.data, key, value)
    return Run(cfg, None, Vocab(SPECIALS + src), Vocab(SPECIALS + tgt), 0, None, None)


@pytest.mark.parametrize("other, what", [
    (_run(["a", "b"], ["x", "y"], lowercase=True), "its data.lowercase is True, not False"),
    (_run(["a", "b"], ["x", "z"]), "its target vocabulary differs at id 5 ('z', not 'y')"),
    (_run(["a", "c"], ["x", "z"]), "its source vocabulary differs at id 5 ('c', not 'b')"),
    (_run(["a", "b"], ["x", "y", "w"]), "its target vocabulary has 7 tokens, not 6"),
])
def test_runs_that_cannot_be_ensembled_are_refused_naming_the_first_difference(other, what):
    first = _run(["a", "b"], ["x", "y"])
    check_ensemble([first, _run(["a", "b"], ["x", "y"])], ["A", "B"])  # the same: accepted
    with pytest.raises(ConfigError) as e:
        check_ensemble([first, first, other], ["A", "B", "C"])
    assert str(e.value).startswith(f"C: cannot be ensembled with A: {what}; ")


def test_tokenizer_settings_must_match_but_not_how_training_sampled_segmentations():
    from mt.tokenizers.subword import SentencePieceSettings

    def spm(**settings) -> Run:
        return _run(["a"], ["x"], tokenizer=SentencePieceSettings(**settings))

    check_ensemble([spm(alpha=0.1, samples=3), spm()], ["A", "B"])  # sampling: accepted
    for other, what in ((spm(vocab_size=900), "its data.tokenizer.vocab_size is 900, not "),
                        (_run(["a"], ["x"]), "its data.tokenizer is 'spacy', not "
                                             "'sentencepiece'")):
        with pytest.raises(ConfigError, match=what):
            check_ensemble([spm(), other], ["A", "B"])


def test_tokenizer_files_must_match():
    a, b = _run(["a"], ["x"]), _run(["a"], ["x"])
    a.files, b.files = {"spm.src.model": b"1"}, {"spm.src.model": b"2"}
    with pytest.raises(ConfigError, match="its tokenizer file spm.src.model differs"):
        check_ensemble([a, b], ["A", "B"])


def test_an_export_in_an_ensemble_and_an_ensemble_through_ctranslate2_are_refused(
        cli, tmp_path):
    export = tmp_path / "export"
    export.mkdir()
    (export / "model.bin").write_bytes(b"")  # what marks an `mt export` directory
    r = cli("translate", tmp_path / "run", export, stdin=b"a\n")
    assert_user_error(r, 3, f"{export}: a CTranslate2 export cannot be part of an ensemble")
    with pytest.raises(ConfigError, match="an ensemble of 2 models: not with the ctranslate2"):
        Translator.load([export, export], engine="ctranslate2")
