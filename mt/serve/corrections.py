"""POST /corrections: a person's translation of a sentence, written into the served pair's
translation memory (`mt serve --memory`) at once, so that the next request for that sentence
gets it (an exact match, reused as it is: decode.memory_exact reuse).

A correction is answered only once its transaction is committed (SQLite with synchronous=FULL,
PostgreSQL's COMMIT): an acknowledged correction survives the server being killed. Each pair's
memory has a thread and a connection of its own for the server (the translator reads through
another, in the batcher's thread), so the corrections of many clients are written one after
another, none inside another's transaction, and a request's lines looked up whole
(mt.serve.translating) see every correction answered before it.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ConfigDict

from mt.memory import Match, Memory
from mt.serve.access import ClientError


class CorrectionRequest(BaseModel):
    """The body of POST /corrections. Strict: a number is not a string; unknown fields are
    refused."""

    model_config = ConfigDict(extra="forbid", strict=True)

    source: str  # the sentence translated (one line)
    translation: str  # the machine's translation of it, as the person saw it
    corrected: str  # the person's translation: what the memory keeps (one line)
    source_lang: str | None = None  # the pair, where the server translates several
    target_lang: str | None = None


def checked(req: CorrectionRequest, max_chars: int) -> tuple[str, str]:
    """The pair to keep, (source, corrected), their surrounding whitespace stripped; a
    ClientError for an empty source or correction (422), one of several lines (422: a memory
    holds segments, and a line break is no segment TSV can hold), or more characters in all
    than a request may hold (413, --max-chars)."""
    source, corrected = req.source.strip(), req.corrected.strip()
    for name, text in (("source", source), ("corrected", corrected)):
        if not text:
            raise ClientError(422, f"{name}: empty; give the sentence and the person's "
                                   "translation of it")
        if len(text.splitlines()) > 1:
            raise ClientError(422, f"{name}: holds a line break; send one sentence (one "
                                   "line) a correction")
    chars = len(req.source) + len(req.translation) + len(req.corrected)
    if chars > max_chars:
        raise ClientError(413, f"a correction of {chars:,} characters, more than this server "
                               f"takes in one request ({max_chars:,}, --max-chars)")
    return source, corrected


def no_memory(pair: str, several: bool) -> ClientError:
    """The 409 of a pair served without a memory."""
    which = f"{pair}=MEMORY" if several else "MEMORY"
    return ClientError(409, f"{pair}: this server keeps no translation memory for the pair, so "
                            f"it takes no corrections; start it with mt serve --memory {which}")


class MemoryThread:
    """A pair's memory as the server uses it: its lookups and writes, one at a time on a
    thread of their own (so a lookup after a correction's answer sees it)."""

    def __init__(self, memory: Memory):
        self.memory = memory
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="mt-memory")
        self.saved = 0  # corrections written since the server started (GET /health)

    async def matches(self, lines: list[str], threshold: float) -> list[Match | None]:
        """Each line's best match at or above threshold (None where none, and for a blank
        line)."""
        def best() -> list[Match | None]:
            return [self.memory.best(line, threshold) for line in lines]

        return await asyncio.wrap_future(self._thread.submit(best))

    async def save(self, source: str, target: str) -> bool:
        """Write the pair in one transaction, returning once it is committed: whether it was
        new (False: the memory held it already, and it is made the latest all the same)."""
        added, _ = await asyncio.wrap_future(self._thread.submit(self.memory.add,
                                                                 [(source, target)]))
        self.saved += 1
        return bool(added)

    def close(self) -> None:
        """Finish the lookups and writes queued, then close the memory."""
        self._thread.shutdown(wait=True)
        self.memory.close()
