"""mt serve (mt/serve/, mt/commands/serve.py): the batcher on a stand-in translator; the command's
one-line errors; and, over real HTTP on loopback against `mt serve` on the tiny model, the
translations (equal to `mt translate --format jsonl`'s), every error status with its JSON body,
concurrent clients, attention, the request log, and SIGTERM in the middle of a load."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import socket
import sys
import threading
import time

import pytest

from benchmarks.bench_serve import Client, Served, make_plans, send_all
from conftest import ROOT, THREADS, TOY, TWO_LINES, assert_user_error
from mt.config import DecodeConfig
from mt.errors import ConfigError
from mt.records import Translation
from mt.serve.batcher import Batcher, Job
from mt.translator import Translator

# -- the batcher, on a stand-in for the Translator ------------------------------------------


class Upper:
    """Translates a line into itself in capitals, and records each call."""

    def __init__(self):
        self.calls = []

    def translate_nbest(self, lines, prefix=None, *, attention=False, **options):
        self.calls.append((list(lines), prefix, attention, options))
        if options.get("beam") == 0:
            raise ConfigError("decode.beam must be at least 1")
        return [[Translation((p or "") + line.upper(), -1.0)] for line, p in
                zip(lines, prefix or [None] * len(lines))]


def texts(future) -> list[str]:
    return [ts[0].text for ts in future.result(timeout=30)]


def test_batcher_translates_queued_requests_in_one_call_and_answers_each_its_own():
    upper = Upper()
    batcher = Batcher(upper, wait_ms=500)
    jobs = [Job(["a", "b"], {}), Job(["c"], {}), Job(["d", "e", "f"], {})]
    futures = [batcher.submit(j) for j in jobs]
    assert [texts(f) for f in futures] == [["A", "B"], ["C"], ["D", "E", "F"]]
    assert [c[0] for c in upper.calls] == [["a", "b", "c", "d", "e", "f"]]
    assert (batcher.requests, batcher.lines, batcher.calls) == (3, 6, 1)
    batcher.close()


def test_batcher_groups_requests_by_options_prefix_and_attention():
    upper = Upper()
    batcher = Batcher(upper, wait_ms=500)
    jobs = [Job(["a"], {"beam": 2}), Job(["b"], {}), Job(["c"], {"beam": 2}),
            Job(["d"], {}, prefix=["x "]), Job(["e"], {}, attention=True),
            Job(["f"], {}, prefix=["y "])]
    futures = [batcher.submit(j) for j in jobs]
    assert [texts(f) for f in futures] == [["A"], ["B"], ["C"], ["x D"], ["E"], ["y F"]]
    assert upper.calls == [(["a", "c"], None, False, {"beam": 2}), (["b"], None, False, {}),
                           (["d", "f"], ["x ", "y "], False, {}), (["e"], None, True, {})]
    batcher.close()


def test_batcher_gives_a_calls_error_to_each_of_its_requests_and_goes_on():
    upper = Upper()
    batcher = Batcher(upper, wait_ms=200)
    bad = [batcher.submit(Job([line], {"beam": 0})) for line in "ab"]
    good = batcher.submit(Job(["c"], {}))
    for f in bad:
        with pytest.raises(ConfigError, match="decode.beam"):
            f.result(timeout=30)
    assert texts(good) == ["C"]
    batcher.close()


def test_batcher_skips_cancelled_requests_and_close_answers_what_is_queued():
    upper = Upper()
    batcher = Batcher(upper, wait_ms=300)
    first, gone, last = (batcher.submit(Job([line], {})) for line in "abc")
    gone.cancel()
    batcher.close()  # returns once the queue is translated
    assert texts(first) == ["A"] and texts(last) == ["C"] and gone.cancelled()
    assert [c[0] for c in upper.calls] == [["a", "c"]]


def test_batcher_waits_for_a_gap_not_a_fixed_time_after_the_first():
    upper = Upper()
    batcher = Batcher(upper, wait_ms=300)
    futures = []
    for line in "abcde":  # 100 ms apart: 400 ms in all, more than one wait
        futures.append(batcher.submit(Job([line], {})))
        time.sleep(0.1)
    time.sleep(1.0)  # a gap longer than the wait: the next request is another call
    futures.append(batcher.submit(Job(["f"], {})))
    assert [texts(f) for f in futures] == [[c] for c in "ABCDEF"]
    assert [c[0] for c in upper.calls] == [list("abcde"), ["f"]]
    batcher.close()


def test_batcher_stops_gathering_at_max_lines():
    upper = Upper()
    batcher = Batcher(upper, wait_ms=300, max_lines=3)
    futures = [batcher.submit(Job(list(lines), {})) for lines in ("ab", "cd", "e")]
    assert [texts(f) for f in futures] == [["A", "B"], ["C", "D"], ["E"]]
    assert [c[0] for c in upper.calls] == [["a", "b", "c", "d"], ["e"]]
    batcher.close()


def test_batcher_calls_setup_first_and_its_tick_before_each_call_in_its_own_thread():
    seen = []

    class Where(Upper):
        def translate_nbest(self, lines, prefix=None, **kw):
            seen.append(("translate", threading.current_thread().name))
            return super().translate_nbest(lines, prefix, **kw)

    def setup():
        seen.append(("setup", threading.current_thread().name))
        return lambda: seen.append(("tick", threading.current_thread().name))

    batcher = Batcher(Where(), wait_ms=10, setup=setup)
    assert texts(batcher.submit(Job(["a"], {}))) == ["A"]
    assert texts(batcher.submit(Job(["b"], {}))) == ["B"]
    batcher.close()
    assert seen == [("setup", "mt-batcher")] + [("tick", "mt-batcher"),
                                                ("translate", "mt-batcher")] * 2


# -- the app in this process, on a stand-in translator ----------------------------------------


class Slow(Upper):
    """Upper taking its time, with what the app asks of a Translator; the line "bug" fails as a
    bug in mt would."""

    decode_cfg, model = DecodeConfig(), None

    def check_options(self, attention=False, **options) -> DecodeConfig:
        return self.decode_cfg

    def translate_nbest(self, lines, prefix=None, *, attention=False, **options):
        time.sleep(1.5)
        if lines == ["bug"]:
            raise RuntimeError("a bug")
        return super().translate_nbest(lines, prefix, attention=attention, **options)


@contextlib.contextmanager
def serving(app):
    """app on uvicorn in a thread, on a free loopback port: its URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()


