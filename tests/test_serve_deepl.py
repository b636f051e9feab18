"""mt/serve/deepl.py and mt/serve/glossaries.py: DeepL's API v2, driven by DeepL's official
client (the `deepl` package, unchanged: `deepl.Translator(key, server_url=URL)`) over real HTTP
on loopback against `mt serve` of two toy pairs: its answers are mt's own endpoint's, its
glossaries are mt's and survive a restart, its documents are mt's, and its errors are DeepL's."""

from __future__ import annotations

import io
import json
import urllib.error
import urllib.parse
import urllib.request

import pytest

from benchmarks.bench_serve import Client, Served
from conftest import THREADS

deepl = pytest.importorskip("deepl")
KEY, OTHER = "deepl-key-1", "deepl-key-2"
EN = ["Yesterday we saw forty two red dogs.", "Today you have eight cats."]
DE = ["Gestern sahen wir zwei und vierzig rote Hunde.", "Heute hast du acht Katzen."]


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    path = tmp_path_factory.mktemp("keys") / "keys.txt"
    path.write_text(f"{KEY}\n{OTHER}\n", encoding="utf-8")
    return path


def serve(tiny_run, reverse_run, keys, state):
    return Served(None, "--model", f"en-de={tiny_run}", "--model", f"de-en={reverse_run}",
                  "--api-key-file", str(keys), "--state-dir", str(state), env=THREADS)


