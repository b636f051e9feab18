"""mt/serve/app.py: the HTTP side of `mt serve`. In this process on a stand-in translator: a
slow translation holds up no other answer, and a bug is a JSON 500. Over real HTTP on loopback
against `mt serve` on the tiny model: the translations (equal to `mt translate --format
jsonl`'s), prefixes, attention, every error status with its JSON body, concurrent clients,
/health, /info and the page, and the request log."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import re
import socket
import threading
import time
import urllib.request
from types import SimpleNamespace
from urllib.parse import quote, urlsplit

import pytest
from test_serve_batcher import Upper

from benchmarks.bench_serve import Client, Served, make_plans, send_all
from conftest import THREADS, TOY, TWO_LINES
from mt.config import Config, DecodeConfig
from mt.document.formats import extensions
from mt.translator import Translator
from mt.vocab import SPECIALS, Vocab


class Slow(Upper):
    """Upper taking its time, with what the app asks of a Translator; the line "bug" fails as a
    bug in mt would."""

    decoding, model = DecodeConfig(), None
    # a paragraph's language, no sentence starters, a vocabulary with digits; its bound
    run = SimpleNamespace(cfg=Config(), starters=[], src_vocab=Vocab([*SPECIALS, "7"]),
                          checkpoint=None, step=0)
    max_src = 256

    def check_options(self, attention=False, **options) -> DecodeConfig:
        return self.decoding

    def translate_nbest(self, lines, prefix=None, *, attention=False, glossary=None, **options):
        time.sleep(1.5)
        if lines == ["bug"]:
            raise RuntimeError("a bug")
        return super().translate_nbest(lines, prefix, attention=attention, glossary=glossary,
                                       **options)


@contextlib.contextmanager
def serving(app):
    """app on uvicorn in a thread, on a free loopback port: its URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    while not server.started:
        assert thread.is_alive()
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join()


@pytest.mark.slow  # sleeps through two slow translations
def test_a_slow_translation_does_not_hold_up_the_other_answers_and_a_bug_is_a_json_500():
    from mt.serve.app import Limits, create_app

    with serving(create_app(Slow(), {"path": "slow"}, Limits(), wait_ms=0)) as url:
        found = []
        slow = threading.Thread(target=lambda: found.append(Client(url).translate(["a"])))
        slow.start()
        time.sleep(0.3)  # the worker is in translate_nbest now
        start = time.perf_counter()
        assert Client(url).request("GET", "/health")[0] == 200
        assert Client(url).request("GET", "/info")[1]["path"] == "slow"
        assert time.perf_counter() - start < 1.0 and slow.is_alive()
        slow.join()
        assert found == [[{"src": "a", "text": "A", "score": -1.0}]]
        status, answer = Client(url).request("POST", "/translate", {"text": "bug"})
    assert status == 500 and answer == {"error": "internal error (RuntimeError): a bug in mt; "
                                                 "the server's log has the traceback"}


LINES = [*TWO_LINES.splitlines(), "", "Today you have eight cats.",
         "The doctor wrote three hundred ninety nine letters."]


MAX_CHARS = 1000


@pytest.fixture(scope="module")
def served(tiny_run):
    with Served(tiny_run, "--max-lines", "8", "--max-chars", str(MAX_CHARS),
                "--batch-wait-ms", "20", env=THREADS) as s:
        yield s
        assert s.stop() == 0, s.log[-20:]
        assert re.match(r"stopped: answered (\d+) of \1 request\(s\)$", s.log[-1]), s.log[-3:]


def jsonl(cli, run, tmp_path, *options: str, lines=LINES) -> list[dict]:
    """`mt translate RUN --format jsonl OPTIONS` of lines: one object per line."""
    src = tmp_path / "src.txt"
    src.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    r = cli("translate", run, "-i", src, "--format", "jsonl", "--device", "cpu", *options)
    assert r.code == 0, r.err
    return [json.loads(line) for line in r.out.splitlines()]


