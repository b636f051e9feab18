"""DeepL's API v2, so that its official clients (`deepl.Translator(key, server_url=URL)`) and
the tools built on them (Weblate, CAT-tool plugins) use `mt serve`: /v2/translate (JSON or
form), /v2/languages, /v2/glossary-language-pairs, /v2/usage, /v2/glossaries (mt.serve.glossaries)
and /v2/document. The key comes as `Authorization: DeepL-Auth-Key KEY` (--api-key-file);
errors are DeepL's `{"message": "..."}` with its statuses: 400, 403 (no or a wrong key), 404 (a
glossary or document not found), 413, 429, 500.

The translations are mt's own (mt.serve.translating): each text is mt's `text`, split into
sentences (`split_sentences: 0`: whole); `tag_handling: html` is mt's `format: html`; a
glossary is mt's glossary for the line (beam at least 2: constrained search needs a beam).
Ignored, as DeepL's own servers ignore what they do not know: `preserve_formatting` (mt keeps
the text's whitespace anyway), `context`, `formality` `default` and `prefer_*`,
`outline_detection`, `model_type`, `show_billed_characters`. Refused (400): `tag_handling:
xml` (mt reads HTML), `formality: more|less`, a glossary of another pair. A document is
translated when it is uploaded: its status is `done` at once.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import secrets
from collections import Counter
from pathlib import PurePath

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from mt.errors import MTError
from mt.serve import documents
from mt.serve.access import ClientError
from mt.serve.forms import Upload, read_form
from mt.serve.glossaries import Glossaries, owner, parse_entries
from mt.serve.libretranslate import file_format
from mt.serve.pairs import language_name
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

STATUS = {401: 403, 422: 400, 501: 400}  # mt's statuses as DeepL answers them
REGIONS = {"en": ("EN-GB", "EN-US"), "pt": ("PT-BR", "PT-PT")}  # DeepL's target codes
CHARACTER_LIMIT = 10**12  # /v2/usage's limit: mt has no quota; DeepL's clients want a number


def failed(e: Exception) -> JSONResponse:
    """DeepL's error: `{"message": "..."}`, its status for mt's."""
    return compatible_error(e, "message", STATUS)


def base(code: str | None) -> str | None:
    """A DeepL language code as mt's pairs name it: EN-GB is en."""
    return code.split("-")[0].lower() if code else None