@pytest.fixture(scope="module")
def server(tiny_run, reverse_run, keys, tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    with serve(tiny_run, reverse_run, keys, state) as s:
        s.state = state  # its --state-dir: the glossaries' files
        yield s
        assert s.stop() == 0, s.log[-10:]


def own(url: str, lines, source: str, target: str, **options) -> list[str]:
    """mt's own POST /translate's texts."""
    status, answer = Client(url).request("POST", "/translate", {
        "text": lines, "source": source, "target": target, **options},
        {"Authorization": f"Bearer {KEY}"})
    assert status == 200, answer
    return [t["text"] for t in answer["translations"]]


def own_document(url: str, format: str, data: bytes) -> bytes:
    """mt's own POST /translate/document's answer."""
    request = urllib.request.Request(f"{url}/translate/document?format={format}&target=de",
                                     data, {"Authorization": f"Bearer {KEY}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        return response.read()


def test_translate_text_equals_mts_own_for_both_pairs(server):
    client = deepl.Translator(KEY, server_url=server.url)
    got = client.translate_text(EN, target_lang="DE")
    assert [r.text for r in got] == own(server.url, EN, "en", "de")
    assert [r.detected_source_lang for r in got] == ["EN", "EN"]
    back = client.translate_text(DE[1], source_lang="DE", target_lang="EN-GB")
    assert back.text == own(server.url, DE[1], "de", "en")[0] and back.billed_characters == 26
    page = "<p>Yesterday we saw <b>forty two</b> red dogs.</p>"
    html = client.translate_text(page, source_lang="EN", target_lang="DE", tag_handling="html")
    assert html.text == own(server.url, page, "en", "de", format="html")[0]
    assert "<b>" in html.text
    whole = client.translate_text(EN[0], target_lang="DE", split_sentences="0")
    assert whole.text == own(server.url, EN[0], "en", "de", split=False)[0]
    assert [x.code for x in client.get_source_languages()] == ["EN", "DE"]
    assert [(x.code, x.name) for x in client.get_target_languages()] == [
        ("DE", "German"), ("EN-GB", "English (United Kingdom)"),
        ("EN-US", "English (United States)")]


def test_usage_counts_each_keys_characters(server):
    client = deepl.Translator(OTHER, server_url=server.url)
    before = client.get_usage().character.count
    client.translate_text(["eight cats", "two dogs"], target_lang="DE")
    assert client.get_usage().character.count == before + 18
    assert not client.get_usage().any_limit_reached


def test_a_glossary_made_through_the_client_is_used_kept_and_deleted(server, tiny_run,
                                                                      reverse_run, keys):
    client = deepl.Translator(KEY, server_url=server.url)
    glossary = client.create_glossary("pets", "EN", "DE", {"cats": "Hunde"})
    assert (glossary.source_lang, glossary.target_lang, glossary.entry_count) == ("EN", "DE", 1)
    assert client.get_glossary_entries(glossary) == {"cats": "Hunde"}
    got = client.translate_text(EN[1], source_lang="EN", target_lang="DE", glossary=glossary)
    assert got.text == own(server.url, EN[1], "en", "de", beam=2,
                           glossary=[["cats", "Hunde"]])[0]
    assert "Hunde" in got.text
    other = deepl.Translator(OTHER, server_url=server.url)
    assert glossary.glossary_id not in [g.glossary_id for g in other.list_glossaries()]
    with pytest.raises(deepl.GlossaryNotFoundException):
        other.get_glossary(glossary.glossary_id)
    # the client itself refuses a glossary of another pair: sent as another client would
    status, answer = post_v2(server.url, {"text": [DE[1]], "source_lang": "DE",
                                          "target_lang": "EN-GB",
                                          "glossary_id": glossary.glossary_id})
    assert status == 400 and "made for en-de, not de-en" in answer["message"]
    client.delete_glossary(glossary)
    with pytest.raises(deepl.GlossaryNotFoundException):
        client.get_glossary(glossary.glossary_id)


def test_glossaries_survive_a_restart(tiny_run, reverse_run, keys, tmp_path):
    with serve(tiny_run, reverse_run, keys, tmp_path) as first:
        made = deepl.Translator(KEY, server_url=first.url).create_glossary_from_csv(
            "csv", "DE", "EN", "Katzen,dogs\nHunde,cats,de,en\n")
        assert first.stop() == 0
    with serve(tiny_run, reverse_run, keys, tmp_path) as second:
        client = deepl.Translator(KEY, server_url=second.url)
        kept = client.get_glossary(made.glossary_id)
        entries = client.get_glossary_entries(made.glossary_id)
        assert second.stop() == 0
    assert (kept.name, kept.entry_count) == ("csv", 2)
    assert entries == {"Katzen": "dogs", "Hunde": "cats"}
    assert [p.suffix for p in (tmp_path / "glossaries").iterdir()] == [".json"]


def test_documents_are_mts(server, tmp_path):
    docx = pytest.importorskip("docx")
    client = deepl.Translator(KEY, server_url=server.url)
    d = docx.Document()
    d.add_paragraph("Yesterday we saw ").add_run("forty two").bold = True
    d.paragraphs[0].add_run(" red dogs.")
    source, out = tmp_path / "in.docx", tmp_path / "out.docx"
    d.save(source)
    client.translate_document_from_filepath(source, out, target_lang="DE")
    got, want = docx.Document(out), docx.Document(io.BytesIO(own_document(
        server.url, "docx", source.read_bytes())))
    assert [(r.text, r.bold) for r in got.paragraphs[0].runs] == \
        [(r.text, r.bold) for r in want.paragraphs[0].runs]
    assert any(r.bold for r in got.paragraphs[0].runs)
    page = b"<p>Yesterday we saw <b>forty two</b> red dogs.</p>\n"
    buffer = io.BytesIO()
    client.translate_document(page, buffer, target_lang="DE", filename="a.html")
    assert buffer.getvalue() == own_document(server.url, "html", page)
    with pytest.raises(deepl.DeepLException, match="a format this server does not read"):
        client.translate_document(b"x", io.BytesIO(), target_lang="DE", filename="a.pdf")


def test_errors_are_deepls(server):
    with pytest.raises(deepl.AuthorizationException):
        deepl.Translator("wrong", server_url=server.url).translate_text("a", target_lang="DE")
    client = deepl.Translator(KEY, server_url=server.url)
    with pytest.raises(deepl.DeepLException, match="fr-de: a language pair this server does "
                                                   "not translate"):
        client.translate_text("a", source_lang="FR", target_lang="DE")
    with pytest.raises(deepl.DeepLException, match="glossary 'nope' not found"):
        client.translate_text("a", source_lang="EN", target_lang="DE", glossary="nope")
    with pytest.raises(deepl.DeepLException, match="entries line 2: 1 fields"):
        client.create_glossary_from_csv("bad", "EN", "DE", "cats,Hunde\njust one\n")
    assert client.list_glossaries() == []  # nothing stored of the refused one
    with pytest.raises(deepl.DeepLException, match="tag_handling 'xml'"):
        client.translate_text("a", target_lang="DE", tag_handling="xml")


@pytest.mark.parametrize("body, status, needle", [
    ({"text": "a"}, 400, "target_lang: missing"),
    ({"text": [], "target_lang": "DE"}, 400, "text: give one text or more"),
    ({"text": [1], "target_lang": "DE"}, 400, "text: give one text or more"),
    ({"text": ["a"] * 101, "target_lang": "DE"}, 413, "101 lines"),
    ({"text": ["a"], "target_lang": "DE", "formality": "more"}, 400, "formality 'more'"),
    ({"text": ["a"], "target_lang": 5}, 400, "target_lang: give a language code"),
    ({"text": ["a"], "target_lang": "DE", "source_lang": ["EN", 5]}, 400,
     "source_lang: give a language code"),
    ({"text": "a", "target_lang": "FR"}, 400, "auto-fr: a language pair this server does not"),
    ({"text": ["a"], "target_lang": "DE", "source_lang": "EN", "glossary_id": "nope"}, 404,
     "glossary 'nope' not found"),
    ({"text": ["a"], "target_lang": "DE", "glossary_id": "nope"}, 400,
     "glossary_id: give source_lang"),
])
def test_bad_json_bodies_get_deepls_error_shape(server, body, status, needle):
    got, answer, log = server.logged(lambda: post_v2(server.url, body))
    assert got == status and list(answer) == ["message"], answer
    assert needle in answer["message"]
    assert [line.split(" | ")[:2] for line in log] == [["POST /v2/translate", str(status)]]


def test_a_form_body_is_read_as_json_is(server):
    form = urllib.parse.urlencode([("text", EN[0]), ("text", EN[1]), ("target_lang", "DE")])
    request = urllib.request.Request(server.url + "/v2/translate", form.encode(), {
        "Content-Type": "application/x-www-form-urlencoded",
        "Authorization": f"DeepL-Auth-Key {KEY}"})
    with urllib.request.urlopen(request, timeout=300) as response:
        got = [t["text"] for t in json.loads(response.read())["translations"]]
    assert got == own(server.url, EN, "en", "de")


@pytest.mark.parametrize("body, needle", [
    ({"name": "g", "source_lang": "EN", "target_lang": "DE", "entries": "cats\tHunde\ndogs\n"},
     "entries line 2: 1 fields; give `source TAB target`"),
    ({"name": "g", "source_lang": "EN", "target_lang": "DE", "entries": "a\tb\tc\n"},
     "entries line 1: 3 fields"),
    ({"name": "g", "source_lang": "EN", "target_lang": "DE", "entries": "cats\tA\ncats\tB\n"},
     "cats"),
    ({"name": "g", "source_lang": "EN", "target_lang": "DE", "entries": ""}, "0 entries"),
    ({"name": "g", "source_lang": "EN", "target_lang": "DE", "entries": 5},
     "entries: give the entries as text"),
    ({"name": "g", "source_lang": "EN", "target_lang": "DE", "entries": "a\tb",
      "entries_format": "xlsx"}, "entries_format 'xlsx'"),
    ({"name": 5, "source_lang": "EN", "target_lang": "DE", "entries": "a\tb"}, "name: missing"),
    ({"name": "g", "target_lang": "DE", "entries": "a\tb"}, "source_lang: missing"),
    ({"name": "g", "source_lang": "FR", "target_lang": "DE", "entries": "a\tb"},
     "fr-de: a language pair this server does not translate"),
])
def test_a_bad_glossary_is_refused_and_nothing_stored(server, body, needle):
    got, answer, log = server.logged(lambda: post_v2(server.url, body, "/v2/glossaries"))
    assert got == 400 and list(answer) == ["message"] and needle in answer["message"], answer
    assert [line.split(" | ")[:2] for line in log] == [["POST /v2/glossaries", "400"]]
    assert list((server.state / "glossaries").iterdir()) == []
    assert deepl.Translator(KEY, server_url=server.url).list_glossaries() == []


def test_a_bad_document_upload_is_deepls_400(server):
    boundary = "b0undary"
    part = (f'--{boundary}\r\nContent-Disposition: form-data; name="target_lang"\r\n\r\nDE'
            "\r\n").encode()
    for body, needle in ((part + b"--b0undary--\r\n", "file: missing"),
                         (part, "the body is not a multipart form")):
        request = urllib.request.Request(server.url + "/v2/document", body, {
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Authorization": f"DeepL-Auth-Key {KEY}"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(request, timeout=300)
        assert e.value.code == 400 and needle in json.loads(e.value.read())["message"]



def post_v2(url: str, body: dict, path: str = "/v2/translate") -> tuple[int, dict]:
    """POST path of a JSON body: the status and the answer."""
    request = urllib.request.Request(url + path, json.dumps(body).encode(), {
        "Content-Type": "application/json", "Authorization": f"DeepL-Auth-Key {KEY}"})
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_glossary_not_written_is_neither_listed_nor_left_on_disk(tmp_path, monkeypatch):
    """The store writes a glossary's file whole (atomic_write) before it lists it: a disk that
    fails half-way leaves the store as it was, and the route answers DeepL's 500."""
    from mt.errors import FileSystemError
    from mt.serve import glossaries as module
    from mt.serve.translating import compatible_error

    store = module.Glossaries(tmp_path)
    kept = store.add("kept", "en", "de", [["cat", "Katze"]], "")

    def half_then_full(self, text, encoding=None):
        with open(self, "w", encoding=encoding) as f:
            f.write(text[: len(text) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module.Path, "write_text", half_then_full)
    with pytest.raises(FileSystemError, match="No space left") as e:
        store.add("lost", "en", "de", [["dog", "Hund"]], "")
    monkeypatch.undo()
    assert compatible_error(e.value, "message", {}).status_code == 500
    assert [g.name for g in store.mine("")] == ["kept"]
    assert [p.name for p in (tmp_path / "glossaries").iterdir()] == [f"{kept.glossary_id}.json"]
    assert [g.name for g in module.Glossaries(tmp_path).mine("")] == ["kept"]  # a restart
