"""mt/serve/corrections.py, and `mt serve --memory`: POST /corrections over real HTTP on
loopback. In this process, on a stand-in translator (the server reuses the memory's exact
matches before a translator sees the line): each refusal (its status and one line), the API
key, a server without a memory, and 50 clients correcting while others translate with none
lost. Against `mt serve --memory` on the tiny model: a correction, then a request for the
sentence gets the person's translation on every API (each answer in its own shape), `mt memory
export` gives it back as TMX, and a server killed (SIGKILL) while corrections are written
leaves a sound file with every acknowledged one."""

from __future__ import annotations

import http.client
import json
import signal
import sqlite3
import threading
import time
from types import SimpleNamespace

import pytest
from test_serve_app import serving
from test_serve_batcher import Upper

from benchmarks.bench_serve import Client, Served
from conftest import THREADS, assert_user_error
from mt.config import Config, DecodeConfig
from mt.memory import open_memory
from mt.serve.pairs import Pair, Pairs
from mt.vocab import SPECIALS, Vocab


class Standin(Upper):
    """Upper, with what the app asks of a Translator (a memory, it does not read: the server
    looks each line up whole before the translator sees it)."""

    decoding, model, max_src = DecodeConfig(), None, 256
    run = SimpleNamespace(cfg=Config(), starters=[], src_vocab=Vocab([*SPECIALS, "7"]),
                          checkpoint=None, step=0)

    def check_options(self, attention=False, **options) -> DecodeConfig:
        return self.decoding


def app_with(path, keys=(), max_chars=100, standin=None):
    """The app of one en-de pair on a Standin (standin, or a new one), with the memory at path
    (None: without)."""
    from mt.serve.access import Access
    from mt.serve.app import Limits, create_app

    memory = open_memory(path, ("en", "de")) if path else None
    pair = Pair("en", "de", standin or Standin(), {"name": "standin"}, memory=memory)
    return create_app(Pairs([pair]), {"name": "standin"}, Limits(max_chars=max_chars), wait_ms=1,
                      access=Access(list(keys)))


GOOD = {"source": "Save the file", "translation": "SAVE THE FILE", "corrected": "Speichern"}


@pytest.mark.parametrize("body, status, message", [
    (b"{not json", 400, "the body is not JSON"),
    ([GOOD], 422, "the body: not a JSON object"),
    ({**GOOD, "target": "Datei"}, 422, "target: unknown field; the fields are source, "
                                       "translation, corrected, source_lang, target_lang"),
    ({k: v for k, v in GOOD.items() if k != "translation"}, 422, "translation: Field required"),
    ({**GOOD, "corrected": 7}, 422, "corrected: Input should be a valid string"),
    ({**GOOD, "corrected": " \t"}, 422, "corrected: empty"),
    ({**GOOD, "source": ""}, 422, "source: empty"),
    ({**GOOD, "source": "one\ntwo"}, 422, "source: holds a line break"),
    ({**GOOD, "corrected": "x" * 90}, 413, "a correction of 116 characters, more than this "
                                           "server takes in one request (100, --max-chars)"),
    ({**GOOD, "target_lang": "fr"}, 422, "a language pair this server does not translate"),
])
def test_a_bad_correction_is_one_line_and_nothing_is_kept(tmp_path, body, status, message):
    path = tmp_path / "tm.db"
    with serving(app_with(path)) as url:
        got = Client(url).request("POST", "/corrections", body if isinstance(body, bytes)
                                  else json.dumps(body).encode())
    assert got[0] == status and message in got[1]["error"], got
    assert "\n" not in got[1]["error"]
    with open_memory(path) as memory:
        assert memory.info()["pairs"] == 0


def test_a_correction_needs_the_key_and_a_server_with_a_memory(tmp_path):
    with serving(app_with(tmp_path / "tm.db", keys=["k1"])) as url:
        assert Client(url).request("POST", "/corrections", GOOD)[0] == 401
        got = Client(url).request("POST", "/corrections", GOOD, {"Authorization": "Bearer k1"})
    assert got == (200, {"pair": "en-de", "new": True})
    with serving(app_with(None)) as url:
        status, answer = Client(url).request("POST", "/corrections", GOOD)
        assert Client(url).request("GET", "/info")[1]["serve"]["memory"] is False
    assert status == 409 and answer["error"] == (
        "en-de: this server keeps no translation memory for the pair, so it takes no "
        "corrections; start it with mt serve --memory MEMORY")


