"""mt/serve/access.py and what `mt serve` tells and takes over real HTTP: API keys (401 without,
/health and the page open), lines per minute (429 with Retry-After), /info without the host's
paths (unless --full-info), a client gone half-way through its body (one log line, 499), SIGTERM
beside a stalled client (exit 0 within the grace period), and an ensemble RUN RUN."""

from __future__ import annotations

import http.client
import json
import socket
import time
from urllib.parse import urlsplit

import pytest
from test_serve_app import assert_same, jsonl

from benchmarks.bench_serve import Client, Served
from conftest import THREADS, assert_user_error
from mt.serve.access import Access, ClientError


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_lines_per_minute_count_a_sliding_minute_per_client():
    clock = Clock()
    access = Access(lines_per_minute=5, clock=clock)
    access.admit("a", 3)
    clock.now += 20
    access.admit("a", 2)
    access.admit("b", 5)  # another client has its own minute
    with pytest.raises(ClientError) as refused:
        access.admit("a", 1)
    # the first 3 lines leave the window 60 s after they came: 40 s from now
    assert refused.value.status == 429 and refused.value.headers == {"Retry-After": "40"}
    clock.now += 40
    access.admit("a", 3)  # the 3 lines are out; the 2 of 40 s ago still count
    with pytest.raises(ClientError, match="--lines-per-minute") as too_many:
        access.admit("c", 6)
    assert too_many.value.status == 413


def test_a_key_is_needed_where_keys_are_given():
    access = Access(["k1", "k2"])
    assert access.client({"authorization": "Bearer k2"}, "1.2.3.4") == "k2"
    for headers in ({}, {"authorization": "Bearer k3"}, {"authorization": "Basic k1"},
                    {"authorization": "Bearer "}):
        with pytest.raises(ClientError) as e:
            access.client(headers, "1.2.3.4")
        assert e.value.status == 401 and e.value.headers == {"WWW-Authenticate": "Bearer"}
    assert Access().client({}, "1.2.3.4") == "1.2.3.4"  # no keys: open, a client per address


