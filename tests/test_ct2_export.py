"""mt/ct2/export.py: a trained model as a CTranslate2 model: the export computes what mt's
model computes (greedy ids and log-probabilities; a wrong position table is caught), quantized
exports translate, unsupported quantizations and the missing extra are one line, and exporting
leaves the model as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from conftest import ROOT, TOY, assert_user_error, run_mt

ctranslate2 = pytest.importorskip("ctranslate2")

from test_decoding_rules import greedy  # noqa: E402

from mt.checkpoint import load_run  # noqa: E402
from mt.ct2.export import QUANTIZATIONS, build_spec  # noqa: E402
from mt.ct2.search import CTranslate2Engine  # noqa: E402
from mt.data import pad, read_parallel  # noqa: E402
from mt.decoding.request import SearchRequest  # noqa: E402
from mt.vocab import BOS, EOS  # noqa: E402


@pytest.fixture(scope="module")
def toy_test(tiny_run):
    """The toy test set as source ids, and mt's greedy outputs for it."""
    run = load_run(tiny_run)
    src, _ = read_parallel(TOY / "toy.test.en", TOY / "toy.test.de")
    ids = [run.src_vocab.encode(t) for t in run.src_tok.tokenize_many(src)]
    c = run.cfg.decode
    return run, ids, greedy(run.model, pad(ids), c)


def logprob_gap(model_dir: Path, run, ids: list[list[int]], hyps: list[list[int]]) -> float:
    """Largest difference between CTranslate2's and mt's per-token log-probabilities of the
    outputs hyps (each closed by <eos>), teacher-forced."""
    translator = ctranslate2.Translator(str(model_dir), intra_threads=1)
    src = [[run.src_vocab.itos[i] for i in x] for x in ids]
    tgt = [[run.tgt_vocab.itos[t] for t in h] for h in hyps]
    results = translator.score_batch(src, tgt, max_input_length=0)
    gap = 0.0
    with torch.no_grad():
        for x, h, r in zip(ids, hyps, results, strict=True):
            lprobs = run.model(torch.tensor([x]), torch.tensor([[BOS] + h]))[0].log_softmax(-1)
            ours = lprobs.gather(-1, torch.tensor(h + [EOS])[:, None])[:, 0]
            theirs = torch.tensor(r.log_probs)
            assert theirs.shape == ours.shape  # one per token, <eos> included
            gap = max(gap, (theirs - ours).abs().max().item())
    return gap


def test_greedy_ids_and_log_probs_match_mt(toy_test, ct2_export):
    run, ids, hyps = toy_test
    search = CTranslate2Engine(ct2_export, run.src_vocab, run.tgt_vocab,
                               run.cfg.model.max_positions, threads=1)
    found = search.search(SearchRequest(pad(ids), run.cfg.decode))
    assert [h[0].tokens for h in found] == hyps
    assert len(hyps) == 300 and sum(map(len, hyps)) > 1000
    assert logprob_gap(ct2_export, run, ids, hyps) < 1e-4


def test_a_wrong_position_table_is_caught(tiny_run, toy_test, tmp_path):
    """CTranslate2's own layout (all sines, then all cosines) in place of mt's interleaved one:
    the log-probability check above must fail."""
    run, ids, hyps = toy_test
    model = load_run(tiny_run).model  # a second copy: the shared one keeps the right table
    table = model.positions.table  # (max_positions, D), sin and cos interleaved
    table.copy_(torch.cat([table[:, 0::2], table[:, 1::2]], dim=1))
    assert not torch.equal(table, run.model.positions.table)
    spec = build_spec(model, run.src_vocab.itos, run.tgt_vocab.itos)
    spec.optimize()
    spec.save(str(tmp_path))
    assert logprob_gap(tmp_path, run, ids, hyps) > 1e-2


def test_quantized_export_translates(cli, tiny_run, tmp_path):
    out = tmp_path / "int8"
    r = cli("export", str(tiny_run), "--to", "ctranslate2", str(out), "--quantization", "int8")
    assert r.code == 0, r.err
    assert json.loads((out / "mt_export.json").read_text())["quantization"] == "int8"
    ev = cli("eval", "--engine", "ctranslate2", str(out), "--json")
    assert ev.code == 0, ev.err
    assert json.loads(ev.out)["bleu"] > 90


def test_unsupported_quantization_names_the_supported_ones(cli, tiny_run, tmp_path):
    supported = ctranslate2.get_supported_compute_types("cpu")
    if ctranslate2.get_cuda_device_count() > 0:
        supported |= ctranslate2.get_supported_compute_types("cuda")
    unsupported = [q for q in QUANTIZATIONS if q not in supported]
    if not unsupported:
        pytest.skip("this machine runs every quantization")
    r = cli("export", str(tiny_run), "--to", "ctranslate2", str(tmp_path / "out"),
            "--quantization", unsupported[0])
    assert_user_error(r, 6, unsupported[0], "int8")
    assert not (tmp_path / "out").exists()


def test_without_the_extra_one_line_names_it(tiny_run, tmp_path):
    # A ctranslate2 that cannot be imported, first on the path: as if it were not installed.
    fake = tmp_path / "site" / "ctranslate2"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('No module named ctranslate2')\n")
    env = {"PYTHONPATH": f"{fake.parent}:{ROOT}"}
    r = run_mt("export", str(tiny_run), "--to", "ctranslate2", str(tmp_path / "out"), env=env)
    assert_user_error(r, 3, 'pip install "mt[ctranslate2]"')
    r = run_mt("translate", "--engine", "ctranslate2", str(tiny_run), input="eight cats\n",
               env=env)
    assert_user_error(r, 3, 'pip install "mt[ctranslate2]"')


def test_export_leaves_the_model_as_it_was(tiny_run, tmp_path):
    """Quantizing rewrites the spec's arrays in place: they must be copies, not the weights."""
    from mt.ct2.export import write_model

    run = load_run(tiny_run)
    before = {k: v.clone() for k, v in run.model.state_dict().items()}
    write_model(run, tmp_path, "int8")
    after = run.model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in before.items())


@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_the_feed_forward_activation_is_exported(tiny_run, toy_test, ct2_export, tmp_path,
                                                activation):
    """The toy model's weights under another activation: CTranslate2 scores as mt does, and
    the ReLU export does not (so the mapping is what the test sees)."""
    import dataclasses

    from mt.model import make_model

    run, ids, hyps = toy_test
    other = load_run(tiny_run)
    model = make_model(dataclasses.replace(other.model.cfg, activation=activation),
                       len(other.src_vocab), len(other.tgt_vocab)).eval()
    model.load_state_dict(other.model.state_dict())
    other = dataclasses.replace(other, model=model)
    spec = build_spec(model, run.src_vocab.itos, run.tgt_vocab.itos)
    spec.optimize()
    spec.save(str(tmp_path))
    assert logprob_gap(tmp_path, other, ids[:50], hyps[:50]) < 1e-4
    assert logprob_gap(ct2_export, other, ids[:50], hyps[:50]) > 1e-3


def test_an_export_keeps_the_runs_sentence_starters(tiny_run, ct2_export):
    from mt.checkpoint import open_run

    assert open_run(ct2_export).starters == open_run(tiny_run).starters != []
