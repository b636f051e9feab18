"""`mt translate --workers N`: chunks of the input translated in N processes, each with its own
Translator, written in input order with a few chunks in flight, so memory stays bounded. The
input is read N chunks at a time and each such round cut into N parts of about equal
characters, so that an input shorter than N chunks (or a long one's last round) keeps every
process busy rather than one."""

from __future__ import annotations

import bisect
import collections
import itertools
import multiprocessing
import signal
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

import torch

import mt.translator
from mt.commands.formats import formatted
from mt.commands.options import TranslateOptions
from mt.errors import MTError
from mt.glossary import Glossary
from mt.log import warn
from mt.runs import Paths
from mt.threads import threads_for
from mt.translator import Translator, prefix_mismatch, unkept_message

_translator: Translator | None = None  # a worker's own, loaded once


def parallel_formatted(run_path: Paths, options: TranslateOptions, lines: Iterator[str],
                       nbest: bool, prefixes: Iterator[str] | None = None,
                       glossary: Glossary | None = None,
                       glossaries: Iterator[Glossary | None] | None = None
                       ) -> Iterator[list[str]]:
    """What formats.formatted writes, one list per part of the input (`rounds`; one string
    per line), in input order, from options.workers processes of options.threads torch
    threads each (0: mt.threads.threads_for); prefixes and glossaries: one per line; glossary:
    as there."""
    workers, output_format = options.workers, options.output_format
    # spawn, not fork: a forked child inherits torch's thread pools in whatever state they are.
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker,
                               initargs=(run_path, options.device, options.engine,
                                         options.overrides, options.decode,
                                         threads_for(options.threads, workers)))
    truncated = unkept = max_src = 0  # summed over the parts, to warn once
    try:
        submitted = (pool.submit(_translate_chunk, chunk, start, output_format, nbest, forced,
                                 glossary, own)
                     for start, chunk, forced, own in rounds(lines, prefixes, glossaries,
                                                             workers, mt.translator.CHUNK_LINES))
        for future in _ahead(submitted, 2 * workers):
            texts, cut, missed, max_src = future.result()
            truncated, unkept = truncated + cut, unkept + missed
            yield texts
    except BrokenProcessPool:
        raise MTError("a translation worker process died (killed, or out of memory?); try "
                      "fewer --workers") from None
    finally:  # interrupted or failed: stop the workers now, not after their chunks
        pool.shutdown(wait=False, cancel_futures=True)
        for child in multiprocessing.active_children():
            child.terminate()
    if unkept:
        warn(unkept_message(unkept, max_src))
    if truncated:
        warn(f"{truncated} source line(s) longer than model.max_positions were truncated")


def rounds(lines: Iterator[str], prefixes: Iterator[str] | None,
           glossaries: Iterator[Glossary | None] | None, workers: int, size: int
           ) -> Iterator[tuple[int, list[str], list[str] | None, list[Glossary | None] | None]]:
    """The input read workers x size lines at a time, each round cut into `workers` parts
    (`balanced`): (the first line's number, the lines, their prefixes, their glossaries) each,
    None for what was not given. A DataError where the prefixes end before the lines or after."""
    for start in itertools.count(0, workers * size):
        chunk = list(itertools.islice(lines, workers * size))
        forced = None if prefixes is None else list(itertools.islice(prefixes, workers * size))
        if forced is not None and len(forced) != len(chunk):
            raise prefix_mismatch(start + len(chunk), start + len(forced))
        own = None if glossaries is None else list(itertools.islice(glossaries, workers * size))
        if not chunk:
            return
        bounds = balanced(chunk, workers)
        for a, z in itertools.pairwise(bounds):
            yield (start + a, chunk[a:z], None if forced is None else forced[a:z],
                   None if own is None else own[a:z])


def _ahead(futures: Iterator[Future], n: int) -> Iterator[Future]:
    """futures in order, each handed out once n more after it were submitted (or the input
    ended): a few parts in flight, so memory stays bounded."""
    pending: collections.deque = collections.deque()
    for future in futures:
        pending.append(future)
        if len(pending) > n:
            yield pending.popleft()
    yield from pending


def balanced(lines: list[str], parts: int) -> list[int]:
    """Bounds cutting lines into at most `parts` contiguous runs of about equal characters (a
    line's work grows with its length), none empty: run k is lines[b[k]:b[k + 1]]."""
    ends = list(itertools.accumulate((len(line) + 1 for line in lines), initial=0))
    total, cuts = ends[-1], [0]
    for k in range(1, parts):
        aim = total * k / parts
        cut = bisect.bisect_left(ends, aim)  # the first end at or past it
        if cut > 0 and aim - ends[cut - 1] < ends[cut] - aim:  # or the one before, nearer
            cut -= 1
        if cuts[-1] < cut < len(lines):
            cuts.append(cut)
    return cuts + [len(lines)]


def _start_worker(run_path: Paths, device: str, engine: str, overrides: tuple[str, ...],
                  decode: dict, threads: int) -> None:
    global _translator
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the main process handles Ctrl-C
    torch.set_num_threads(threads)
    _translator = Translator.load(run_path, device, engine, overrides, **decode)


def _translate_chunk(chunk: list[str], start: int, output_format: str, nbest: bool,
                     forced: list[str] | None, glossary: Glossary | None = None,
                     own: list[Glossary | None] | None = None
                     ) -> tuple[list[str], int, int, int]:
    """formatted() of one chunk (n-best indices from `start`; its prefixes and its lines' own
    glossaries, or None), its
    truncated line count, its count of lines missing a glossary term, and the model's
    max_positions (for the warning)."""
    before = _translator.warnings()
    # Exactly one output per line, leaving the stream unfinished: it would warn about its
    # truncated lines and those missing a term (and count afresh) for every chunk; the main
    # process warns once for the whole input.
    texts = list(itertools.islice(formatted(_translator, iter(chunk), output_format, nbest,
                                            start, forced and iter(forced), glossary,
                                            glossaries=own and iter(own)),
                                  len(chunk)))
    after = _translator.warnings()
    return (texts, after.truncated - before.truncated, after.unkept - before.unkept,
            _translator.max_src)
