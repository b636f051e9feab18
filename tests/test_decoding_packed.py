"""mt/decoding/packed.py: a bf16 model that decodes on a CPU with bf16 in hardware has every
Linear packed (a feed-forward's first with its ReLU inside), computes what torch's own
product computes, translates as the unpacked bf16 model does, and leaves the run's float32
model alone; elsewhere nothing is packed."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from conftest import TOY, run_mt
from mt.checkpoint import load_run
from mt.decoding import compiled, packed, precision
from mt.decoding.precision import decoding_model
from mt.decoding.shortlist import Shortlisted
from mt.ensemble import Ensemble
from mt.translator import Translator

CPU = torch.device("cpu")
can_pack = pytest.mark.skipif(
    not packed.packable(torch.nn.Linear(2, 2).bfloat16()),
    reason="this CPU has no bf16 in hardware, or torch no oneDNN: nothing is packed")
TEST = (TOY / "toy.test.en").read_text().splitlines()


@pytest.fixture(scope="module")
def run(tiny_run):
    return load_run(tiny_run, "cpu")


def translator(run, packs: bool, monkeypatch, **decode) -> Translator:
    monkeypatch.setattr(packed, "PACK", packs)
    return Translator(run, dataclasses.replace(run.cfg.decode, dtype="bf16", **decode))


@can_pack
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("rows", [1, 7, 300])
def test_a_packed_product_is_torchs(relu, rows):
    linear = torch.nn.Linear(64, 96).bfloat16()
    x = torch.randn(rows, 64).bfloat16()
    want = F.linear(x, linear.weight, linear.bias)
    got = packed.PackedLinear(linear.weight, linear.bias, relu=relu)(x)
    torch.testing.assert_close(got, want.relu() if relu else want)
    x3 = x.view(1, rows, 64)  # (B, T, D), as the decoder's layers call it
    torch.testing.assert_close(packed.PackedLinear(linear.weight, linear.bias)(x3),
                               want.view(1, rows, 96))


@can_pack
def test_every_linear_of_a_bf16_decoding_model_is_packed_and_float32_left_alone(run):
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    model = decoding_model(run.model, "bf16", CPU)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(isinstance(m, packed.PackedLinear) for m in linears)
    firsts = [layer.ff.net[0] for layer in [*model.encoder, *model.decoder]]
    assert all(m.relu for m in firsts)  # the ReLU inside the feed-forward's first product
    assert sum(m.relu for m in linears) == len(firsts)
    assert not any(isinstance(m, packed.PackedLinear) for m in run.model.modules())
    assert all(torch.equal(v, run.model.state_dict()[k]) for k, v in before.items())
    assert model.state_dict().keys() == run.model.state_dict().keys()


@can_pack
@pytest.mark.parametrize("beam", [1, 3])
def test_packed_bf16_translates_as_unpacked_bf16(run, beam, monkeypatch):
    plain = translator(run, False, monkeypatch, beam=beam)
    assert not any(isinstance(m, packed.PackedLinear) for m in plain.model.modules())
    fast = translator(run, True, monkeypatch, beam=beam)
    assert fast.translate(TEST) == plain.translate(TEST)


@can_pack
def test_a_copy_an_ensemble_and_a_shortlist_of_a_packed_model(run):
    model = decoding_model(run.model, "bf16", CPU)
    twin = copy.deepcopy(model)
    assert isinstance(twin.generator, packed.PackedLinear)
    assert twin.generator.packed is not model.generator.packed
    x = torch.randn(4, run.model.cfg.d_model).bfloat16()
    torch.testing.assert_close(twin.next_scores(x), model.next_scores(x))
    pair = decoding_model(Ensemble([run.model, run.model]).eval(), "bf16", CPU)
    assert all(isinstance(m.generator, packed.PackedLinear) for m in pair.models)
    ids = torch.tensor([1, 3, 5])
    listed = Shortlisted(model, ids)
    assert isinstance(listed.project, packed.PackedLinear)  # its rows packed too, once a batch
    torch.testing.assert_close(listed.next_scores(x), model.next_scores(x)[:, ids])


def test_nothing_is_packed_in_float32_or_when_turned_off(run, monkeypatch):
    assert not packed.packable(run.model)  # float32: the run's own model, never packed
    monkeypatch.setattr(packed, "PACK", False)
    model = decoding_model(run.model, "bf16", CPU)
    assert not any(isinstance(m, packed.PackedLinear) for m in model.modules())


@pytest.mark.parametrize("amx, vnni, bf16, want", [
    (True, True, True, "bf16"), (False, True, True, "int8"), (False, False, True, "bf16"),
    (False, False, False, "float32")])
def test_auto_picks_the_fastest_dtype_of_the_cpu(monkeypatch, amx, vnni, bf16, want):
    monkeypatch.setattr(precision, "cpu_has_amx", lambda: amx)
    monkeypatch.setattr(precision, "cpu_has_int8", lambda: vnni)
    monkeypatch.setattr(precision, "quantizable", lambda: True)
    monkeypatch.setattr(precision, "has_native_bf16", lambda device: bf16)
    assert precision.fastest_dtype(CPU) == want


def test_dtype_auto_translates_as_the_dtype_it_picks(tiny_run):
    want = precision.fastest_dtype(CPU)
    r = run_mt("translate", str(tiny_run), "--dtype", "auto", "--beam", "3",
               input="\n".join(TEST[:30]) + "\n")
    assert r.code == 0, r.err
    assert r.out.splitlines() == Translator.load(tiny_run, dtype=want, beam=3).translate(TEST[:30])


@can_pack
def test_a_compiled_step_traces_a_packed_model(run, monkeypatch):
    # Traced, then run as traced (no Inductor): a packed model's compiled step multiplies by
    # the plain weights, so it translates as the unpacked model's compiled step does.
    monkeypatch.setattr(compiled, "lower", lambda gm, example_inputs: gm.forward)
    out = {}
    for packs in (False, True):
        torch._dynamo.reset()
        monkeypatch.setattr(compiled, "_step", None)
        monkeypatch.setattr(compiled, "STATS", compiled.Stats())
        tr = translator(run, packs, monkeypatch, beam=2, compile="on")
        assert isinstance(tr.model.generator, packed.PackedLinear) == packs
        out[packs] = tr.translate(TEST[:6])
        assert compiled.STATS.compiles > 0
    torch._dynamo.reset()
    assert out[True] == out[False]
