"""mt/train/finetune.py: `mt train CONFIG --init-from PARENT` starts from the parent's weights,
vocabularies and tokenizer, afresh in everything else; what it refuses, before writing
anything."""

import json
import shutil

import pytest
import torch

from conftest import CONFIG, TINY, assert_user_error, corpus
from mt.checkpoint import load_checkpoint
from mt.commands.train import given_keys, train
from mt.config import load_config
from mt.tokenizers.spacy_words import SpacySettings
from mt.tokenizers.subword import SentencePieceSettings
from mt.train.finetune import Parent, child_config, open_parent, parent_tokenizer
from mt.train.lineage import sha256_of
from mt.train.loop import Trainer

pytestmark = pytest.mark.slow  # each test trains a parent, or several runs

SMALL = [*TINY, "model.d_model=32", "model.d_ff=64", "train.max_tokens=400",
         "train.eval_bleu=false", "train.metric=loss", "train.warmup=10", "train.threads=1"]


@pytest.fixture(scope="module")
def parent(tmp_path_factory):
    """A run trained 12 steps on 200 toy pairs."""
    root = tmp_path_factory.mktemp("parent")
    data = corpus(root, n=200)
    train(CONFIG, [*SMALL, f"data.dir={data}", "train.max_steps=12"], root / "run", "cpu",
          False)
    return root / "run"


def child_sets(tmp_path, *more):
    """The parent's settings on other data: the first 100 pairs of the toy corpus reversed."""
    data = corpus(tmp_path, n=100, edit=lambda src, tgt: (src.reverse(), tgt.reverse()))
    return [*SMALL, f"data.dir={data}", *more]


def test_a_fine_tuned_run_starts_from_the_parents_weights_and_afresh_otherwise(parent, tmp_path):
    cfg = load_config(parent / "config.yaml")  # the parent's validation set too
    t = Trainer(cfg, tmp_path / "child", "cpu", parent=open_parent(parent))
    t.prepare_run_dir()
    t.load_data()
    t.build()
    best = load_checkpoint(parent / "best.pt")
    for name, tensor in best["model"].items():
        assert torch.equal(t.model.state_dict()[name], tensor), name
    parent_valid = [json.loads(x) for x in (parent / "metrics.jsonl").read_text().splitlines()]
    parent_loss = [e["val_loss"] for e in parent_valid
                   if e["event"] == "valid" and e["step"] == best["step"]][0]
    assert t.validate()["val_loss"] == parent_loss  # step 0: the parent's validation loss
    assert t.progress.step == 0 and t.progress.best is None and t.progress.epoch == 0
    assert t.optimizer.state_dict()["state"] == {}
    assert t.src_vocab.itos == best["vocab"]["src"] and t.tgt_vocab.itos == best["vocab"]["tgt"]
    assert t.lineage["how"] == "fine-tuned"
    assert t.lineage["from"][0]["sha256"] == sha256_of(parent / "best.pt")
    assert t.lineage["from"][0]["step"] == best["step"]
    assert t.lineage["from"][0]["lineage"] == best["lineage"]


def test_fine_tuning_trains_its_own_steps_with_the_parents_vocabulary(parent, tmp_path, cli):
    run = tmp_path / "child"
    sets = [a for s in child_sets(tmp_path, "train.max_steps=5", "data.lowercase=true")
            for a in ("--set", s)]
    r = cli("train", CONFIG, "--init-from", parent / "best.pt", "--out", run, "--device", "cpu",
            *sets)
    assert r.code == 0, r.err
    assert "data.lowercase: False, the parent's (the config says True)" in r.err
    last = load_checkpoint(run / "last.pt")
    assert last["step"] == last["progress"]["step"] == 5  # not the parent's 12 + 5
    assert {int(s["step"]) for s in last["optimizer"]["state"].values()} == {5}
    assert last["config"]["data"]["lowercase"] is False
    assert last["vocab"] == load_checkpoint(parent / "best.pt")["vocab"]
    assert (run / "vocab.src.txt").read_text() == (parent / "vocab.src.txt").read_text()
    valid = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()
             if '"valid"' in x]
    assert [e["best"] for e in valid][0] == valid[0]["val_loss"]  # best score started afresh
    assert last["lineage"]["from"][0]["path"] == str(parent / "best.pt")


