"""mt/serve/pairs.py: --model specs, and a request's source and target routed to a pair; the
command's refusals of a --model that does not fit (one line, no traceback)."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest

from conftest import assert_user_error
from mt.serve.access import ClientError
from mt.serve.pairs import Pair, Pairs, language_name, parse_model, parse_models

EN = "Yesterday we saw forty two red dogs and today you have eight cats."
DE = "Gestern sahen wir zwei und vierzig rote Hunde und heute hast du acht Katzen."


def pairs(*names: str) -> Pairs:
    return Pairs([Pair(*n.split("-"), SimpleNamespace()) for n in names])


def test_a_model_spec_names_its_pair_and_runs():
    assert parse_model("DE-en=runs/a") == ("de", "en", [__import__("pathlib").Path("runs/a")])
    assert [str(p) for p in parse_model("en-de=runs/b, runs/c")[2]] == ["runs/b", "runs/c"]
    for bad in ("de-en", "deen=runs/a", "de-en=", "=runs/a"):
        with pytest.raises(ValueError, match="give SOURCE-TARGET=RUN"):
            parse_model(bad)


def test_a_language_is_named_by_the_cldr_and_an_unknown_code_by_itself():
    from babel import Locale

    assert language_name("de") == Locale("de").get_display_name("en") == "German"
    assert language_name("pt-br") == "Portuguese (Brazil)"
    assert language_name("EN-GB") == "English (United Kingdom)"
    for unknown in ("xx", "toy", "e-"):  # not in the CLDR; not a locale identifier
        assert language_name(unknown) == unknown


def test_routing_by_source_and_target():
    served = pairs("en-de", "de-en", "fr-en")
    assert served.route("en", "de").name == "en-de"
    assert served.route("auto", "de").name == "en-de"  # the one pair into de
    assert served.route(None, "DE").name == "en-de"
    with pytest.raises(ClientError, match=r"several pairs translate into en \(de-en, fr-en\)"):
        served.route("auto", "en")
    with pytest.raises(ClientError, match="it-de: a language pair this server does not "
                                          "translate; it translates en-de, de-en, fr-en") as e:
        served.route("it", "de")
    assert e.value.status == 422
    assert pairs("en-de").route(None, None).name == "en-de"  # one pair: nothing to name


FR = "Aujourd'hui tu as huit chats et hier nous avons vu des chiens rouges."


def test_auto_among_several_pairs_into_the_target_is_the_texts_language():
    served = pairs("de-en", "fr-en", "en-de")
    for text, name in ((DE, "de-en"), (FR, "fr-en")):
        pair, confidence = served.routed("auto", "en", [text])
        assert pair.name == name and 50 < confidence <= 100
    assert served.route(None, "de", [FR]).name == "en-de"  # the one pair into de: no guess
    assert served.route("fr", "en", [DE]).name == "fr-en"  # a source named is not second-guessed
    with pytest.raises(ClientError, match="the text's language is not told among them"):
        pairs("de-en", "xx-en").route("auto", "en", [DE])  # xx: unknown to the model, not ruled out
    with pytest.raises(ClientError, match="several pairs translate into en"):
        served.route("auto", "en", [])  # a document: no text to tell by


def test_libretranslates_auto_and_detect_over_http_pick_the_texts_pair(tiny_run):
    """Two pairs into de served by one toy model (what it writes does not matter here): each
    request is routed by the language of its text, and /detect says which, as LibreTranslate
    answers."""
    from starlette.testclient import TestClient

    from mt.serve.app import Limits, create_app
    from mt.translator import Translator

    model = Translator.load([tiny_run])
    served = Pairs([Pair("en", "de", model), Pair("fr", "de", model)])
    with TestClient(create_app(served, {}, Limits(), 1.0)) as client:
        for text, source in ((EN, "en"), (FR, "fr")):
            got = client.post("/translate", json={"q": text, "source": "auto", "target": "de"})
            assert got.status_code == 200, got.text
            assert got.json()["detectedLanguage"]["language"] == source
            ranked = client.post("/detect", data={"q": text}).json()
            assert [r["language"] for r in ranked][0] == source and len(ranked) == 2
            assert ranked[0]["confidence"] > ranked[1]["confidence"]
        assert [b.requests for b in (p.batcher for p in served.all)] == [1, 1]


def test_a_model_whose_run_is_another_pair_is_one_line(cli, tiny_run):
    assert_user_error(cli("serve", "--model", f"de-en={tiny_run}", "--port", "0"), None,
                      "the run translates en-de")
    assert_user_error(cli("serve", tiny_run, "--model", f"en-de={tiny_run}"), 2, "not both")
    assert_user_error(cli("serve", "--port", "0"), 2, "not neither")
    assert_user_error(cli("serve", "--model", "en-de", "--port", "0"), 2, "give SOURCE-TARGET")


def test_a_run_twice_or_for_two_pairs_is_a_usage_error_before_loading(cli, tiny_run, tmp_path):
    missing = tmp_path / "missing"  # nothing is loaded: a run that is not there is not read
    for models, needle in (
            ([f"en-de={tiny_run},{tiny_run}"], f"{tiny_run} named twice; an ensemble's members"),
            ([f"en-de={tiny_run},{tiny_run}/../{tiny_run.name}"], "named twice"),
            ([f"en-de={tiny_run}", f"de-en={tiny_run}"],
             f"{tiny_run}: served for en-de and de-en; a run translates one pair"),
            ([f"en-de={tiny_run}", f"de-en={tiny_run / 'best.pt'}"], "served for en-de and de-en"),
            ([f"en-de={missing}", f"en-de={missing}"], "en-de: served twice")):
        assert_user_error(cli("serve", *(a for m in models for a in ("--model", m)),
                              "--port", "0"), 2, "Invalid value for '--model'", needle)
    # two checkpoints of one run are an ensemble; two runs that are not there, two pairs
    assert [(s, t, len(runs)) for s, t, runs in parse_models([
        f"en-de={tiny_run / 'best.pt'},{tiny_run / 'last.pt'}", f"de-en={missing / 'a'}",
        f"fr-en={missing / 'b'}"])] == [("en", "de", 2), ("de", "en", 1), ("fr", "en", 1)]


def test_each_model_is_loaded_once_and_every_api_uses_it(tiny_run, reverse_run):
    """Two pairs, each its own run, as `mt serve --model` loads them: two models in memory,
    each pair's batcher on its pair's one Translator, and mt's own API, LibreTranslate's and
    DeepL's all answered by them (no API loads a model of its own)."""
    from starlette.testclient import TestClient

    from mt.commands.options import TranslateOptions
    from mt.commands.serve import load_pair, pair_specs
    from mt.document.segment import sentencizer
    from mt.model import Seq2Seq
    from mt.serve.app import Limits, create_app

    def models() -> set[int]:
        gc.collect()
        return {id(o) for o in gc.get_objects() if type(o) is Seq2Seq}  # no proxy asked

    before = models()
    specs = pair_specs(None, (f"en-de={tiny_run}", f"de-en={reverse_run}"))
    sentencizer.cache_clear()
    served = Pairs([load_pair(*spec, TranslateOptions(), False) for spec in specs])
    # each source's sentence splitter made before the first request, not by it
    assert sentencizer.cache_info().currsize == 2
    with TestClient(create_app(served, served.default.info, Limits(), 1.0)) as client:
        answers = [client.post("/translate", json={"text": "a cat", "target": "de"}),
                   client.post("/translate", json={"q": "a cat", "source": "en", "target": "de"}),
                   client.post("/v2/translate", json={"text": ["Katze"], "target_lang": "EN"})]
        assert [a.status_code for a in answers] == [200] * 3, [a.text for a in answers]
        assert all(p.batcher.translator is p.translator for p in served.all)
        assert [p.batcher.requests for p in served.all] == [2, 1]  # routed by pair
        loaded = models() - before
    assert loaded == {id(p.translator.model) for p in served.all} and len(loaded) == 2


def test_a_memory_spec_names_its_pair_where_several_are_served():
    from mt.serve.pairs import parse_memories

    assert parse_memories(["tm.db"], None) == {None: "tm.db"}  # RUN...: its pair, once loaded
    assert parse_memories(["EN-de=tm.db"], None) == {"en-de": "tm.db"}
    url = "postgresql://mt@db/tm?sslmode=require"  # an `=` that names no pair
    assert parse_memories([url], ["en-de"]) == {None: url}
    two = ["en-de", "de-en"]
    assert parse_memories(["de-en=b.db", "en-de=a.db"], two) == {"de-en": "b.db", "en-de": "a.db"}
    for specs, message in ((["tm.db"], "several pairs are served; name the pair the memory is "
                                       "for, e.g. en-de=tm.db"),
                           (["fr-en=tm.db"], "fr-en is not served here; the pairs are en-de, "
                                             "de-en"),
                           (["en-de=a.db", "en-de=b.db"], "a second memory for en-de"),
                           (["en-de="], "give MEMORY")):
        with pytest.raises(ValueError, match=message):
            parse_memories(specs, two)
    with pytest.raises(ValueError, match="a second memory for the pair"):
        parse_memories(["a.db", "b.db"], None)
