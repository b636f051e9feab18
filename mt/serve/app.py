"""The HTTP side of `mt serve` (FastAPI): POST /translate, POST /translate/document, POST
/corrections (with --memory, mt.serve.corrections), GET /health, GET /info, the page at GET /,
every error as JSON `{"error": "..."}` with a status that says what the client did wrong, and
one log line per request; and beside mt's own API the LibreTranslate- and DeepL-compatible ones
(mt.serve.libretranslate, mt.serve.deepl), which take the same path (mt.serve.translating).

Statuses: 400 a body that is not JSON; 422 an unknown field, a wrong type or a bad value (the
decoding options are checked as `--set decode.KEY` is), or a language pair not served; 413
more lines or characters than the server's limits (--max-lines, --max-chars,
--lines-per-minute); 401 no or a wrong API key (--api-key-file); 429 more lines a minute than
--lines-per-minute; 409 a correction for a pair served without a memory; 499 (in the log only)
a client gone before its request was read; 404 and 405 as usual; 501 a document format the
server lacks the extra for (.docx without python-docx); 503 a correction the memory could not
take (nothing was written); 500 only for a bug in mt.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import sys
import time
import typing
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from starlette.exceptions import HTTPException

from mt.config import REQUEST, DecodeConfig
from mt.document.formats import extensions
from mt.errors import MTError
from mt.glossary import Glossary, as_glossary
from mt.serve import deepl, documents, libretranslate
from mt.serve.access import Access, ClientError
from mt.serve.batcher import Batcher
from mt.serve.corrections import CorrectionRequest, MemoryThread, checked, no_memory
from mt.serve.documents import TEXT_FORMATS  # POST /translate's `format`
from mt.serve.forms import is_form
from mt.serve.pairs import Pairs
from mt.serve.translating import (
    Ask,
    Limits,
    Served,
    TooLarge,
    address,
    read_body,
    translate_file,
)
from mt.serve.translating import translate_lines as translate_asked
from mt.translator import Translator

__all__ = ["OPTIONS", "Limits", "TranslateRequest", "create_app"]

# The decoding options a request may give: the DecodeConfig fields whose metadata names
# REQUEST; the others (batch_tokens, bounding its memory, and the weights' dtype, chosen when
# the model loads) stay the server's.
OPTIONS = tuple(f.name for f in dataclasses.fields(DecodeConfig)
                if REQUEST in f.metadata["commands"])

DOCUMENT_EXTENSIONS = extensions()  # ".htm": "html", ...: POST /translate/document's formats
DOCS_ASSETS = "/docs-assets"  # where /docs and /redoc get Swagger UI's and ReDoc's files


def request_model() -> type[BaseModel]:
    """The body of POST /translate: text, prefix and attention, the pair (source, target; of
    a one-pair server, none needed), and each decoding option in OPTIONS, typed as
    DecodeConfig types it (null or absent: the server's). Strict: "5" is not a number; unknown
    fields are refused."""
    hints = typing.get_type_hints(DecodeConfig)
    options = {key: (hints[key] | None, None) for key in OPTIONS}
    return create_model(
        "TranslateRequest", __config__=ConfigDict(extra="forbid", strict=True),
        text=(str | list[str], ...), prefix=(str | list[str] | None, None),
        attention=(bool, False), glossary=(list[list[str]] | None, None),
        glossaries=(list[list[list[str]] | None] | None, None),
        format=(typing.Literal[TEXT_FORMATS], "text"), split=(bool | None, None),
        source=(str | None, None), target=(str | None, None), **options)


TranslateRequest = request_model()
DocumentQuery = documents.file_model(
    {key: (hint | None, None) for key, hint in typing.get_type_hints(DecodeConfig).items()
     if key in OPTIONS} | {"source": (str | None, None), "target": (str | None, None)})


def create_app(translator: Translator | Pairs, info: dict, limits: Limits, wait_ms: float,
               setup: Callable[[], Callable[[], None]] | None = None,
               access: Access | None = None, state_dir: Path | None = None) -> RequestLog:
    """The ASGI app: FastAPI's routes inside the request log. translator: the one pair's, or
    the Pairs served. info: GET /info's object (what `mt info --json` says of the model, and
    how this server decodes). Each pair's batcher starts with the app's lifespan (first calling
    setup, in its thread) and, when it ends, answers what is queued, then stops. access: the
    keys and the lines per minute (mt.serve.access; default none). state_dir: where the DeepL
    API's glossaries are kept (None: in memory)."""
    pairs = translator if isinstance(translator, Pairs) else Pairs.of(translator, info)
    served = Served(pairs, limits, access or Access())  # default: no keys, no limit

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        for pair in pairs.all:
            pair.batcher = Batcher(pair.translator, wait_ms, setup=setup)
            pair.memory_thread = pair.memory and MemoryThread(pair.memory)
        if len(pairs.sources()) > 1:  # its model now (a second), not in a request's time
            await asyncio.to_thread(pairs.identifier.load)
        yield
        await asyncio.gather(*(asyncio.to_thread(p.batcher.close) for p in pairs.all),
                             *(asyncio.to_thread(p.memory_thread.close) for p in pairs.all
                               if p.memory_thread))

    # /docs and /redoc with their scripts served from here (fastapi-offline ships them), not
    # from a CDN: a server without internet shows its API too; no validator badge fetched
    app = FastAPIOffline(title="mt serve", lifespan=lifespan, static_url=DOCS_ASSETS,
                         swagger_ui_parameters={"validatorUrl": None},
                         description="Translate with a model kept loaded; see docs/serve.md.")
    schema = {"content": {"application/json": {"schema": TranslateRequest.model_json_schema()}},
              "required": True}
    compatible = libretranslate.Api(served)

    @app.post("/translate", openapi_extra={"requestBody": schema})
    async def translate(request: Request) -> Response:
        """Translate one line ("text": "...") or several (["...", ...]), in input order. A
        LibreTranslate request (a form, or JSON with "q") is answered as LibreTranslate
        answers it."""
        kind = request.headers.get("content-type", "")
        try:
            body = await read_body(request, limits)
        except TooLarge as e:  # told by what was read: LibreTranslate answers it with a 400
            if libretranslate.asks(e.head, kind):
                return libretranslate.failed(e)
            return error(e.status, str(e))
        except ClientError as e:
            return error(e.status, str(e), e.headers)
        try:  # parsed once, here: the shape says whose request it is
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError) as e:
            if is_form(kind):  # mt's own takes JSON only (curl -d sends it as a form)
                return await compatible.translate(request, body)
            return error(400, f"the body is not JSON ({e})")
        if isinstance(parsed, dict) and "q" in parsed:  # mt's own has `text`, refuses `q`
            return await compatible.translate(request, parsed)
        return await translate_lines(served, request, parsed)

    @app.post("/translate/document")
    async def translate_document(request: Request) -> Response:
        """Translate one document, the body (`?format=` html, md, srt, txt or docx; the
        decoding options and a JSON `glossary` in the query too): the answer is the
        translated document, in its format."""
        return await document_route(served, request)

    @app.post("/corrections", openapi_extra={"requestBody": {"required": True, "content": {
        "application/json": {"schema": CorrectionRequest.model_json_schema()}}}})
    async def correct(request: Request) -> JSONResponse:
        """Keep a person's translation of a sentence in the pair's memory (mt serve
        --memory), committed before the answer: the next request for that sentence gets it."""
        return await correction_route(served, request)

    add_info_routes(app, served, info)
    compatible.add_routes(app)
    deepl.Api(served, deepl.Glossaries(state_dir)).add_routes(app)
    add_error_handlers(app)
    return RequestLog(app)