def spelt(n: int) -> str:
    """n in letters (12: "bc"): a line with digits in it is translated with its numbers kept
    aside (mt.document's placeholders), which a stand-in does not do."""
    return "".join("abcdefghij"[int(d)] for d in str(n))


def test_the_server_hands_its_lookups_to_the_translator(tmp_path):
    """Each line is looked up once (the memory thread, whole): the lines not reused reach the
    translator with their matches, so that it does not search the memory again."""
    path = tmp_path / "tm.db"
    with open_memory(path, ("en", "de")) as m:
        m.add([("Save the file", "Datei speichern"), ("Open the file now", "Datei jetzt öffnen")])
    standin = Standin()
    with serving(app_with(path, standin=standin)) as url:
        found = Client(url).translate(["Save the file", "Open the file", "Quit"])
    assert [t["text"] for t in found] == ["Datei speichern", "OPEN THE FILE", "QUIT"]
    (lines, _, _, options), = standin.calls
    assert lines == ["Open the file", "Quit"]
    close, none = options["matches"]
    assert (close.target, close.score, none) == ("Datei jetzt öffnen", 75.0, None)


def test_fifty_clients_correcting_while_others_translate_lose_nothing(tmp_path):
    """50 threads post corrections over HTTP while 5 translate the same sentences: every
    acknowledged correction is in the memory after, and each is what the server translates
    the sentence into from then on."""
    path, clients, each = tmp_path / "tm.db", 50, 3
    sources = [[f"sentence {spelt(c)} line {spelt(k)}" for k in range(each)]
               for c in range(clients)]
    acknowledged, wrong, stop = [], [], threading.Event()

    def correct(mine: list[str]) -> None:
        client = Client(url)
        for source in mine:
            status, answer = client.request("POST", "/corrections", {
                "source": source, "translation": source.upper(), "corrected": f"Satz {source}"})
            (acknowledged if status == 200 and answer["new"] else wrong).append(source)

    def translate() -> None:
        client, lines = Client(url), [s for mine in sources[::7] for s in mine]
        while not stop.is_set():
            try:
                found = client.translate(lines)
            except RuntimeError as e:  # the status, and the answer's error
                found = [{"text": str(e)}] * len(lines)
            wrong.extend(t["text"] for line, t in zip(lines, found, strict=True)
                         if t["text"] not in (line.upper(), f"Satz {line}"))

    with serving(app_with(path, max_chars=20_000)) as url:
        readers = [threading.Thread(target=translate) for _ in range(5)]
        writers = [threading.Thread(target=correct, args=(mine,)) for mine in sources]
        for t in readers + writers:
            t.start()
        for t in writers:
            t.join()
        stop.set()
        for t in readers:
            t.join()
        after = [t for mine in sources for t in Client(url).translate(mine)]
        health = Client(url).request("GET", "/health")[1]
    assert wrong == [] and len(acknowledged) == clients * each
    assert [t["text"] for t in after] == [f"Satz {s}" for mine in sources for s in mine]
    assert [t["match"] for t in after[:1]] == [{"source": sources[0][0],
                                                "target": f"Satz {sources[0][0]}", "score": 100}]
    assert health["corrections"] == clients * each
    with open_memory(path) as memory:
        assert dict(memory.pairs()) == {s: f"Satz {s}" for s in acknowledged}


SENTENCE = "Yesterday we saw forty two red dogs."
PERSON = "Gestern sahen wir zweiundvierzig rote Hunde."


def ask_every_api(url: str, line: str) -> dict:
    """line translated by mt's API, LibreTranslate's, DeepL's and as a document: each answer
    whole (the document's: its text)."""
    client, json_body = Client(url), {"Content-Type": "application/json"}
    answers = {api: client.request("POST", path, body, json_body)[1] for api, path, body in (
        ("mt", "/translate", {"text": line}),
        ("libretranslate", "/translate", {"q": line, "source": "en", "target": "de"}),
        ("deepl", "/v2/translate", {"text": [line], "target_lang": "DE"}))}
    answers["document"] = client.request("POST", "/translate/document?format=txt",
                                         line.encode())[1]
    return answers


