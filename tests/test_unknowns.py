"""mt/unknowns.py and decode.unk: no `<unk>` reaches a reader. Unit tests of the replacement
rules, the search's ban (decode.unk forbid), and a word-level toy model trained with a cut
vocabulary (so that it writes `<unk>`), read through every output: text, jsonl, documents
and the server."""

from __future__ import annotations

import json

import pytest
import torch

from conftest import TOY, shared_run
from mt.config import DecodeConfig
from mt.decoding.constraints import Constraints
from mt.decoding.lexical import Terms
from mt.unknowns import NUMBER, _numbers, known_words, unread_numbers
from mt.vocab import UNK

# Inputs with the words a vocabulary of 70 tokens a side cuts (the teens, seen least).
RARE = ["We saw eighteen red dogs.", "Yesterday I bought twelve old cars.",
        "You need sixteen books.", "They have nineteen small birds.",
        "Today we see fourteen new houses."]


def test_a_prefix_or_term_unk_gets_its_own_word():
    ids = [5, UNK, 7, UNK, UNK, 9]
    terms = [([7, UNK], ["x", "Pudel"]), ([8], ["y"])]
    assert known_words(ids, ["Wir", "Xylo"], terms) == {1: "Xylo", 3: "Pudel"}
    assert known_words([UNK, 4], [], [([UNK, 4], ["Zorro", "b"])]) == {0: "Zorro"}


def test_a_run_of_tokens_attending_to_an_unread_number_is_the_number_once():
    source = ["I", "need", "25", "books", "."]
    assert unread_numbers([4, 5, UNK, 6, 7, 0], source) == {2}  # padded ids
    assert unread_numbers([4, 5, UNK, UNK, 7], ["I", "need", "many", "books", "."]) == set()
    tokens, ids = ["Ich", "brauche", "fünf", "und", "zwanzig", "Bücher", "."], [10] * 7
    at = [0, 1, 2, 2, 2, 3, 4]
    assert _numbers(tokens, ids, at, source, {2}) == (
        ["Ich", "brauche", "25", "Bücher", "."], ["25"])
    assert _numbers(tokens, ids, at, source, set()) == (tokens, [])
    for number in ("25", "1.299,50", "€5", "-3", "10:30", "50%"):
        assert NUMBER.fullmatch(number)
    for word in ("zwei", "A4", "B-52"):
        assert not NUMBER.fullmatch(word)


def test_forbid_bans_unk_but_where_a_term_holds_one():
    mask = torch.ones(3, 4, dtype=torch.bool)
    terms = Terms.of([[[7, UNK]], [[7]], []], False, "cpu")
    cfg = DecodeConfig(unk="forbid")
    c = Constraints.of(cfg, mask, 100, terms=terms)
    scores = c.apply(torch.zeros(3, 12), 1, torch.zeros(3, 1, dtype=torch.long),
                     torch.arange(3), terms.start(torch.arange(3)))
    assert scores[0, UNK] == 0 and scores[1, UNK] == -torch.inf and scores[2, UNK] == -torch.inf
    free = Constraints.of(DecodeConfig(), mask, 100, terms=terms)
    assert (free.apply(torch.zeros(3, 12), 1, torch.zeros(3, 1, dtype=torch.long),
                       torch.arange(3))[:, UNK] == 0).all()


def test_a_terms_own_words_are_blocked_where_the_term_is_active():
    terms = Terms.of([[[7], [8]], [[9]]], False, "cpu", blocked=[[[3, 4], [5]], [[6]]])
    st = terms.start(torch.tensor([0, 1]))
    scores = terms.block(torch.zeros(2, 12), st)
    assert torch.isinf(scores[0, [3, 4, 5]]).all() and torch.isinf(scores[1, 6])
    assert scores[0, 6] == 0 and (scores[1, [3, 4, 5]] == 0).all()
    assert Terms.of([[[7]]], False, "cpu").blocked is None  # nothing blocked: no tensor


@pytest.fixture(scope="module")
def unk_run(tmp_path_factory):
    """A word-level toy model whose vocabularies keep 70 tokens a side: it learned to write
    <unk> for the words cut (trained once per session, as tiny_run)."""
    return shared_run(tmp_path_factory, "unk_run")