class Api:
    """DeepL's routes over a server's pairs, limits and keys, with its glossaries."""

    def __init__(self, served: Served, glossaries: Glossaries):
        self.served, self.glossaries = served, glossaries
        self.files = Finished()
        self.usage: Counter[str] = Counter()  # characters translated, per client

    async def fields(self, request: Request, most: int | None = None) -> dict[str, list]:
        """The query's and the body's fields (JSON, a form or a multipart form), each a list
        of its values (DeepL's `text` is repeated in a form)."""
        fields: dict[str, list] = {}
        for key, value in request.query_params.multi_items():
            fields.setdefault(key, []).append(value)
        body = await read_body(request, self.served.limits, most)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if not body:
            return fields
        if kind == "application/json":
            try:
                parsed = json.loads(body)
            except ValueError as e:
                raise ClientError(400, f"the body is not JSON ({e})") from None
            if not isinstance(parsed, dict):
                raise ClientError(400, "the body is not a JSON object")
            for key, value in parsed.items():
                fields[key] = value if isinstance(value, list) else [value]
            return fields
        for key, values in read_form(body, request.headers.get("content-type", "")).items():
            fields.setdefault(key, []).extend(values)
        return fields

    def client(self, request: Request) -> str:
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        return self.served.access.holder(key if scheme == "DeepL-Auth-Key" else None,
                                         address(request),
                                         "send the header `Authorization: DeepL-Auth-Key KEY`")

    def whose(self, client: str) -> str:
        return owner(client, bool(self.served.access.keys))

    async def translate(self, request: Request) -> JSONResponse:
        """POST /v2/translate."""
        try:
            client = self.client(request)
            fields = await self.fields(request)
            texts = fields.get("text") or []
            if not texts or not all(isinstance(t, str) for t in texts):
                raise ClientError(400, "text: give one text or more, each a string")
            source, target = languages(fields)
            pair = self.served.pairs.route(source, target, texts)
            ask = Ask(texts, {}, format=tagged(fields),
                      split=one(fields, "split_sentences") not in ("0", 0))
            check_formality(one(fields, "formality"))
            glossary_id = one(fields, "glossary_id")
            if glossary_id:
                self.use_glossary(ask, pair, client, str(glossary_id), source)
            found = await translate_lines(self.served, pair, client, ask, request)
        except (ClientError, MTError) as e:
            return failed(e)
        self.usage[client] += sum(map(len, texts))
        return JSONResponse({"translations": [
            {"detected_source_language": pair.source.upper(), "text": r["text"],
             "billed_characters": len(src)} for src, r in zip(texts, found)]})

    def use_glossary(self, ask: Ask, pair, client: str, glossary_id: str,
                     source: str | None) -> None:
        """ask with a stored glossary: its pair's, and the source language named (as DeepL
        asks)."""
        if source is None:
            raise ClientError(400, "glossary_id: give source_lang with a glossary")
        stored = self.glossaries.get(glossary_id, self.whose(client))
        if (stored.source_lang, stored.target_lang) != (pair.source, pair.target):
            raise ClientError(400, f"glossary {glossary_id}: made for {stored.source_lang}-"
                                   f"{stored.target_lang}, not {pair.name}")
        ask.glossary = stored.glossary()
        cfg = pair.translator.decoding
        if cfg.glossary_mode != "annotate" and cfg.beam < 2:  # constrained search needs beam
            ask.options["beam"] = 2

    async def upload(self, request: Request) -> JSONResponse:
        """POST /v2/document: a multipart `file`, translated now; its id and key."""
        served = self.served
        try:
            client = self.client(request)
            fields = await self.fields(request, served.limits.max_file_bytes)
            upload = next((v for v in fields.get("file", []) if isinstance(v, Upload)), None)
            if upload is None:
                raise ClientError(400, "file: missing; send the document as a multipart file")
            name = str(one(fields, "filename") or upload.filename)
            fmt = file_format(name)
            wanted = one(fields, "output_format")
            if wanted and file_format(f"x.{wanted}") != fmt:
                raise ClientError(400, f"output_format {wanted}: mt writes a document in its "
                                       "own format")
            source, target = languages(fields)
            pair = served.pairs.route(source, target)
            ask = Ask([], {})
            check_formality(one(fields, "formality"))
            if one(fields, "glossary_id"):
                self.use_glossary(ask, pair, client, str(one(fields, "glossary_id")), source)
            done, _ = await translate_file(served, pair, client, upload.data, fmt,
                                           ask.options, ask.glossary, request)
        except (ClientError, MTError) as e:
            return failed(e)
        characters = sum(len(src) for src, _ in done.sentences)
        self.usage[client] += characters
        data = done.data if done.data is not None else done.text.encode("utf-8")
        key = secrets.token_hex(32)
        document_id = self.files.put(Kept(PurePath(name).name, data,
                                          documents.content_type(fmt), key, characters))
        return JSONResponse({"document_id": document_id, "document_key": key})

    async def document(self, request: Request, document_id: str, result: bool) -> Response:
        """POST /v2/document/ID (its status) and /v2/document/ID/result (the file, once)."""
        try:
            self.client(request)
            fields = await self.fields(request)
            kept = self.files.get(document_id)
            key = str(one(fields, "document_key") or "")
            if kept is None or not hmac.compare_digest(key.encode(), kept.secret.encode()):
                raise ClientError(404, f"document {document_id!r} not found (or not with this "
                                       "document_key)")
        except (ClientError, MTError) as e:
            return failed(e)
        if not result:
            return JSONResponse({"document_id": document_id, "status": "done",
                                 "billed_characters": kept.characters})
        del self.files.files[document_id]  # DeepL's result is downloaded once
        return Response(kept.data, media_type=kept.media_type)

    def add_routes(self, app: FastAPI) -> None:
        add_glossary_routes(app, self)
        served, tags = self.served, ["DeepL"]

        @app.post("/v2/translate", tags=tags)
        async def translate(request: Request) -> JSONResponse:
            """DeepL's text translation: text (one or more), target_lang, source_lang,
            tag_handling, split_sentences, glossary_id."""
            return await self.translate(request)

        @app.api_route("/v2/languages", methods=["GET", "POST"], tags=tags)
        async def languages(request: Request) -> Response:
            """The source languages served, or (`type=target`) the targets."""
            try:
                self.client(request)
                kind = one(await self.fields(request), "type") or "source"
            except ClientError as e:
                return failed(e)
            if kind == "source":
                return JSONResponse([{"language": s.upper(), "name": language_name(s)}
                                     for s in served.pairs.sources()])
            codes = [c for t in served.pairs.targets() for c in REGIONS.get(t, (t.upper(),))]
            return JSONResponse([{"language": c, "name": language_name(c),
                                  "supports_formality": False} for c in codes])

        @app.api_route("/v2/usage", methods=["GET", "POST"], tags=tags)
        async def usage(request: Request) -> Response:
            """The characters this key has had translated since the server started."""
            try:
                client = self.client(request)
            except ClientError as e:
                return failed(e)
            return JSONResponse({"character_count": self.usage[client],
                                 "character_limit": CHARACTER_LIMIT})

        @app.post("/v2/document", tags=tags)
        async def upload(request: Request) -> JSONResponse:
            """DeepL's document translation: a multipart `file` (.txt, .html, .docx, ...)."""
            return await self.upload(request)

        @app.post("/v2/document/{document_id}", tags=tags)
        async def status(request: Request, document_id: str) -> Response:
            return await self.document(request, document_id, result=False)

        @app.post("/v2/document/{document_id}/result", tags=tags)
        async def result(request: Request, document_id: str) -> Response:
            return await self.document(request, document_id, result=True)