async def translate_lines(served: Served, request: Request, body: object) -> JSONResponse:
    """POST /translate: its lines whole, or as documents (mt.serve.documents.wanted). body:
    the JSON body, parsed."""
    try:
        client = served.access.client(request.headers, address(request))
        req = TranslateRequest.model_validate(body)
        pair = served.pairs.route(req.source, req.target, as_lines(req.text))
        options = {k: getattr(req, k) for k in OPTIONS if getattr(req, k) is not None}
        ask = Ask(as_lines(req.text), options, as_prefix(req.prefix, req.text), req.attention,
                  as_glossary(req.glossary), as_glossaries(req.glossaries, req.text),
                  req.format, req.split)
        found = await translate_asked(served, pair, client, ask, request)
    except ValidationError as e:
        return error(*validation_message(e))
    except ClientError as e:
        return error(e.status, str(e), e.headers)
    except MTError as e:  # a bad option value, an unknown tag: what --set would refuse
        return option_error(e)
    return JSONResponse({"translations": found})


async def document_route(served: Served, request: Request) -> Response:
    """POST /translate/document: the body, one document, translated in its format."""
    try:
        client = served.access.client(request.headers, address(request))
        query = DocumentQuery.model_validate(dict(request.query_params))
        pair = served.pairs.route(query.source, query.target)
        options = {k: getattr(query, k) for k in OPTIONS if getattr(query, k) is not None}
        glossary = as_glossary(documents.glossary_pairs(query.glossary))
        data = await read_body(request, served.limits, served.limits.max_file_bytes)
        done, sentences = await translate_file(served, pair, client, data, query.format,
                                               options, glossary, request)
    except ValidationError as e:
        return error(*validation_message(e, DocumentQuery, "query parameter"))
    except ClientError as e:
        return error(e.status, str(e), e.headers)
    except MTError as e:
        return option_error(e)
    headers = {"MT-Sentences": str(sentences)}
    if done.cut:
        headers["MT-Cut"] = str(done.cut)
    if done.notes:  # JSON: ASCII, as a header must be
        headers["MT-Notes"] = json.dumps(done.notes)
    body = done.data if done.data is not None else done.text.encode("utf-8")
    return Response(body, headers=headers, media_type=documents.content_type(query.format))


