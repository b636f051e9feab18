"""HTML form bodies, as the compatible APIs' clients send them: `application/x-www-form-
urlencoded` (LibreTranslate's clients, DeepL's form requests; a field given several times, as
DeepL's `text`, is a list) and `multipart/form-data` (a file upload: /translate_file,
/v2/document). Read with the standard library, so that the serve extra needs nothing more."""

from __future__ import annotations

import email.parser
import email.policy
from dataclasses import dataclass
from urllib.parse import parse_qsl

from mt.serve.access import ClientError

FORM = "application/x-www-form-urlencoded"
MULTIPART = "multipart/form-data"


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
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))
    except (UnicodeDecodeError, ValueError):
        raise ClientError(400, "the body is not a URL-encoded form of UTF-8 text") from None
    fields: dict[str, list[str | Upload]] = {}
    for key, value in pairs:
        fields.setdefault(key, []).append(value)
    return fields


def _multipart(body: bytes, content_type: str) -> dict[str, list[str | Upload]]:
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart() or message.defects:
        raise ClientError(400, "the body is not a multipart form (multipart/form-data with "
                               "its boundary)")
    fields: dict[str, list[str | Upload]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name is None:
            continue
        data = part.get_payload(decode=True) or b""
        filename = part.get_filename()
        if filename is not None:
            fields.setdefault(name, []).append(Upload(filename, data))
            continue
        try:
            fields.setdefault(name, []).append(data.decode("utf-8"))
        except UnicodeDecodeError:
            raise ClientError(400, f"{name}: not UTF-8 text") from None
    return fields
