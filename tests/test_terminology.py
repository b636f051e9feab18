"""mt/terminology.py with mt/mixing.py and the Translator: data.terminology's annotated training
sources are what docs/terminology.md shows (golden), drawn per (seed, epoch) and kept within
data.max_len; the reserved tokens join the source vocabulary; a translation's annotation is the
training one, id for id; a resumed run with data.terminology is the straight run, bit for bit."""

from __future__ import annotations

import pytest
import torch

from conftest import TINY, TOY, straight_and_resumed
from mt.cached_mix import mixed_data, run_vocabs
from mt.checkpoint import Run
from mt.config import load_config
from mt.decoding.engines import ModelEngine
from mt.errors import ConfigError, DataError
from mt.glossary import Glossary
from mt.model import make_model
from mt.terminology import MARKERS, annotate
from mt.token_cache import open_cached_corpora
from mt.translator import Translator

PAIRS = [("Yesterday we saw old cats and birds.", "Gestern sahen wir alte Katzen und Vögel."),
         ("New York has old cats.", "New York hat alte Katzen."),
         ("We saw birds.", "Wir sahen Tiere."),  # the target lacks Vögel: not annotated
         ("Cats and cats.", "Katzen und Katzen.")]  # case counts
GLOSSARY_TOY = "cats\tKatzen\nold cats\talte Katzen\nbirds\tVögel\nYesterday\tGestern\n"
GLOSSARY = "cats\tKatzen\nold cats\talte Katzen\nbirds\tVögel\nNew York\tNew York\n"
# docs/terminology.md shows these (spaCy words: ￭ joins a token to the one before)
GOLDEN = ["Yesterday we saw <term> old cats <as> alte Katzen </term> and <term> birds <as> "
          "Vögel </term> ￭.",
          "<term> New York <as> New York </term> has <term> old cats <as> alte Katzen </term> ￭.",
          "We saw birds ￭.",
          "Cats and <term> cats <as> Katzen </term> ￭."]