def add_glossary_routes(app: FastAPI, api: Api) -> None:
    """/v2/glossaries: create, list, get, entries, delete; /v2/glossary-language-pairs."""
    glossaries, served, tags = api.glossaries, api.served, ["DeepL"]

    @app.get("/v2/glossary-language-pairs", tags=tags)
    async def pairs(request: Request) -> Response:
        try:
            api.client(request)
        except ClientError as e:
            return failed(e)
        return JSONResponse({"supported_languages": [
            {"source_lang": p.source, "target_lang": p.target} for p in served.pairs.all]})

    @app.post("/v2/glossaries", tags=tags)
    async def create(request: Request) -> Response:
        """A glossary from `entries` (entries_format tsv or csv) for a served pair."""
        try:
            client = api.client(request)
            fields = await api.fields(request)
            name = one(fields, "name")
            if not name or not isinstance(name, str):
                raise ClientError(400, "name: missing; give the glossary a name")
            source, target = languages(fields)
            if source is None:  # a glossary is for one pair: DeepL asks for both
                raise ClientError(400, "source_lang: missing; give the glossary's source "
                                       "language")
            pair = served.pairs.route(source, target)
            entries = one(fields, "entries")
            if not isinstance(entries, str):
                raise ClientError(400, "entries: give the entries as text")
            parsed = parse_entries(entries, str(one(fields, "entries_format") or "tsv"))
            stored = await asyncio.to_thread(glossaries.add, name, pair.source, pair.target,
                                             parsed, api.whose(client))
        except (ClientError, MTError) as e:
            return failed(e)
        return JSONResponse(stored.info(), 201)

    @app.get("/v2/glossaries", tags=tags)
    async def listed(request: Request) -> Response:
        try:
            client = api.client(request)
        except ClientError as e:
            return failed(e)
        return JSONResponse({"glossaries": [g.info() for g in glossaries.mine(
            api.whose(client))]})

    @app.api_route("/v2/glossaries/{glossary_id}", methods=["GET", "DELETE"], tags=tags)
    async def one_glossary(request: Request, glossary_id: str) -> Response:
        try:
            whose = api.whose(api.client(request))
            if request.method == "GET":
                return JSONResponse(glossaries.get(glossary_id, whose).info())
            await asyncio.to_thread(glossaries.delete, glossary_id, whose)
        except (ClientError, MTError) as e:
            return failed(e)
        return Response(status_code=204)

    @app.get("/v2/glossaries/{glossary_id}/entries", tags=tags)
    async def entries(request: Request, glossary_id: str) -> Response:
        try:
            stored = glossaries.get(glossary_id, api.whose(api.client(request)))
        except ClientError as e:
            return failed(e)
        return Response(stored.tsv(), media_type="text/tab-separated-values; charset=utf-8")


def one(fields: dict[str, list], name: str):
    """A field's value (its last), or None."""
    values = fields.get(name)
    return values[-1] if values else None


def languages(fields: dict[str, list]) -> tuple[str | None, str]:
    """source_lang (None if not given) and target_lang as mt's pairs name them; a 400 for a
    target missing, or a code that is not a string."""
    codes = [one(fields, name) for name in ("source_lang", "target_lang")]
    for name, code in zip(("source_lang", "target_lang"), codes):
        if code is not None and not isinstance(code, str):
            raise ClientError(400, f"{name}: give a language code, such as DE or EN-GB")
    if not codes[1]:
        raise ClientError(400, "target_lang: missing; give a target language")
    return base(codes[0]), base(codes[1])


def tagged(fields: dict[str, list]) -> str:
    """mt's format for `tag_handling`: html is mt's HTML; xml is refused (mt reads HTML)."""
    handling = one(fields, "tag_handling")
    if handling in (None, ""):
        return "text"
    if handling == "html":
        return "html"
    raise ClientError(400, f"tag_handling {handling!r}: this server reads html (mt's HTML "
                           "path), not xml")


def check_formality(formality) -> None:
    if formality in ("more", "less"):
        raise ClientError(400, f"formality {formality!r}: this server's models have no "
                               "formality; leave it out or give prefer_more, prefer_less")
