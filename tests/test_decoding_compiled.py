"""mt/decoding/compiled.py: decode.compile. The compiled step gives the eager step's outputs;
a search over inputs of many lengths compiles once per shape of the ladder, not per step or
per input; auto never compiles for one line, nor before the process has decoded BREAK_EVEN
source tokens with the model."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
import torch._dynamo
from test_decoding_rules import beam_search, greedy, random_src, small_model

from mt.config import DecodeConfig
from mt.decoding import compiled


@pytest.fixture
def counted(monkeypatch):
    """Compiles counted afresh; each graph lowered by running it as it is (no Inductor: what is
    counted is how often torch.compile compiles, which the backend does not change); and
    each shape the compiled step is called with, in `shapes`."""
    torch._dynamo.reset()
    monkeypatch.setattr(compiled, "_step", None)
    monkeypatch.setattr(compiled, "STATS", compiled.Stats())
    monkeypatch.setattr(compiled, "lower", lambda gm, example_inputs: gm.forward)
    shapes, step_of = set(), compiled.step_of

    def recording(model):
        step = step_of(model)

        def run(tokens, pos, keys, values, cross, src_mask, length, need_weights):
            shapes.add((tuple(keys[0].shape), tuple(cross[0][0].shape), need_weights))
            return step(tokens, pos, keys, values, cross, src_mask, length, need_weights)
        return run

    monkeypatch.setattr(compiled, "step_of", recording)
    yield shapes
    torch._dynamo.reset()


@pytest.mark.slow  # a trace per shape: about 40 s on two shared cores
def test_many_lengths_compile_once_per_shape_of_the_ladder(counted):
    V = 12
    model = small_model(V, 0)
    cfg = DecodeConfig(max_len_a=1.0, max_len_b=3, compile="on")
    searches = 0
    # two source lengths on each of the rungs 6 and 12, each batch twice: many inputs, few
    # shapes (a trace per shape is the cost; a search of a shape already compiled is cheap)
    for S, B, seed in itertools.product((5, 6, 11, 12), (1, 2, 5, 7), (0, 1)):
        greedy(model, random_src(B, S, V, S * B + 100 * seed), cfg)
        searches += 1
    beam = DecodeConfig(beam=3, max_len_a=1.0, max_len_b=3, compile="on")
    for S in (3, 9):
        beam_search(model, random_src(4, S, V, S), beam, attend=True)
        searches += 1
    # rows 1..7 (x3 for beam) and source lengths 5..12 on the ladder's rungs; greedy's and
    # beam search's (with attention weights) shapes apart
    assert compiled.STATS.compiles <= len(counted) < searches  # never once per step or input
    plain = [s for s in counted if not s[2]]
    rows, lengths = {s[0][0] for s in plain}, {s[1][2] for s in plain}
    assert len(rows) <= 6 and len(lengths) <= 7  # 1, 2, 3, 4, 6, 8 and 2, 3, 4, 6, 8, 12, 16
    assert len(plain) <= len(rows) * len(lengths)  # the length limit adds no shape
    # beam 3 over 4 sentences: 4 rows at the first step, then 12, 9, 6 or 3; 2 lengths
    assert len(counted) - len(plain) <= 5 * 2
    print(f"{searches} searches, {len(counted)} shapes, {compiled.STATS.compiles} compiles")


def test_auto_never_compiles_one_line_nor_before_break_even(monkeypatch):
    model, V = small_model(12, 0), 12
    monkeypatch.setattr(compiled, "BREAK_EVEN", 30)
    two, one = random_src(2, 8, V, 0), random_src(1, 8, V, 0)
    assert not compiled.wanted("auto", model, two)  # 15 tokens decoded
    assert not compiled.wanted("auto", model, two)  # 30
    assert compiled.wanted("auto", model, two) and not compiled.wanted("auto", model, one)
    assert not compiled.wanted("auto", small_model(12, 1), two)  # counted per model
    assert compiled.wanted("on", model, one) and not compiled.wanted("off", model, two)


@pytest.mark.slow
def test_the_inductor_compiled_step_translates_as_the_eager_one(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    torch._dynamo.reset()
    monkeypatch.setattr(compiled, "_step", None)
    V = 12
    # one row: one shape to compile (each is seconds of C++ compiling on a CPU)
    model, src = small_model(V, 3), random_src(1, 7, V, 3)
    eager = greedy(model, src, DecodeConfig(max_len_a=1.0, max_len_b=3, compile="off"))
    before = compiled.STATS.compiles
    fast = greedy(model, src, DecodeConfig(max_len_a=1.0, max_len_b=3, compile="on"))
    assert fast == eager and compiled.STATS.compiles > before
    torch._dynamo.reset()


def test_a_bf16_step_compiles_and_greedy_keeps_its_tokens(counted):
    # bf16 attention takes torch's fused kernel, which once refused the step's mask of the
    # padded positions as a 1-D tensor; traced here, as a compiled search would be
    V = 12
    model = small_model(V, 5).to(torch.bfloat16)
    src = random_src(3, 6, V, 5)
    cfg = DecodeConfig(max_len_a=1.0, max_len_b=3)
    eager = greedy(model, src, cfg)
    fast = greedy(model, src, dataclasses.replace(cfg, compile="on"))
    assert compiled.STATS.compiles > 0 and len(fast) == len(eager)
    same = sum(a == b for a, b in zip(fast, eager, strict=True))
    assert same >= 2, (fast, eager)  # bf16: the padded sum may round a near tie otherwise
