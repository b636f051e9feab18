"""mt/serve/corrections.py: POST /corrections over real HTTP on loopback. In this process, on
a stand-in translator that reuses its memory's exact matches: each refusal (its status and one
line), the API key, a server without a memory, and 50 clients correcting while others translate
with none lost. Against `mt serve --memory` on the tiny model: a correction then a request for
the sentence gets the person's translation (on each API), `mt memory export` gives it back as
TMX, and a server killed (SIGKILL) while corrections are written keeps a sound file with every
acknowledged one."""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest
from test_serve_app import serving
from test_serve_batcher import Upper

from benchmarks.bench_serve import Client
from mt.config import Config, DecodeConfig
from mt.memory import open_memory
from mt.records import Translation
from mt.serve.pairs import Pair, Pairs


class Recall(Upper):
    """Upper, reusing the exact matches of a memory (read through its own connection, as the
    Translator's is), with what the app asks of a Translator."""

    decoding, model, max_src = DecodeConfig(), None, 256
    run = SimpleNamespace(cfg=Config(), starters=[], src_vocab=SimpleNamespace(itos=["7"]),
                          checkpoint=None, step=0)

    def __init__(self, path):
        super().__init__()
        self.memory = open_memory(path) if path else None

    def check_options(self, attention=False, **options) -> DecodeConfig:
        return self.decoding

    def translate_nbest(self, lines, prefix=None, *, attention=False, glossary=None, **options):
        found = super().translate_nbest(lines, prefix, attention=attention, **options)
        for k, line in enumerate(lines):
            match = self.memory and self.memory.search(line, k=1, threshold=100)
            if match:
                found[k] = [Translation(match[0].target, 0.0)]
        return found


def app_with(path, keys=(), max_chars=100):
    """The app of one en-de pair on Recall, with the memory at path (None: without)."""
    from mt.serve.access import Access
    from mt.serve.app import Limits, create_app

    memory = open_memory(path, ("en", "de")) if path else None
    pair = Pair("en", "de", Recall(path), {"name": "recall"}, memory=memory)
    return create_app(Pairs([pair]), {"name": "recall"}, Limits(max_chars=max_chars), wait_ms=1,
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
    assert health["corrections"] == clients * each
    with open_memory(path) as memory:
        assert dict(memory.pairs()) == {s: f"Satz {s}" for s in acknowledged}
