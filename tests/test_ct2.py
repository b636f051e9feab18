"""CTranslate2 export and engine: the exported model computes what mt's model computes."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch

from conftest import ROOT, TOY, assert_user_error, leftovers, run_mt, snapshot

ctranslate2 = pytest.importorskip("ctranslate2")

from mt.checkpoint import load_run  # noqa: E402
from mt.commands.export import export  # noqa: E402
from mt.ct2.export import QUANTIZATIONS, build_spec  # noqa: E402
from mt.ct2.search import CTranslate2Engine  # noqa: E402
from mt.data import pad, read_parallel  # noqa: E402
from mt.decode import greedy  # noqa: E402
from mt.vocab import BOS, EOS  # noqa: E402


@pytest.fixture(scope="module")
def toy_test(tiny_run):
    """The toy test set as source ids, and mt's greedy outputs for it."""
    run = load_run(tiny_run)
    src, _ = read_parallel(TOY / "toy.test.en", TOY / "toy.test.de")
    ids = [run.src_vocab.encode(t) for t in run.src_tok.tokenize_many(src)]
    c = run.cfg.decode
    return run, ids, greedy(run.model, pad(ids), c)


@pytest.fixture(scope="module")
def exported(tiny_run, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("ct2") / "model"
    export(tiny_run, out)
    return out


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


def test_greedy_ids_and_log_probs_match_mt(toy_test, exported):
    run, ids, hyps = toy_test
    search = CTranslate2Engine(exported, run.src_vocab, run.tgt_vocab,
                               run.cfg.model.max_positions, threads=1)
    found = search.search(pad(ids), run.cfg.decode, scored=False)
    assert [h[0].tokens for h in found] == hyps
    assert len(hyps) == 300 and sum(map(len, hyps)) > 1000
    assert logprob_gap(exported, run, ids, hyps) < 1e-4


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


def test_engine_through_the_cli(tiny_run, exported, tmp_path):
    src = str(TOY / "toy.test.en")
    ours = run_mt("translate", str(tiny_run), "-i", src, "--device", "cpu")
    theirs = run_mt("translate", "--engine", "ctranslate2", str(exported), "-i", src)
    assert ours.code == 0 and theirs.code == 0, (ours.err, theirs.err)
    assert theirs.out == ours.out and len(ours.out.splitlines()) == 300
    # n-best scores are mt's, from CTranslate2's log-probabilities
    nbest = run_mt("translate", "--engine", "ctranslate2", str(exported), "--beam", "3",
                   "--nbest", "2", "--length-norm", "average", input="Today you have eight cats.\n")
    mine = run_mt("translate", str(tiny_run), "--beam", "3", "--nbest", "2", "--length-norm",
                  "average", input="Today you have eight cats.\n")
    assert nbest.code == 0, nbest.err
    first = [line.split("\t") for line in nbest.out.splitlines()][0]
    expect = [line.split("\t") for line in mine.out.splitlines()][0]
    assert first[2] == expect[2] and math.isclose(float(first[1]), float(expect[1]), abs_tol=2e-4)
    # eval of a run directory: exported on the fly, same BLEU as mt's own greedy search
    ev = run_mt("eval", "--engine", "ctranslate2", str(tiny_run), "--json")
    ev_mt = run_mt("eval", str(tiny_run), "--json", "--device", "cpu")
    assert ev.code == 0, ev.err
    assert json.loads(ev.out)["bleu"] == json.loads(ev_mt.out)["bleu"] > 90


def test_quantized_export_translates(tiny_run, tmp_path):
    out = tmp_path / "int8"
    r = run_mt("export", str(tiny_run), "--to", "ctranslate2", str(out), "--quantization", "int8")
    assert r.code == 0, r.err
    assert json.loads((out / "mt_export.json").read_text())["quantization"] == "int8"
    ev = run_mt("eval", "--engine", "ctranslate2", str(out), "--json")
    assert ev.code == 0, ev.err
    assert json.loads(ev.out)["bleu"] > 90


def test_existing_output_needs_force(tiny_run, exported, tmp_path):
    out = tmp_path / "model"
    shutil.copytree(exported, out)
    (out / "stale.txt").write_text("old")
    r = run_mt("export", str(tiny_run), "--to", "ctranslate2", str(out))
    assert_user_error(r, 6, "already exists", "--force")
    assert (out / "stale.txt").is_file()
    r = run_mt("export", str(tiny_run), "--to", "ctranslate2", str(out), "--force")
    assert r.code == 0, r.err
    assert not (out / "stale.txt").exists() and (out / "model.bin").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]  # no temporary left