async def correction_route(served: Served, request: Request) -> JSONResponse:
    """POST /corrections: {"pair", "new"} once the correction is committed (new: false where
    the memory held that pair already)."""
    try:
        served.access.client(request.headers, address(request))
        try:
            body = json.loads(await read_body(request, served.limits))
        except (ValueError, UnicodeDecodeError) as e:
            return error(400, f"the body is not JSON ({e})")
        req = CorrectionRequest.model_validate(body)
        pair = served.pairs.route(req.source_lang, req.target_lang, [req.source])
        if pair.memory_thread is None:
            raise no_memory(pair.name, len(served.pairs.all) > 1)
        source, corrected = checked(req, served.limits.max_chars)
        try:
            new = await pair.memory_thread.save(source, corrected)
        except MTError as e:  # the memory's own line: damaged, locked past its wait, ...
            return error(503, f"the correction was not kept: {e}")
    except ValidationError as e:
        return error(*validation_message(e, CorrectionRequest))
    except ClientError as e:
        return error(e.status, str(e), e.headers)
    return JSONResponse({"pair": pair.name, "new": new})


# The command line's flags that are a request's fields, longest first (--glossary-mode before
# --glossary): a message written for the command line names them as flags.
FIELD_FLAGS = re.compile("(?:" + "|".join(sorted(
    (re.escape("--" + name.replace("_", "-")) for name in (*OPTIONS, "glossary", "prefix")),
    key=len, reverse=True)) + r")(?![\w-])")


def option_error(e: MTError) -> JSONResponse:
    """A 422 for what --set would refuse, named as the request names it: `beam`, not
    `decode.beam` nor `--beam`."""
    message = str(e).removeprefix("Translator options: ").replace("decode.", "")
    return error(422, FIELD_FLAGS.sub(lambda m: m[0][2:].replace("-", "_"), message))


def add_info_routes(app: FastAPI, served: Served, info: dict) -> None:
    """GET /health, GET /info and the page at GET /."""
    page = resources.files("mt.serve").joinpath("page.html").read_text(encoding="utf-8")

    @app.get("/health")
    async def health() -> dict:
        """ok, with what the batchers (one a pair) have translated and hold queued, and the
        corrections kept (with --memory)."""
        batchers = [p.batcher for p in served.pairs.all]
        kept = [p.memory_thread for p in served.pairs.all if p.memory_thread]
        more = {"corrections": sum(m.saved for m in kept)} if kept else {}
        return {"status": "ok", **{key: sum(getattr(b, attr) for b in batchers) for key, attr in (
            ("queued", "queued"), ("requests", "requests"), ("lines", "lines"),
            ("translator_calls", "calls"))}, **more}

    @app.get("/info")
    async def model_info(request: Request) -> JSONResponse:
        """What the model is (its name, languages, step, size; `mt info --json`'s object with
        `mt serve --full-info`), and "serve": decoding and limits; of several pairs, the first
        pair's, and "pairs": each pair's languages and model."""
        access, pairs = served.access, served.pairs
        try:
            access.client(request.headers, address(request))
        except ClientError as e:
            return error(e.status, str(e), e.headers)
        translator = pairs.default.translator
        more = {} if len(pairs.all) == 1 else {"pairs": [
            {"source": p.source, "target": p.target, **p.info, "memory": p.memory is not None}
            for p in pairs.all]}
        return JSONResponse({**info, **more, "serve": {
            "decode": dataclasses.asdict(translator.decoding), "options": list(OPTIONS),
            **dataclasses.asdict(served.limits), "lines_per_minute": access.lines_per_minute,
            "documents": DOCUMENT_EXTENSIONS,  # the page's upload: a file's format by its name
            "api_key": bool(access.keys), "attention": translator.model is not None,
            "memory": pairs.default.memory is not None}})  # corrections taken

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def index() -> HTMLResponse:
        return HTMLResponse(page)


