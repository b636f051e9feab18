"""Bad input, faults and untrusted files: one `error:` line, a distinct exit code, nothing lost.

Most cases run `mt` in this process (`cli`), which is the same `main()` as the command but
spares a Python start per case; the end-to-end ones (signals, locks, pipes, --debug) run it
in a subprocess.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import json
import math
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest
import torch

import mt.commands.translate
import mt.translator
from conftest import ROOT, TINY, TOY, Result, assert_user_error, make_weights_only, run_mt
from mt.checkpoint import load_checkpoint, load_run, save_checkpoint
from mt.cli import main
from mt.commands.translate import translate_file
from mt.config import load_config
from mt.errors import CheckpointError, FileSystemError, RunError
from mt.textio import atomic_write
from mt.train.loop import Trainer
from mt.train.step import MAX_BAD_STEPS
from mt.translator import CHUNK_LINES, Translator

CONFIG = ROOT / "configs" / "toy.yaml"


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run `mt ARGS` in this process: exit code, stdout and stderr, as a user would see them."""
    monkeypatch.chdir(ROOT)  # as run_mt: configs name data/toy relative to the repository

    def run(*args: str, stdin: bytes | None = None) -> Result:
        monkeypatch.setattr(sys, "argv", ["mt", *map(str, args)])
        monkeypatch.setenv("MT_DEBUG", "")
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        code = 0
        try:
            with own_signals():
                main()
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


@contextlib.contextmanager
def own_signals():
    """main() installs SIGINT/SIGTERM handlers; give pytest its own back."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)


@pytest.fixture(scope="session")
def tiny(tiny_run):
    return load_run(tiny_run)


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    """Every file's bytes and modification time, to show that nothing was touched."""
    return {str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(directory.rglob("*")) if p.is_file()}


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def corpus(root: Path, n: int = 60, edit=None) -> Path:
    """A small copy of the toy corpus; edit(src_lines, tgt_lines) may change the training pair."""
    d = root / "corpus"
    d.mkdir()
    for split, count in (("train", n), ("val", 20)):
        src = (TOY / f"toy.{split}.en").read_bytes().split(b"\n")[:count]
        tgt = (TOY / f"toy.{split}.de").read_bytes().split(b"\n")[:count]
        if split == "train" and edit:
            edit(src, tgt)
        (d / f"toy.{split}.en").write_bytes(b"".join(line + b"\n" for line in src))
        (d / f"toy.{split}.de").write_bytes(b"".join(line + b"\n" for line in tgt))
    return d


def small_config(data_dir: Path, *sets: str) -> list[str]:
    """--set options: the tiny model on a small corpus, validating by loss only (no BLEU)."""
    options = [*TINY, f"data.dir={data_dir}", "train.eval_bleu=false", "train.metric=loss", *sets]
    return [arg for s in options for arg in ("--set", s)]


# --- one error path ---------------------------------------------------------------------------

@pytest.mark.parametrize("args, needle", [
    (["train", CONFIG, "--bogus"], "No such option: --bogus"),
    (["translate"], "Missing argument"),
    (["translate", "run", "--device"], "--device"),
    (["eval", "run", "--split", "dev"], "--split"),
])
def test_usage_errors_are_one_line_with_exit_2(cli, args, needle):
    r = cli(*args)
    assert_user_error(r, 2, needle, "--help")
    assert "Usage:" not in r.err and "╭" not in r.err  # no Click/Rich box, just the line


