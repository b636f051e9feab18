"""mt/commands/export.py: `mt export RUN --to ctranslate2 OUT` writes the directory whole or not
at all: an existing one needs --force, and a bad checkpoint leaves nothing."""

from __future__ import annotations

import shutil

import pytest

from conftest import assert_user_error

pytest.importorskip("ctranslate2")


def test_existing_output_needs_force(cli, tiny_run, ct2_export, tmp_path):
    out = tmp_path / "model"
    shutil.copytree(ct2_export, out)
    (out / "stale.txt").write_text("old")
    r = cli("export", str(tiny_run), "--to", "ctranslate2", str(out))
    assert_user_error(r, 6, "already exists", "--force")
    assert (out / "stale.txt").is_file()
    r = cli("export", str(tiny_run), "--to", "ctranslate2", str(out), "--force")
    assert r.code == 0, r.err
    assert not (out / "stale.txt").exists() and (out / "model.bin").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary left


def test_bad_checkpoints_are_refused(cli, tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    out = tmp_path / "out"
    cases = {"missing": None, "truncated": (run / "best.pt").read_bytes()[:1000],
             "foreign": b"not a checkpoint\n"}
    for case, content in cases.items():
        ckpt = run / f"{case}.pt"
        if content is not None:
            ckpt.write_bytes(content)
        r = cli("export", str(ckpt), "--to", "ctranslate2", str(out))
        assert_user_error(r, 5)
        assert not out.exists(), case