def assert_same(got: list[dict], want: list[dict]) -> None:
    """The same records: text, source, alignments and n-best lists alike, scores to 1e-4."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.keys() == w.keys(), (g, w)
        assert g["score"] == pytest.approx(w["score"], abs=1e-4)
        for key in g.keys() - {"score", "nbest"}:
            assert g[key] == w[key], key
        if "nbest" in w:
            assert_same(g["nbest"], w["nbest"])


def test_a_glossary_per_request_as_mt_translate_keeps_it(served, tiny_run, cli, tmp_path):
    glossary = [["cats", "Hunde"], ["letters", "Vögel"]]
    got = Client(served.url).translate(LINES, beam=3, glossary=glossary)
    g = tmp_path / "g.tsv"
    g.write_text("".join(f"{s}\t{t}\n" for s, t in glossary), encoding="utf-8")
    assert_same(got, jsonl(cli, tiny_run, tmp_path, "--beam", "3", "--glossary", g))
    assert [t["terms"] for t in got][3:] == [[["cats", "Hunde"]], [["letters", "Vögel"]]]
    assert "Hunde" in got[3]["text"] and got[3]["missing"] == []


def test_a_glossary_per_line_as_mt_translate_reads_records(served, tiny_run, cli, tmp_path):
    base = [["letters", "Vögel"], ["cats", "Hunde"]]
    own = [[["dogs", "Vögel"]], None, None, [["cats", "Autos"], ["have", "Katzen"]], None]
    got = Client(served.url).translate(LINES, beam=3, split=False, glossary=base,
                                       glossaries=own)
    g, src = tmp_path / "g.tsv", tmp_path / "in.jsonl"
    g.write_text("".join(f"{s}\t{t}\n" for s, t in base), encoding="utf-8")
    src.write_text("".join(json.dumps({"src": line, "glossary": o}) + "\n"
                           for line, o in zip(LINES, own)), encoding="utf-8")
    r = cli("translate", tiny_run, "--input-format", "jsonl", "-i", src, "--format", "jsonl",
            "--beam", "3", "--glossary", g)
    assert r.code == 0, r.err
    assert_same(got, [json.loads(line) for line in r.out.splitlines()])
    assert got[3]["terms"] == [["have", "Katzen"], ["cats", "Autos"]]
    # split into sentences (the default), a line's glossary holds for each of its sentences
    [split] = Client(served.url).translate([f"{LINES[0]} {LINES[0]}"], beam=3,
                                           glossaries=[[["dogs", "Vögel"]]])
    assert split["text"].count("Vögel") == 2 and split["terms"] == [["dogs", "Vögel"]]
    [plain] = Client(served.url).translate(LINES[:1], beam=3, glossaries=[None])
    assert "terms" not in plain and "Vögel" not in plain["text"]


def post_file(url: str, query: str, data: bytes) -> tuple[int, http.client.HTTPResponse, bytes]:
    """POST /translate/document?query with data as the body: status, response, body."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=300)
    try:
        connection.request("POST", f"/translate/document?{query}", data)
        response = connection.getresponse()
        return response.status, response, response.read()
    finally:
        connection.close()


def test_a_document_comes_back_as_mt_translate_writes_it(served, tiny_run, cli, tmp_path):
    docx = pytest.importorskip("docx")
    d = docx.Document()
    p = d.add_paragraph("Yesterday we saw ")
    p.add_run("forty two").bold = True
    p.add_run(" red dogs. Today you have eight cats.")
    src, out = tmp_path / "in.docx", tmp_path / "out.docx"
    d.save(src)
    status, response, body = post_file(served.url, "format=docx&beam=3", src.read_bytes())
    assert status == 200, body
    assert response.getheader("Content-Type").startswith("application/vnd.openxmlformats")
    assert response.getheader("MT-Sentences") == "2"
    r = cli("translate", tiny_run, "-i", src, "-o", out, "--doc-format", "docx", "--beam", "3")
    assert r.code == 0, r.err
    got, want = docx.Document(io.BytesIO(body)), docx.Document(out)
    assert [(x.text, x.bold) for x in got.paragraphs[0].runs] == \
        [(x.text, x.bold) for x in want.paragraphs[0].runs]
    assert any(x.bold for x in got.paragraphs[0].runs)
    page, g, html = tmp_path / "in.html", tmp_path / "g.tsv", tmp_path / "out.html"
    page.write_text("<p>Yesterday we saw <b>forty two</b> red dogs.</p>\n", encoding="utf-8")
    g.write_text("dogs\tVögel\n", encoding="utf-8")
    glossary = quote(json.dumps([["dogs", "Vögel"]]))
    status, response, body = post_file(served.url, f"format=html&beam=3&glossary={glossary}",
                                       page.read_bytes())
    assert status == 200 and response.getheader("Content-Type") == "text/html; charset=utf-8"
    r = cli("translate", tiny_run, "-i", page, "-o", html, "--format", "html", "--beam", "3",
            "--glossary", g)
    assert r.code == 0 and body.decode() == html.read_text(encoding="utf-8")
    assert "Vögel" in body.decode()


