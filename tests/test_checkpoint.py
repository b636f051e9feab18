"""mt/checkpoint.py: one-file checkpoints (config and vocabularies inside), old weights-only ones,
and checkpoints from elsewhere: code, flipped bytes, truncation and mismatches are refused,
and a full disk keeps the previous checkpoint."""

import errno
import io
import json
import os
import pickle
import shutil
import zipfile
from pathlib import Path

import pytest
import torch

from conftest import TOY, TWO_LINES, assert_user_error, leftovers, snapshot
from mt.checkpoint import FORMAT, load_checkpoint, load_run, run_state, save_checkpoint
from mt.commands.evaluate import evaluate
from mt.commands.info import run_info
from mt.errors import CheckpointError, FileSystemError
from mt.translator import Translator


def test_checkpoints_carry_config_and_vocab_as_plain_data(tiny_run):
    for name in ("best.pt", "last.pt"):
        state = load_checkpoint(tiny_run / name)  # weights_only=True inside
        assert state["format"] == FORMAT
        assert state["vocab"]["src"] == (tiny_run / "vocab.src.txt").read_text().splitlines()
        assert state["vocab"]["tgt"] == (tiny_run / "vocab.tgt.txt").read_text().splitlines()
        assert state["config"] == load_run(tiny_run).cfg.to_dict()
        assert state["files"] == {}


def test_moved_checkpoint_translates_and_evaluates_alone(cli, monkeypatch, tiny_run, tmp_path):
    alone = tmp_path / "elsewhere" / "model.pt"
    alone.parent.mkdir()
    shutil.copy(tiny_run / "best.pt", alone)
    assert sorted(p.name for p in alone.parent.iterdir()) == ["model.pt"]
    in_run = Translator(load_run(tiny_run)).translate(TWO_LINES.splitlines())
    moved = cli("translate", str(alone), stdin=TWO_LINES.encode())
    assert moved.code == 0, moved.err
    assert moved.out.splitlines() == in_run and "zwei und vierzig" in moved.out
    src, ref = str(TOY / "toy.test.en"), str(TOY / "toy.test.de")
    a = evaluate(tiny_run, src=src, ref=ref)
    monkeypatch.chdir(tmp_path)  # away from the repository's data and configs
    r = cli("eval", str(alone), "--src", src, "--ref", ref, "--json")
    assert r.code == 0, r.err
    b = json.loads(r.out)
    assert b["bleu"] == a["bleu"] > 80 and b["chrf"] == a["chrf"]


def test_files_travel_as_bytes(tiny_run, tmp_path):
    run = load_run(tiny_run)
    blob = bytes(range(256)) * 3
    state = run_state(run.model.state_dict(), run.cfg, run.src_vocab, run.tgt_vocab, 7,
                      files={"spm.model": blob, "empty": b""})
    save_checkpoint(tmp_path / "x.pt", state)
    again = load_run(tmp_path / "x.pt")
    assert again.files == {"spm.model": blob, "empty": b""} and again.step == 7


def test_damaged_one_file_checkpoints_are_refused(cli, tiny_run, tmp_path):
    good = load_checkpoint(tiny_run / "best.pt")
    cases = {
        "newer": ({**good, "format": FORMAT + 1}, "format"),
        "vocab": ({**good, "vocab": {"src": good["vocab"]["src"], "tgt": ["x"]}}, "vocabulary"),
        "config": ({**good, "config": {**good["config"], "bogus": 1}}, "bogus"),
        # without its shortlist, which would be refused first (made for the longer vocabulary)
        "shape": ({**{k: v for k, v in good.items() if k != "shortlist"},
                   "vocab": {**good["vocab"], "tgt": good["vocab"]["tgt"][:-1]}},
                  "does not match"),
        "starters": ({**good, "starters": "Today"}, "its starters are str"),
    }
    for name, (state, needle) in cases.items():
        torch.save(state, tmp_path / f"{name}.pt")
        with pytest.raises(CheckpointError, match=needle):
            load_run(tmp_path / f"{name}.pt")
    r = cli("translate", str(tmp_path / "vocab.pt"), stdin=b"one\n")
    assert_user_error(r, 5, "vocab.pt", "damaged one-file checkpoint")


