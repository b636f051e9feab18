"""mt/serve/forms.py: form bodies read with python-multipart: URL-encoded fields (a field
given twice is a list, `+` and percent escapes as UTF-8) and multipart parts (a file an
Upload); a body that is not the form its type says, or a field that is not UTF-8, is a 400."""

from __future__ import annotations

import logging

import pytest

from mt.serve.access import ClientError
from mt.serve.forms import Upload, read_form

FORM = "application/x-www-form-urlencoded"
BOUNDARY = "b0undary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def multipart(*parts: tuple[str, bytes, str | None]) -> bytes:
    """A multipart body of (name, data, filename or None) parts."""
    out = b""
    for name, data, filename in parts:
        more = f'; filename="{filename}"' if filename else ""
        out += (f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"{more}\r\n\r\n'
                .encode() + data + b"\r\n")
    return out + f"--{BOUNDARY}--\r\n".encode()


def test_a_url_encoded_form_keeps_each_fields_values_in_order():
    assert read_form(b"text=a+b&text=%C3%A9t%C3%A9&target_lang=DE&x=", FORM) == {
        "text": ["a b", "été"], "target_lang": ["DE"], "x": [""]}
    assert read_form(b"", FORM) == {}


def test_a_multipart_form_gives_fields_and_files():
    body = multipart(("source", b"en", None), ("q", "été".encode(), None),
                     ("file", b"<p>x</p>\r\n", "pé.html"))
    assert read_form(body, MULTIPART) == {"source": ["en"], "q": ["été"],
                                          "file": [Upload("pé.html", b"<p>x</p>\r\n")]}


@pytest.mark.parametrize("body, kind, needle", [
    (b"t=%FF", FORM, "not a URL-encoded form of UTF-8 text"),
    (b"t=\xff", FORM, "not a URL-encoded form of UTF-8 text"),
    (b"garbage", MULTIPART, "not a multipart form"),
    (multipart(("q", b"a", None)), "multipart/form-data", "not a multipart form"),  # no boundary
    (multipart(("q", b"a", None))[:-12], MULTIPART, "not a multipart form"),  # cut short
    (multipart(("q", b"\xff", None)), MULTIPART, "q: not UTF-8 text"),
])
def test_a_body_that_is_not_its_form_is_a_400(body, kind, needle, caplog):
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ClientError, match=needle) as e:
        read_form(body, kind)
    assert e.value.status == 400
    assert caplog.records == []  # the parser logs nothing: the request's one line says it