def answer(url: str, method: str, path: str, body: dict | None = None,
           headers: dict | None = None) -> tuple[int, dict, object]:
    """(status, headers, JSON or text) of one request on its own connection."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    try:
        connection.request(method, path, json.dumps(body).encode() if body else None,
                           headers or {})
        response = connection.getresponse()
        data = response.read().decode()
    finally:
        connection.close()
    try:
        return response.status, dict(response.headers), json.loads(data)
    except json.JSONDecodeError:
        return response.status, dict(response.headers), data


def test_keys_limits_and_what_info_tells(tiny_run, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text("# the team's keys\nsecret-one\n\nsecret-two\n", encoding="utf-8")
    with Served(tiny_run, "--api-key-file", keys, "--lines-per-minute", "3",
                env=THREADS) as served:
        url, good = served.url, {"Authorization": "Bearer secret-two"}
        health = answer(url, "GET", "/health")
        page = answer(url, "GET", "/")
        no_key = answer(url, "GET", "/info")
        wrong = answer(url, "POST", "/translate", {"text": "a"}, {"Authorization": "Bearer x"})
        info = answer(url, "GET", "/info", headers=good)
        first = answer(url, "POST", "/translate", {"text": ["one", "two"]}, good)
        over = answer(url, "POST", "/translate", {"text": ["three", "four"]}, good)
        other = answer(url, "POST", "/translate", {"text": ["five", "six"]},
                       {"Authorization": "Bearer secret-one"})
        assert served.stop() == 0
    assert health[0] == 200 and page[0] == 200
    assert no_key[0] == 401 and no_key[1]["www-authenticate"] == "Bearer"
    assert "no API key" in no_key[2]["error"]
    assert wrong[0] == 401 and "wrong API key" in wrong[2]["error"]
    assert first[0] == 200 and len(first[2]["translations"]) == 2
    assert over[0] == 429 and 1 <= int(over[1]["retry-after"]) <= 60
    assert "2 of this client's 3 lines" in over[2]["error"]
    assert other[0] == 200  # each key is its own client
    # /info and the page name the run, not where it is
    assert info[0] == 200 and info[2]["name"] == tiny_run.name
    shown = json.dumps(info[2]) + page[2]
    assert str(tiny_run.parent) not in shown and "/" + tiny_run.name not in shown
    assert info[2]["serve"]["api_key"] is True and info[2]["serve"]["lines_per_minute"] == 3
    assert info[2]["tokenizer"]["src_lang"] and info[2]["step"] > 0
    assert not any("Traceback" in line for line in served.log)


def test_full_info_tells_the_paths(tiny_run):
    with Served(tiny_run, "--full-info", env=THREADS) as served:
        info = Client(served.url).request("GET", "/info")[1]
        assert served.stop() == 0
    assert info["path"] == str(tiny_run) and info["checkpoint"].startswith(str(tiny_run))


@pytest.mark.parametrize("content, code, needle", [
    (None, 4, "file not found"), ("# none\n\n", 3, "no key"), (b"\xff\xfe", 4, "UTF-8")])
def test_a_bad_key_file_is_one_line_before_the_model_loads(cli, tmp_path, content, code,
                                                           needle):
    keys = tmp_path / "keys.txt"
    if isinstance(content, str):
        keys.write_text(content, encoding="utf-8")
    elif content is not None:
        keys.write_bytes(content)
    # no-such-run: refused before the run is read
    r = cli("serve", "no-such-run", "--api-key-file", keys, "--port", "0")
    assert_user_error(r, code, "keys.txt", needle)


def stalled(url: str) -> socket.socket:
    """A connection that sent the headers of a POST and half of its body, then waits."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port))
    body = json.dumps({"text": "a sentence that never ends"}).encode()
    sock.sendall(b"POST /translate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:10])
    return sock


def test_a_client_gone_half_way_is_one_log_line(tiny_run):
    with Served(tiny_run, env=THREADS) as served:
        stalled(served.url).close()
        deadline = time.monotonic() + 60
        while not any(line.startswith("POST /translate") for line in served.log):
            assert time.monotonic() < deadline, served.log
            time.sleep(0.05)
        fine = Client(served.url).translate(["a sentence"])  # the server goes on
        assert served.stop() == 0
    assert len(fine) == 1
    assert any(line.startswith("POST /translate | 499 |") for line in served.log), served.log
    assert not any("Traceback" in line or "ClientDisconnect" in line for line in served.log)


def test_sigterm_beside_a_stalled_client_exits_within_the_grace_period(tiny_run):
    with Served(tiny_run, "--grace", "1", env=THREADS) as served:
        sock = stalled(served.url)
        time.sleep(0.5)  # the server has read the headers
        start = time.monotonic()
        code = served.stop(timeout=60)
        took = time.monotonic() - start
        sock.settimeout(10)
        got = b""
        while chunk := sock.recv(4096):  # to the end: the server closes the connection
            got += chunk
        sock.close()
    assert code == 0 and took < 15, (took, served.log[-5:])
    assert got.startswith(b"HTTP/1.1 503") and b'"error":"the server is stopping' in got
    assert any("at most 1 s" in line for line in served.log)
    assert any(line.startswith("POST /translate | 503 |") for line in served.log)
    assert not any("Traceback" in line or "ERROR" in line for line in served.log), served.log


def test_an_ensemble_is_served_as_mt_translate_runs_it(tiny_run, other_run, cli, tmp_path):
    lines = ["Yesterday we saw forty two red dogs.", "I need seven hundred eleven books."]
    with Served(tiny_run, other_run, env=THREADS) as served:
        got = Client(served.url).translate(lines, beam=2)
        info = Client(served.url).request("GET", "/info")[1]
        assert served.stop() == 0
    assert_same(got, jsonl(cli, tiny_run, tmp_path, other_run, "--beam", "2", lines=lines))
    assert [m["name"] for m in info["ensemble"]] == [tiny_run.name, other_run.name]
    assert info["name"] == f"{tiny_run.name} + {other_run.name}"
