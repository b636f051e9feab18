"""The one translation path of `mt serve`, which mt's own API and the compatible ones
(mt.serve.libretranslate, mt.serve.deepl) all take: a request's lines (or one document) for a
pair, checked against the server's limits and the client's minute, sent to that pair's batcher
as a Job, and the records mt's POST /translate answers with (or the rendered document).

What differs between the APIs is only how a request is read and how an answer and an error are
written; the batching, limits, option checks, glossaries and documents are these functions'.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse

from mt.config import DecodeConfig
from mt.document import Documents
from mt.document.document import DocumentTranslation
from mt.errors import FileSystemError
from mt.glossary import Glossary
from mt.memory import Match
from mt.records import Translation, lists, record
from mt.serve import documents
from mt.serve.access import Access, ClientError
from mt.serve.batcher import Job
from mt.serve.pairs import Pair, Pairs
from mt.translator import reused


@dataclass
class Limits:
    """What one request may hold (413 beyond)."""

    max_lines: int = 100
    max_chars: int = 20_000  # characters of all its lines and prefixes (a document's text)
    max_file_bytes: int = 16 * 2**20  # POST /translate/document's body: a .docx has pictures

    @property
    def max_body(self) -> int:
        """Bytes of a request body: max_chars characters written as JSON `\\u` escapes (a
        surrogate pair is 12 bytes), plus room for the rest of the object."""
        return 12 * self.max_chars + 65_536


@dataclass
class Served:
    """What every route reads: the pairs (each with its translator and batcher), the limits,
    and who may ask."""

    pairs: Pairs
    limits: Limits
    access: Access


@dataclass
class Ask:
    """What a request asks to translate, in mt's terms, whichever API it came through."""

    lines: list[str]
    options: dict  # decoding options over the pair's (DecodeConfig fields), not yet checked
    prefix: list[str] | None = None
    attention: bool = False
    glossary: Glossary | None = None  # for every line
    glossaries: list[Glossary | None] | None = None  # each line's own
    format: str = "text"  # a text format of mt.document
    split: bool | None = None  # None: split into sentences unless a per-line option asks


async def translate_lines(served: Served, pair: Pair, client: str, ask: Ask,
                          request: Request | None = None) -> list[dict]:
    """Per line of ask, the object of mt's POST /translate (`{"src", "text", "score", ...}`),
    translated by pair's batcher. With a memory (`mt serve --memory`), each line is looked up
    whole first: one whose match is reused (mt.translator.reused: exact, or at
    decode.memory_reuse) is its stored translation, not sent to the batcher, and every line's
    object has its best "match" ({"source", "target", "score"}, or null); the others reach the
    translator with their matches (each text looked up once). A ClientError for
    what the client must change, an MTError for an option value mt refuses (both before
    anything is translated or counted)."""
    translator, lines = pair.translator, ask.lines
    if request is not None:
        request.state.lines = len(lines)
    check_limits(lines, ask.prefix, served.limits)
    cfg = translator.check_options(ask.attention, **ask.options)
    if ask.glossary is not None or any(ask.glossaries or ()):  # refused now: beam 1, ct2
        translator.matcher(ask.glossary or Glossary(()), cfg)
    served.access.admit(client, len(lines))  # only what is to be translated counts
    if pair.memory_thread is None:
        return await translated(pair, ask, cfg)
    found = await pair.memory_thread.matches(lines, cfg.memory_threshold)
    reuse = [reused(m, cfg) for m in found]
    rest = [i for i, r in enumerate(reuse) if not r]
    done = iter(await translated(pair, only(ask, rest), cfg, dict(zip(lines, found)))
                if rest else [])
    nbest = lists(cfg)
    return [{**(record(line, [Translation(m.target, 0.0)], nbest) if r else next(done)),
             "match": m and m.to_json()} for line, m, r in zip(lines, found, reuse, strict=True)]


