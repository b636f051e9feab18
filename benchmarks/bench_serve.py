"""`mt serve` under load: N clients at once, each sending M requests of 1-8 lines, against one
client sending the same requests one at a time, against the same N clients asking the same
through LibreTranslate's POST /translate and DeepL's POST /v2/translate, and against the
Translator on the same lines in this process (what `mt translate --format jsonl` does: scored,
in length-sorted chunks) with the same torch threads.

    python -m benchmarks.bench_serve RUN [--input FILE] [--clients 32] [--requests 25]
        [--threads T] [--batch-wait-ms 5] [--server-set KEY=VALUE] [--no-single]
        [--no-compatible] [--rounds 2] [--seed 0]
    python -m benchmarks.bench_serve RUN --smoke   # toy lines, 4 clients x 3 requests, 1 round

The lines are drawn at random (--seed) from --input (default Multi30k test_2016_flickr,
German). The server is one `mt serve RUN --port 0 --threads T` process on loopback, started
once; clients are threads here, each with its own keep-alive connection. Every response is
checked against the Translator's translation of its lines: one wrong or missing answer fails
the run (exit 1). Reported: requests/s, lines/s, and the 50th and 99th percentile latency of a
request; then lines/s under load against the Translator's (the issue's target: 0.8x), each
compatible API's against mt's own under load (target: 0.9x), and against one client. The
contenders take turns, --rounds rounds, each keeping its fastest.
Its helpers (Served, Client, send_all, APIS) also drive the server in tests/test_serve_app.py
and tests/test_serve_server.py.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import torch

from benchmarks.harness import ROOT, TOY, add_run_args, alternate, markdown, parse, parser
from mt.textio import iter_lines
from mt.threads import threads_for
from mt.translator import Translator

LISTENING = re.compile(r"^serving .* on (http://\S+)/ ")
BASE = "Translator (mt translate)"  # the contenders that are not clients under load
SINGLE = "one client, one request at a time"
COMPATIBLE = ("libretranslate", "deepl")  # APIS beside mt's own, each against it under load


class Served:
    """`mt serve RUN ARGS --port 0` in a subprocess, from the line saying where it listens to
    stop(): url, and every line of its stderr so far in log."""

    def __init__(self, run: str | Path | None, *args: str, env: dict | None = None,
                 timeout: float = 300, cwd: Path = ROOT):
        runs = [] if run is None else [str(run)]  # None: ARGS name the pairs (--model)
        command = [sys.executable, "-m", "mt", "serve", *runs, "--port", "0", *args]
        self.process = subprocess.Popen(command, cwd=cwd, stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        text=True, env={**os.environ, **(env or {})})
        self.log: list[str] = []
        self.url = ""
        started = threading.Event()

        def read() -> None:
            for line in self.process.stderr:
                self.log.append(line.rstrip("\n"))
                found = LISTENING.match(line)
                if found:
                    self.url = found.group(1)
                    started.set()
            started.set()  # it ended

        threading.Thread(target=read, daemon=True).start()
        if not started.wait(timeout) or not self.url:
            self.process.kill()
            raise RuntimeError("mt serve did not start:\n" + "\n".join(self.log[-30:]))

    def logged(self, send: Callable[[], tuple]) -> tuple:
        """send()'s answer (a tuple), and the log lines the server wrote while and after it
        was sent (its one line comes after the answer's last byte: waited for, and then a
        little longer for any second one). The lines of requests before it are let in first."""
        before = -1
        while before != len(self.log):  # quiet for 0.3 s: the last request's line is in
            before = len(self.log)
            time.sleep(0.3)
        answer = send()
        deadline = time.monotonic() + 30
        while len(self.log) == before and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        return (*answer, self.log[before:])

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM, and its exit code once it has ended."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def __enter__(self) -> Served:
        return self

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Client:
    """Requests to one server: over one keep-alive connection, or (keep_alive False) a new
    connection for each, closed after its answer."""

    def __init__(self, url: str, keep_alive: bool = True, timeout: float = 300):
        parts = urlsplit(url)
        self.host, self.port, self.timeout = parts.hostname, parts.port, timeout
        self.keep_alive = keep_alive
        self.connection: http.client.HTTPConnection | None = None

    def request(self, method: str, path: str, body: bytes | dict | None = None,
                headers: dict | None = None) -> tuple[int, dict | str]:
        """(status, the JSON answer, or the text of one that is not JSON)."""
        if isinstance(body, dict):
            body = json.dumps(body).encode()
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port,
                                                         timeout=self.timeout)
        sent = {"Connection": "keep-alive" if self.keep_alive else "close", **(headers or {})}
        try:
            self.connection.request(method, path, body, sent)
            response = self.connection.getresponse()
            data = response.read().decode("utf-8")
        finally:
            if not self.keep_alive:
                self.close()
        try:
            return response.status, json.loads(data)
        except json.JSONDecodeError:
            return response.status, data

    def translate(self, lines: list[str], **options) -> list[dict]:
        status, answer = self.request("POST", "/translate", {"text": lines, **options})
        if status != 200:
            raise RuntimeError(f"POST /translate: {status} {answer}")
        return answer["translations"]

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


@dataclass(frozen=True)
class Api:
    """One of the server's APIs, as its clients ask it to translate lines into a target: the
    path, the JSON body, and the answer's translations, a line each."""

    name: str
    path: str
    body: Callable[[list[str], str], dict]  # (lines, target language) -> the request's body
    texts: Callable[[dict], list[str]]

    def translate(self, client: Client, lines: list[str], target: str) -> list[str]:
        status, answer = client.request("POST", self.path, self.body(lines, target),
                                        {"Content-Type": "application/json"})
        if status != 200:
            raise RuntimeError(f"{self.name} POST {self.path}: {status} {answer}")
        return self.texts(answer)