def debug_error(r: Result, code: int, *needles: str) -> None:
    """--debug: the traceback, then the same one `error:` line (last) and the same exit code."""
    assert r.code == code, r
    assert "Traceback" in r.err, r.err
    errors = [line for line in r.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and r.err.splitlines()[-1] == errors[0], r.err
    assert all(n in errors[0] for n in needles), (needles, errors[0])


def test_debug_adds_the_traceback_and_keeps_the_exit_code_and_error_line(cli, tmp_path):
    missing = tmp_path / "nope.yaml"
    plain = run_mt("train", str(missing))
    assert_user_error(plain, 3, str(missing), "not found")
    r = run_mt("--debug", "train", str(missing))
    debug_error(r, 3, str(missing), "not found")
    assert "ConfigError" in r.err
    assert r.err.splitlines()[-1] == plain.err.splitlines()[-1]
    assert not missing.exists()
    # Usage errors (exit 2) and data errors (exit 4) keep theirs too.
    debug_error(cli("--debug", "train", missing, "--bogus"), 2, "--bogus")
    debug_error(cli("--debug", "translate", "run", "-i", tmp_path / "no.txt"), 4, "no.txt",
                "not found")
    assert list(tmp_path.iterdir()) == []


def test_mt_debug_env_is_the_same_as_debug(monkeypatch, capsys):
    monkeypatch.setattr(sys, "argv", ["mt", "train", "/nonexistent/c.yaml"])
    monkeypatch.setenv("MT_DEBUG", "1")
    with pytest.raises(SystemExit) as e, own_signals():
        main()
    err = capsys.readouterr().err
    debug_error(Result(e.value.code, "", err), 3, "/nonexistent/c.yaml", "not found")


def test_error_lines_say_what_to_do(cli, tmp_path, run_copy):
    """`error: <where>: <what is wrong>; <what to do>`, as the README promises."""
    bad_yaml, a_list, src = tmp_path / "bad.yaml", tmp_path / "list.yaml", tmp_path / "in.txt"
    bad_yaml.write_text("model:\n  d_model: [\n")
    a_list.write_text("- 1\n")
    src.write_text("one\n")
    empty_run = tmp_path / "empty"
    empty_run.mkdir()
    no_vocab = Path(shutil.copytree(run_copy, tmp_path / "v"))
    no_config = Path(shutil.copytree(run_copy, tmp_path / "c"))
    for old in (no_vocab, no_config):  # checkpoints that need the files beside them
        make_weights_only(old)
    (no_vocab / "vocab.tgt.txt").unlink()
    (no_config / "config.yaml").unlink()
    cases = [
        (["train", tmp_path / "none.yaml"], 3, "; check the path"),
        (["train", bad_yaml], 3, "; fix the YAML there"),
        (["train", a_list], 3, "; see configs/ for examples"),
        (["train", CONFIG, "--set", "train.lr.x=1"], 3, "; give section.key=value"),
        (["train", CONFIG, "--out", tmp_path / "r", "--set", f"data.dir={tmp_path / 'no'}"], 4,
         "; check the path"),
        (["translate", tmp_path / "no-run", "-i", src], 5, "; check the path"),
        (["translate", empty_run, "-i", src], 5, "; train it first, or give a .pt file"),
        (["translate", no_vocab, "-i", src], 5, "; copy it from the run"),
        (["translate", no_config, "-i", src], 5, "; copy it from the run"),
        (["translate", run_copy, "-i", tmp_path / "no.txt"], 4, "; check the path"),
        (["eval", run_copy, "--src", src], 4, "; add --ref FILE"),
    ]
    for args, code, advice in cases:
        r = cli(*args)
        assert_user_error(r, code, advice)
        assert re.fullmatch(r"error: \S.*: .+; \w.+", r.err.strip().splitlines()[-1]), r.err


@pytest.mark.parametrize("err, needles", [
    (PermissionError(errno.EACCES, "Permission denied", "/x/out.txt"),
     ["/x/out.txt: Permission denied", "check the permissions"]),
    (OSError(errno.ENOSPC, "No space left on device", "/x/out.txt"),
     ["/x/out.txt: No space left on device", "free some disk space"]),
])
def test_os_errors_from_anywhere_are_user_errors_with_exit_7(cli, monkeypatch, err, needles):
    def fail(*args, **kwargs):
        raise err

    monkeypatch.setattr(mt.commands.translate, "translate_file", fail)
    assert_user_error(cli("translate", "run"), 7, *needles)


def test_internal_errors_keep_their_traceback(cli, monkeypatch):
    def bug(*args, **kwargs):
        raise ValueError("a bug")

    monkeypatch.setattr(mt.commands.translate, "translate_file", bug)
    r = cli("translate", "run")
    assert r.code == 1
    assert "Traceback" in r.err and "ValueError: a bug" in r.err
    assert "internal error" in r.err and not r.err.startswith("error:")


# --- configs ----------------------------------------------------------------------------------

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


# --- data -------------------------------------------------------------------------------------

def test_mismatched_parallel_files_name_both_and_their_counts(cli, tmp_path):
    data = corpus(tmp_path, edit=lambda src, tgt: tgt.pop())
    r = cli("train", CONFIG, "--out", tmp_path / "run", *small_config(data))
    assert_user_error(r, 4, "train.en has 60 lines", "train.de has 59")


def test_empty_and_missing_training_files(cli, tmp_path):
    data = corpus(tmp_path, n=0)
    r = cli("train", CONFIG, "--out", tmp_path / "r1", *small_config(data))
    assert_user_error(r, 4, "train.en", "empty")
    (data / "toy.train.en").write_text("\n\n")
    (data / "toy.train.de").write_text("eins\n\n")
    r = cli("train", CONFIG, "--out", tmp_path / "r3", *small_config(data))
    assert_user_error(r, 4, "train.en", "no training pairs left")
    r = cli("train", CONFIG, "--out", tmp_path / "r2", *small_config(tmp_path / "nowhere"))
    assert_user_error(r, 4, "nowhere/toy.train.en", "not found")


def test_training_data_invalid_utf8_is_replaced_and_long_lines_dropped(tmp_path, capsys):
    def edit(src, tgt):
        src[2] = b"one \xff\xfe two"  # line 3
        src[4] = tgt[4] = b" ".join([b"seven"] * 45)  # over data.max_len (40): dropped
        src[5] = tgt[5] = b""  # empty: dropped

    data = corpus(tmp_path, edit=edit)
    cfg = load_config(CONFIG, [*TINY, f"data.dir={data}"])
    trainer = Trainer(cfg, tmp_path / "run", "cpu")
    trainer.load_data()
    err = capsys.readouterr().err
    assert "train.en: 1 line(s) had invalid UTF-8 (first at line 3)" in err
    assert "58 training pairs (2 dropped" in err
    assert any("\ufffd" in token for token in trainer.src_vocab.itos)  # the pair was kept


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_input(cli, tmp_path, tiny_run):
    src = tmp_path / "in.txt"
    src.write_text("one\n")
    src.chmod(0)
    assert_user_error(cli("translate", tiny_run, "-i", src), 4, "in.txt", "Permission denied")


def test_translate_checks_paths_before_loading_the_model(cli, tmp_path):
    src = tmp_path / "in.txt"
    src.write_text("one two\n")
    run = tmp_path / "no-such-run"  # never reached: the path errors come first
    assert_user_error(cli("translate", run, "-i", tmp_path / "nope.txt"), 4, "nope.txt",
                      "not found")
    assert_user_error(cli("translate", run, "-i", tmp_path), 4, "is a directory")
    assert_user_error(cli("translate", run, "-i", src, "-o", tmp_path), 4, "is a directory")
    assert_user_error(cli("translate", run, "-i", src, "-o", tmp_path / "no" / "out.txt"), 4,
                      "output directory", "does not exist")


def test_eval_checks_its_output_path_before_loading_or_translating(cli, tmp_path, tiny_run,
                                                                    monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("translated although the output path was bad")

    monkeypatch.setattr(Translator, "translate_stream", never)
    missing = tmp_path / "missing" / "dir" / "hyp.txt"
    for run in (tmp_path / "no-such-run", tiny_run):  # no run: the path check comes first
        before = snapshot(tmp_path)
        assert_user_error(cli("eval", run, "--output", tmp_path), 4, str(tmp_path),
                          "is a directory", "; give a file name")
        r = cli("eval", run, "--output", missing)
        assert_user_error(r, 4, str(missing), f"output directory {missing.parent} does not "
                          "exist", "; create it or choose another path")
        assert not (tmp_path / "missing").exists()
        assert snapshot(tmp_path) == before and leftovers(tmp_path) == []


def test_translate_invalid_utf8_from_file_and_stdin(cli, tmp_path, tiny_run):
    data = b"one two\n\xff\xfe three\n\nfour \xc3\n"
    src = tmp_path / "in.txt"
    src.write_bytes(data)
    for args, stdin, name in ((["-i", src], None, str(src)), ([], data, "-")):
        r = cli("translate", tiny_run, *args, stdin=stdin)
        assert r.code == 0, r.err
        assert r.out.count("\n") == 4 and r.out.split("\n")[2] == "", r.out
        assert f"{name}: 2 line(s) had invalid UTF-8 (first at line 2)" in r.err


# --- checkpoints from elsewhere ---------------------------------------------------------------

class Payload:
    """Unpickling this runs a command; a safe loader must refuse before it does."""

    marker = ""

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def run_copy(tiny_run, tmp_path) -> Path:
    return Path(shutil.copytree(tiny_run, tmp_path / "run"))


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


def test_resume_needs_the_training_state(cli, run_copy):
    shutil.copy(run_copy / "best.pt", run_copy / "last.pt")  # weights only
    r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert_user_error(r, 5, "last.pt", "cannot resume")


# --- runs -------------------------------------------------------------------------------------

def test_second_training_into_a_locked_directory_is_refused(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with open(run / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as a running `mt train` holds it
        before = snapshot(run)
        r = run_mt("train", str(CONFIG), "--out", str(run), "--device", "cpu")
    assert_user_error(r, 6, str(run), "another training run")
    assert snapshot(run) == before


def test_locked_directory_refused_even_with_resume(cli, run_copy):
    with open(run_copy / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        before = snapshot(run_copy)
        r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert_user_error(r, 6, "another training run")
    assert snapshot(run_copy) == before


def test_existing_run_is_refused_without_resume_and_left_untouched(cli, run_copy):
    before = snapshot(run_copy)
    r = cli("train", CONFIG, "--out", run_copy, "--device", "cpu")
    assert_user_error(r, 6, str(run_copy), "holds a run already", "--resume")
    assert snapshot(run_copy) == before


def test_resume_removes_temporary_checkpoints_left_by_a_kill(cli, run_copy):
    leftover = [run_copy / ".last.pt.k9x2a.tmp", run_copy / ".best.pt.3fz_q.tmp"]
    for tmp in leftover:
        tmp.write_bytes(b"PK\x03\x04 half a checkpoint")  # what kill -9 mid-save leaves
    others = {run_copy / ".notes.txt.ab12.tmp": b"not ours", run_copy / "notes.txt": b"mine"}
    for path, content in others.items():
        path.write_bytes(content)
    before = snapshot(run_copy)
    r = cli("train", CONFIG, "--out", run_copy, "--device", "cpu")  # refused: nothing touched
    assert_user_error(r, 6, "holds a run already")
    assert snapshot(run_copy) == before
    step = load_checkpoint(run_copy / "last.pt")["step"]
    r = cli("train", "--out", run_copy, "--resume", "--device", "cpu")
    assert r.code == 0, r.err
    assert "left by an interrupted save" in r.err
    assert not any(tmp.exists() for tmp in leftover)
    assert all(path.read_bytes() == content for path, content in others.items())
    assert load_checkpoint(run_copy / "last.pt")["step"] == step  # the run itself is intact


def test_unwritable_run_directory_is_reported_before_training(cli, tmp_path, monkeypatch):
    nowhere = ["--set", f"data.dir={tmp_path / 'no-data'}"]  # reading data would fail: it must
    a_file = tmp_path / "file"                                # not get that far
    a_file.write_text("x")
    assert_user_error(cli("train", CONFIG, "--out", a_file, *nowhere), 6, "not a directory")
    assert_user_error(cli("train", CONFIG, "--out", a_file / "run", *nowhere), 6,
                      "cannot create the run directory")
    read_only, access = tmp_path / "ro", os.access  # chmod would not stop root: pretend

    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != read_only
                        and access(path, mode))
    assert_user_error(cli("train", CONFIG, "--out", read_only, *nowhere), 6, "not writable")


def nonfinite(net):
    return lambda src, tgt_in: net(src, tgt_in) * float("nan")


def test_nonfinite_loss_skips_the_update_is_logged_and_stops_the_run(tmp_path, capsys):
    cfg = load_config(CONFIG, [*TINY, f"data.dir={corpus(tmp_path)}"])
    trainer = Trainer(cfg, tmp_path / "run", "cpu")
    trainer.prepare_run_dir()
    trainer.load_data()
    trainer.build()
    batch = trainer.train_data.batches(cfg.train.max_tokens)[0]
    weights = lambda: {k: v.clone() for k, v in trainer.model.state_dict().items()}  # noqa: E731
    start, good_net = weights(), trainer.net

    trainer.net = nonfinite(good_net)
    for _ in range(MAX_BAD_STEPS - 1):
        assert math.isnan(trainer.step(batch))
    assert all(torch.equal(start[k], v) for k, v in weights().items())  # no update applied
    trainer.net = good_net
    assert math.isfinite(trainer.step(batch)) and trainer.bad_steps == 0  # a good step resets
    trained = weights()
    assert not all(torch.equal(start[k], v) for k, v in trained.items())

    trainer.net = nonfinite(good_net)
    with pytest.raises(RunError, match=f"not finite for {MAX_BAD_STEPS} steps in a row") as e:
        for _ in range(MAX_BAD_STEPS):
            trainer.step(batch)
    assert "last.pt" in str(e.value) and "train.lr" in str(e.value)
    saved = load_checkpoint(tmp_path / "run" / "last.pt")["model"]
    assert all(torch.equal(trained[k], v) and v.isfinite().all() for k, v in saved.items())
    events = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    skipped = [e for e in events if e["event"] == "nonfinite_loss"]
    assert len(skipped) == 2 * MAX_BAD_STEPS - 1
    assert skipped[-1]["in_a_row"] == MAX_BAD_STEPS
    assert skipped[-1]["skipped_steps"] == 2 * MAX_BAD_STEPS - 1
    assert "update skipped" in capsys.readouterr().err


def test_nonfinite_gradient_skips_the_update(tmp_path):
    cfg = load_config(CONFIG, [*TINY, f"data.dir={corpus(tmp_path)}", "train.clip_norm=0"])
    trainer = Trainer(cfg, tmp_path / "run", "cpu")
    trainer.prepare_run_dir()
    trainer.load_data()
    trainer.build()
    batch = trainer.train_data.batches(cfg.train.max_tokens)[0]
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    param = next(trainer.model.parameters())
    hook = param.register_hook(lambda g: g * float("inf"))  # a finite loss, overflowing grads
    assert math.isnan(trainer.step(batch))
    hook.remove()
    assert all(torch.equal(start[k], v) for k, v in trainer.model.state_dict().items())
    events = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    assert [e["event"] for e in events] == ["nonfinite_grad"]


def start_training(run: Path, data: Path) -> subprocess.Popen:
    args = ["train", str(CONFIG), "--out", str(run), "--device", "cpu",
            *small_config(data, "train.max_epochs=1000", "train.log_every=1")]
    return subprocess.Popen([sys.executable, "-m", "mt", *args], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONUNBUFFERED": "1", "MT_DEBUG": ""},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def wait_for_steps(p: subprocess.Popen, metrics: Path, steps: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert p.poll() is None, p.communicate()
        if metrics.exists() and sum('"train"' in line for line in metrics.open()) >= steps:
            return
        time.sleep(0.2)
    p.kill()
    pytest.fail("training made no progress")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_saves_last_checkpoint_and_resume_continues(tmp_path, sig):
    run = tmp_path / "run"
    p = start_training(run, corpus(tmp_path, n=200))
    wait_for_steps(p, run / "metrics.jsonl", 3)
    p.send_signal(sig)
    out, err = p.communicate(timeout=300)
    r = Result(p.returncode, out, err)
    assert_user_error(r, 6, "interrupted at step", "last.pt", "--resume")
    step = int(re.search(r"interrupted at step (\d+)", err).group(1))
    state = load_checkpoint(run / "last.pt")
    assert state["step"] == state["progress"]["step"] == step >= 3
    if sig == signal.SIGINT:
        return  # the same path; resume once is enough
    r = run_mt("train", "--out", str(run), "--resume", "--device", "cpu",
               "--set", f"train.max_steps={step + 2}")
    assert r.code == 0, r.err
    assert f"at step {step}" in r.err
    assert json.loads(r.out.splitlines()[-1])["step"] == step + 2


def test_a_second_signal_stops_at_once(tmp_path):
    trainer = Trainer(load_config(CONFIG, TINY), tmp_path / "run", "cpu")
    trainer.stopping.on_signal(signal.SIGINT, None)
    # The first only asks the loop to save and stop (once every rank knows).
    assert trainer.stopping.signalled and trainer.stopping.reason is None
    with pytest.raises(RunError, match="interrupted twice: stopped without saving"):
        trainer.stopping.on_signal(signal.SIGINT, None)


# --- partial writes ---------------------------------------------------------------------------

def test_atomic_write_failure_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old\n")

    def crash(tmp):
        Path(tmp).write_text("half of the ne")
        raise RuntimeError("crash mid-write")

    def disk_full(tmp):
        Path(tmp).write_text("half of the ne")
        raise OSError(errno.ENOSPC, "No space left on device")

    def ctrl_c(tmp):
        Path(tmp).write_text("half of the ne")
        raise KeyboardInterrupt

    with pytest.raises(RuntimeError):
        atomic_write(target, crash)
    with pytest.raises(FileSystemError, match="out.txt: No space left on device"):
        atomic_write(target, disk_full)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, ctrl_c)
    assert target.read_text() == "old\n"
    assert leftovers(tmp_path) == []
    atomic_write(target, lambda tmp: Path(tmp).write_text("new\n"))
    assert target.read_text() == "new\n" and leftovers(tmp_path) == []


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


# --- translate under load ---------------------------------------------------------------------

def big_input(n: int = 100_000) -> tuple[bytes, int, int]:
    """n lines, mostly empty or short, some not UTF-8, a few too long: (bytes, bad, long)."""
    words = "one two three four five six seven eight nine ten".split()
    lines, bad, long = [], 0, 0
    for i in range(n):
        if i % 1000 == 7:
            lines.append(b"\xff\xfe " + words[i % 10].encode())
            bad += 1
        elif i in (500, n // 2, n - 3):
            lines.append(" ".join(words * 40).encode())  # 400 tokens > 256 positions
            long += 1
        elif i % 1000 == 11:
            lines.append(" \t\x0b\x0c\u0085\u2028\u2029\u3000 ".encode())  # only whitespace
        elif i % 10 == 3:
            lines.append(" ".join(words[i % 7: i % 7 + 1 + i % 3]).encode())
        elif i % 100 == 9:
            lines.append("two\rthree\u2028four \x00 five".encode())
        else:
            lines.append(b"")
    return b"\n".join(lines) + b"\n", bad, long


def test_100k_lines_one_output_line_each(tmp_path, tiny_run):
    data, bad, long = big_input()
    out = tmp_path / "out.txt"
    r = run_mt("translate", str(tiny_run), "-o", str(out), "--device", "cpu", input=data)
    assert r.code == 0, r.err
    assert f"-: {bad} line(s) had invalid UTF-8 (first at line 8)" in r.err
    assert f"{long} source line(s) longer than model.max_positions (256 tokens)" in r.err
    text = out.read_text(encoding="utf-8")
    outputs = text.split("\n")
    assert outputs.pop() == "" and len(outputs) == 100_000
    assert text.splitlines() == outputs  # no other line separator inside a line
    for src, hyp in zip(data.split(b"\n"), outputs):
        assert (hyp == "") == (src.decode("utf-8", "replace").strip() == "")
    assert leftovers(tmp_path) == []


def test_translate_stream_never_reads_ahead_more_than_a_chunk(tiny):
    consumed = 0

    def endless():
        nonlocal consumed
        while True:
            consumed += 1
            yield "one two three"

    first = next(iter(Translator(tiny).translate_stream(endless())))
    assert first and consumed <= CHUNK_LINES


def test_stdin_is_translated_while_it_is_still_being_written(tiny_run):
    p = subprocess.Popen([sys.executable, "-m", "mt", "translate", str(tiny_run)], cwd=ROOT,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    got, first = [], threading.Event()

    def read():
        for line in p.stdout:
            got.append(line)
            first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    p.stdin.write(b"one two\n" * CHUNK_LINES)
    p.stdin.flush()
    try:
        assert first.wait(timeout=300), "no output before the end of the input"
        assert p.poll() is None  # still running: stdin is open
    finally:
        p.stdin.write(b"three\n" * 10)
        p.stdin.close()
        reader.join(timeout=300)
        p.wait(timeout=60)
    assert p.returncode == 0, p.stderr.read()
    assert len(got) == CHUNK_LINES + 10


def test_crash_mid_file_leaves_no_partial_output(tmp_path, tiny_run, monkeypatch):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("one two\n" * 40)
    out.write_text("previous translations\n")
    monkeypatch.setattr(mt.translator, "CHUNK_LINES", 5)
    real = Translator.translate_stream

    def crashing(self, lines):
        for i, hyp in enumerate(real(self, lines)):
            if i == 23:
                raise RuntimeError("crash mid-file")
            yield hyp

    monkeypatch.setattr(Translator, "translate_stream", crashing)
    with pytest.raises(RuntimeError, match="crash mid-file"):
        translate_file(tiny_run, str(src), str(out))
    assert out.read_text() == "previous translations\n"
    assert leftovers(tmp_path) == []


def test_disk_full_mid_file_is_one_line_and_keeps_the_old_output(cli, tmp_path, tiny_run,
                                                                  monkeypatch):
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text("one two\n" * 10)
    out.write_text("previous translations\n")

    def full(self, lines):
        yield "ein"
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Translator, "translate_stream", full)
    r = cli("translate", tiny_run, "-i", src, "-o", out)
    assert_user_error(r, 7, f"{out}: No space left on device", "free some disk space")
    assert out.read_text() == "previous translations\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("sig, code, word", [(signal.SIGTERM, 143, "terminated"),
                                             (signal.SIGINT, 130, "interrupted")])
def test_signal_mid_translation_leaves_no_partial_output(tmp_path, tiny_run, sig, code, word):
    out = tmp_path / "out.txt"
    out.write_text("previous translations\n")
    p = subprocess.Popen([sys.executable, "-m", "mt", "translate", str(tiny_run), "-o", str(out)],
                         cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, "MT_DEBUG": ""},
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    p.stdin.write(b"one two\n" * 100)  # less than a chunk: it waits for more, mid-file
    p.stdin.flush()
    deadline = time.monotonic() + 300
    while not leftovers(tmp_path) and time.monotonic() < deadline:  # writing has begun
        assert p.poll() is None, p.communicate()
        time.sleep(0.1)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    assert word in err.decode() and "Traceback" not in err.decode()
    assert out.read_text() == "previous translations\n"
    assert leftovers(tmp_path) == []