async def translated(pair: Pair, ask: Ask, cfg: DecodeConfig,
                     known: dict[str, Match | None] | None = None) -> list[dict]:
    """translate_lines's objects of ask's lines, all translated by pair's batcher: whole, or
    as documents (mt.serve.documents.wanted). known: texts looked up in the pair's memory
    already, with their matches (None without a memory): the batcher's lines (the lines, or
    their sentences) are looked up through the memory thread where they are not among them,
    and go to the translator with their matches, so that none is looked up twice."""
    translator, lines = pair.translator, ask.lines
    own = ask.glossaries

    async def submit(job: Job) -> list[list[Translation]]:
        nonlocal known
        if known is not None:
            missing = list(dict.fromkeys(x for x in job.lines if x not in known))
            if missing:  # a line's sentences, where it has more than one
                found = await pair.memory_thread.matches(missing, cfg.memory_threshold)
                known = {**known, **dict(zip(missing, found, strict=True))}
            job.matches = [known[x] for x in job.lines]
        return await asyncio.wrap_future(pair.batcher.submit(job))

    if not documents.wanted(ask.format, ask.split, ask.prefix is not None, cfg):
        found = await submit(Job(lines, ask.options, ask.prefix, ask.attention, ask.glossary,
                                 own))
        nbest = lists(cfg)
        return [record(src, ts, nbest) for src, ts in zip(lines, found, strict=True)]
    docs = await asyncio.to_thread(documents.prepare, translator, lines, ask.format, cfg)
    found = await hardened(docs, lambda rows: submit(docs_job(
        docs, translator, rows, ask.options, ask.attention, ask.glossary, own)))
    terms = [ask.glossary is not None or bool(g) for g in own or [None] * len(lines)]
    return documents.records(lines, docs, found, terms)


def docs_job(docs: Documents, translator, rows: Sequence[int], options: dict,
             attention: bool = False, glossary: Glossary | None = None,
             own: list[Glossary | None] | None = None) -> Job:
    """The Job of docs' inputs at rows, read when called (Documents.harden remakes them), with
    docs' options over `options`, and each input's glossary from its line's in own."""
    mine = own and docs.per_input(own)
    return Job([docs.inputs[i] for i in rows], {**options, **docs.options(translator)}, None,
               attention, glossary, mine and [mine[i] for i in rows])


async def hardened(docs: Documents, translate) -> list[list[Translation]]:
    """docs' inputs translated, per input, with the paragraphs that lost a directive left to
    the model translated again without it (Documents.harden): translate(rows) translates
    those inputs of docs (awaited), all of them first."""
    found = await translate(range(len(docs.inputs)))
    merged: list = docs.harden([ts[0] for ts in found])
    rows = [i for i, t in enumerate(merged) if t is None]
    more = iter(await translate(rows) if rows else [])
    return [next(more) if t is None else [t] for t in merged]


def only(ask: Ask, keep: list[int]) -> Ask:
    """ask with only the lines at keep (their prefixes and glossaries with them)."""
    def pick(values: list | None) -> list | None:
        return None if values is None else [values[i] for i in keep]

    return dataclasses.replace(ask, lines=pick(ask.lines), prefix=pick(ask.prefix),
                               glossaries=pick(ask.glossaries))


async def translate_file(served: Served, pair: Pair, client: str, data: bytes, format: str,
                         options: dict, glossary: Glossary | None = None,
                         request: Request | None = None) -> tuple[DocumentTranslation, int]:
    """One document's bytes in format, translated by pair's batcher as mt's POST
    /translate/document translates it: the rendered document and its count of sentences.
    ClientError and MTError as translate_lines."""
    translator = pair.translator
    cfg = translator.check_options(**options)
    documents.check_document(cfg)
    if glossary is not None:  # refused now: beam 1, CTranslate2
        translator.matcher(glossary, cfg)
    docs = await asyncio.to_thread(documents.prepare_file, translator, data, format, cfg)
    if request is not None:
        request.state.lines = len(docs.inputs)
    check_limits(docs.inputs, None, served.limits, "the document", lines_too=False)
    served.access.admit(client, len(docs.inputs))
    found = await hardened(docs, lambda rows: asyncio.wrap_future(pair.batcher.submit(
        docs_job(docs, translator, rows, options, glossary=glossary))))
    done = await asyncio.to_thread(docs.docs[0].render, [ts[0] for ts in found])
    return done, len(docs.inputs)