def corpus(tmp_path, pairs, glossary: str, *sets: str):
    """The cached corpus of these pairs with glossary as data.terminology: (config, cache)."""
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    for side, lang in enumerate(("en", "de")):
        (d / f"t.{lang}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
    (d / "g.tsv").write_text(glossary, encoding="utf-8")
    cfg = load_config(None, [f"data.dir={d}", "data.train=t", f"data.terminology.glossary="
                             f"{d / 'g.tsv'}", "data.terminology.prob=1", *sets])
    return cfg, open_cached_corpora(cfg.data)


def sources(cache, max_len=100, seed=1, epoch=0) -> list[str]:
    """Every training source as the epoch's batches hold it, in corpus order, as text."""
    vocabs = run_vocabs(cache)
    data = mixed_data(cache, *vocabs)
    data.filter_length(max_len)
    data.plan(1000, seed, epoch)
    rows = data.collate(data.parts[0].variants[0].pairs).src.tolist()
    return [" ".join(vocabs[0].itos[i] for i in row if i) for row in rows]


def test_the_annotated_corpus_is_the_documented_one(tmp_path):
    _, cache = corpus(tmp_path, PAIRS, GLOSSARY)
    assert sources(cache) == GOLDEN
    src_vocab, _ = run_vocabs(cache)  # after the counted words: markers, then target terms'
    assert src_vocab.itos[-6:] == [*MARKERS, "Katzen", "alte", "Vögel"]


def test_a_lexicon_annotates_the_alternative_the_target_holds(tmp_path):
    """A training glossary may give a source term several targets: each occurrence gets the
    first its pair's target holds, none when it holds none; a translation-time glossary may
    not."""
    pairs = [("We saw cats.", "Wir sahen Katzen."), ("We saw cats.", "Wir sahen Miezen."),
             ("We saw cats.", "Wir sahen Tiere."), ("Cats, cats.", "Miezen, Katzen.")]
    _, cache = corpus(tmp_path, pairs, "cats\tKatzen\ncats\tMiezen\n")
    assert sources(cache) == ["We saw <term> cats <as> Katzen </term> ￭.",
                              "We saw <term> cats <as> Miezen </term> ￭.", "We saw cats ￭.",
                              "Cats ￭, <term> cats <as> Katzen </term> ￭."]
    with pytest.raises(DataError, match="'cats' again, as 'Miezen'"):
        Glossary.load(tmp_path / "data" / "g.tsv")


def test_annotation_keeps_sources_within_max_len(tmp_path):
    """The first line's 8 tokens would become 17: it stays as it is; the last's 4 become 8."""
    _, cache = corpus(tmp_path, PAIRS, GLOSSARY)
    out = sources(cache, max_len=9)
    assert out[0] == "Yesterday we saw old cats and birds ￭." and out[3] == GOLDEN[3]


def test_each_epoch_draws_its_own_annotations_from_the_seed(tmp_path):
    lines = toy_lines(1000)
    _, cache = corpus(tmp_path, lines, "cats\tKatzen\nbirds\tVögel\n",
                      "data.terminology.prob=0.5")
    a, again, other, seed2 = (sources(cache, seed=s, epoch=e)
                              for s, e in ((1, 0), (1, 0), (1, 1), (2, 0)))
    assert a == again and a != other and a != seed2
    eligible = sum(("cats" in s and "Katzen" in t) + ("birds" in s and "Vögel" in t)
                   for s, t in lines)
    share = sum(line.count("<term>") for line in a) / eligible
    assert eligible > 200 and 0.4 < share < 0.6, (eligible, share)


def test_plain_batches_plan_the_pairs_as_a_run_without_terminology(tmp_path):
    """data.terminology.plain_batches: the epoch's batches hold the same pairs as without
    data.terminology (the annotations ride on top); by default the plan counts them and a
    batch holds fewer pairs."""
    def plan(cache, terms: bool):
        data = mixed_data(cache, *run_vocabs(cache))
        if not terms:
            data.terminology = None
        data.filter_length(100)
        p = data.plan(300, 3, 0)
        return p.pairs.tolist(), p.bounds.tolist()

    lines = toy_lines(150)
    for d in ("a", "b"):
        (tmp_path / d).mkdir()
    _, counted = corpus(tmp_path / "a", lines, "cats\tKatzen\nbirds\tVögel\n")
    _, plain = corpus(tmp_path / "b", lines, "cats\tKatzen\nbirds\tVögel\n",
                      "data.terminology.plain_batches=true")
    assert plan(plain, True) == plan(plain, False) == plan(counted, False)
    assert len(plan(counted, True)[1]) > len(plan(plain, True)[1])


def toy_lines(n: int) -> list[tuple[str, str]]:
    return [tuple((TOY / f"toy.train.{lang}").read_text(encoding="utf-8").splitlines()[i]
                  for lang in ("en", "de")) for i in range(n)]


def untrained_run(tmp_path, lines, glossary: str, *sets: str) -> tuple[Run, list[str]]:
    """An untrained small model of a run with data.terminology (prob 1) on these pairs, and
    its training sources as text."""
    cfg, cache = corpus(tmp_path, lines, glossary, *sets, "model.d_model=32", "model.d_ff=32",
                        "model.n_enc_layers=1", "model.n_dec_layers=1", "decode.max_len_a=0",
                        "decode.max_len_b=3", "decode.min_len=3", "decode.glossary_mode=annotate")
    src_vocab, tgt_vocab = run_vocabs(cache)
    model = make_model(cfg.model, len(src_vocab), len(tgt_vocab)).eval()
    return Run(cfg, model, src_vocab, tgt_vocab, 0, *cache.tokenizers()), sources(cache)


@pytest.mark.parametrize("tokenizer", [
    [],
    ["data.tokenizer={kind: sentencepiece, vocab_size: 340}", "data.shared_vocab=true"]],
    ids=["spacy", "sentencepiece"])
def test_a_translation_is_annotated_as_training_was(tmp_path, tokenizer):
    """prob 1: the ids the search gets for a training source are its training ids, wherever
    training annotated every term the line holds (the reference held each target term)."""
    lines = toy_lines(300)
    run, trained = untrained_run(tmp_path, lines, GLOSSARY_TOY, *tokenizer)
    seen = set()

    class Recording(ModelEngine):
        def search(self, request):
            assert request.terms is None  # annotate: no constraints
            seen.update(" ".join(run.src_vocab.itos[i] for i in row if i)
                        for row in request.src.tolist())
            return super().search(request)

    translator = Translator(run, engine=Recording(run.model))  # greedy, 3 tokens: fast
    glossary = run.cfg.data.terminology.glossary
    translator.translate([s for s, _ in lines], glossary=glossary)
    matcher = translator.matcher(glossary)
    checked = 0
    for (src, _), train_line in zip(lines, trained, strict=True):
        spans = matcher.spans(translator.src_tok.tokenize(src))
        if train_line.count("<term>") == len(spans) > 0:
            assert train_line in seen, train_line
            checked += 1
    assert checked > 50


def test_ctranslate2_translates_annotated_input_and_refuses_constraints(tmp_path):
    pytest.importorskip("ctranslate2")
    from mt.ct2.export import write_model
    from mt.ct2.search import NO_TERMS, CTranslate2Engine

    lines = [s for s, _ in toy_lines(40)]
    run, _ = untrained_run(tmp_path, toy_lines(200), GLOSSARY_TOY)
    (tmp_path / "ct2").mkdir()
    write_model(run, tmp_path / "ct2", None)
    ct2 = Translator(run, engine=CTranslate2Engine(tmp_path / "ct2", run.src_vocab,
                                                   run.tgt_vocab, 256, "cpu", 1))
    glossary = run.cfg.data.terminology.glossary
    def scores(translator, **glossary):  # an untrained model's outputs may all be empty
        return [best.score for best, in translator.translate_nbest(lines, **glossary)]

    ours = scores(Translator(run), glossary=glossary)
    assert scores(ct2, glossary=glossary) == pytest.approx(ours, abs=1e-4)  # the same input
    assert ours != pytest.approx(scores(Translator(run)), abs=1e-4)  # which annotation changed
    with pytest.raises(ConfigError, match=NO_TERMS[:40]):
        ct2.translate(lines, glossary=glossary, glossary_mode="both", beam=2)


def test_annotate_needs_a_model_trained_with_terminology(tmp_path):
    cfg, cache = corpus(tmp_path, PAIRS, GLOSSARY, "model.d_model=32", "model.d_ff=32")
    plain = load_config(None, [f"data.dir={cfg.data.dir}", "data.train=t", "model.d_model=32",
                               "model.d_ff=32"])
    vocabs = run_vocabs(open_cached_corpora(plain.data))
    run = Run(plain, make_model(plain.model, *map(len, vocabs)), *vocabs, 0,
              *cache.tokenizers())
    translator = Translator(run, plain.decode)
    with pytest.raises(ConfigError, match="glossary_mode annotate: this model was trained "
                                          "without data.terminology"):
        translator.translate(["old cats"], glossary=[["cats", "Katzen"]],
                             glossary_mode="annotate")
    # and training on from it (an inherited vocabulary without the markers) is refused
    with pytest.raises(DataError, match="<term> is not in the vocabulary this run inherits"):
        mixed_data(cache, *vocabs)


def test_annotate_is_the_same_function_for_words_and_ids():
    spans = [(0, 1, 0), (2, 4, 1)]
    words = annotate(["a", "b", "c", "d", "e"], spans, [["A"], ["C", "D"]], MARKERS)
    assert " ".join(words) == "<term> a <as> A </term> b <term> c d <as> C D </term> e"
    assert annotate([1, 2, 3, 4, 5], spans, [[10], [30, 40]], [7, 8, 9]) == \
        [7, 1, 8, 10, 9, 2, 7, 3, 4, 8, 30, 40, 9, 5]


@pytest.mark.slow
def test_resume_is_exact_with_terminology(tmp_path):
    """2N steps straight, or N then --resume: the same weights, bit for bit, with terms
    annotated anew each epoch (the toy's 6,000 pairs at 2,048 tokens: about 63 steps an
    epoch, so the resume at step 50 is inside the first epoch, and 70 inside the second)."""
    (tmp_path / "g.tsv").write_text("cats\tKatzen\nold cats\talte Katzen\nbirds\tVögel\n",
                                    encoding="utf-8")
    common = [*TINY, "model.d_model=32", "model.d_ff=64", "model.dropout=0.1",
              "train.eval_bleu=false", "train.metric=loss", "train.eval_every=1000",
              "train.eval_epochs=false", f"data.terminology.glossary={tmp_path / 'g.tsv'}"]
    a, b = straight_and_resumed(tmp_path, common, 70, 50)
    assert a["step"] == b["step"] == 70 and a["progress"]["epoch"] == 1
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
