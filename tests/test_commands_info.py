"""mt/commands/info.py: `mt info` of runs and checkpoints, good and bad."""

import json
import re
import shutil

import pytest
import torch
import yaml

from conftest import CONFIG, TINY, assert_user_error, corpus
from mt.checkpoint import FORMAT, load_checkpoint, load_run, save_checkpoint
from mt.commands.average import average_run
from mt.commands.info import format_info, run_info
from mt.commands.train import train
from mt.errors import CheckpointError
from mt.tokenizers import FLAT_KEYS
from mt.train.lineage import sha256_of


def test_info_json(cli, tiny_run):
    r = cli("info", str(tiny_run), "--json")
    assert r.code == 0, r.err
    info = json.loads(r.out)
    run = load_run(tiny_run)
    assert info["checkpoint"] == str(tiny_run / "best.pt")
    assert info["format"] == FORMAT and info["self_contained"] is True
    assert info["parameters"] == sum(p.numel() for p in run.model.parameters())
    assert info["vocab"] == {"src": len(run.src_vocab), "tgt": len(run.tgt_vocab),
                             "shared": False}
    assert info["model"]["d_model"] == 64 and info["model"]["n_enc_layers"] == 2
    assert info["tokenizer"] == {"kind": "spacy", "src_lang": "en", "tgt_lang": "de",
                                 "lowercase": False}
    last = load_checkpoint(tiny_run / "last.pt")["step"]
    assert info["step"] == run.step and info["steps_trained"] == last
    records = [json.loads(line) for line in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    valid = [e for e in records if e["event"] == "valid"]
    top = max(e["val_bleu"] for e in valid)
    assert info["best"] == {"metric": "val_bleu", "value": top,
                            "step": min(e["step"] for e in valid if e["val_bleu"] == top)}
    assert info["best"]["step"] == run.step  # best.pt is the best validation's checkpoint
    assert {c["name"]: (c["bytes"], c["step"]) for c in info["checkpoints"]} == {
        "best.pt": ((tiny_run / "best.pt").stat().st_size, run.step),
        "last.pt": ((tiny_run / "last.pt").stat().st_size, last)}
    # trained to read nothing beside its sources; its shortlist's size
    assert info["reads"]["memory"] is None and info["reads"]["terminology"] is False
    per = len(run.shortlist.ids) / (len(run.shortlist.offsets) - 1)
    assert info["reads"]["shortlist"] == int(per) > 0
    text = cli("info", str(tiny_run / "last.pt"))
    assert text.code == 0, text.err
    assert "parameters:" in text.out and f"steps trained: {last}" in text.out
    assert "best:" in text.out and "last.pt:" in text.out and "MiB" in text.out
    assert "reads:" not in text.out and "shortlist:" in text.out


def test_info_says_a_memory_trained_run_reads_a_memory(tiny_run):
    info = run_info(tiny_run)
    info["reads"]["memory"] = {"threshold": 70.0, "prob": 0.5, "mask": True}
    assert ("reads:         a memory's best match of 70% or more (data.memory, prob 0.5, "
            "unrelated words masked): translate with --memory") in format_info(info)


def test_info_of_a_run_older_than_tokenizer_sections(tiny_run, tmp_path):
    """Its config (saved and in its checkpoints) says data.tokenizer: spacy and every old
    flat key, as configs were saved before the kinds owned their settings: read as before."""
    run = tmp_path / "old"
    shutil.copytree(tiny_run, run)

    def old(data: dict) -> dict:
        assert data["tokenizer"] == "spacy"
        return {**data, **{key: default for key, (_, _, default) in FLAT_KEYS.items()}}

    for name in ("best.pt", "last.pt"):
        state = load_checkpoint(run / name)
        state["config"]["data"] = old(state["config"]["data"])
        save_checkpoint(run / name, state)
    saved = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    (run / "config.yaml").write_text(yaml.safe_dump({**saved, "data": old(saved["data"])}))
    before, after = run_info(tiny_run), run_info(run)
    for key in ("tokenizer", "data", "model", "vocab", "step", "parameters", "best"):
        assert after[key] == before[key], key
    assert "tokenizer:     spacy en -> de\n" in format_info(after)


def test_info_of_missing_truncated_or_foreign_checkpoints(cli, tiny_run, tmp_path):
    cut = tmp_path / "cut.pt"
    cut.write_bytes((tiny_run / "best.pt").read_bytes()[:5000])
    assert_user_error(cli("info", str(cut), "--json"), 5, "truncated or corrupted")
    with pytest.raises(CheckpointError, match="none.pt"):
        run_info(tmp_path / "none.pt")
    foreign = tmp_path / "foreign.pt"
    torch.save({"state_dict": {"w": torch.zeros(2)}}, foreign)
    with pytest.raises(CheckpointError, match="not an mt checkpoint"):
        run_info(foreign)
    old = tmp_path / "old" / "best.pt"  # weights only, and no run directory around it
    old.parent.mkdir()
    state = load_checkpoint(tiny_run / "best.pt")
    torch.save({"model": state["model"], "step": state["step"]}, old)
    with pytest.raises(CheckpointError, match="config missing"):
        run_info(old)


@pytest.mark.slow
def test_info_shows_the_lineage_base_fine_tuned_averaged(tmp_path, cli):
    small = [*TINY, "model.d_model=32", "model.d_ff=64", "train.max_tokens=400",
             "train.eval_bleu=false", "train.metric=loss", "train.warmup=10",
             f"data.dir={corpus(tmp_path, n=100)}", "train.eval_every=3"]
    train(CONFIG, [*small, "train.max_steps=6"], tmp_path / "base", "cpu", False)
    train(CONFIG, [*small, "train.max_steps=6", "train.keep_checkpoints=2"], tmp_path / "ft",
          "cpu", False, init_from=tmp_path / "base")
    average = average_run(tmp_path / "ft", 2)
    info = run_info(average)
    base_sha, ft_sha = (sha256_of(p) for p in (tmp_path / "base" / "best.pt",
                                               tmp_path / "ft" / "ckpt.6.pt"))
    fingerprint = info["lineage"][0]["fingerprint"]
    assert fingerprint.startswith("toy_train.en-de.")
    assert info["lineage"] == [
        {"how": "trained", "train": f"{tmp_path / 'corpus'}/toy.train",
         "fingerprint": fingerprint, "sha256": base_sha, "step": 6},
        {"how": "fine-tuned", "train": f"{tmp_path / 'corpus'}/toy.train",
         "fingerprint": fingerprint, "sha256": ft_sha, "step": 6},
        {"how": "averaged", "train": f"{tmp_path / 'corpus'}/toy.train",
         "fingerprint": fingerprint, "sha256": sha256_of(average), "step": 6,
         "averaged": [3, 6]}]
    r = cli("info", average)
    assert r.code == 0, r.err
    assert (f"lineage:       trained on {tmp_path / 'corpus'}/toy.train (step 6, sha256 "
            f"{base_sha[:12]}) -> fine-tuned on {tmp_path / 'corpus'}/toy.train (step 6, sha256 "
            f"{ft_sha[:12]}) -> averaged steps 3, 6 (step 6, sha256 "
            f"{sha256_of(average)[:12]})\n") in r.out
    assert json.loads(cli("info", average, "--json").out)["lineage"] == info["lineage"]
    old = tmp_path / "base" / "old.pt"  # saved before lineages
    state = load_checkpoint(tmp_path / "base" / "best.pt")
    del state["lineage"]
    save_checkpoint(old, state)
    assert run_info(old)["lineage"] == [{"how": "unknown", "sha256": sha256_of(old), "step": 6}]
    assert "lineage:       no lineage recorded (step 6" in cli("info", old).out


def test_peak_memory_is_recorded_at_each_validation_and_shown(cli, tiny_run):
    records = [json.loads(line) for line in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    peaks = [e["peak_rss_mib"] for e in records if e["event"] == "valid"]
    assert len(peaks) >= 2 and peaks == sorted(peaks)  # a high-water mark
    assert 50 < peaks[0] < 64 * 1024  # torch alone is more than 50 MiB resident
    info = json.loads(cli("info", str(tiny_run), "--json").out)
    top = max((e for e in records if e["event"] == "valid"), key=lambda e: e["peak_rss_mib"])
    assert info["peak_memory"] == {"peak_rss_mib": top["peak_rss_mib"], "step": top["step"]}
    text = cli("info", str(tiny_run)).out
    assert re.search(rf"peak memory: +{top['peak_rss_mib'] / 1024:.2f} GiB resident, by step "
                     rf"{top['step']}\n", text), text


def test_info_names_a_held_out_corpus_by_its_file(tmp_path):
    from mt.commands.info import held_label
    from mt.config import load_config

    d = load_config(None, [f"data.test={{format: tsv, path: {tmp_path / 'test.tsv'}}}"]).data
    assert (held_label(d, "val"), held_label(d, "test")) == ("toy.val", str(tmp_path / "test.tsv"))


@pytest.mark.slow  # builds and imports a Marian model
def test_info_of_an_imported_model_says_it_has_no_training_data(tmp_path, cli):
    """Its config's data section is mt's default: shown as the model's data, it read
    `data: data/toy (train data/toy/toy.train…)` (issue 65)."""
    pytest.importorskip("transformers")
    from hf_models import build_marian

    from mt.commands.import_hf import import_hf

    import_hf(str(build_marian(tmp_path / "marian")), tmp_path / "run")
    r = cli("info", tmp_path / "run")
    assert r.code == 0, r.err
    data = [line for line in r.out.splitlines() if line.startswith("data:")]
    assert data and "none: an imported model" in data[0] and "toy" not in data[0], r.out
    assert json.loads(cli("info", tmp_path / "run", "--json").out)["data"] is None
