"""mt/serve/server.py: the socket, bound before the model loads (a port taken or a host that is
not an address here is one line and exit 8, before the run is read), and SIGTERM in the middle
of a load, on each API: every request accepted is answered, then exit 0."""

from __future__ import annotations

import re
import signal
import socket
import threading
import time

import pytest

from benchmarks.bench_serve import APIS, Client, Served, make_plans, send_all
from conftest import THREADS, TOY, assert_user_error
from mt.translator import Translator


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


@pytest.mark.parametrize("api", APIS)
def test_sigterm_during_a_load_answers_every_accepted_request(tiny_run, api):
    """On every API (mt's own, LibreTranslate's, DeepL's): they share one batcher and one
    graceful stop."""
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:40]
    expected = dict(zip(lines, Translator.load(tiny_run).translate(lines)))
    plans = make_plans(lines, clients=16, requests=40, seed=2)
    with Served(tiny_run, "--batch-wait-ms", "10", env=THREADS) as served:
        done = {}
        sender = threading.Thread(target=lambda: done.update(outcome=send_all(
            served.url, plans, expected, keep_alive=False, stop_on_refusal=True, api=api,
            target="de")))
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
    # anywhere in a line: under load another thread's log line may share it
    assert any("stopping: answering the" in line for line in served.log), served.log[-20:]


def sent_with(url: str, address: str | None) -> int:
    """The status of one line sent to POST /translate, with `X-Forwarded-For: address`."""
    headers = {"X-Forwarded-For": address} if address else {}
    return Client(url).request("POST", "/translate", {"text": "a cat"}, headers)[0]


def test_a_forwarded_address_counts_only_from_a_proxy_named(tiny_run):
    """--lines-per-minute counts a client by its address: a client that sends X-Forwarded-For
    with a new address each time is still itself (uvicorn's default believes the header from
    loopback), unless --forwarded-allow-ips names the proxy it comes through."""
    with Served(tiny_run, "--lines-per-minute", "2", env=THREADS) as served:
        assert [sent_with(served.url, None) for _ in range(3)] == [200, 200, 429]
        assert sent_with(served.url, "203.0.113.7") == 429  # TEST-NET-3: no one's address
        assert sent_with(served.url, "203.0.113.8") == 429
        assert served.stop() == 0
    with Served(tiny_run, "--lines-per-minute", "2", "--forwarded-allow-ips",
                "10.9.8.7, 127.0.0.1", env=THREADS) as served:
        assert [sent_with(served.url, "203.0.113.7") for _ in range(3)] == [200, 200, 429]
        assert sent_with(served.url, "203.0.113.8") == 200  # another client behind the proxy
        assert sent_with(served.url, None) == 200  # the proxy itself: a third
        assert served.stop() == 0


def test_forwarded_allow_ips_that_is_not_an_address_is_a_usage_error(cli):
    r = cli("serve", "no-such-run", "--port", "0", "--forwarded-allow-ips", "10.0.0.1,proxy")
    assert_user_error(r, 2, "--forwarded-allow-ips", "'proxy' is not an IP address")
