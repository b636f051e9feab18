"""mt/serve/libretranslate.py: LibreTranslate's API, driven by its own client (libretranslatepy,
unchanged) over real HTTP on loopback against `mt serve` of two toy pairs (en-de and de-en):
its answers are mt's own endpoint's, with and without a key, in HTML, a file, and every error
in LibreTranslate's shape and status."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from benchmarks.bench_serve import Client, Served
from conftest import THREADS

libretranslatepy = pytest.importorskip("libretranslatepy")
KEY = "lt-key-1"
EN = ["Yesterday we saw forty two red dogs.", "Today you have eight cats."]
DE = ["Gestern sahen wir zwei und vierzig rote Hunde.", "Heute hast du acht Katzen."]


@pytest.fixture(scope="module")
def keyed(tiny_run, reverse_run, tmp_path_factory):
    keys = tmp_path_factory.mktemp("keys") / "keys.txt"
    keys.write_text(f"{KEY}\n", encoding="utf-8")
    with Served(None, "--model", f"en-de={tiny_run}", "--model", f"de-en={reverse_run}",
                "--api-key-file", str(keys), env=THREADS) as s:
        yield s
        assert s.stop() == 0, s.log[-10:]


def own(url: str, lines, source: str, target: str, **options) -> list[str]:
    """mt's own POST /translate's texts."""
    status, answer = Client(url).request("POST", "/translate", {
        "text": lines, "source": source, "target": target, **options},
        {"Authorization": f"Bearer {KEY}"})
    assert status == 200, answer
    return [t["text"] for t in answer["translations"]]


def post(url: str, path: str, fields: dict, form: bool = True) -> tuple[int, dict]:
    body = (urllib.parse.urlencode(fields) if form else json.dumps(fields)).encode()
    kind = "application/x-www-form-urlencoded" if form else "application/json"
    request = urllib.request.Request(url + path, body, {"Content-Type": kind})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_client_translates_both_pairs_as_mts_own_endpoint(keyed):
    lt = libretranslatepy.LibreTranslateAPI(keyed.url, api_key=KEY)
    for lines, source, target in ((EN, "en", "de"), (DE, "de", "en")):
        got = [lt.translate(line, source, target) for line in lines]
        assert got == own(keyed.url, lines, source, target)
    assert lt.translate(EN[1], "en", "de") != lt.translate(DE[1], "de", "en")
    assert lt.languages() == [{"code": "en", "name": "English", "targets": ["de"]},
                              {"code": "de", "name": "German", "targets": ["en"]}]


def test_the_client_detects_each_served_source(keyed):
    lt = libretranslatepy.LibreTranslateAPI(keyed.url, api_key=KEY)
    for lines, source, other in ((EN, "en", "de"), (DE, "de", "en")):
        for line in lines:
            ranked = lt.detect(line)
            assert [r["language"] for r in ranked] == [source, other], ranked
            assert ranked[0]["confidence"] > 50 > ranked[1]["confidence"]
    assert post(keyed.url, "/detect", {"q": EN[0]})[0] == 403  # the key, as /translate
    assert post(keyed.url, "/detect", {"api_key": KEY})[0] == 400


def test_a_list_html_alternatives_and_auto(keyed):
    status, answer = post(keyed.url, "/translate", {"q": EN, "source": "auto", "target": "de",
                                                    "api_key": KEY}, form=False)
    assert status == 200 and answer["translatedText"] == own(keyed.url, EN, "en", "de")
    assert answer["detectedLanguage"] == [{"confidence": 100.0, "language": "en"}] * 2
    page = "<p>Yesterday we saw <b>forty two</b> red dogs.</p>"
    status, answer = post(keyed.url, "/translate", {"q": page, "source": "en", "target": "de",
                                                    "format": "html", "api_key": KEY})
    assert status == 200
    assert answer["translatedText"] == own(keyed.url, page, "en", "de", format="html")[0]
    assert "<b>" in answer["translatedText"]
    status, answer = post(keyed.url, "/translate", {"q": EN[1], "source": "en", "target": "de",
                                                    "alternatives": 2, "api_key": KEY})
    assert status == 200 and len(answer["alternatives"]) == 2
    [best] = own(keyed.url, EN[1], "en", "de", beam=3, nbest=3)
    assert answer["translatedText"] == best and best not in answer["alternatives"]


def test_a_file_is_translated_and_downloaded(keyed):
    import uuid

    boundary = uuid.uuid4().hex
    page = b"<p>Yesterday we saw <b>forty two</b> red dogs.</p>\n"
    parts = [(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n')
             .encode() for k, v in (("source", "en"), ("target", "de"), ("api_key", KEY))]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                 f'filename="page.html"\r\nContent-Type: text/html\r\n\r\n'.encode() + page
                 + f"\r\n--{boundary}--\r\n".encode())
    request = urllib.request.Request(keyed.url + "/translate_file", b"".join(parts), {
        "Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        url = json.loads(response.read())["translatedFileUrl"]
    assert url.startswith(keyed.url + "/download_file/")
    with urllib.request.urlopen(url, timeout=300) as response:
        got = response.read().decode()
    assert got.strip() == own(keyed.url, page.decode().strip(), "en", "de", format="html")[0]


@pytest.mark.parametrize("fields, status, needle", [
    ({"q": "a", "source": "en", "target": "de"}, 403, "no API key"),
    ({"q": "a", "source": "en", "target": "de", "api_key": "wrong"}, 403, "a wrong API key"),
    ({"source": "en", "target": "de", "api_key": KEY}, 400, "missing q parameter"),
    ({"q": "a", "source": "en", "api_key": KEY}, 400, "missing target parameter"),
    ({"q": "a", "source": "fr", "target": "de", "api_key": KEY}, 400,
     "fr-de: a language pair this server does not translate; it translates en-de, de-en"),
    ({"q": "a", "source": "en", "target": "de", "format": "pdf", "api_key": KEY}, 400,
     "format 'pdf'"),
    ({"q": "a", "source": "en", "target": "de", "alternatives": "x", "api_key": KEY}, 400,
     "alternatives"),
    ({"q": "a", "source": "en", "target": "de", "qq": 1, "api_key": KEY}, 400,
     "unknown parameter qq"),
    ({"q": "a" * 20_001, "source": "en", "target": "de", "api_key": KEY}, 400,
     "20,001 characters"),
    # past the body's limit, read no further than it: LibreTranslate's 400, not mt's 413
    ({"source": "en", "target": "de", "q": "a" * 400_000, "api_key": KEY}, 400, "a body of"),
])
def test_bad_requests_get_libretranslates_error_shape(keyed, fields, status, needle):
    got, answer = post(keyed.url, "/translate", fields)
    assert got == status and list(answer) == ["error"] and needle in answer["error"], answer


def test_without_keys_one_run_serves_its_pair_and_the_limit_applies(tiny_run):
    with Served(tiny_run, "--lines-per-minute", "3", env=THREADS) as served:
        lt = libretranslatepy.LibreTranslateAPI(served.url)
        got = lt.translate(EN[0], "en", "de")
        auto = lt.translate(EN[0], "auto", "de")
        settings = json.loads(urllib.request.urlopen(served.url + "/frontend/settings").read())
        mine = Client(served.url).translate(EN[:1])  # the third line of this client's minute
        limited = post(served.url, "/translate", {"q": "a", "source": "en", "target": "de"})
        assert served.stop() == 0
    assert got == auto == mine[0]["text"]
    assert limited[0] == 429 and "lines a minute are used" in limited[1]["error"]
    assert settings["language"]["source"]["code"] == "en" and not settings["keyRequired"]



@pytest.mark.parametrize("fields, needle", [
    ({"q": 5, "target": "de"}, "q is a string or a list of strings"),
    ({"q": ["a", 5], "target": "de"}, "q is a string or a list of strings"),
    ({"q": [], "target": "de"}, "q is a string or a list of strings"),
    ({"q": "a", "target": 5}, "missing target parameter"),
    ({"q": "a", "source": 5, "target": "de"}, "source is a language code"),
    ({"q": "a", "target": "de", "alternatives": True}, "alternatives is a whole number"),
    ({"q": "a", "target": "de", "api_key": 5}, "api_key is not a string"),
    ({"q": ["a"] * 101, "target": "de"}, "101 lines, more than this server takes"),
    ({"q": "a" * 400_000, "target": "de"}, "a body of 400,"),
])
def test_bad_json_is_one_400_and_one_log_line(keyed, fields, needle):
    status, answer, log = keyed.logged(lambda: post(keyed.url, "/translate", {
        "api_key": KEY, **fields}, form=False))
    assert status == 400 and list(answer) == ["error"] and needle in answer["error"], answer
    assert [line.split(" | ")[:2] for line in log] == [["POST /translate", "400"]], log


@pytest.mark.parametrize("text", ['"q": 1 ' * 60_000, '\\"q": ' * 60_000])
def test_mts_own_body_past_the_limit_is_still_mts_413(keyed, text):
    """A text that holds `"q":` (its quotes escaped in the JSON) is no LibreTranslate key."""
    status, answer = Client(keyed.url).request("POST", "/translate", {"text": text},
                                               {"Authorization": f"Bearer {KEY}"})
    assert status == 413 and "a body of" in answer["error"], answer


def multipart_post(url: str, body: bytes, boundary: str = "b0undary") -> tuple[int, dict]:
    request = urllib.request.Request(url + "/translate_file", body, {
        "Content-Type": f"multipart/form-data; boundary={boundary}"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def form_parts(fields: dict, file: tuple[str, bytes] | None) -> bytes:
    parts = [(f'--b0undary\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n')
             .encode() for k, v in fields.items()]
    if file:
        parts.append(f'--b0undary\r\nContent-Disposition: form-data; name="file"; '
                     f'filename="{file[0]}"\r\n\r\n'.encode() + file[1] + b"\r\n")
    return b"".join(parts) + b"--b0undary--\r\n"


@pytest.mark.parametrize("body, needle", [
    (form_parts({"source": "en", "target": "de", "api_key": KEY}, ("a.pdf", b"%PDF-1.4")),
     "'a.pdf': a file of a format this server does not read"),
    (form_parts({"source": "en", "target": "de", "api_key": KEY}, None),
     "missing file parameter"),
    (form_parts({"source": "en", "target": "de", "api_key": KEY}, ("a.txt", b"a"))[:-14],
     "the body is not a multipart form"),
    (form_parts({"source": "en", "target": "fr", "api_key": KEY}, ("a.txt", b"a")),
     "en-fr: a language pair this server does not translate"),
])
def test_a_bad_file_request_is_one_400_and_one_log_line(keyed, body, needle):
    status, answer, log = keyed.logged(lambda: multipart_post(keyed.url, body))
    assert status == 400 and list(answer) == ["error"] and needle in answer["error"], answer
    assert [line.split(" | ")[:2] for line in log] == [["POST /translate_file", "400"]], log