def test_a_slow_translation_does_not_hold_up_the_other_answers_and_a_bug_is_a_json_500():
    from mt.serve.app import Limits, create_app

    with serving(create_app(Slow(), {"path": "slow"}, Limits(), wait_ms=0)) as url:
        found = []
        slow = threading.Thread(target=lambda: found.append(Client(url).translate(["a"])))
        slow.start()
        time.sleep(0.3)  # the worker is in translate_nbest now
        start = time.perf_counter()
        assert Client(url).request("GET", "/health")[0] == 200
        assert Client(url).request("GET", "/info")[1]["path"] == "slow"
        assert time.perf_counter() - start < 1.0 and slow.is_alive()
        slow.join()
        assert found == [[{"src": "a", "text": "A", "score": -1.0}]]
        status, answer = Client(url).request("POST", "/translate", {"text": "bug"})
    assert status == 500 and answer == {"error": "internal error (RuntimeError): a bug in mt; "
                                                 "the server's log has the traceback"}


# -- the command's errors: one line and an exit code, before the model loads -----------------


def test_without_the_extra_one_line_names_it(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "fastapi", None)  # as if it were not installed
    assert_user_error(cli("serve", "no-such-run"), 3, 'pip install "mt[serve]"')


def test_a_port_already_taken_is_one_line_and_exit_8(cli):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = cli("serve", "no-such-run", "--port", str(port))  # refused before the run is read
    assert_user_error(r, 8, f"127.0.0.1:{port}", "in use", "--port")


def test_a_host_that_is_not_an_address_here_is_exit_8(cli):
    # 192.0.2.1: TEST-NET-1, an address no machine of ours has
    assert_user_error(cli("serve", "no-such-run", "--host", "192.0.2.1", "--port", "0"), 8,
                      "192.0.2.1", "--host")


# -- over HTTP, against the tiny model -------------------------------------------------------

LINES = [*TWO_LINES.splitlines(), "", "Today you have eight cats.",
         "The doctor wrote three hundred ninety nine letters."]
MAX_CHARS = 1000


@pytest.fixture(scope="module")
def served(tiny_run):
    with Served(tiny_run, "--max-lines", "8", "--max-chars", str(MAX_CHARS),
                "--batch-wait-ms", "20", env=THREADS) as s:
        yield s
        assert s.stop() == 0, s.log[-20:]
        assert re.match(r"stopped: answered (\d+) of \1 request\(s\)$", s.log[-1]), s.log[-3:]