def test_no_unk_reaches_any_output_of_a_model_that_writes_it(unk_run, cli, tmp_path):
    from mt.translator import Translator

    t = Translator.load(unk_run)
    shown = t.translate(RARE, unk="show")
    assert sum("<unk>" in s for s in shown) >= 3, shown  # the model writes <unk> here
    for unk in ("replace", "forbid"):
        assert not any("<unk>" in s for s in t.translate(RARE, unk=unk, beam=3))
    replaced = t.translate_nbest(RARE)
    assert sum(bool(best[0].unknowns) for best in replaced) >= 3
    src = tmp_path / "rare.en"
    src.write_text("\n".join(RARE) + "\n", encoding="utf-8")
    text = cli("translate", unk_run, "-i", src)
    assert text.code == 0 and "<unk>" not in text.out and len(text.out.splitlines()) == 5
    rows = [json.loads(x) for x in cli("translate", unk_run, "-i", src, "--format",
                                       "jsonl").out.splitlines()]
    assert "<unk>" not in json.dumps(rows) and any(r.get("unknowns") for r in rows)
    paragraph = cli("translate", unk_run, "-i", src, "--split-sentences")
    assert paragraph.code == 0 and "<unk>" not in paragraph.out
    assert "<unk>" in cli("translate", unk_run, "-i", src, "--unk", "show").out

    from mt.document import translate_document

    assert "<unk>" not in translate_document(t, " ".join(RARE)).text
    html = translate_document(t, f"<p>{RARE[0]} <b>{RARE[1]}</b></p>", "html").text
    assert "<unk>" not in html and "&lt;unk&gt;" not in html


def test_no_unk_in_the_servers_answers(unk_run):
    from test_serve_app import serving

    from benchmarks.bench_serve import Client
    from mt.serve.app import Limits, create_app
    from mt.translator import Translator

    with serving(create_app(Translator.load(unk_run), {"path": str(unk_run)}, Limits(),
                            wait_ms=0)) as url:
        answers = Client(url).translate(RARE)
        status, shown = Client(url).request("POST", "/translate",
                                            {"text": RARE, "unk": "show"})
    assert not any("<unk>" in a["text"] for a in answers)
    assert status == 200 and any("<unk>" in a["text"] for a in shown["translations"])


def test_an_oov_glossary_term_is_in_every_constrained_output(tiny_run):
    from mt.translator import Translator

    t = Translator.load(tiny_run)
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:40]
    dogs = [x for x in lines if " dogs" in x][:10]
    assert dogs
    # "Pudelhunde" is no word of the toy's German: the search writes <unk> in its place
    out = t.translate_nbest(dogs, glossary=[["dogs", "Pudelhunde"]], beam=4)
    assert all("Pudelhunde" in best[0].text and "<unk>" not in best[0].text
               for best in out), [b[0].text for b in out]
    assert all(best[0].missing == [] for best in out)
    shown = t.translate_nbest(dogs, glossary=[["dogs", "Pudelhunde"]], beam=4, unk="show")
    assert all(best[0].missing == ["Pudelhunde"] for best in shown)  # no output can hold it



def test_a_forced_term_replaces_the_models_own_word(tiny_run):
    from mt.translator import Translator

    t = Translator.load(tiny_run)
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()
    dogs = [x for x in lines if " dogs" in x][:12]
    replaced = t.translate(dogs, glossary=[["dogs", "Katzen"]], beam=4)
    assert all("Katzen" in x and "Hunde" not in x for x in replaced), replaced
    plain = t.translate(dogs, beam=4)
    assert all("Hunde" in x for x in plain)  # the word the term replaced
    kept = t.translate(dogs, glossary=[["dogs", "Katzen"]], beam=4, glossary_replace=False)
    assert all("Katzen" in x for x in kept)


def test_an_unread_number_the_model_dropped_is_put_after_the_word_before_it():
    source = ["We", "saw", "342", "red", "dogs", "."]
    tokens, at = ["Wir", "sahen", "rote", "Hunde", "."], [0, 1, 3, 4, 5]
    assert _numbers(tokens, [10] * 5, at, source, {2}) == (
        ["Wir", "sahen", "342", "rote", "Hunde", "."], ["342"])
    assert _numbers(["Hunde", "."], [10] * 2, [4, 5], ["342", "dogs", "."], {0}) == (
        ["342", "Hunde", "."], ["342"])
    assert _numbers(["Wir", "sahen"], [10] * 2, [0, 1], ["We", "saw", "342", "."], {2}) == (
        ["Wir", "sahen", "342"], ["342"])
