"""mt/decoding/precision.py (decode.dtype int8): the quantized copy keeps the float32 model's
translations on the toy test set, beam search with beam 1 equals greedy in int8, every command
decodes in int8, and where int8 cannot run there is one warning (no fast kernel) or one line
(no kernel)."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import sys
import urllib.request

import pytest
import torch
from test_decoding_rules import beam_search, greedy

from benchmarks.bench_serve import Served
from conftest import TOY, assert_user_error, run_mt
from mt.checkpoint import load_run
from mt.decoding import precision as int8
from mt.ensemble import Ensemble
from mt.translator import Translator

pytestmark = pytest.mark.skipif(not (int8.quantizable() and int8.cpu_has_int8()),
                                reason="this CPU or torch build has no fast int8 kernel")
TEST = (TOY / "toy.test.en").read_text().splitlines()


@pytest.fixture(scope="module")
def run(tiny_run):
    return load_run(tiny_run, "cpu")


def translator(run, dtype: str, **decode) -> Translator:
    return Translator(run, dataclasses.replace(run.cfg.decode, dtype=dtype, **decode))


def test_every_linear_is_int8_and_the_float_model_is_left_alone(run):
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    q = int8.int8_model(run.model, torch.device("cpu"))
    kinds = {type(m) for m in q.modules()}
    assert torch.nn.Linear not in kinds and int8.Int8Linear in kinds
    assert isinstance(q.generator, int8.Int8Linear)  # the output projection too
    assert q.tgt_embed.weight.dtype == torch.float32  # tied to the generator: kept as it was
    assert all(torch.equal(v, run.model.state_dict()[k]) for k, v in before.items())
    # the int8 product is close to the float one, not equal (else nothing was quantized)
    x = torch.randn(5, run.model.cfg.d_model)
    exact, approx = run.model.generator(x), q.generator(x)
    assert not torch.equal(exact, approx)
    assert (exact - approx).abs().max() < 0.05 * exact.abs().max()


@pytest.mark.parametrize("beam", [1, 3])
def test_int8_translates_the_toy_test_set_as_float32_does(run, beam):
    f32 = translator(run, "float32", beam=beam).translate(TEST)
    q8 = translator(run, "int8", beam=beam).translate(TEST)
    same = sum(a == b for a, b in zip(f32, q8, strict=True))
    assert same >= 0.95 * len(TEST), (same, len(TEST))


def test_int8_beam_search_with_beam_1_is_int8_greedy(run):
    tr = translator(run, "int8")
    src = torch.nn.utils.rnn.pad_sequence(
        [torch.tensor(run.src_vocab.encode(tr.src_tok.tokenize(line))) for line in TEST[:20]],
        batch_first=True)
    cfg = dataclasses.replace(run.cfg.decode, beam=1, nbest=1)
    with torch.no_grad():
        found = [h[0].tokens for h in beam_search(tr.model, src, cfg)]
        assert found == greedy(tr.model, src, cfg)


def test_an_ensemble_and_a_logits_bias_quantize(run):
    pair = Ensemble([run.model, run.model]).eval()
    q = int8.int8_model(pair, torch.device("cpu"))
    assert all(isinstance(m.generator, int8.Int8Linear) for m in q.models)
    model = copy.deepcopy(run.model)
    del model.logits_bias
    model.register_buffer("logits_bias", torch.linspace(-3, 3, model.vocab_size))  # as Marian's
    q = int8.int8_model(model, torch.device("cpu"))
    x = torch.randn(3, model.cfg.d_model)
    assert q.logits_bias is None  # folded into the int8 generator
    exact = model.next_scores(x)
    assert (q.next_scores(x) - exact).abs().max() < 0.05 * exact.abs().max()


def test_an_ensemble_of_the_run_with_itself_translates_in_int8_as_the_run_does(tiny_run):
    one = Translator.load(tiny_run, dtype="int8", beam=3).translate(TEST[:40])
    assert Translator.load([tiny_run, tiny_run], dtype="int8", beam=3).translate(TEST[:40]) == one
    r = run_mt("translate", str(tiny_run), str(tiny_run), "--dtype", "int8", "--beam", "3",
               input="\n".join(TEST[:40]) + "\n")
    assert r.code == 0 and r.out.splitlines() == one, r.err


def test_every_command_decodes_in_int8(tiny_run, tmp_path):
    r = run_mt("translate", str(tiny_run), "--dtype", "int8", "--beam", "3", "-i",
               str(TOY / "toy.test.en"))
    assert r.code == 0 and r.out.splitlines() == translator(
        load_run(tiny_run, "cpu"), "int8", beam=3).translate(TEST), r.err
    r = run_mt("eval", str(tiny_run), "--dtype", "int8", "--split", "test", "--json")
    assert r.code == 0 and json.loads(r.out)["bleu"] > 50, r.err  # the toy model learned
    served = Served(tiny_run, "--dtype", "int8")
    try:
        body = json.dumps({"text": TEST[:3]}).encode()
        request = urllib.request.Request(served.url + "/translate", body,
                                         {"Content-Type": "application/json"})
        answer = json.load(urllib.request.urlopen(request, timeout=60))
    finally:
        assert served.stop() == 0
    got = [t["text"] for t in answer["translations"]]
    assert got == Translator.load(tiny_run, dtype="int8").translate(TEST[:3])


def test_no_fast_kernel_warns_once_and_decodes_in_float32(run, monkeypatch, capsys):
    monkeypatch.setattr(int8, "cpu_has_int8", lambda: False)
    tr = translator(run, "int8")
    assert tr.model is run.model
    assert capsys.readouterr().err.count("no fast int8 kernel on a CPU without VNNI or AMX") == 1
    assert tr.translate(TEST[:5]) == translator(run, "float32").translate(TEST[:5])


def test_a_torch_without_quantized_kernels_is_one_line(tiny_run, tmp_path):
    # as in a torch build without oneDNN's quantized engine, or after torch.ao's removal
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import mt.decoding.precision as p\np.quantizable = lambda: False\n")
    r = run_mt("translate", str(tiny_run), "--dtype", "int8", input="one two\n",
               env={"PYTHONPATH": os.pathsep.join([str(site), *sys.path])})
    assert_user_error(r, 3, "decode.dtype int8", "no quantized linear")