def jsonl(cli, run, tmp_path, *options: str, lines=LINES) -> list[dict]:
    """`mt translate RUN --format jsonl OPTIONS` of lines: one object per line."""
    src = tmp_path / "src.txt"
    src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    r = cli("translate", run, "-i", src, "--format", "jsonl", "--device", "cpu", *options)
    assert r.code == 0, r.err
    return [json.loads(line) for line in r.out.splitlines()]


def assert_same(got: list[dict], want: list[dict]) -> None:
    """The same records: text, source, alignments and n-best lists alike, scores to 1e-4."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys(), (g, w)
        assert g["score"] == pytest.approx(w["score"], abs=1e-4)
        for key in g.keys() - {"score", "nbest"}:
            assert g[key] == w[key], key
        if "nbest" in w:
            assert_same(g["nbest"], w["nbest"])


@pytest.mark.parametrize("options, flags", [
    ({}, []),
    ({"beam": 3, "nbest": 2, "length_penalty": 1.0}, ["--beam", "3", "--nbest", "2",
                                                      "--length-penalty", "1.0"]),
    ({"align": True, "max_len_b": 4}, ["--align", "--max-len-b", "4"]),
    ({"sampling": "topk", "topk": 3, "samples": 2, "seed": 7},
     ["--sampling", "topk", "--topk", "3", "--samples", "2", "--seed", "7"]),
])
def test_translations_equal_mt_translates(served, tiny_run, cli, tmp_path, options, flags):
    got = Client(served.url).translate(LINES, **options)
    assert [t["src"] for t in got] == LINES
    assert_same(got, jsonl(cli, tiny_run, tmp_path, *flags))
    [one] = Client(served.url).translate(LINES[0], **options)  # a string: one line
    assert_same([one], got[:1])


def test_a_prefix_per_line_as_mt_translates_prefix_file(served, tiny_run, cli, tmp_path):
    prefix = ["Gestern", "", "", "Heute haben", ""]
    (tmp_path / "prefix.txt").write_text("".join(f"{p}\n" for p in prefix), encoding="utf-8")
    got = Client(served.url).translate(LINES, prefix=prefix)
    assert got[0]["text"].startswith("Gestern") and got[3]["text"].startswith("Heute haben")
    assert_same(got, jsonl(cli, tiny_run, tmp_path, "--prefix", tmp_path / "prefix.txt"))


def test_attention_is_the_translators_for_one_sentence(served, tiny_run):
    line = LINES[3]
    [got] = Client(served.url).translate([line], attention=True)
    [want] = Translator.load(tiny_run).translate_nbest([line], attention=True)
    assert got["text"] == want[0].text
    att = got["attention"]
    assert att["src_tokens"] == want[0].attention.src_tokens == ["Today", "you", "have",
                                                                 "eight", "cats", "\uffed."]
    assert att["out_tokens"] == want[0].attention.out_tokens
    assert len(att["weights"]) == len(att["out_tokens"])
    for row, row_want in zip(att["weights"], want[0].attention.weights):
        assert len(row) == len(att["src_tokens"]) and sum(row) == pytest.approx(1, abs=1e-3)
        assert row == pytest.approx(row_want, abs=2e-4)
    [plain] = Client(served.url).translate([line])
    assert "attention" not in plain and plain["text"] == got["text"]


TOO_MANY_CHARS = {"text": ["x" * (MAX_CHARS // 2), "y" * (MAX_CHARS // 2 + 1)]}


@pytest.mark.parametrize("method, path, body, status, needle", [
    ("POST", "/translate", b'{"text": "eight cats"', 400, "not JSON"),
    ("POST", "/translate", b"", 400, "not JSON"),
    ("POST", "/translate", b"\xff\xfe", 400, "not JSON"),
    ("POST", "/translate", b"[1, 2]", 422, "object"),
    ("POST", "/translate", {"txt": "eight cats"}, 422, "txt: unknown field"),
    ("POST", "/translate", {"text": "a", "bream": 2}, 422, "bream: unknown field"),
    ("POST", "/translate", {"text": "a", "dtype": "bf16"}, 422, "dtype: unknown field"),
    ("POST", "/translate", {"beam": 2}, 422, "text: Field required"),
    ("POST", "/translate", {"text": 5}, 422, "text:"),
    ("POST", "/translate", {"text": ["a", 3]}, 422, "text[1]"),
    ("POST", "/translate", {"text": "a", "beam": "2"}, 422, "beam:"),
    ("POST", "/translate", {"text": "a", "beam": 0}, 422, "beam must be at least 1"),
    ("POST", "/translate", {"text": "a", "beam": 2, "nbest": 3}, 422, "nbest (3)"),
    ("POST", "/translate", {"text": "a", "sampling": "maybe"}, 422, "sampling:"),
    ("POST", "/translate", {"text": "a", "tag": "<2xx>"}, 422, "tag <2xx>: not a tag"),
    ("POST", "/translate", {"text": ["a", "b"], "prefix": "x"}, 422, "prefix:"),
    ("POST", "/translate", {"text": ["a"] * 9}, 413, "9 lines"),
    ("POST", "/translate", TOO_MANY_CHARS, 413, "1,001 characters"),
    ("POST", "/translate", b"x" * (12 * MAX_CHARS + 65_537), 413, "a body of"),
    ("GET", "/translate", None, 405, "Method Not Allowed"),
    ("GET", "/nothing", None, 404, "Not Found: GET /nothing"),
])
def test_each_error_has_its_status_and_a_json_body(served, method, path, body, status, needle):
    client = Client(served.url)
    got, answer = client.request(method, path, body)
    assert got == status, answer
    assert isinstance(answer, dict) and list(answer) == ["error"], answer
    assert needle in answer["error"] and "Traceback" not in answer["error"]
    assert client.request("GET", "/health")[0] == 200  # the same connection still answers


def test_concurrent_clients_are_batched_and_each_answered_in_order(served, tiny_run):
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:40]
    plans = make_plans(lines, clients=12, requests=4, seed=1, most=6)
    expected = dict(zip(lines, Translator.load(tiny_run).translate(lines)))
    client = Client(served.url)
    before = client.request("GET", "/health")[1]
    outcome = send_all(served.url, plans, expected)
    after = client.request("GET", "/health")[1]
    assert outcome.wrong == [] and outcome.refused == 0 and len(outcome.latencies) == 48
    assert after["requests"] - before["requests"] == 48
    assert after["translator_calls"] - before["translator_calls"] < 48  # some went together


def test_health_info_and_the_page(served, tiny_run, cli):
    client = Client(served.url)
    status, health = client.request("GET", "/health")
    assert status == 200 and health["status"] == "ok"
    status, info = client.request("GET", "/info")
    serve = info.pop("serve")
    assert status == 200 and info == json.loads(cli("info", tiny_run, "--json").out)
    assert serve["max_lines"] == 8 and serve["attention"] is True and "beam" in serve["options"]
    status, page = client.request("GET", "/")
    assert status == 200 and '<canvas id="heatmap"' in page and "fetch(\"translate\"" in page


def test_one_log_line_per_request(served):
    client = Client(served.url)
    time.sleep(0.5)  # a line is written after its answer: let the last test's come
    count = len(served.log)
    client.translate(LINES[:2])
    client.request("GET", "/nothing")
    time.sleep(0.5)
    assert [re.sub(r"\d+\.\d ms$", "T ms", line) for line in served.log[count:]] == [
        "POST /translate | 200 | lines 2 | T ms", "GET /nothing | 404 | lines 0 | T ms"]


def test_sigterm_during_a_load_answers_every_accepted_request(tiny_run):
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:40]
    expected = dict(zip(lines, Translator.load(tiny_run).translate(lines)))
    plans = make_plans(lines, clients=16, requests=40, seed=2)
    with Served(tiny_run, "--batch-wait-ms", "10", env=THREADS) as served:
        done = {}
        sender = threading.Thread(target=lambda: done.update(outcome=send_all(
            served.url, plans, expected, keep_alive=False, stop_on_refusal=True)))
        sender.start()
        deadline = time.monotonic() + 300
        while sum(line.startswith("POST") for line in served.log) < 30:
            assert time.monotonic() < deadline and sender.is_alive(), served.log[-10:]
            time.sleep(0.05)
        served.process.send_signal(signal.SIGTERM)
        sender.join(300)
        code = served.process.wait(120)
    outcome = done["outcome"]
    assert code == 0, served.log[-10:]
    assert outcome.wrong == []
    answered = re.match(r"stopped: answered (\d+) of (\d+) request", served.log[-1])
    assert answered, served.log[-3:]
    # Every request the server began it answered, and each answer reached its client whole.
    assert int(answered.group(1)) == int(answered.group(2)) == len(outcome.latencies)
    assert 30 <= len(outcome.latencies) < 16 * 40 and outcome.refused >= 1
    assert any(line.startswith("stopping: answering the") for line in served.log)


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


def test_the_page_ships_with_the_package():
    from importlib import resources

    assert "<canvas" in resources.files("mt.serve").joinpath("page.html").read_text("utf-8")
    assert '"mt.serve" = ["page.html"]' in (ROOT / "pyproject.toml").read_text("utf-8")
