"""Several training corpora: what each epoch draws by weight, exactly resumable; TSV and plain
files give the same pairs; tags first in each source, never split; a bidirectional model."""

import collections
import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import ROOT, TINY, TOY, assert_user_error, straight_and_resumed
from mt.cached_mix import mixed_data, run_vocabs
from mt.commands.info import run_info
from mt.commands.train import train
from mt.config import load_config
from mt.data import ParallelData, read_parallel
from mt.errors import ConfigError
from mt.metrics import score
from mt.mixing import MixedData, Part
from mt.token_cache import open_cached_corpora
from mt.translator import Translator


def toy_part(name: str, n: int, weight: float, start: int = 0, tag: int | None = None) -> Part:
    """n pairs of lengths 1..9, the source's first id telling the pair apart."""
    src = [[start + i] + [5] * (i % 9) for i in range(n)]
    tgt = [[6] * (1 + i % 7) for i in range(n)]
    return Part(name, [ParallelData.from_lists(src, tgt)], weight, tag)


def drawn(data: MixedData, epoch: int, seed: int = 3) -> collections.Counter:
    """How often each pair (by its source's first id) is in the epoch's batches."""
    plan = data.plan(300, seed, epoch)
    firsts = [int(b.src[r, 1 if data.parts[0].tag is not None else 0])
              for k in range(len(plan)) for b in [data.collate(plan[k])] for r in range(len(b.src))]
    return collections.Counter(firsts)


def test_each_epoch_draws_each_corpus_by_its_weight():
    """Exactly round(weight x pairs) from each corpus per epoch; over epochs every pair of an
    up- or down-weighted corpus is drawn as often as any other, within one."""
    data = MixedData([toy_part("big", 400, 0.5), toy_part("small", 60, 2.5, start=1000)])
    assert len(data) == 200 + 150
    totals: collections.Counter = collections.Counter()
    for epoch in range(4):
        counts = drawn(data, epoch)
        assert sum(c for i, c in counts.items() if i < 1000) == 200
        assert sum(c for i, c in counts.items() if i >= 1000) == 150
        totals += counts
    big = [totals[i] for i in range(400)]
    small = [totals[1000 + i] for i in range(60)]
    assert set(big) == {2}  # 4 epochs x half: every pair twice
    assert max(small) - min(small) <= 1 and sum(small) == 600


def test_a_plan_is_a_function_of_seed_and_epoch():
    make = lambda: MixedData([toy_part("a", 300, 0.7), toy_part("b", 90, 1.9, start=500)])  # noqa: E731
    one, two = make(), make()
    for epoch in (0, 1, 5):
        p, q = one.plan(300, 3, epoch), two.plan(300, 3, epoch)
        assert np.array_equal(p.pairs, q.pairs) and np.array_equal(p.bounds, q.bounds)
    assert not np.array_equal(one.plan(300, 3, 0).pairs, one.plan(300, 3, 1).pairs)
    assert not np.array_equal(one.plan(300, 3, 0).pairs, one.plan(300, 4, 0).pairs)


def test_one_corpus_of_weight_one_plans_as_before():
    """The plan of one corpus is ParallelData's (the plan every earlier run trained on)."""
    part = toy_part("only", 500, 1.0)
    single = ParallelData(part.variants[0].src, part.variants[0].tgt)
    mixed = MixedData([part])
    for epoch in (0, 2):
        a, b = mixed.plan(400, 7, epoch), single.plan(400, 7 + epoch)
        assert np.array_equal(a.pairs, b.pairs) and np.array_equal(a.bounds, b.bounds)


def test_a_tag_is_the_first_source_token_of_its_corpus_only():
    data = MixedData([toy_part("a", 50, 1.0, tag=4), toy_part("b", 50, 1.0, start=100)])
    batch = data.collate(np.array([3, 60, 10]))
    assert batch.src[0, 0] == 4 and batch.src[0, 1] == 3
    assert batch.src[1, 0] == 110 and (batch.src[1] != 4).all()  # pair 10 of the second
    assert batch.src[2, 0] == 4 and batch.src[2, 1] == 10