def test_bad_checkpoints_are_refused(tiny_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    out = tmp_path / "out"
    cases = {"missing": None, "truncated": (run / "best.pt").read_bytes()[:1000],
             "foreign": b"not a checkpoint\n"}
    for case, content in cases.items():
        ckpt = run / f"{case}.pt"
        if content is not None:
            ckpt.write_bytes(content)
        r = run_mt("export", str(ckpt), "--to", "ctranslate2", str(out))
        assert_user_error(r, 5)
        assert not out.exists(), case


def test_unsupported_quantization_names_the_supported_ones(tiny_run, tmp_path):
    supported = ctranslate2.get_supported_compute_types("cpu")
    if ctranslate2.get_cuda_device_count() > 0:
        supported |= ctranslate2.get_supported_compute_types("cuda")
    unsupported = [q for q in QUANTIZATIONS if q not in supported]
    if not unsupported:
        pytest.skip("this machine runs every quantization")
    r = run_mt("export", str(tiny_run), "--to", "ctranslate2", str(tmp_path / "out"),
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


def _truncate(size):
    return lambda d: (d / "model.bin").write_bytes((d / "model.bin").read_bytes()[:size(d)])


DAMAGE = {  # what is done to a copy of an export -> what the error line names
    "model.bin cut to 0 bytes": (_truncate(lambda d: 0), "model.bin is incomplete"),
    "model.bin cut to 1000 bytes": (_truncate(lambda d: 1000), "invalid payload size"),
    "model.bin cut short by a byte": (_truncate(lambda d: (d / "model.bin").stat().st_size - 1),
                                      "model.bin is incomplete"),
    **{f"{name} missing": (lambda d, name=name: (d / name).unlink(), f"{name} missing")
       for name in ("model.bin", "config.json", "config.yaml", "vocab.src.txt", "vocab.tgt.txt")},
    "source_vocabulary.json missing": (lambda d: (d / "source_vocabulary.json").unlink(),
                                       "source vocabulary"),
    "target_vocabulary.json damaged": (lambda d: (d / "target_vocabulary.json").write_text("x"),
                                       "parse error"),
    "config.yaml damaged": (lambda d: (d / "config.yaml").write_text("model: [\n"), "line 2"),
    "vocab.src.txt damaged": (lambda d: (d / "vocab.src.txt").write_text("a\nb\n"),
                              "not a valid vocabulary"),
    "mt_export.json damaged": (lambda d: (d / "mt_export.json").write_text("{"),
                               "mt_export.json"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_export_is_a_checkpoint_error_that_says_export_again(cli, tiny_run, exported,
                                                                       tmp_path, case):
    damage, needle = DAMAGE[case]
    model = Path(shutil.copytree(exported, tmp_path / "model"))
    damage(model)
    before = snapshot(model)
    src = tmp_path / "in.txt"
    src.write_text("Today you have eight cats.\n")
    out = tmp_path / "out.txt"
    again = ("damaged CTranslate2 export", "export it again: mt export ",
             f"--to ctranslate2 {model} --force")
    if case != "mt_export.json damaged":  # the marker names the checkpoint exported
        again = (*again, f"mt export {tiny_run / 'best.pt'} ")
    r = cli("translate", "--engine", "ctranslate2", model, "-i", src, "-o", out)
    assert_user_error(r, 5, str(model), needle, *again)
    assert r.out == "" and not out.exists() and leftovers(tmp_path) == []
    assert snapshot(model) == before
    if case == "config.yaml damaged":  # eval opens it the same way
        assert_user_error(cli("eval", "--engine", "ctranslate2", model, "--json"), 5, *again)


def test_an_override_that_breaks_a_sound_export_is_a_config_error(cli, exported):
    r = cli("translate", "--engine", "ctranslate2", exported, "--set", "model.bogus=1",
            stdin=b"eight cats\n")
    assert_user_error(r, 3, "--set model.bogus=1", "unknown key")


@pytest.mark.parametrize("activation", ["gelu", "silu"])
def test_the_feed_forward_activation_is_exported(tiny_run, toy_test, exported, tmp_path,
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
    assert logprob_gap(exported, other, ids[:50], hyps[:50]) > 1e-3
