"""LibreTranslate's API, so that its clients (libretranslatepy, Weblate, Discourse, Nextcloud,
browser extensions) use `mt serve` given its base URL: POST /translate (told from mt's own by
its shape: a form, or JSON with `q`), GET /languages, POST /detect, POST /translate_file with
GET /download_file, and GET /frontend/settings. Answers and errors in LibreTranslate's shapes:
`{"translatedText": ...}`, `{"error": "..."}` with 400 (a bad request, a pair not served, a
request over the limits), 403 (no or a wrong `api_key`), 429 (--lines-per-minute) and 500.

The translations are mt's own (mt.serve.translating): `q` is what mt's `text` is, split into
sentences; `format: html` is mt's `format: html`; `alternatives: N` is mt's nbest N+1 (beam at
least N+1), each line then translated whole. /detect and `source: auto` among several pairs into
the target identify the language with mt.serve.detect. Not here: /suggest.
"""

from __future__ import annotations

import json
import re
from pathlib import PurePath

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from mt.document.formats import extensions
from mt.errors import MTError
from mt.serve import documents
from mt.serve.access import ClientError
from mt.serve.forms import Upload, is_form, read_form
from mt.serve.pairs import AUTO, language_name
from mt.serve.translating import (
    Ask,
    Finished,
    Kept,
    Served,
    address,
    compatible_error,
    read_body,
    translate_file,
    translate_lines,
)

FORMATS = ("text", "html")  # LibreTranslate's `format`
STATUS = {401: 403, 413: 400, 422: 400}  # mt's statuses as LibreTranslate answers them
FIELDS = {"q", "source", "target", "format", "alternatives", "api_key"}
DOCUMENT_EXTENSIONS = extensions()


# A key "q" in JSON, wherever the body was cut: a quote not escaped (no backslash before it, or
# an even run of them), q, a quote, a colon. Inside a JSON string every quote is escaped, so this
# is a key; mt's own request has none named q.
Q_KEY = re.compile(rb'(?<!\\)(?:\\\\)*"q"\s*:')


def asks(head: bytes, content_type: str) -> bool:
    """Whether a body too large to read whole (its head: the bytes read) was LibreTranslate's
    request: a form, or JSON with a key `q`. (A whole body is told by its parsed shape, in
    mt.serve.app.)"""
    return is_form(content_type) or Q_KEY.search(head) is not None


def fields_of(body: bytes, content_type: str) -> dict:
    """A request's fields: a JSON object's, or a form's (form_fields); a 400 for neither."""
    try:
        parsed = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        if not is_form(content_type):
            raise ClientError(400, "Invalid request: the body is neither JSON nor a form") from None
        return form_fields(body, content_type)
    if not isinstance(parsed, dict):
        raise ClientError(400, "Invalid request: the body is not a JSON object")
    return parsed


def form_fields(body: bytes, content_type: str) -> dict:
    """A form's fields, each field's last value."""
    return {k: v[-1] for k, v in read_form(body, content_type).items()}


def failed(e: Exception) -> JSONResponse:
    """LibreTranslate's error: `{"error": "..."}`, its status for mt's."""
    return compatible_error(e, "error", STATUS)


