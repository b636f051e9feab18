"""`mt translate --workers N`: chunks of the input translated in N processes, each with its own
Translator, written in input order with a few chunks in flight, so memory stays bounded."""

from __future__ import annotations

import collections
import itertools
import multiprocessing
import signal
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
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
    """What formats.formatted writes, one list per chunk of CHUNK_LINES input lines (one
    string per line), in input order, from options.workers processes of options.threads torch
    threads each (0: mt.threads.threads_for); prefixes and glossaries: one per line; glossary:
    as there."""
    workers, output_format = options.workers, options.output_format
    # spawn, not fork: a forked child inherits torch's thread pools in whatever state they are.
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_start_worker,
                               initargs=(run_path, options.device, options.engine,
                                         options.overrides, options.decode,
                                         threads_for(options.threads, workers)))
    pending: collections.deque = collections.deque()
    size = mt.translator.CHUNK_LINES  # the chunks one process would translate
    truncated = unkept = max_src = 0  # summed over the chunks, to warn once
    try:
        for start in itertools.count(0, size):
            chunk = list(itertools.islice(lines, size))
            forced = None if prefixes is None else list(itertools.islice(prefixes, size))
            if forced is not None and len(forced) != len(chunk):
                raise prefix_mismatch(start + len(chunk), start + len(forced))
            own = None if glossaries is None else list(itertools.islice(glossaries, size))
            if chunk:
                pending.append(pool.submit(_translate_chunk, chunk, start, output_format, nbest,
                                           forced, glossary, own))
            while pending and (len(pending) > 2 * workers or not chunk):
                texts, cut, missed, max_src = pending.popleft().result()
                truncated, unkept = truncated + cut, unkept + missed
                yield texts
            if not chunk:
                break
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
