"""HTML form bodies, as the compatible APIs' clients send them: `application/x-www-form-
urlencoded` (LibreTranslate's clients, DeepL's form requests; a field given several times, as
DeepL's `text`, is a list) and `multipart/form-data` (a file upload: /translate_file,
/v2/document). Parsed by python-multipart, the parser Starlette's own `request.form()` uses,
over a body already read within the server's limits (mt.serve.translating.read_body); only
the fields are gathered here, so that a field that is not UTF-8 is refused, not guessed at."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from python_multipart import MultipartParser, QuerystringParser
from python_multipart.exceptions import FormParserError
from python_multipart.multipart import parse_options_header

from mt.serve.access import ClientError

FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"
NOT_MULTIPART = "the body is not a multipart form (multipart/form-data with its boundary)"
# The parsers' own logger, silenced: they log what they refuse, and the request's one log line
# and its 400 already say it (a second line per request would break the log's shape).
QUIET = logging.Logger("mt.serve.forms", logging.CRITICAL + 1)


@dataclass
class Upload:
    """A file of a multipart form: its name as the client gave it, and its bytes."""

    filename: str
    data: bytes


def is_form(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() in (FORM, MULTIPART)


def read_form(body: bytes, content_type: str) -> dict[str, list[str | Upload]]:
    """Each field's values, in order; a 400 ClientError for a body that is not the form its
    content type says."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == MULTIPART:
        return _multipart(body, content_type)
    fields: dict[str, list[str | Upload]] = {}
    name, value = bytearray(), bytearray()

    def end() -> None:
        try:
            key, text = (unquote_to_bytes(bytes(b).replace(b"+", b" ")).decode("utf-8")
                         for b in (name, value))
        except UnicodeDecodeError:
            raise ClientError(400, "the body is not a URL-encoded form of UTF-8 text") from None
        fields.setdefault(key, []).append(text)

    parser = QuerystringParser({
        "on_field_start": lambda: (name.clear(), value.clear()),
        "on_field_name": lambda data, start, stop: name.extend(data[start:stop]),
        "on_field_data": lambda data, start, stop: value.extend(data[start:stop]),
        "on_field_end": end}, strict_parsing=True)
    parser.logger = QUIET
    try:
        parser.write(body)
        parser.finalize()
    except FormParserError:  # a field without `=`: not a form
        raise ClientError(400, "the body is not a URL-encoded form of UTF-8 text") from None
    return fields


def _multipart(body: bytes, content_type: str) -> dict[str, list[str | Upload]]:
    boundary = parse_options_header(content_type)[1].get(b"boundary")
    if not boundary:
        raise ClientError(400, NOT_MULTIPART)
    parts: list[tuple[list[tuple[bytes, bytes]], bytearray]] = []
    header, ended = [bytearray(), bytearray()], []
    parser = MultipartParser(boundary, {
        "on_part_begin": lambda: parts.append(([], bytearray())),
        "on_part_data": lambda data, start, stop: parts[-1][1].extend(data[start:stop]),
        "on_header_field": lambda data, start, stop: header[0].extend(data[start:stop]),
        "on_header_value": lambda data, start, stop: header[1].extend(data[start:stop]),
        "on_header_end": lambda: (parts[-1][0].append((bytes(header[0]).lower(),
                                                       bytes(header[1]))),
                                  header[0].clear(), header[1].clear()),
        "on_end": lambda: ended.append(True)})
    parser.logger = QUIET
    try:
        parser.write(body)
        parser.finalize()
    except FormParserError:
        raise ClientError(400, NOT_MULTIPART) from None
    if not ended:  # the parser does not check that the body reached its closing boundary
        raise ClientError(400, NOT_MULTIPART)
    fields: dict[str, list[str | Upload]] = {}
    for headers, data in parts:
        options = parse_options_header(dict(headers).get(b"content-disposition"))[1]
        try:
            name = options[b"name"].decode("utf-8") if b"name" in options else None
            filename = options[b"filename"].decode("utf-8") if b"filename" in options else None
        except UnicodeDecodeError:
            raise ClientError(400, "a part's name: not UTF-8 text") from None
        if name is None:
            continue
        if filename is not None:
            fields.setdefault(name, []).append(Upload(filename, bytes(data)))
            continue
        try:
            fields.setdefault(name, []).append(bytes(data).decode("utf-8"))
        except UnicodeDecodeError:
            raise ClientError(400, f"{name}: not UTF-8 text") from None
    return fields