def test_old_weights_only_checkpoints_still_load_from_their_run_directory(tiny_run, tmp_path):
    run_dir = shutil.copytree(tiny_run, tmp_path / "run")
    state = load_checkpoint(run_dir / "best.pt")
    torch.save({"model": state["model"], "step": state["step"]}, run_dir / "best.pt")
    lines = TWO_LINES.splitlines()
    old = load_run(run_dir)
    assert Translator(old).translate(lines) == Translator(load_run(tiny_run)).translate(lines)
    assert run_info(run_dir)["format"] == 0 and not run_info(run_dir)["self_contained"]


class Payload:
    """Unpickling this runs a command; a safe loader must refuse before it does."""

    marker = ""

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def weights_only(ckpt: Path) -> None:
    """Rewrite a checkpoint as older mt wrote it: weights and step, config and vocab beside it."""
    state = load_checkpoint(ckpt)
    torch.save({"model": state["model"], "step": state["step"]}, ckpt)


def test_checkpoint_with_code_is_refused_and_never_run(cli, run_copy, tmp_path):
    marker = tmp_path / "pwned"
    Payload.marker = str(marker)
    os.system(f"touch {tmp_path / 'control'}")  # the payload does work when it is run
    assert (tmp_path / "control").exists()
    torch.save({"model": Payload(), "step": 1}, run_copy / "best.pt")
    with pytest.raises(CheckpointError, match="refused to load"):
        load_checkpoint(run_copy / "best.pt")
    r = cli("translate", run_copy, stdin=b"one\n")
    assert_user_error(r, 5, "best.pt", "refused to load", "posix.system")
    assert "weights_only" not in r.err  # never advise the unsafe way
    (run_copy / "best.pt").write_bytes(pickle.dumps({"model": Payload()}))  # a bare pickle
    assert_user_error(cli("translate", run_copy, stdin=b"one\n"), 5, "best.pt",
                      "not a PyTorch zip archive")
    assert not marker.exists()


def test_plain_pickle_is_not_an_mt_checkpoint_and_is_never_unpickled(cli, run_copy, tmp_path):
    marker = tmp_path / "pwned"
    Payload.marker = str(marker)
    ckpt = run_copy / "best.pt"
    ckpt.write_bytes(pickle.dumps({"model": {"w": torch.zeros(2)}, "code": Payload()}))
    before = snapshot(run_copy)
    out = tmp_path / "out.txt"
    r = cli("translate", run_copy, "-o", out, stdin=b"one\n")
    assert_user_error(r, 5, str(ckpt), "not an mt checkpoint (not a PyTorch zip archive)",
                      "; give a checkpoint written by mt train")
    assert "truncated or corrupted" not in r.err
    assert not marker.exists() and not out.exists()
    assert snapshot(run_copy) == before


def flip_in_largest_tensor(ckpt: Path) -> int:
    """Change one byte in the middle of the checkpoint's largest tensor; its offset."""
    data = bytearray(ckpt.read_bytes())
    with zipfile.ZipFile(ckpt) as archive:
        largest = max((i for i in archive.infolist() if "/data/" in i.filename),
                      key=lambda i: i.file_size)
        tensor = archive.read(largest)
    offset = data.find(tensor) + len(tensor) // 2
    data[offset] ^= 0x01
    ckpt.write_bytes(data)
    return offset


def test_flipped_byte_in_a_checkpoint_is_caught_on_every_load(cli, run_copy, tmp_path):
    for name in ("best.pt", "last.pt"):
        good = load_checkpoint(run_copy / name)["model"]
        flip_in_largest_tensor(run_copy / name)
        # torch.load alone takes it: the damage would go unnoticed without mt's CRC-32 check.
        bad = torch.load(run_copy / name, weights_only=True)["model"]
        assert any(not torch.equal(good[k], bad[k]) for k in good)
    before = snapshot(run_copy)
    out, src = tmp_path / "out.txt", tmp_path / "in.txt"
    src.write_text("one two\n")
    needles = ["best.pt", "truncated or corrupted checkpoint", "Bad CRC-32", "archive/data/",
               "; use another checkpoint"]
    assert_user_error(cli("translate", run_copy, "-i", src, "-o", out), 5, *needles)
    assert_user_error(cli("translate", run_copy / "best.pt", stdin=b"one\n"), 5, *needles)
    assert_user_error(cli("eval", run_copy, "--output", out), 5, *needles)
    r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert_user_error(r, 5, "last.pt", "Bad CRC-32")
    assert not out.exists() and leftovers(tmp_path) == []
    assert snapshot(run_copy) == before  # the damaged files are left as they were