def test_a_docx_zip_bomb_is_a_422_and_the_server_goes_on(served):
    pytest.importorskip("docx")
    from zip_bombs import bomb_docx

    status, _, body = post_file(served.url, "format=docx", bomb_docx(30 << 20))  # 65 KB
    assert status == 422, body
    assert "document: its part word/document.xml inflates" in json.loads(body)["error"]
    assert Client(served.url).request("GET", "/health")[0] == 200


def test_html_nested_too_deep_is_a_422_from_both_endpoints(served):
    deep = "<p>" + "<b>" * 101 + "dogs" + "</b>" * 101 + "</p>"  # under --max-chars
    status, answer = Client(served.url).request("POST", "/translate",
                                                {"text": deep, "format": "html"})
    assert status == 422 and "text[0]:1: <b> nests inline elements 101 deep" in answer["error"]
    status, _, body = post_file(served.url, "format=html", deep.encode())
    assert status == 422 and "document:1: <b> nests" in json.loads(body)["error"], body


@pytest.mark.parametrize("options, flags", [
    ({}, []),
    ({"beam": 3, "nbest": 2, "length_penalty": 1.0}, ["--beam", "3", "--nbest", "2",
                                                      "--length-penalty", "1.0"]),
    ({"align": True, "max_len_b": 4}, ["--align", "--max-len-b", "4"]),
    ({"sampling": "topk", "topk": 3, "samples": 2, "seed": 7},
     ["--sampling", "topk", "--topk", "3", "--samples", "2", "--seed", "7"]),
])
def test_translations_equal_mt_translates(served, tiny_run, cli, tmp_path, options, flags):
    got = Client(served.url).translate(LINES, **options)
    assert [t["src"] for t in got] == LINES
    assert_same(got, jsonl(cli, tiny_run, tmp_path, *flags))
    [one] = Client(served.url).translate(LINES[0], **options)  # a string: one line
    assert_same([one], got[:1])


def test_a_prefix_per_line_as_mt_translates_prefix_file(served, tiny_run, cli, tmp_path):
    prefix = ["Gestern", "", "", "Heute haben", ""]
    (tmp_path / "prefix.txt").write_text("".join(f"{p}\n" for p in prefix), encoding="utf-8")
    got = Client(served.url).translate(LINES, prefix=prefix)
    assert got[0]["text"].startswith("Gestern") and got[3]["text"].startswith("Heute haben")
    assert_same(got, jsonl(cli, tiny_run, tmp_path, "--prefix", tmp_path / "prefix.txt"))


def test_attention_is_the_translators_for_one_sentence(served, tiny_run):
    line = LINES[3]
    [got] = Client(served.url).translate([line], attention=True)
    [want] = Translator.load(tiny_run).translate_nbest([line], attention=True)
    assert got["text"] == want[0].text
    att = got["attention"]
    assert att["src_tokens"] == want[0].attention.src_tokens == ["Today", "you", "have",
                                                                 "eight", "cats", "\uffed."]
    assert att["out_tokens"] == want[0].attention.out_tokens
    # the labels a reader sees: the joiner marks gone
    assert att["src_labels"] == ["Today", "you", "have", "eight", "cats", "."]
    assert att["out_labels"] == [t.replace("\uffed", "") for t in att["out_tokens"]]
    assert len(att["weights"]) == len(att["out_tokens"])
    for row, row_want in zip(att["weights"], want[0].attention.weights):
        assert len(row) == len(att["src_tokens"]) and sum(row) == pytest.approx(1, abs=1e-3)
        assert row == pytest.approx(row_want, abs=2e-4)
    [plain] = Client(served.url).translate([line])
    assert "attention" not in plain and plain["text"] == got["text"]