def test_refusals_are_one_line_with_their_code_and_write_nothing(parent, tmp_path, cli):
    run = tmp_path / "child"
    sets = [a for s in child_sets(tmp_path) for a in ("--set", s)]
    r = cli("train", CONFIG, "--init-from", parent, "--out", run, *sets,
            "--set", "model.d_ff=96", "--device", "cpu")
    assert_user_error(r, 3, "--set model.d_ff=96: model.d_ff differs from the parent's "
                      "(96 here, 64 in")
    r = cli("train", CONFIG, "--init-from", parent, "--out", run, "--resume", "--device", "cpu")
    assert_user_error(r, 3, "--init-from", "--resume")
    cut = tmp_path / "cut.pt"
    cut.write_bytes((parent / "best.pt").read_bytes()[:5000])
    r = cli("train", CONFIG, "--init-from", cut, "--out", run, *sets, "--device", "cpu")
    assert_user_error(r, 5, "truncated or corrupted")
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    r = cli("train", CONFIG, "--init-from", foreign, "--out", run, *sets, "--device", "cpu")
    assert_user_error(r, 5, "not an mt checkpoint")
    empty = tmp_path / "empty"
    empty.mkdir()
    r = cli("train", CONFIG, "--init-from", empty, "--out", run, *sets, "--device", "cpu")
    assert_user_error(r, 5, "no checkpoint")
    assert not run.exists()


def test_a_weights_only_parent_keeps_working(parent, tmp_path, cli):
    """A parent saved before checkpoints carried config and lineage: its directory's files."""
    old = shutil.copytree(parent, tmp_path / "old")
    state = load_checkpoint(old / "best.pt")
    torch.save({"model": state["model"], "step": state["step"]}, old / "best.pt")
    p = open_parent(old)
    assert p.record["lineage"] is None and p.record["step"] == state["step"]
    assert all(torch.equal(p.weights[k], v) for k, v in state["model"].items())


def test_a_child_takes_its_parents_tokenizer_but_samples_as_it_says():
    parent = SentencePieceSettings(model_type="bpe", vocab_size=500, alpha=0.1, samples=2)
    own = SentencePieceSettings(vocab_size=8000, alpha=0.3, nbest=5)
    assert parent_tokenizer(parent, own) == SentencePieceSettings(
        model_type="bpe", vocab_size=500, alpha=0.3, nbest=5, samples=8)
    # another kind in the child's config: the parent's, sampling as that kind does by default
    assert parent_tokenizer(parent, SpacySettings()) == SentencePieceSettings(
        model_type="bpe", vocab_size=500)
    assert parent_tokenizer(SpacySettings(), own) == SpacySettings()


def test_the_log_names_only_what_the_config_sets(tmp_path, capsys):
    """A default the config never mentions is not "what the config says" (issue 65: fine-tuning
    an imported model logged `data.shared_vocab: True, the parent's (the config says False)`)."""
    parent = Parent(tmp_path / "p.pt", load_config(CONFIG, ["data.shared_vocab=true",
                                                            "data.lowercase=true"]),
                    {}, None, {})
    assert {"data.tokenizer.vocab_size", "data.tokenizer.kind", "model.d_model"} <= given_keys(
        CONFIG, ["data.vocab_size=500", "data.tokenizer=sentencepiece"])
    sets = ["data.lowercase=false"]
    given = given_keys(CONFIG, sets)
    assert "data.lowercase" in given and "data.shared_vocab" not in given
    cfg = child_config(load_config(CONFIG, sets), parent, str, given)
    assert cfg.data.shared_vocab is True and cfg.data.lowercase is True  # both inherited
    err = capsys.readouterr().err
    assert "data.lowercase: True, the parent's (the config says False)" in err
    assert "shared_vocab" not in err
