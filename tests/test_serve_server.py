"""mt/serve/server.py: the socket, bound before the model loads (a port taken or a host that is
not an address here is one line and exit 8, before the run is read), and SIGTERM in the middle
of a load: every request accepted is answered, then exit 0."""

from __future__ import annotations

import re
import signal
import socket
import threading
import time

from benchmarks.bench_serve import Served, make_plans, send_all
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
    # anywhere in a line: under load another thread's log line may share it
    assert any("stopping: answering the" in line for line in served.log), served.log[-20:]
