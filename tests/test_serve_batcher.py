"""mt/serve/batcher.py: the requests of many clients translated together, on a stand-in for
the Translator: one call for what has queued, grouped by options, prefix and attention; a
call's error to each of its requests; cancelled requests skipped; the wait for a gap; the cap
on lines; setup and translation in the batcher's own thread."""

from __future__ import annotations

import threading
import time

import pytest

from mt.errors import ConfigError
from mt.records import Translation
from mt.serve.batcher import Batcher, Job


class Upper:
    """Translates a line into itself in capitals, and records each call."""

    def __init__(self):
        self.calls = []

    def translate_nbest(self, lines, prefix=None, *, attention=False, glossary=None, **options):
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
