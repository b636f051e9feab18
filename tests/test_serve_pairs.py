"""mt/serve/pairs.py: --model specs, and a request's source and target routed to a pair; the
command's refusals of a --model that does not fit (one line, no traceback)."""

from __future__ import annotations

import gc
from types import SimpleNamespace

import pytest

from conftest import assert_user_error
from mt.serve.access import ClientError
from mt.serve.pairs import Pair, Pairs, parse_model


def pairs(*names: str) -> Pairs:
    return Pairs([Pair(*n.split("-"), SimpleNamespace()) for n in names])


def test_a_model_spec_names_its_pair_and_runs():
    assert parse_model("DE-en=runs/a") == ("de", "en", [__import__("pathlib").Path("runs/a")])
    assert [str(p) for p in parse_model("en-de=runs/b, runs/c")[2]] == ["runs/b", "runs/c"]
    for bad in ("de-en", "deen=runs/a", "de-en=", "=runs/a"):
        with pytest.raises(ValueError, match="give SOURCE-TARGET=RUN"):
            parse_model(bad)


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
    with pytest.raises(ValueError, match="en-de: served twice"):
        pairs("en-de", "en-de")


def test_a_model_whose_run_is_another_pair_is_one_line(cli, tiny_run):
    assert_user_error(cli("serve", "--model", f"de-en={tiny_run}", "--port", "0"), None,
                      "the run translates en-de")
    assert_user_error(cli("serve", tiny_run, "--model", f"en-de={tiny_run}"), 2, "not both")
    assert_user_error(cli("serve", "--port", "0"), 2, "not neither")
    assert_user_error(cli("serve", "--model", "en-de", "--port", "0"), 2, "give SOURCE-TARGET")


def test_each_model_is_loaded_once_and_every_api_uses_it(tiny_run, reverse_run):
    """Two pairs, each its own run, as `mt serve --model` loads them: two models in memory,
    each pair's batcher on its pair's one Translator, and mt's own API, LibreTranslate's and
    DeepL's all answered by them (no API loads a model of its own)."""
    from starlette.testclient import TestClient

    from mt.commands.options import TranslateOptions
    from mt.commands.serve import load_pair, pair_specs
    from mt.model import Seq2Seq
    from mt.serve.app import Limits, create_app

    def models() -> set[int]:
        gc.collect()
        return {id(o) for o in gc.get_objects() if type(o) is Seq2Seq}  # no proxy asked

    before = models()
    specs = pair_specs(None, (f"en-de={tiny_run}", f"de-en={reverse_run}"))
    served = Pairs([load_pair(*spec, TranslateOptions(), False) for spec in specs])
    with TestClient(create_app(served, served.default.info, Limits(), 1.0)) as client:
        answers = [client.post("/translate", json={"text": "a cat", "target": "de"}),
                   client.post("/translate", json={"q": "a cat", "source": "en", "target": "de"}),
                   client.post("/v2/translate", json={"text": ["Katze"], "target_lang": "EN"})]
        assert [a.status_code for a in answers] == [200] * 3, [a.text for a in answers]
        assert all(p.batcher.translator is p.translator for p in served.all)
        assert [p.batcher.requests for p in served.all] == [2, 1]  # routed by pair
        loaded = models() - before
    assert loaded == {id(p.translator.model) for p in served.all} and len(loaded) == 2