APIS = {  # the same lines asked of each: one texts each, split into sentences as mt's default
    "mt": Api("mt's own", "/translate", lambda lines, target: {"text": lines},
              lambda a: [t["text"] for t in a["translations"]]),
    "libretranslate": Api("LibreTranslate", "/translate",
                          lambda lines, target: {"q": lines, "source": "auto", "target": target},
                          lambda a: a["translatedText"]),
    "deepl": Api("DeepL", "/v2/translate",
                 lambda lines, target: {"text": lines, "target_lang": target.upper()},
                 lambda a: [t["text"] for t in a["translations"]]),
}


@dataclass
class Outcome:
    """What a set of clients got: the seconds until the last finished, each answered request's
    latency, and the requests refused (the connection failed before any answer)."""

    seconds: float
    latencies: list[float] = field(default_factory=list)
    wrong: list[str] = field(default_factory=list)  # answers that differ from expected
    refused: int = 0
    calls: int = 0  # the server's Translator calls for them (GET /health), if counted


def send_all(url: str, plans: Sequence[Sequence[list[str]]], expected: dict[str, str],
             keep_alive: bool = True, stop_on_refusal: bool = False, api: str = "mt",
             target: str = "") -> Outcome:
    """One client thread per plan, sending its requests in turn to APIS[api] (target: the
    language asked for, which the compatible APIs need); each answer's texts are checked
    against expected (line -> translation). A refused connection (ConnectionError, or an
    answer that never began) counts in refused; with stop_on_refusal the client stops."""
    outcome, lock = Outcome(0.0), threading.Lock()

    def client(plan: Sequence[list[str]]) -> None:
        c = Client(url, keep_alive)
        for lines in plan:
            start = time.perf_counter()
            try:
                texts = APIS[api].translate(c, lines, target)
            except (ConnectionError, http.client.RemoteDisconnected):
                c.close()
                with lock:
                    outcome.refused += 1
                if stop_on_refusal:
                    return
                continue
            ms = (time.perf_counter() - start) * 1000
            with lock:
                outcome.latencies.append(ms)
                if texts != [expected[line] for line in lines]:
                    outcome.wrong.append(f"{lines} -> {texts}")
        c.close()

    threads = [threading.Thread(target=client, args=(plan,)) for plan in plans]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    outcome.seconds = time.perf_counter() - start
    return outcome


def make_plans(lines: list[str], clients: int, requests: int, seed: int = 0,
               most: int = 8) -> list[list[list[str]]]:
    """Per client, `requests` requests of 1 to `most` lines drawn at random from lines."""
    rng = random.Random(seed)
    return [[rng.choices(lines, k=rng.randint(1, most)) for _ in range(requests)]
            for _ in range(clients)]


def faster(a: Outcome, b: Outcome) -> Outcome:
    """alternate()'s keep: the faster round's times, with every round's wrong and refused."""
    kept = a if a.seconds <= b.seconds else b
    return dataclasses.replace(kept, wrong=a.wrong + b.wrong, refused=a.refused + b.refused)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))] if ordered else 0.0


