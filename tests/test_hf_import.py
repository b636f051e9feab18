"""`mt import hf` from the Hub and from damaged directories: a loopback server in the Hub's
layout (files at {endpoint}/{owner}/{name}/resolve/{revision}/{file}, as huggingface.co serves
them: https://huggingface.co/docs/hub/api), cut downloads, 404s, a server that never answers,
no network; every failure one line, and nothing half-written used as a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from hf_models import build_marian  # noqa: E402

from conftest import assert_user_error  # noqa: E402
from loopback import FileServer  # noqa: E402
from mt.checkpoint import load_checkpoint, load_run  # noqa: E402

REPO = "Helsinki-NLP/opus-mt-en-de"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_marian(tmp_path_factory.mktemp("hub") / "model")


@pytest.fixture
def hub(model_dir, monkeypatch, tmp_path):
    """start(mode) serves the model as the Hub does; mode "cut" cuts model.safetensors halfway
    each time, "silent" never answers."""
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))  # this test's downloads only
    servers = []
    prefix = f"/{REPO}/resolve/main/"

    def start(mode: str = "ok") -> FileServer:
        server = FileServer({prefix + p.name: p.read_bytes() for p in model_dir.iterdir()},
                            cut=[prefix + "model.safetensors"] if mode == "cut" else [],
                            silent=mode == "silent")
        servers.append(server)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        return server

    yield start
    for s in servers:
        s.close()


def test_a_hub_id_is_fetched_and_imports_as_the_directory_does(hub, model_dir, tmp_path, cli):
    server = hub()
    r = cli("import", "hf", REPO, "--out", tmp_path / "from-hub")
    assert r.code == 0, r.err
    printed = json.loads(r.out)
    assert printed["source"] == REPO and printed["languages"] == "en-de"
    assert (f"/{REPO}/resolve/main/model.safetensors", None) in server.requests
    local = cli("import", "hf", model_dir, "--out", tmp_path / "from-dir")
    assert local.code == 0 and json.loads(local.out)["sha256"] == printed["sha256"]
    a, b = (load_run(tmp_path / n).model.state_dict() for n in ("from-hub", "from-dir"))
    assert all((a[k] == b[k]).all() for k in a)
    lineage = load_checkpoint(tmp_path / "from-hub" / "best.pt")["lineage"]
    assert lineage["how"] == "imported"
    assert lineage["source"]["path"] == REPO and lineage["source"]["revision"] == "main"
    info = cli("info", tmp_path / "from-hub")
    assert f"imported from {REPO}" in info.out
    before = len(server.requests)
    again = cli("import", "hf", REPO, "--out", tmp_path / "again")  # from the cache
    assert again.code == 0 and len(server.requests) == before


def test_no_network_is_one_line_saying_how_to_import_a_directory(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused
    r = cli("import", "hf", REPO, "--out", tmp_path / "run")
    assert_user_error(r, 5, "cannot reach the Hugging Face Hub", "mt import hf DIR")
    assert not (tmp_path / "run").exists()


def test_a_download_cut_short_is_never_used_and_the_next_try_resumes_it(hub, tmp_path, cli):
    hub("cut")
    r = cli("import", "hf", REPO, "--out", tmp_path / "run")
    assert_user_error(r, 5, "model.safetensors", "run again to resume")
    assert not (tmp_path / "run").exists()
    cached = tmp_path / "cache" / "hf" / REPO / "main"
    assert (cached / "config.json").is_file() and not (cached / "model.safetensors").exists()
    assert [p.name for p in cached.glob(".*")] == [".model.safetensors.part"]  # hidden, kept
    server = hub("ok")
    assert cli("import", "hf", REPO, "--out", tmp_path / "run").code == 0
    assert server.ranged() and not list(cached.glob(".*"))


def test_an_unknown_model_is_a_404_naming_it(hub, tmp_path, cli):
    hub()
    r = cli("import", "hf", "Helsinki-NLP/opus-mt-xx-yy", "--out", tmp_path / "run")
    assert_user_error(r, 5, "opus-mt-xx-yy", "404")


def test_a_server_that_never_answers_times_out_in_one_line(hub, tmp_path, cli, monkeypatch):
    from mt import download
    monkeypatch.setattr(download, "TIMEOUT", 0.5)
    hub("silent")
    r = cli("import", "hf", REPO, "--out", tmp_path / "run")
    assert_user_error(r, 5, "cannot reach")


@pytest.mark.parametrize("revision", ["../../../../escaped", "ABSOLUTE", "v1/../..", ".."])
def test_a_revision_that_is_not_one_plain_name_writes_nothing(hub, tmp_path, cli, revision):
    server = hub()
    revision = revision.replace("ABSOLUTE", str(tmp_path / "escaped"))
    r = cli("import", "hf", REPO, "--out", tmp_path / "run", "--revision", revision)
    assert_user_error(r, 2, "Invalid value for '--revision'", "not a plain file or folder name")
    assert server.requests == [] and not (tmp_path / "run").exists()
    assert not (tmp_path / "cache").exists() and not (tmp_path / "escaped").exists()


def _copy(src: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in src.iterdir():
        (dest / f.name).write_bytes(f.read_bytes())
    return dest


def test_damaged_or_incomplete_directories_are_one_line(model_dir, tmp_path, cli):
    cut = _copy(model_dir, tmp_path / "cut")
    data = (cut / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[: len(data) // 2])
    assert_user_error(cli("import", "hf", cut, "--out", tmp_path / "a"), 5, "model.safetensors")
    no_vocab = _copy(model_dir, tmp_path / "no-vocab")
    (no_vocab / "vocab.json").unlink()
    assert_user_error(cli("import", "hf", no_vocab, "--out", tmp_path / "b"), 5, "vocab.json")
    assert_user_error(cli("import", "hf", tmp_path / "nowhere", "--out", tmp_path / "c"), 5,
                      "no such directory")
    no_langs = _copy(model_dir, tmp_path / "no-langs")
    (no_langs / "tokenizer_config.json").unlink()
    assert_user_error(cli("import", "hf", no_langs, "--out", tmp_path / "d"), 2, "--src-lang")
    r = cli("import", "hf", no_langs, "--out", tmp_path / "d", "--src-lang", "en",
            "--tgt-lang", "de")
    assert r.code == 0, r.err
    assert_user_error(cli("import", "hf", model_dir, "--out", tmp_path / "d"), 6,
                      "already exists")
    assert not any((tmp_path / n).exists() for n in "abc")


def test_export_to_hf_refuses_what_marian_cannot_express(tiny_run, tmp_path, cli):
    r = cli("export", tiny_run, tmp_path / "out", "--to", "hf")
    assert_user_error(r, 3, "cannot be expressed as a Marian model", "data.tokenizer is spacy",
                      "model.pre_norm")
    assert not (tmp_path / "out").exists()
    r = cli("export", tiny_run, tmp_path / "out", "--to", "hf", "--quantization", "int8")
    assert_user_error(r, 2, "--quantization")