def compatible_error(e: Exception, field: str, statuses: dict[int, int]) -> JSONResponse:
    """A compatible API's error: `{field: "one line"}`, with its status for mt's (statuses:
    mt's status to the API's; an MTError, an option value mt refuses, is a 400, but a
    FileSystemError, the server's state not written, a 500). The WWW-Authenticate of mt's 401
    is dropped: these APIs answer a key's absence with a 403."""
    if isinstance(e, ClientError):
        headers = {k: v for k, v in e.headers.items() if k != "WWW-Authenticate"}
        return JSONResponse({field: str(e)}, statuses.get(e.status, e.status), headers)
    message = str(e).removeprefix("Translator options: ").replace("decode.", "")
    return JSONResponse({field: message}, 500 if isinstance(e, FileSystemError) else 400)


class TooLarge(ClientError):
    """A 413 for a body past the server's limit, with its first `most` bytes, which are enough
    to tell which API it was sent to (mt.serve.libretranslate.asks)."""

    def __init__(self, message: str, head: bytes):
        super().__init__(413, message)
        self.head = head


async def read_body(request: Request, limits: Limits, most: int | None = None) -> bytes:
    """The body, or TooLarge past `most` bytes (limits.max_body if None). A larger body is still
    read to its end (and dropped), so the client, still sending, gets the answer and not a
    reset."""
    most = limits.max_body if most is None else most
    chunks, size = [], 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size <= most:
                chunks.append(chunk)
    except ClientDisconnect:  # nobody reads the answer; its status is for the log
        raise ClientError(499, "the client closed the connection before sending its whole "
                               "request") from None
    if size > most:
        origin = (f"from --max-chars {limits.max_chars:,}" if most == limits.max_body
                  else "a document's")
        raise TooLarge(f"a body of {size:,} bytes: more than this server takes ({most:,}, "
                       f"{origin})", b"".join(chunks))
    return b"".join(chunks)


def address(request: Request) -> str | None:
    return request.client.host if request.client else None


def check_limits(lines: list[str], prefix: list[str] | None, limits: Limits,
                 what: str = "text", lines_too: bool = True) -> None:
    """A 413 for more lines (lines_too) or characters than limits; what: how the answer names
    them."""
    if lines_too and len(lines) > limits.max_lines:
        raise ClientError(413, f"{what}: {len(lines)} lines, more than this server takes in one "
                               f"request ({limits.max_lines}, --max-lines); send them in parts")
    chars = sum(map(len, lines)) + sum(map(len, prefix or []))
    if chars > limits.max_chars:
        raise ClientError(413, f"{what}: {chars:,} characters, more than this server takes in "
                               f"one request ({limits.max_chars:,}, --max-chars); send them in "
                               "parts")


@dataclass
class Kept:
    """A translated file waiting to be fetched (LibreTranslate's /download_file, DeepL's
    /v2/document/ID/result)."""

    filename: str
    data: bytes
    media_type: str
    secret: str = ""  # what the fetch must show (DeepL's document_key)
    characters: int = 0  # of the source's sentences (DeepL's billed_characters)


class Finished:
    """Translated files by id, in memory, the oldest forgotten past `most`: a client fetches
    its file right after its translation, and a server is not a file store."""

    def __init__(self, most: int = 64):
        self.most, self.files = most, {}

    def put(self, kept: Kept) -> str:
        """A new id for kept (unguessable: it is all a LibreTranslate download asks for)."""
        name = secrets.token_hex(16)
        self.files[name] = kept
        while len(self.files) > self.most:
            del self.files[next(iter(self.files))]
        return name

    def get(self, name: str) -> Kept | None:
        return self.files.get(name)
