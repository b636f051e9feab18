"""The requests of many clients translated together: they queue, and one worker thread takes
what has come (waiting a few milliseconds for more), translates all their lines in one call to
the Translator, which sorts them by length into token-budget batches, and gives each request
its own lines' translations back, in order.

Requests with other decoding options cannot share a call: a call is made per group of equal
options (Job.key). The worker is the only thread that runs the model.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field

from mt.glossary import Glossary
from mt.memory import Match
from mt.records import Translation
from mt.translator import CHUNK_LINES, Translator

GATHER_WAITS = 10  # a gathering lasts at most this many waits (--batch-wait-ms)


@dataclass
class Job:
    """One request: its lines and how to translate them. Its future gets, per line, the
    translations that Translator.translate_nbest gives."""

    lines: list[str]
    options: dict  # decoding options over the translator's (DecodeConfig fields), checked
    prefix: list[str] | None = None  # a target prefix per line, or None
    attention: bool = False  # give each translation its cross-attention
    glossary: Glossary | None = None  # whose terms the translations keep (mt.glossary)
    glossaries: list[Glossary | None] | None = None  # each line's own, added to glossary
    # each line's match in the memory, where the server looked them up (its memory thread):
    # the translator does not look them up again
    matches: list[Match | None] | None = None
    future: Future[list[list[Translation]]] = field(default_factory=Future)

    def key(self) -> tuple:
        """Jobs with the same key are translated in one call."""
        return (tuple(sorted(self.options.items())), self.prefix is not None, self.attention,
                self.glossary, self.matches is not None)


class Batcher:
    """A queue of Jobs and the worker thread that translates them (started here).

    wait_ms: how long the worker waits, after each job that arrives, for another to translate
    with it (GATHER_WAITS of them at most).
    max_lines: it stops gathering at this many lines (the chunk mt translate sorts a file in).
    setup: called first in the worker thread (its torch threads: mt.threads.follow_load); the
    tick it returns is called before each call to the Translator.
    """

    def __init__(self, translator: Translator, wait_ms: float = 5.0,
                 max_lines: int = CHUNK_LINES,
                 setup: Callable[[], Callable[[], None]] | None = None):
        self.translator, self.setup = translator, setup
        self._tick: Callable[[], None] = lambda: None  # setup's, in the worker thread
        self.wait, self.max_lines = wait_ms / 1000, max_lines
        self.requests = self.lines = self.calls = 0  # translated so far (GET /health)
        self._queue: queue.Queue[Job | None] = queue.Queue()  # None: closed
        self._thread = threading.Thread(target=self._run, name="mt-batcher", daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> Future[list[list[Translation]]]:
        self._queue.put(job)
        return job.future

    @property
    def queued(self) -> int:
        return self._queue.qsize()

    def close(self) -> None:
        """Translate every job submitted so far, then stop the worker."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        if self.setup is not None:
            self._tick = self.setup()
        closed = False
        while not closed:
            jobs, closed = self._gather()
            groups: dict[tuple, list[Job]] = {}
            for job in jobs:
                groups.setdefault(job.key(), []).append(job)
            for group in groups.values():
                self._translate(group)

    def _gather(self) -> tuple[list[Job], bool]:
        """The next jobs, oldest first: the first to come, then those that follow it, each
        within the wait of the one before (at once if already queued), for at most GATHER_WAITS
        waits in all and up to max_lines; and whether the queue was closed.

        Waiting for a gap rather than a fixed time after the first: clients answered together
        send their next requests together, over more than one wait when there are many of
        them, and a burst split in two is translated in two calls, the second one small."""
        first = self._queue.get()
        if first is None:
            return [], True
        jobs, lines = [first], len(first.lines)
        last = time.monotonic() + GATHER_WAITS * self.wait
        while lines < self.max_lines:
            try:
                job = self._queue.get(timeout=max(0.0, min(self.wait, last - time.monotonic())))
            except queue.Empty:
                break
            if job is None:
                return jobs, True
            jobs.append(job)
            lines += len(job.lines)
        return jobs, False

    def _translate(self, jobs: list[Job]) -> None:
        """One Translator call for jobs of one key; each future gets its own lines' results,
        or the call's error."""
        jobs = [j for j in jobs if j.future.set_running_or_notify_cancel()]  # skip the cancelled
        if not jobs:
            return
        first = jobs[0]
        lines = [line for j in jobs for line in j.lines]
        prefix = None if first.prefix is None else [p for j in jobs for p in j.prefix]
        own = {}  # each line's glossary, where a job gives them
        if any(j.glossaries for j in jobs):
            own["glossaries"] = [g for j in jobs for g in j.glossaries or [None] * len(j.lines)]
        if first.matches is not None:  # the key: every job's, or none's
            own["matches"] = [m for j in jobs for m in j.matches]
        self._tick()  # threads follow the free cores (mt serve --threads 0)
        try:
            found = self.translator.translate_nbest(lines, prefix, attention=first.attention,
                                                    glossary=first.glossary, **own,
                                                    **first.options)
        except Exception as e:  # the same for every job of the call; the app answers it
            for j in jobs:
                j.future.set_exception(e)
            return
        self.requests, self.lines, self.calls = (self.requests + len(jobs),
                                                 self.lines + len(lines), self.calls + 1)
        start = 0
        for j in jobs:
            j.future.set_result(found[start: start + len(j.lines)])
            start += len(j.lines)
