"""mt/commands/serve.py: `mt serve` of a CTranslate2 export (--engine ctranslate2): the same
translations as `mt translate --engine ctranslate2`, no attention, and /info from the export's
files. The HTTP side is in test_serve_app.py, the socket in test_serve_server.py."""

from __future__ import annotations

import pytest
from test_serve_app import LINES, assert_same, jsonl

from benchmarks.bench_serve import Client, Served
from conftest import THREADS


def test_a_ctranslate2_export(tiny_run, tmp_path, cli):
    pytest.importorskip("ctranslate2")
    out = tmp_path / "ct2"
    assert cli("export", tiny_run, "--to", "ctranslate2", out).code == 0
    with Served(out, "--engine", "ctranslate2", env=THREADS) as served:
        got = Client(served.url).translate(LINES, beam=2)
        refused = Client(served.url).request("POST", "/translate", {"text": "a",
                                                                    "attention": True})
        info = Client(served.url).request("GET", "/info")[1]
        assert served.stop() == 0
    assert_same(got, jsonl(cli, out, tmp_path, "--engine", "ctranslate2", "--beam", "2"))
    assert refused[0] == 422 and "--engine mt" in refused[1]["error"]
    assert info["export"] == "ctranslate2" and info["serve"]["attention"] is False