def main() -> None:
    ap = parser(__doc__, rounds=2, smoke="toy lines, 4 clients x 3 requests, 1 round")
    add_run_args(ap, "test_2016_flickr.de.gz")
    ap.add_argument("--clients", type=int, default=32, help="clients at once (default 32)")
    ap.add_argument("--requests", type=int, default=25, help="requests a client (default 25)")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch threads of the server and the Translator (default 0: the "
                    "cores for the Translator; the server's default, following the load)")
    ap.add_argument("--batch-wait-ms", type=float, default=5.0,
                    help="the server's --batch-wait-ms (default 5)")
    ap.add_argument("--seed", type=int, default=0, help="draws the requests' lines")
    ap.add_argument("--no-single", action="store_true",
                    help="leave out one client, one request at a time (the slowest contender)")
    ap.add_argument("--no-compatible", action="store_true",
                    help="leave out the clients of LibreTranslate's and DeepL's APIs")
    ap.add_argument("--server-set", action="append", default=[], metavar="KEY=VALUE",
                    help="the server's --set (not the Translator's), e.g. "
                         "decode.batch_tokens=16384; repeatable")
    args = parse(ap, {"clients": 4, "requests": 3, "rounds": 1,
                      "input": TOY / "toy.test.en"})
    threads = threads_for(args.threads)
    torch.set_num_threads(threads)
    plans = make_plans(list(iter_lines(args.input)), args.clients, args.requests, args.seed)
    requests = [lines for plan in plans for lines in plan]
    all_lines = [line for lines in requests for line in lines]
    translator = Translator.load(args.run)
    target = translator.run.cfg.data.tgt_lang  # what the compatible APIs' clients name
    expected = {}
    sets = [a for item in args.server_set for a in ("--set", item)]
    with Served(args.run, "--threads", str(args.threads), "--batch-wait-ms",
                str(args.batch_wait_ms), *sets) as served:
        for lines in requests[:4]:  # warm-up, untimed
            Client(served.url).translate(lines)

        def translate(r: int) -> Outcome:
            start = time.perf_counter()
            found = list(translator.translate_nbest_stream(all_lines))  # as mt translate
            expected.update((line, ts[0].text) for line, ts in zip(all_lines, found))
            return Outcome(time.perf_counter() - start)

        def calls() -> int:
            """The server's Translator calls so far (GET /health, on a connection of its own)."""
            return Client(served.url, keep_alive=False).request("GET", "/health")[1][
                "translator_calls"]

        def counted(plans_: list, api: str = "mt") -> Outcome:
            """send_all to APIS[api], with the server's Translator calls it took."""
            before = calls()
            return dataclasses.replace(send_all(served.url, plans_, expected, api=api,
                                                target=target), calls=calls() - before)

        contenders = {BASE: translate, under_load(args, "mt"): lambda r: counted(plans)}
        for api in () if args.no_compatible else COMPATIBLE:
            contenders[under_load(args, api)] = lambda r, api=api: counted(plans, api)
        if not args.no_single:
            contenders[SINGLE] = lambda r: counted([requests])
        best = alternate(contenders, args.rounds, keep=faster)
        code = served.stop()
    report(args, best, requests, all_lines, threads, sets, code)


def under_load(args, api: str) -> str:
    """The name of the contender of --clients clients at once of APIS[api]."""
    return f"{args.clients} clients at once" + ("" if api == "mt" else
                                                f", {APIS[api].name} POST {APIS[api].path}")


def report(args, best: dict[str, Outcome], requests: list, all_lines: list, threads: int,
           sets: list[str], code: int) -> None:
    """The table, the ratios, and whether every answer was right (SystemExit 1 if not)."""
    print(f"{args.run}: {len(requests):,} requests ({args.clients} clients x {args.requests}), "
          f"{len(all_lines):,} lines of {args.input}; {threads} thread(s)"
          f"{'' if args.threads else ' (the server: following the load)'}; --batch-wait-ms "
          f"{args.batch_wait_ms}{''.join(' ' + a for a in sets)}; fastest of {args.rounds} "
          "round(s)\n")
    print(markdown(["contender", "seconds", "requests/s", "lines/s", "p50 ms", "p99 ms",
                    "lines a call"], (
        [name, f"{o.seconds:.2f}", f"{len(requests) / o.seconds:.1f}",
         f"{len(all_lines) / o.seconds:.1f}",
         *([f"{percentile(o.latencies, 50):.0f}", f"{percentile(o.latencies, 99):.0f}"]
           if o.latencies else ["-", "-"]),
         f"{len(all_lines) / o.calls:.1f}" if o.calls else "-"] for name, o in best.items())))
    load, base = best[under_load(args, "mt")], best[BASE]
    outcomes = [o for name, o in best.items() if name != BASE]  # the server's
    print(f"\nlines/s under load / Translator (mt translate): {base.seconds / load.seconds:.2f}x "
          "(target 0.8x)")
    for api in () if args.no_compatible else COMPATIBLE:
        print(f"lines/s under load, {APIS[api].name} / mt's own: "
              f"{load.seconds / best[under_load(args, api)].seconds:.2f}x (target 0.9x)")
    if not args.no_single:
        alone = best[SINGLE]
        print(f"lines/s under load / one request at a time: {alone.seconds / load.seconds:.2f}x")
    wrong, lost = [w for o in outcomes for w in o.wrong], sum(o.refused for o in outcomes)
    print(f"responses correct: {'all' if not wrong else 'NOT all'} of "
          f"{len(outcomes) * args.rounds * len(requests):,} ({len(outcomes)} server contender(s) x "
          f"{args.rounds} round(s) x {len(requests):,} requests); wrong {len(wrong)}, lost "
          f"{lost}; server exit code {code}")
    for w in wrong[:5]:
        print(f"wrong: {w}")
    if wrong or lost or code:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