def same_content(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            same_content(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@pytest.mark.slow
def test_no_flipped_byte_anywhere_in_a_checkpoint_loads_silently(tmp_path):
    """Flip every byte of a small checkpoint in turn (one bit, and all eight): each load is
    refused, or gives exactly what was saved (padding, fields no reader uses)."""
    state = {"model": {"w": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2)}, "step": 3,
             "progress": {"best": 1.5, "note": "x"}}
    ckpt = tmp_path / "c.pt"
    save_checkpoint(ckpt, state)
    good = ckpt.read_bytes()
    refused = 0
    for i in range(len(good)):
        for mask in (1 << (i % 8), 0xFF):
            bad = bytearray(good)
            bad[i] ^= mask
            ckpt.write_bytes(bad)
            try:
                loaded = load_checkpoint(ckpt)
            except CheckpointError:
                refused += 1
                continue
            assert same_content(loaded, state), (i, mask)
    assert refused > len(good)  # most flips matter, and every one of those was caught


def garbled_pickle(good: bytes) -> bytes:
    """The checkpoint's zip archive with its pickle replaced by text."""
    buf = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(good)) as src, zipfile.ZipFile(buf, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, b"not a pickle" if name.endswith("data.pkl") else src.read(name))
    return buf.getvalue()


def test_truncated_corrupted_and_foreign_checkpoints(cli, run_copy):
    ckpt = run_copy / "best.pt"
    good = ckpt.read_bytes()
    for content in (good[: len(good) // 2], good[:100], b"", garbled_pickle(good)):
        ckpt.write_bytes(content)
        assert_user_error(cli("translate", run_copy, stdin=b"one\n"), 5, "best.pt",
                          "truncated or corrupted", "; use another checkpoint")
    for content in (os.urandom(4096), b"model: weights\n"):
        ckpt.write_bytes(content)
        assert_user_error(cli("translate", run_copy, stdin=b"one\n"), 5, "best.pt",
                          "not an mt checkpoint (not a PyTorch zip archive)")
    torch.save({"weights": torch.zeros(3)}, ckpt)
    assert_user_error(cli("translate", run_copy, stdin=b"one\n"), 5, "not an mt checkpoint")


def test_checkpoint_that_does_not_fit_the_vocabulary(cli, run_copy):
    weights_only(run_copy / "best.pt")
    vocab = run_copy / "vocab.tgt.txt"
    vocab.write_text(vocab.read_text() + "extra1\nextra2\n")
    assert_user_error(cli("translate", run_copy, stdin=b"one\n"), 5, "does not match",
                      "vocab")


def test_checkpoint_that_does_not_fit_the_config(cli, run_copy):
    weights_only(run_copy / "best.pt")
    config = run_copy / "config.yaml"
    config.write_text(config.read_text().replace("d_ff: 128", "d_ff: 96"))
    assert_user_error(cli("translate", run_copy, stdin=b"one\n"), 5, "does not match")


@pytest.mark.parametrize("name", ["vocab.src.txt", "vocab.tgt.txt", "config.yaml"])
def test_run_directory_missing_a_file(cli, run_copy, name):
    weights_only(run_copy / "best.pt")
    (run_copy / name).unlink()
    assert_user_error(cli("translate", run_copy, stdin=b"one\n"), 5, name, "missing")


def test_checkpoint_save_on_a_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    ckpt = tmp_path / "last.pt"
    save_checkpoint(ckpt, {"model": {"w": torch.ones(3)}, "step": 1})
    before = ckpt.read_bytes()

    def full(obj, f):
        f.write(b"PK\x03\x04 partial")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("mt.checkpoint.torch.save", full)
    with pytest.raises(FileSystemError, match="last.pt: No space left on device"):
        save_checkpoint(ckpt, {"model": {"w": torch.zeros(3)}, "step": 2})
    assert ckpt.read_bytes() == before and load_checkpoint(ckpt)["step"] == 1
    assert leftovers(tmp_path) == []