def add_error_handlers(app: FastAPI) -> None:
    """Every error as JSON `{"error": "..."}`: HTTP's own, a request FastAPI refuses, a bug."""

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, e: HTTPException) -> JSONResponse:
        return error(e.status_code, f"{e.detail}: {request.method} {request.url.path}",
                     e.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, e: RequestValidationError) -> JSONResponse:
        return error(422, "; ".join(str(x.get("msg")) for x in e.errors()))

    @app.exception_handler(Exception)
    async def bug(request: Request, e: Exception) -> JSONResponse:
        # uvicorn logs the traceback (Starlette raises the exception again after this answer)
        return error(500, f"internal error ({type(e).__name__}): a bug in mt; the server's "
                          "log has the traceback")


def error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def as_lines(text: str | list[str]) -> list[str]:
    return [text] if isinstance(text, str) else text


def as_prefix(prefix: str | list[str] | None, text: str | list[str]) -> list[str] | None:
    """A prefix per line, shaped as text is: a string for a string, a list as long for a list."""
    if prefix is None:
        return None
    if isinstance(text, str) != isinstance(prefix, str) or len(as_lines(prefix)) != len(
            as_lines(text)):
        what = "a string" if isinstance(text, str) else f"a list of {len(text)} strings"
        raise ClientError(422, f"prefix: give one prefix per line of text: {what} (\"\" for "
                               "none)")
    return as_lines(prefix)


def as_glossaries(given: list | None, text: str | list[str]) -> list[Glossary | None] | None:
    """A glossary per line (None for none), as many as text has lines (a string: one); a
    ClientError (422) for another count, a DataError naming `glossaries[i]` for a bad one."""
    if given is None:
        return None
    lines = len(as_lines(text))
    if len(given) != lines:
        raise ClientError(422, f"glossaries: {len(given)} given; give one glossary per line "
                               f"of text ({lines}; null for none)")
    return [as_glossary(g, f"glossaries[{i}]") if g else None for i, g in enumerate(given)]


def validation_message(e: ValidationError, model: type[BaseModel] | None = None,
                       field_name: str = "field") -> tuple[int, str]:
    """422 and the first wrong field (of model: TranslateRequest if None): where (`text[2]`)
    and what is wrong with it (each way it could have been right, for a union)."""
    errors = e.errors()
    fields = ", ".join((model or TranslateRequest).model_fields)
    unknown = [x["loc"][0] for x in errors if x["type"] == "extra_forbidden"]
    if unknown:  # first: a misspelt field is also a missing one
        return 422, f"{unknown[0]}: unknown {field_name}; the {field_name}s are {fields}"
    field = errors[0]["loc"][0] if errors[0]["loc"] else None
    if field is None:  # not an object
        return 422, f"the body: not a JSON object; give one with the fields {fields}"
    hint = (model or TranslateRequest).model_fields[field].annotation
    if errors[0]["type"] == "missing" and typing.get_origin(hint) is typing.Literal:
        return 422, f"{field}: {errors[0]['msg']}; give one of {', '.join(typing.get_args(hint))}"
    mine = [x for x in errors if x["loc"] and x["loc"][0] == field]
    where = field + "".join(f"[{i}]" for x in mine[-1:] for i in x["loc"][1:] if isinstance(i, int))
    messages = list(dict.fromkeys(x["msg"] for x in mine))
    return 422, f"{where}: {' or '.join(messages)}"


class RequestLog:
    """ASGI middleware around the app: one line per request on stderr, `METHOD PATH | status |
    lines N | T ms` (N: the lines a translate request held), and the count of requests begun and
    answered, for the line the server ends with."""

    def __init__(self, app):
        self.app = app
        self.begun = self.answered = 0

    @property
    def in_flight(self) -> int:
        return self.begun - self.answered

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan
            return await self.app(scope, receive, send)
        start, status, done = time.perf_counter(), 500, False
        state = scope.setdefault("state", {})  # request.state: the endpoint puts "lines" there
        self.begun += 1

        async def sending(message) -> None:
            nonlocal status, done
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done = True

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            # uvicorn cancels what is not answered when the grace period after SIGTERM ends (a
            # client stalled half-way through its body, say): it gets a 503, if it can.
            if status == 500 and not done:
                await error(503, "the server is stopping; send the request again to another "
                                 "or later")(scope, receive, sending)
        finally:
            self.answered += done
            ms = (time.perf_counter() - start) * 1000
            print(f"{scope['method']} {scope['path']} | {status} | lines {state.get('lines', 0)} "
                  f"| {ms:.1f} ms", file=sys.stderr, flush=True)
