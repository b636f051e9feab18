"""`mt import hf` from the Hub and from damaged directories: a loopback server in the Hub's
layout (files at {endpoint}/{owner}/{name}/resolve/{revision}/{file}, as huggingface.co serves
them: https://huggingface.co/docs/hub/api), cut downloads, 404s, a server that never answers,
no network; every failure one line, and nothing half-written used as a model."""

from __future__ import annotations

import http.server
import json
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from hf_models import build_marian  # noqa: E402

from conftest import assert_user_error  # noqa: E402
from mt.checkpoint import load_checkpoint, load_run  # noqa: E402

REPO = "Helsinki-NLP/opus-mt-en-de"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return build_marian(tmp_path_factory.mktemp("hub") / "model")


class Hub:
    """A loopback server holding one repository; `mode` says how it misbehaves."""

    def __init__(self, directory: Path, mode: str = "ok"):
        self.directory, self.mode, self.requests = directory, mode, []
        hub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                hub.requests.append(self.path)
                prefix = f"/{REPO}/resolve/main/"
                if hub.mode == "silent":
                    time.sleep(5)
                    return
                path = hub.directory / self.path[len(prefix):]
                if not self.path.startswith(prefix) or not path.is_file():
                    self.send_error(404, "Entry not found")
                    return
                data = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if hub.mode == "cut" and path.name == "model.safetensors":
                    self.wfile.write(data[: len(data) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hub(model_dir, monkeypatch, tmp_path):
    monkeypatch.setenv("MT_CACHE_DIR", str(tmp_path / "cache"))  # this test's downloads only
    servers = []

    def start(mode: str = "ok") -> Hub:
        server = Hub(model_dir, mode)
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
    assert f"/{REPO}/resolve/main/model.safetensors" in server.requests
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


def test_a_download_cut_short_leaves_nothing_and_a_second_try_works(hub, tmp_path, cli):
    hub("cut")
    r = cli("import", "hf", REPO, "--out", tmp_path / "run")
    assert_user_error(r, 5, "model.safetensors")
    assert not (tmp_path / "run").exists()
    cached = tmp_path / "cache" / "hf" / REPO / "main"
    assert (cached / "config.json").is_file() and not (cached / "model.safetensors").exists()
    assert not list(cached.glob("*.tmp*")) and not list(cached.glob(".*"))  # no half file
    hub("ok")
    assert cli("import", "hf", REPO, "--out", tmp_path / "run").code == 0


def test_an_unknown_model_is_a_404_naming_it(hub, tmp_path, cli):
    hub()
    r = cli("import", "hf", "Helsinki-NLP/opus-mt-xx-yy", "--out", tmp_path / "run")
    assert_user_error(r, 5, "opus-mt-xx-yy", "404")


def test_a_server_that_never_answers_times_out_in_one_line(hub, tmp_path, cli, monkeypatch):
    from mt.hf import files
    monkeypatch.setattr(files, "TIMEOUT", 0.5)
    hub("silent")
    r = cli("import", "hf", REPO, "--out", tmp_path / "run")
    assert_user_error(r, 5, "cannot reach")


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