class Api:
    """LibreTranslate's routes over a server's pairs, limits and keys."""

    def __init__(self, served: Served):
        self.served, self.files = served, Finished()

    def client(self, request: Request, fields: dict) -> str:
        key = fields.get("api_key")
        if not isinstance(key, (str, type(None))):
            raise ClientError(400, "Invalid request: api_key is not a string")
        if not key:  # a key in the header, as mt's own API takes it
            return self.served.access.client(request.headers, address(request))
        return self.served.access.holder(key, address(request), "give api_key")

    async def translate(self, request: Request, fields: dict | bytes) -> JSONResponse:
        """POST /translate: q (a string or a list), source, target, format, alternatives.
        fields: the JSON body's object, parsed once by the route (mt.serve.app), or a form's
        body, read here."""
        try:
            if isinstance(fields, bytes):
                fields = form_fields(fields, request.headers.get("content-type", ""))
            client = self.client(request, fields)
            q, fmt, alternatives = checked(fields)
            lines = [q] if isinstance(q, str) else q
            source = fields.get("source") or AUTO
            pair, confidence = self.served.pairs.routed(source, fields.get("target"), lines)
            options = {}
            if alternatives:
                beam = max(pair.translator.decoding.beam, alternatives + 1)
                options = {"nbest": alternatives + 1, "beam": beam}
            found = await translate_lines(self.served, pair, client,
                                          Ask(lines, options, format=fmt), request)
        except (ClientError, MTError) as e:
            return failed(e)
        texts = [r["text"] for r in found]
        answer = {"translatedText": texts[0] if isinstance(q, str) else texts}
        if alternatives:
            more = [[n["text"] for n in r["nbest"][1:]] for r in found]
            answer["alternatives"] = more[0] if isinstance(q, str) else more
        if source.lower() == AUTO:  # identified in the text, or the one pair into target
            detected = {"confidence": 100.0 if confidence is None else confidence,
                        "language": pair.source}
            answer["detectedLanguage"] = detected if isinstance(q, str) else [detected] * len(q)
        return JSONResponse(answer)

    async def detect(self, request: Request) -> JSONResponse:
        """POST /detect: q's language among the served sources, with its confidence (0 to
        100), and the others after it."""
        try:
            body = await read_body(request, self.served.limits)
            fields = fields_of(body, request.headers.get("content-type", ""))
            self.client(request, fields)
            q = fields.get("q")
            if not q or not isinstance(q, (str, list)) or not all(
                    isinstance(x, str) for x in ([q] if isinstance(q, str) else q)):
                raise ClientError(400, "Invalid request: missing q parameter (a string)")
            identifier = self.served.pairs.identifier
            ranked = identifier.rank(q if isinstance(q, str) else "\n".join(q))
            if not ranked:
                unknown = sorted(set(identifier.languages) - set(identifier.known()))
                raise ClientError(400, f"Invalid request: {', '.join(unknown)}: served, but not "
                                       "a language this server can identify")
        except ClientError as e:
            return failed(e)
        return JSONResponse([{"confidence": c, "language": code} for code, c in ranked])

    async def translate_file(self, request: Request) -> JSONResponse:
        """POST /translate_file: a multipart form's `file`, source, target, api_key; the
        answer is where to download the translated file."""
        served = self.served
        try:
            body = await read_body(request, served.limits, served.limits.max_file_bytes)
            fields = form_fields(body, request.headers.get("content-type", ""))
            client = self.client(request, fields)
            upload = fields.get("file")
            if not isinstance(upload, Upload):
                raise ClientError(400, "Invalid request: missing file parameter")
            fmt = file_format(upload.filename)
            pair = served.pairs.route(fields.get("source") or AUTO, fields.get("target"))
            done, _ = await translate_file(served, pair, client, upload.data, fmt, {},
                                           request=request)
        except (ClientError, MTError) as e:
            return failed(e)
        data = done.data if done.data is not None else done.text.encode("utf-8")
        name = self.files.put(Kept(PurePath(upload.filename).name, data,
                                   documents.content_type(fmt)))
        return JSONResponse({"translatedFileUrl": f"{request.base_url}download_file/{name}"})

    def add_routes(self, app: FastAPI) -> None:
        """Its routes but POST /translate, which mt's own shares (mt.serve.app)."""
        served, files = self.served, self.files

        @app.api_route("/languages", methods=["GET", "POST"], tags=["LibreTranslate"])
        async def languages() -> list[dict]:
            """Each source language served, with the targets it is translated into."""
            return [{"code": s, "name": language_name(s), "targets": served.pairs.targets(s)}
                    for s in served.pairs.sources()]

        @app.post("/translate_file", tags=["LibreTranslate"])
        async def translate_file(request: Request) -> JSONResponse:
            """LibreTranslate's file translation: a multipart `file` (.txt, .html, .md, .srt,
            .docx), source, target."""
            return await self.translate_file(request)

        @app.post("/detect", tags=["LibreTranslate"])
        async def detect(request: Request) -> JSONResponse:
            """The language of `q` among the served sources (py3langid)."""
            return await self.detect(request)

        @app.get("/download_file/{name}", tags=["LibreTranslate"])
        async def download_file(name: str) -> Response:
            kept = files.get(name)
            if kept is None:
                return JSONResponse({"error": "Invalid filename"}, 400)
            return Response(kept.data, media_type=kept.media_type, headers={
                "Content-Disposition": f'attachment; filename="{ascii_name(kept.filename)}"'})

        @app.get("/frontend/settings", tags=["LibreTranslate"])
        async def settings() -> dict:
            """What LibreTranslate's own page and its clients read of a server."""
            default = served.pairs.default
            return {"charLimit": served.limits.max_chars, "frequencyLimit": -1,
                    "suggestions": False, "filesTranslation": True,
                    "supportedFilesFormat": sorted(DOCUMENT_EXTENSIONS),
                    "apiKeys": bool(served.access.keys),
                    "keyRequired": bool(served.access.keys),
                    "language": {"source": {"code": default.source,
                                            "name": language_name(default.source)},
                                 "target": {"code": default.target,
                                            "name": language_name(default.target)}}}


def checked(fields: dict) -> tuple[str | list[str], str, int]:
    """q, format and alternatives of a request, or a 400 ClientError saying what is wrong."""
    unknown = sorted(set(fields) - FIELDS)
    if unknown:
        raise ClientError(400, f"Invalid request: unknown parameter {unknown[0]}; the "
                               f"parameters are {', '.join(sorted(FIELDS))}")
    q = fields.get("q")
    if q is None or q == "":
        raise ClientError(400, "Invalid request: missing q parameter")
    if not isinstance(q, str) and not (isinstance(q, list) and q
                                       and all(isinstance(x, str) for x in q)):
        raise ClientError(400, "Invalid request: q is a string or a list of strings")
    if not fields.get("target") or not isinstance(fields["target"], str):
        raise ClientError(400, "Invalid request: missing target parameter")
    if not isinstance(fields.get("source") or "", str):
        raise ClientError(400, "Invalid request: source is a language code")
    fmt = fields.get("format") or "text"
    if fmt not in FORMATS:
        raise ClientError(400, f"Invalid request: format {fmt!r}; give text or html")
    alternatives = fields.get("alternatives") or 0
    try:
        alternatives = int(alternatives)
    except (TypeError, ValueError):
        alternatives = -1
    if not 0 <= alternatives <= 32 or isinstance(fields.get("alternatives"), (bool, float)):
        raise ClientError(400, "Invalid request: alternatives is a whole number from 0 to 32")
    return q, fmt, alternatives


def file_format(filename: str) -> str:
    """A file's format by its extension, or a 400 naming those there are."""
    found = DOCUMENT_EXTENSIONS.get(PurePath(filename).suffix.lower())
    if found is None:
        raise ClientError(400, f"Invalid request: {PurePath(filename).name!r}: a file of a "
                               f"format this server does not read; give one of "
                               f"{', '.join(sorted(DOCUMENT_EXTENSIONS))}")
    return found


def ascii_name(filename: str) -> str:
    return "".join(c if c.isascii() and c.isprintable() and c not in '"\\' else "_"
                   for c in filename) or "translated"
