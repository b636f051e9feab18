"""The lexical shortlist: learned from pairs (mt/shortlist.py), put in checkpoints by mt train
and mt shortlist, checked on load, used by the search (mt/decoding/shortlist.py: with every
token listed it is the full search; prefixes and glossary terms are never cut) and written
for CTranslate2 (vmap.txt)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
import torch

from conftest import TOY, assert_user_error, make_weights_only
from mt.checkpoint import load_checkpoint, load_run, save_checkpoint
from mt.config import DecodeConfig, ModelConfig
from mt.data import ParallelData, pad, read_parallel
from mt.decoding.engines import ModelEngine
from mt.decoding.precision import Int8Linear, quantizable
from mt.decoding.request import SearchRequest
from mt.decoding.shortlist import Shortlisted, listed
from mt.errors import CheckpointError
from mt.model import make_model
from mt.shortlist import Shortlist, learn
from mt.vocab import SPECIALS

N = len(SPECIALS)  # ids below are past the special tokens


def test_learn_ranks_a_words_translation_above_frequent_targets():
    # source 4 ("Haus") is always translated 10 ("house"); 11 ("the") is in every target
    src = [[4, 5], [4, 6], [5, 6], [4], [6, 5]]
    tgt = [[10, 11], [10, 11], [11, 12], [10, 11], [11, 12, 13]]
    table = learn([(ParallelData.from_lists(src, tgt), None, None)], 8, 15, k=2, frequent=1)
    assert table.row(4) == [10, 11]  # p(the | Haus) = 1 too, but Dice puts house first
    # 5 meets 12 in both of 12's pairs, 11 in three of its five: 2*2/(3+2) > 2*3/(3+5)
    assert table.row(5) == [12, 11] and table.row(7) == []
    assert table.frequent.tolist() == [11]
    assert table.offsets.tolist() == sorted(table.offsets.tolist())
    # a batch's candidates: its sources' lists, the frequent ones and the specials, sorted
    got = table.candidates(torch.tensor([[4, 0, 0]])).tolist()
    assert got == [*range(N), 10, 11]


def test_learn_maps_entry_ids_to_the_runs():
    src, tgt = [[1], [2], [1]], [[1], [2], [1]]  # entry ids, mapped to the run's below
    remap = torch.tensor([0, 6, 7]).numpy()
    table = learn([(ParallelData.from_lists(src, tgt), remap, remap)], 8, 8, k=1, frequent=0)
    assert table.row(6) == [6] and table.row(7) == [7] and table.row(1) == []


@pytest.mark.parametrize("kind", ["float32", "logits bias", "int8"])
def test_listed_scores_are_the_projections_own(kind):
    if kind == "int8" and not quantizable():
        pytest.skip("no quantized linear in this torch build")
    cfg = ModelConfig(d_model=32, n_heads=4, n_enc_layers=1, n_dec_layers=1, d_ff=64,
                      logits_bias=kind == "logits bias")
    model = make_model(cfg, 40, 50).eval()
    if model.logits_bias is not None:
        model.logits_bias.normal_()
    if kind == "int8":
        model.generator = Int8Linear(model.generator.weight, None)
    states, ids = torch.randn(3, 32), torch.tensor([1, 3, 17, 49])
    full, listed = model.next_scores(states), Shortlisted(model, ids).next_scores(states)
    torch.testing.assert_close(listed, full[:, ids])  # token i of the list is target id ids[i]


def test_target_ids_map_to_their_places_in_the_list():
    ids = torch.tensor([0, 1, 2, 3, 9, 14, 40])
    tokens = torch.tensor([[14, 3, -1], [40, 0, 15]])  # 15 is not listed; -1 is no token
    assert listed(ids, tokens).tolist() == [[5, 3, -1], [6, 0, -1]]
    assert ids[listed(ids, ids)].equal(ids)


def _all_listed(src_size: int, tgt_size: int) -> Shortlist:
    return Shortlist(torch.zeros(src_size + 1, dtype=torch.long), torch.zeros(0, dtype=torch.long),
                     torch.arange(tgt_size), tgt_size)


@pytest.fixture(scope="module")
def toy_batch(tiny_run):
    run = load_run(tiny_run)
    src, _ = read_parallel(TOY / "toy.test.en", TOY / "toy.test.de")
    ids = [run.src_vocab.encode(t) for t in run.src_tok.tokenize_many(src[:64])]
    return run, pad(ids)


@pytest.mark.parametrize("beam", [1, 4])
def test_every_token_listed_is_the_full_search(toy_batch, beam):
    run, src = toy_batch
    cfg = DecodeConfig(beam=beam, nbest=min(beam, 2), shortlist="on")
    table = _all_listed(len(run.src_vocab), len(run.tgt_vocab))
    full = ModelEngine(run.model).search(SearchRequest(src, replace(cfg, shortlist="off"),
                                                       scores=True))
    listed = ModelEngine(run.model, table).search(SearchRequest(src, cfg, scores=True))
    assert [[h.tokens for h in hyps] for hyps in listed] == \
        [[h.tokens for h in hyps] for hyps in full]
    for a, b in zip(sum(listed, []), sum(full, []), strict=True):
        assert a.score == pytest.approx(b.score, abs=1e-5)


def test_the_run_table_keeps_outputs_within_it(toy_batch):
    run, src = toy_batch
    assert run.shortlist is not None  # mt train learned it
    small = Shortlist(run.shortlist.offsets, run.shortlist.ids, run.shortlist.frequent[:0],
                      run.shortlist.tgt_size)
    cfg = DecodeConfig(beam=3, shortlist="on")
    found = ModelEngine(run.model, small).search(SearchRequest(src[:8], cfg))
    for row, hyps in zip(src[:8], found, strict=True):
        allowed = set(small.candidates(row).tolist())
        assert hyps[0].tokens and set(hyps[0].tokens) <= allowed


def _with_table(run_dir, table: Shortlist | dict | None):
    state = load_checkpoint(run_dir / "best.pt")
    state.pop("shortlist", None)
    if table is not None:
        state["shortlist"] = table.to_state() if isinstance(table, Shortlist) else table
    save_checkpoint(run_dir / "best.pt", state)


def test_prefix_and_glossary_tokens_are_never_cut(cli, tiny_run, tmp_path):
    run_dir = shutil.copytree(tiny_run, tmp_path / "run")
    run = load_run(run_dir)
    V = len(run.tgt_vocab)
    # nothing listed but the specials: whatever the search writes came from the prefix or term
    _with_table(run_dir, Shortlist(torch.zeros(len(run.src_vocab) + 1, dtype=torch.long),
                                   torch.zeros(0, dtype=torch.long),
                                   torch.zeros(0, dtype=torch.long), V))
    (tmp_path / "g.tsv").write_text("cats\tKatzen\n", encoding="utf-8")
    (tmp_path / "p.txt").write_text("Gestern\n", encoding="utf-8")
    line = b"Yesterday you saw sixty two new cats.\n"
    got = cli("translate", str(run_dir), "--threads", "1", "--shortlist", "on", "--beam", "3",
              "--glossary", str(tmp_path / "g.tsv"), "--prefix", str(tmp_path / "p.txt"),
              stdin=line)
    assert got.code == 0, got.err
    assert got.out.startswith("Gestern") and "Katzen" in got.out
    off = cli("translate", str(run_dir), "--threads", "1", "--beam", "3", stdin=line)
    assert len(off.out.split()) > len(got.out.split())  # the list did cut the rest


DAMAGE = {
    "offsets not monotone": lambda t: {**t, "offsets": t["offsets"].flip(0)},
    "an id outside the vocabulary": lambda t: {**t, "ids": t["ids"] + 10**6},
    "a frequent id below zero": lambda t: {**t, "frequent": t["frequent"] - 10**6},
    "too few source rows": lambda t: {**t, "offsets": t["offsets"][:-2]},
    "floating offsets": lambda t: {**t, "offsets": t["offsets"].float()},
    "another vocabulary": lambda t: {**t, "tgt_size": t["tgt_size"] + 1},
    "not a table": lambda t: [1, 2],
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_a_damaged_table_is_one_line(cli, tiny_run, tmp_path, damage):
    run_dir = shutil.copytree(tiny_run, tmp_path / "run")
    table = load_checkpoint(run_dir / "best.pt")["shortlist"]
    _with_table(run_dir, DAMAGE[damage](table))
    with pytest.raises(CheckpointError, match="damaged shortlist"):
        load_run(run_dir)
    got = cli("translate", str(run_dir), "--threads", "1", stdin=b"You see four birds.\n")
    assert_user_error(got, 5, "best.pt", "damaged shortlist", "mt shortlist")


def test_mt_shortlist_on_an_older_run(cli, tiny_run, tmp_path):
    run_dir = shutil.copytree(tiny_run, tmp_path / "run")
    make_weights_only(run_dir)  # as checkpoints were, and without a table
    (run_dir / "last.pt").unlink()
    line = b"Yesterday you saw sixty two new cats.\n"
    refused = cli("translate", str(run_dir), "--threads", "1", "--shortlist", "on", stdin=line)
    assert_user_error(refused, 3, "no lexical shortlist", "mt shortlist RUN")
    auto = cli("translate", str(run_dir), "--threads", "1", "--shortlist", "auto", stdin=line)
    assert auto.code == 0, auto.err  # auto: without a table, the full projection
    made = cli("shortlist", str(run_dir), "--set", "train.shortlist.k=7", "--set",
               "train.shortlist.frequent=3")
    assert made.code == 0, made.err
    assert json.loads(made.out)["checkpoints"] == [str(run_dir / "best.pt")]
    table = load_run(run_dir).shortlist
    assert len(table.frequent) == 3 and int(table.offsets.diff().max()) == 7
    got = cli("translate", str(run_dir), "--threads", "1", "--shortlist", "on", stdin=line)
    assert got.code == 0 and got.out.strip(), got.err
    # from another corpus: the toy's test set as DIR/train.*
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for lang in ("en", "de"):
        shutil.copy(TOY / f"toy.test.{lang}", corpus / f"train.{lang}")
    other = cli("shortlist", str(run_dir / "best.pt"), "--corpus", str(corpus))
    assert other.code == 0, other.err
    assert load_run(run_dir).shortlist.ids.tolist() != table.ids.tolist()


def test_ctranslate2_loads_the_vocabulary_map(cli, ct2_export, tiny_run):
    ct2 = pytest.importorskip("ctranslate2")
    lines = (ct2_export / "vmap.txt").read_text(encoding="utf-8").splitlines()
    run = load_run(tiny_run)
    assert lines[0].startswith("\t") and len(lines[0].split()) == len(run.shortlist.frequent)
    word, targets = lines[1].split("\t")
    s = run.src_vocab.stoi[word]
    assert targets.split() == [run.tgt_vocab.itos[i] for i in run.shortlist.row(s)]
    translator = ct2.Translator(str(ct2_export), intra_threads=1)
    tokens = run.src_tok.tokenize_many(["You see four birds."])
    with_map = translator.translate_batch(tokens, use_vmap=True)
    assert with_map[0].hypotheses[0]
    src = str(TOY / "toy.test.en")
    ours = cli("translate", "--engine", "ctranslate2", str(ct2_export), "-i", src, "--threads",
               "1", "--shortlist", "on")
    assert ours.code == 0 and len(ours.out.splitlines()) == 300, ours.err


@pytest.mark.parametrize("value", ["on", "off", "auto"])
def test_yaml_reads_on_and_off_as_the_modes(value):
    from mt.config import Config, override

    assert override(Config(), [f"decode.shortlist={value}"], "test").decode.shortlist == value