def write_toy(tmp_path: Path, n: int = 400) -> Path:
    d = tmp_path / "data"
    d.mkdir()
    for split, size in (("toy.train", n), ("toy.val", 40)):
        for lang in ("en", "de"):
            lines = (TOY / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()[:size]
            (d / f"{split}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


def test_tsv_and_plain_files_give_the_same_pairs(tmp_path):
    d = write_toy(tmp_path)
    src, tgt = read_parallel(d / "toy.train.en", d / "toy.train.de")
    with gzip.open(d / "pairs.tsv.gz", "wt", encoding="utf-8") as f:
        f.writelines(f"{s}\t{t}\n" for s, t in zip(src, tgt))
    batches = []
    for corpus in ({"prefix": "toy.train"}, {"format": "tsv", "path": str(d / "pairs.tsv.gz")},
                   {"src": str(d / "toy.train.en"), "tgt": str(d / "toy.train.de")}):
        cfg = load_config(None, [f"data.dir={d}", f"data.train=[{json.dumps(corpus)}]"])
        cache = open_cached_corpora(cfg.data)
        batches.append(mixed_data(cache, *run_vocabs(cache)).batches(300, seed=1))
    for other in batches[1:]:
        assert len(other) == len(batches[0])
        assert all(torch.equal(x.src, y.src) and torch.equal(x.tgt_out, y.tgt_out)
                   for x, y in zip(batches[0], other))


@pytest.mark.parametrize("train, message", [
    ("[{prefix: a, weight: 0}]", r"data.train\[0\].weight must be positive"),
    ("[{prefix: a, weight: -1}]", r"data.train\[0\].weight must be positive"),
    ("[{prefix: a, tag: <x>}, {prefix: b, tag: <x>}]", "another corpus has this tag"),
    ("[{prefix: a, tag: bt}]", "write a tag as one token in angle brackets"),
    ("[{format: tsv, prefix: a}]", "a tsv corpus is one file"),
    ("[{src: a.en}]", "a plain corpus needs both src and tgt"),
])
def test_bad_corpus_lists_are_config_errors(train, message):
    with pytest.raises(ConfigError, match=message) as e:
        load_config(None, [f"data.train={train}"])
    assert e.value.exit_code == 3 and str(e.value).startswith("--set data.train=")


def two_corpora(d: Path, *more: str) -> list[str]:
    corpora = [{"name": "first", "src": str(d / "a.en"), "tgt": str(d / "a.de"), "weight": 1.5},
               {"name": "second", "src": str(d / "b.en"), "tgt": str(d / "b.de"), "weight": 0.5}]
    return [*TINY, f"data.dir={d}", f"data.train={json.dumps(corpora)}", *more]


@pytest.mark.slow
@pytest.mark.parametrize("buckets", ["false", "true"])
def test_a_weighted_mix_resumes_exactly(tmp_path, buckets):
    """2N steps straight, or N then --resume: the same weights, bit for bit, with two corpora
    drawn by weight across epochs, in exact-length or bucketed batches."""
    d = write_toy(tmp_path, 600)
    for name, (a, b) in {"a": (0, 300), "b": (300, 600)}.items():
        for lang in ("en", "de"):
            lines = (d / f"toy.train.{lang}").read_text(encoding="utf-8").splitlines()[a:b]
            (d / f"{name}.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
    common = two_corpora(d, "model.dropout=0.1", "train.eval_bleu=false", "train.metric=loss",
                         "train.eval_every=1000", "train.max_tokens=600",
                         f"train.buckets={buckets}")
    a, b = straight_and_resumed(tmp_path, common, 48, 17)
    assert a["step"] == b["step"] == 48 and a["progress"]["epoch"] >= 2  # across epochs
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    mix = run_info(tmp_path / "straight")["data"]["mix"]
    assert [(m["name"], m["pairs"], m["drawn"], m["share"]) for m in mix] == [
        ("first", 300, 450, 0.75), ("second", 300, 150, 0.25)]


@pytest.mark.slow
def test_one_model_translates_both_ways_by_its_tag(tmp_path):
    """en->de tagged <2de> and de->en tagged <2en>, in one model with one vocabulary: each
    direction's BLEU rises far above an untrained model's (about 0)."""
    d = write_toy(tmp_path, 3000)
    corpora = [{"name": "en-de", "src": str(d / "toy.train.en"), "tgt": str(d / "toy.train.de"),
                "tag": "<2de>"},
               {"name": "de-en", "src": str(d / "toy.train.de"), "tgt": str(d / "toy.train.en"),
                "tag": "<2en>"}]
    sets = [*TINY, f"data.dir={d}", f"data.train={json.dumps(corpora)}",
            "data.shared_vocab=true", "model.tie_all=true", "train.max_epochs=3",
            "train.eval_bleu=false", "train.metric=loss"]
    train(ROOT / "configs" / "toy.yaml", sets, tmp_path / "both", "cpu", False)
    translator = Translator.load(tmp_path / "both")
    val = {lang: (d / f"toy.val.{lang}").read_text(encoding="utf-8").splitlines()
           for lang in ("en", "de")}
    bleu = {tag: score(translator.translate(val[src], tag=tag), val[tgt])["bleu"]
            for tag, src, tgt in (("<2de>", "en", "de"), ("<2en>", "de", "en"))}
    assert min(bleu.values()) > 40, bleu
    with pytest.raises(ConfigError, match="decode.tag <2fr>: not a tag of this model "
                                          r"\(its tags are <2de>, <2en>\)"):
        translator.translate(val["en"][:1], tag="<2fr>")


def test_subword_sampling_gives_each_epoch_its_segmentation(tmp_path):
    """data.tokenizer.alpha: epochs see different segmentations of the same pairs (epoch e the
    (e mod samples)-th), the same ones again for the same epoch, each detokenizing to the
    line."""
    d = write_toy(tmp_path, 300)
    sets = [f"data.dir={d}", "data.shared_vocab=true",
            "data.tokenizer={kind: sentencepiece, vocab_size: 340, alpha: 0.2, samples: 3}"]
    cfg = load_config(None, sets)
    cache = open_cached_corpora(cfg.data)
    src_vocab, _ = vocabs = run_vocabs(cache)
    src_tok, _ = cache.tokenizers()
    data = mixed_data(cache, *vocabs)
    lines, _ = read_parallel(d / "toy.train.en", d / "toy.train.de")
    pairs = np.arange(40)

    def segmentations(epoch: int, mixed: MixedData = data) -> list[list[str]]:
        v = epoch % mixed.n_variants  # the plan's pairs carry it: variant * size + pair
        batch = mixed.collate(v * mixed.size + pairs)
        return [[src_vocab.itos[i] for i in row if i] for row in batch.src.tolist()]

    seen = [segmentations(e) for e in range(3)]
    assert seen[0] != seen[1] != seen[2]
    assert segmentations(3) == seen[0]  # 3 cached: epoch 3 is epoch 0's
    again = mixed_data(open_cached_corpora(cfg.data), *vocabs)
    assert segmentations(1, again) == seen[1]  # reproducible
    for epoch in seen:
        assert [src_tok.detokenize(s) for s in epoch] == [lines[i] for i in pairs]
    plan = data.plan(300, 1, 2)
    assert (plan.pairs // data.size == 2).all()  # epoch 2 draws from segmentation 2


def test_corpora_of_one_name_in_two_places_keep_their_entries(tmp_path, capsys):
    """A fine-tuned run's data and its parent's are often both `train`: each keeps its entry."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = (load_config(None, [f"data.dir={write_toy(tmp_path / x, n)}"]).data
            for x, n in (("a", 100), ("b", 200)))
    first = open_cached_corpora(a).entries[0].path
    second = open_cached_corpora(b).entries[0].path
    capsys.readouterr()
    assert open_cached_corpora(a).entries[0].path == first and first.is_dir() and second.is_dir()
    assert "building" not in capsys.readouterr().err


@pytest.mark.parametrize("case, code, needle", [
    ("tsv", 4, "bad.tsv:2: expected source TAB target, found no tab"),
    ("tag", 4, "holds '<bt>', which is also a corpus tag"),
    ("weight", 3, "data.train[0].weight must be positive"),
    ("alpha", 3, "data.spm_alpha is a setting of the sentencepiece tokenizer"),
    ("inf", 3, "data.train[0].weight must be a finite number"),
    ("huge", 3, "data.train[0].weight must be at most 100, got 1e+09"),
    ("tiny", 4, "data.train[1].weight 0.001: draws no pair from corpus 'toy.train' (round(0.001 "
                "x 50 pairs) = 0); give it at least 0.02"),
    # a lone corpus: its weight named too, not "no training pairs left" (issue 65)
    ("one", 4, "data.train[0].weight 0.001: draws no pair from corpus 'toy.train' (round(0.001 "
               "x 50 pairs) = 0); give it at least 0.02"),
])
def test_bad_corpora_stop_mt_train_with_one_line_and_nothing_written(cli, tmp_path, case, code,
                                                                   needle):
    d = write_toy(tmp_path, 50)
    (d / "bad.tsv").write_text("x\ty\nno tab here\n", encoding="utf-8")
    (d / "toy.train.en").write_text("a <bt> b\n" * 50, encoding="utf-8")
    train = {"tsv": f"[{{format: tsv, path: {d}/bad.tsv}}]",
             "tag": "[{prefix: toy.train, tag: <bt>}]",
             "weight": "[{prefix: toy.train, weight: 0}]", "alpha": "toy.train",
             "inf": "[{prefix: toy.train, weight: .inf}]",
             "huge": "[{prefix: toy.train, weight: 1e9}]",
             "tiny": f"[{{format: tsv, path: {d}/good.tsv}}, {{prefix: toy.train, weight: "
                     "0.001}]", "one": "[{prefix: toy.train, weight: 0.001}]"}[case]
    (d / "good.tsv").write_text("a b\tc d\n" * 20, encoding="utf-8")
    more = ["--set", "data.spm_alpha=0.1"] if case == "alpha" else []
    r = cli("train", ROOT / "configs" / "toy.yaml", "--out", tmp_path / "run", "--set",
            f"data.dir={d}", "--set", f"data.train={train}", *more)
    assert_user_error(r, code, needle)
    assert not (tmp_path / "run").exists()


def test_a_corpus_name_of_any_length_has_its_cache_entry(cli, tmp_path):
    """The entry's file name holds only the first STEM_CHARS of the name: 300 characters fit."""
    d = write_toy(tmp_path, 50)
    name = "n" * 300
    r = cli("train", ROOT / "configs" / "toy.yaml", "--out", tmp_path / "run", "--set",
            f"data.dir={d}", "--set", f"data.train=[{{prefix: toy.train, name: {name}}}]",
            "--set", "train.max_steps=1", "--set", "train.eval_bleu=false", "--set",
            "train.metric=loss", "--set", "train.warmup=0")
    assert r.code == 0, r.err
    [entry] = [p for p in (Path(os.environ["MT_CACHE_DIR"]) / "tokens").glob("n" * 40 + "*")
               if p.is_dir()]
    assert entry.name.startswith("n" * 40 + ".") and len(entry.name) < 100
