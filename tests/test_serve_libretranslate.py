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