TOO_MANY_CHARS = {"text": ["x" * (MAX_CHARS // 2), "y" * (MAX_CHARS // 2 + 1)]}


@pytest.mark.parametrize("method, path, body, status, needle", [
    ("POST", "/translate", b'{"text": "eight cats"', 400, "not JSON"),
    ("POST", "/translate", b"", 400, "not JSON"),
    ("POST", "/translate", b"\xff\xfe", 400, "not JSON"),
    ("POST", "/translate", b"[1, 2]", 422, "object"),
    ("POST", "/translate", {"txt": "eight cats"}, 422, "txt: unknown field"),
    ("POST", "/translate", {"text": "a", "bream": 2}, 422, "bream: unknown field"),
    ("POST", "/translate", {"text": "a", "dtype": "bf16"}, 422, "dtype: unknown field"),
    ("POST", "/translate", {"beam": 2}, 422, "text: Field required"),
    ("POST", "/translate", {"text": 5}, 422, "text:"),
    ("POST", "/translate", {"text": ["a", 3]}, 422, "text[1]"),
    ("POST", "/translate", {"text": "a", "beam": "2"}, 422, "beam:"),
    ("POST", "/translate", {"text": "a", "beam": 0}, 422, "beam must be at least 1"),
    ("POST", "/translate", {"text": "a", "beam": 2, "nbest": 3}, 422, "nbest (3)"),
    ("POST", "/translate", {"text": "a", "beam": 99999999999999999999}, 422,
     "beam must be at most 1,024"),
    ("POST", "/translate", {"text": "a", "max_len_b": 99999999999999999999}, 422,
     "max_len_b must be at most 2,147,483,647"),
    ("POST", "/translate", {"text": "a", "sampling": "topk", "samples": 10**20}, 422,
     "samples must be at most 1,024"),
    ("POST", "/translate", b'{"text": "a", "length_penalty": 1e999}', 422,
     "length_penalty must be a finite number"),
    ("POST", "/translate", {"text": "a", "sampling": "maybe"}, 422, "sampling:"),
    ("POST", "/translate", {"text": "a", "tag": "<2xx>"}, 422, "tag <2xx>: not a tag"),
    ("POST", "/translate", {"text": ["a", "b"], "prefix": "x"}, 422, "prefix:"),
    ("POST", "/translate", {"text": ["a", "b"], "beam": 2, "glossaries": [None]}, 422,
     "glossaries: 1 given; give one glossary per line of text (2; null for none)"),
    ("POST", "/translate", {"text": ["a", "b"], "beam": 2, "glossaries": [None, [["a", ""]]]},
     422, "glossaries[1]: entry 1: empty target term"),
    # a request's field, not the command line's flag (--beam): the page has a beam box
    ("POST", "/translate", {"text": "a", "glossaries": [[["a", "b"]]]}, 422,
     "beam search: give beam 2 or more"),
    ("POST", "/translate", {"text": "a", "glossary": [["a", "b"]], "beam": 1}, 422,
     "beam search: give beam 2 or more"),
    ("POST", "/translate/document?format=md&glossary=" + quote('[["a", "b"]]'), b"a", 422,
     "beam search: give beam 2 or more"),
    ("POST", "/translate/document?format=docx", b"not a zip", 422,
     "document: not a .docx file (not a zip archive)"),
    ("POST", "/translate/document?format=html&beam=2&nbest=2", b"<p>a</p>", 422,
     "a document: not with nbest"),
    ("POST", "/translate/document?format=pdf", b"x", 422, "format: Input should be"),
    ("POST", "/translate/document", b"x", 422,
     "format: Field required; give one of text, txt, html, md, srt, docx"),
    ("POST", "/translate/document?format=txt&bogus=1", b"x", 422,
     "bogus: unknown query parameter"),
    ("POST", "/translate/document?format=txt&beam=x", b"x", 422, "beam: Input should be"),
    ("POST", "/translate/document?format=md&glossary=[1", b"x", 422, "glossary: not JSON"),
    ("POST", "/translate/document?format=md&beam=2&glossary=[1,2]", b"x", 422,
     "glossary: entry 1: an entry is two strings, [source term, target term], not 1"),
    ("POST", "/translate/document?format=md&beam=2&glossary=[null]", b"x", 422,
     "glossary: entry 1: an entry is two strings, [source term, target term], not null"),
    ("POST", "/translate/document?format=html", b"<p>caf\xe9</p>", 422, "not UTF-8"),
    ("POST", "/translate/document?format=txt", b"a" * (MAX_CHARS + 1), 413,
     "the document: 1,001 characters"),
    ("POST", "/translate", {"text": ["a"] * 9}, 413, "9 lines"),
    ("POST", "/translate", TOO_MANY_CHARS, 413, "1,001 characters"),
    ("POST", "/translate", b"x" * (12 * MAX_CHARS + 65_537), 413, "a body of"),
    ("GET", "/translate", None, 405, "Method Not Allowed"),
    ("GET", "/nothing", None, 404, "Not Found: GET /nothing"),
])
def test_each_error_has_its_status_and_a_json_body(served, method, path, body, status, needle):
    client = Client(served.url)
    got, answer = client.request(method, path, body)
    assert got == status, answer
    assert isinstance(answer, dict) and list(answer) == ["error"], answer
    assert needle in answer["error"] and "Traceback" not in answer["error"]
    assert "--beam" not in answer["error"]
    assert client.request("GET", "/health")[0] == 200  # the same connection still answers


def test_concurrent_clients_are_batched_and_each_answered_in_order(served, tiny_run):
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:40]
    plans = make_plans(lines, clients=12, requests=4, seed=1, most=6)
    expected = dict(zip(lines, Translator.load(tiny_run).translate(lines)))
    client = Client(served.url)
    before = client.request("GET", "/health")[1]
    outcome = send_all(served.url, plans, expected)
    after = client.request("GET", "/health")[1]
    assert outcome.wrong == [] and outcome.refused == 0 and len(outcome.latencies) == 48
    assert after["requests"] - before["requests"] == 48
    assert after["translator_calls"] - before["translator_calls"] < 48  # some went together


def test_health_info_and_the_page(served, tiny_run, cli):
    client = Client(served.url)
    status, health = client.request("GET", "/health")
    assert status == 200 and health["status"] == "ok"
    status, info = client.request("GET", "/info")
    serve = info.pop("serve")
    full = json.loads(cli("info", tiny_run, "--json").out)
    # what `mt info --json` says, but where things are on the host (--full-info: all of it)
    assert status == 200 and info == {"name": "tiny", **{k: full[k] for k in (
        "step", "steps_trained", "parameters", "model", "vocab", "tokenizer", "best")}}
    assert serve["max_lines"] == 8 and serve["attention"] is True and "beam" in serve["options"]
    status, page = client.request("GET", "/")
    assert status == 200 and '<canvas id="heatmap"' in page and "fetch(\"translate\"" in page
    # a document uploaded (its format by its name: the server's registry) and downloaded, a
    # Copy button, and no score (a log-probability) on the status line: the confidence
    assert serve["documents"] == extensions() and serve["documents"][".docx"] == "docx"
    assert '<input id="file" type="file"' in page and "fetch(`translate/document?" in page
    assert 'link.download = `${stem}.' in page and '<button id="copy"' in page
    assert ".score" not in page and "confidence ${least}" in page


def test_the_api_docs_load_nothing_from_another_host(served):
    """/docs (Swagger UI) and /redoc name only this server's files, and it has them: they show
    without internet (FastAPI's own load theirs from a CDN)."""
    client = Client(served.url)
    for page in ("/docs", "/redoc"):
        status, html = client.request("GET", page)
        assert status == 200 and "openapi.json" in html
        assert "//" not in re.sub(r"<!--.*?-->", "", html, flags=re.S), html  # no other host
        assets = re.findall(r'(?:src|href)="([^"]+)"', html)
        assert assets and all(a.startswith("/docs-assets/") for a in assets), assets
        for asset in assets:  # bytes: the icon is a PNG
            with urllib.request.urlopen(served.url + asset) as response:
                assert response.status == 200 and len(response.read()) > 1000, asset
    assert client.request("GET", "/openapi.json")[1]["info"]["title"] == "mt serve"


def test_one_log_line_per_request(served):
    client = Client(served.url)
    time.sleep(0.5)  # a line is written after its answer: let the last test's come
    count = len(served.log)
    client.translate(LINES[:2])
    client.request("GET", "/nothing")
    time.sleep(0.5)
    assert [re.sub(r"\d+\.\d ms$", "T ms", line) for line in served.log[count:]] == [
        "POST /translate | 200 | lines 2 | T ms", "GET /nothing | 404 | lines 0 | T ms"]


def test_confidence_per_line_and_per_sentence(served, tiny_run, cli, tmp_path):
    got = Client(served.url).translate(LINES, confidence=True)
    want = jsonl(cli, tiny_run, tmp_path, "--confidence")
    for g, w in zip(got, want, strict=True):
        assert g.get("confidence") is None  # the tiny run has no calibration: features only
        if "sentences" in g:  # a paragraph: each sentence its own
            assert all(set(s["features"]) == set(w["features"]) for s in g["sentences"])
            # the line's words: its sentences', which are its text's (what the page shades)
            assert g["words"] == [x for s in g["sentences"] for x in s["words"]]
            assert [x for x, _ in g["words"]] == g["text"].split()
        elif g["text"]:
            assert g["features"] == pytest.approx(w["features"], abs=1e-4)
            assert [x for x, _ in g["words"]] == [x for x, _ in w["words"]]
            assert [p for _, p in g["words"]] == pytest.approx([p for _, p in w["words"]],
                                                               abs=1e-3)