def texts(answers: dict) -> list[str]:
    return [answers["mt"]["translations"][0]["text"], answers["libretranslate"]["translatedText"],
            answers["deepl"]["translations"][0]["text"], answers["document"].strip()]


def test_a_correction_is_what_every_api_answers_next_and_export_gives_back(tiny_run, cli,
                                                                             tmp_path):
    memory = tmp_path / "tm.db"  # made by the server
    with Served(tiny_run, "--memory", str(memory), env=THREADS) as served:
        before = ask_every_api(served.url, SENTENCE)
        machine = texts(before)[0]
        assert texts(before) == [machine] * 4 and machine != PERSON
        assert before["mt"]["translations"][0]["match"] is None
        status, answer = Client(served.url).request("POST", "/corrections", {
            "source": SENTENCE, "translation": machine, "corrected": PERSON})
        assert (status, answer) == (200, {"pair": "en-de", "new": True})
        after = ask_every_api(served.url, SENTENCE)
        fuzzy = Client(served.url).translate([SENTENCE.replace("dogs", "cats")])[0]
        info = Client(served.url).request("GET", "/info")[1]
        assert served.stop() == 0
    assert texts(after) == [PERSON] * 4
    assert after["mt"]["translations"][0]["match"] == {
        "source": SENTENCE, "target": PERSON, "score": 100}
    # the compatible APIs' answers in their own shapes: nothing added for their clients
    assert after["libretranslate"].keys() == before["libretranslate"].keys()
    assert [t.keys() for t in after["deepl"]["translations"]] == [
        t.keys() for t in before["deepl"]["translations"]]
    assert fuzzy["text"] != PERSON and fuzzy["match"]["target"] == PERSON
    assert fuzzy["match"]["score"] == 100 * (1 - 1 / 8)  # one word of eight (the stop too)
    assert info["serve"]["memory"] is True
    out = tmp_path / "tm.tmx"
    assert cli("memory", "export", memory, "--to", "tmx", "-o", out).code == 0
    from translate.storage import tmx

    assert [(u.source, u.target) for u in tmx.tmxfile(out.read_bytes()).units] == [
        (SENTENCE, PERSON)]


def test_a_server_killed_while_writing_corrections_keeps_every_acknowledged_one(tiny_run,
                                                                               tmp_path):
    """SIGKILL while 8 clients post corrections: the file is sound (PRAGMA integrity_check)
    and holds every correction that was answered 200."""
    memory, acknowledged, stop = tmp_path / "tm.db", [], threading.Event()

    def correct(c: int) -> None:
        client, k = Client(served.url, timeout=30), 0
        while not stop.is_set():
            source = f"client {spelt(c)} line {spelt(k)}"
            try:
                status, _ = client.request("POST", "/corrections", {
                    "source": source, "translation": "", "corrected": f"Satz {source}"})
            except (OSError, http.client.HTTPException):  # killed: no (whole) answer
                return
            if status == 200:
                acknowledged.append(source)
            k += 1

    with Served(tiny_run, "--memory", str(memory), env=THREADS) as served:
        clients = [threading.Thread(target=correct, args=(c,)) for c in range(8)]
        for t in clients:
            t.start()
        deadline = time.monotonic() + 120
        while len(acknowledged) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        served.process.send_signal(signal.SIGKILL)
        served.process.wait(30)
        stop.set()
        for t in clients:
            t.join(60)
    assert len(acknowledged) >= 100
    db = sqlite3.connect(memory)
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    kept = dict(db.execute("SELECT source, target FROM pairs"))
    assert all(kept.get(s) == f"Satz {s}" for s in acknowledged)


def test_a_memory_that_does_not_fit_the_pair_is_one_line(tiny_run, cli, tmp_path):
    other = tmp_path / "de-en.db"
    open_memory(other, ("de", "en")).close()
    r = cli("serve", tiny_run, "--port", "0", "--memory", other)
    assert_user_error(r, 4, f"{other}: a de-en memory")
    r = cli("serve", tiny_run, "--port", "0", "--memory", f"de-en={other}")
    assert_user_error(r, 3, f"--memory de-en={other}: the run translates en-de; name it so")
    r = cli("serve", tiny_run, "--port", "0", "--memory", "a.db", "--memory", "b.db")
    assert_user_error(r, 2, "a second memory for the pair")
