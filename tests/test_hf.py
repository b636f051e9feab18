"""Marian models in the Hugging Face format: imported, compared with transformers, exported back.

The models are built here (tests/hf_models.py): random weights in the layout of an OPUS-MT
download. Equivalence is the test: the same logits, the same greedy and beam outputs, the same
token ids as transformers' own MarianMTModel and MarianTokenizer.
"""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from hf_models import build_marian, hf_model, hf_tokenizer  # noqa: E402
from test_decoding_rules import greedy  # noqa: E402

from conftest import MULTI30K, TOY, assert_user_error  # noqa: E402
from mt.checkpoint import load_run  # noqa: E402
from mt.commands.import_hf import import_hf  # noqa: E402
from mt.config import DecodeConfig  # noqa: E402
from mt.data import pad  # noqa: E402
from mt.hf.export import orders, write_export  # noqa: E402
from mt.translator import Translator  # noqa: E402
from mt.vocab import PAD, start_id  # noqa: E402

VARIANTS = {  # shared and separate vocabularies, three activations, scaling on and off
    "shared-swish": dict(shared=True, activation="swish", d_model=32, layers=(2, 2), heads=4),
    "separate-gelu": dict(shared=False, activation="gelu", d_model=16, layers=(1, 3), heads=2,
                          scale_embedding=False, seed=1),
    "shared-relu": dict(shared=True, activation="relu", d_model=64, layers=(3, 1), heads=8,
                        ffn=128, seed=2, init_std=0.15),
}


pytestmark = pytest.mark.slow  # builds transformers' Marian models to compare with

@pytest.fixture(scope="module")
def marian(tmp_path_factory) -> dict:
    """Each variant: its Marian directory, the mt run imported from it, transformers' model."""
    root = tmp_path_factory.mktemp("marian")
    out = {}
    for name, options in VARIANTS.items():
        directory = build_marian(root / name, **options)
        import_hf(str(directory), root / f"{name}.run")
        out[name] = (directory, load_run(root / f"{name}.run"), hf_model(directory))
    return out


def toy_lines(n: int, side: str = "en") -> list[str]:
    return (TOY / f"toy.test.{side}").read_text(encoding="utf-8").splitlines()[:n]


def batch(run, lines: list[str], side: str = "src") -> torch.Tensor:
    tok, vocab = (run.src_tok, run.src_vocab) if side == "src" else (run.tgt_tok, run.tgt_vocab)
    return pad([vocab.encode(t) for t in tok.tokenize_many(lines)])


def run_orders(run) -> tuple[torch.Tensor, torch.Tensor]:
    src, tgt, _ = orders(run.files, run.cfg.data.shared_vocab)
    return src, tgt


@pytest.mark.parametrize("name", VARIANTS)
def test_logits_equal_transformers_on_a_padded_batch(marian, name):
    _, run, hf = marian[name]
    src_order, tgt_order = run_orders(run)
    src = batch(run, toy_lines(8))
    tgt = batch(run, toy_lines(8, "de"), "tgt")
    tgt_in = torch.cat([torch.full((8, 1), start_id(run.cfg.model.decoder_start)), tgt], 1)
    assert (src == PAD).any() and (tgt_in == PAD).any()  # padded both sides
    with torch.no_grad():
        mine = run.model(src, tgt_in)
        theirs = hf(input_ids=src_order[src], attention_mask=src != PAD,
                    decoder_input_ids=tgt_order[tgt_in]).logits
    assert mine.shape == theirs.shape
    torch.testing.assert_close(mine, theirs[..., tgt_order], atol=1e-5, rtol=0)


def hf_generate(hf, run, src: torch.Tensor, src_order, tgt_order, limit: int, **options):
    """transformers' outputs as mt ids, without the start token and </s>."""
    pad_id = int(src_order[PAD])
    with torch.no_grad():
        out = hf.generate(input_ids=src_order[src], attention_mask=src != PAD,
                          max_new_tokens=limit + 1, bad_words_ids=[[int(tgt_order[PAD])]],
                          **options)
    back = torch.empty_like(tgt_order)
    back[tgt_order] = torch.arange(len(tgt_order))
    eos = int(tgt_order[3])
    result = []
    for row in out.tolist():
        row = row[1:]  # the decoder's start
        row = row[: row.index(eos)] if eos in row else row
        result.append([int(back[t]) for t in row if t != pad_id])
    return result


@pytest.mark.parametrize("name", VARIANTS)
def test_greedy_equals_generate(marian, name):
    _, run, hf = marian[name]
    src_order, tgt_order = run_orders(run)
    src = batch(run, toy_lines(12))
    cfg = DecodeConfig(max_len_a=0.0, max_len_b=12)
    mine = greedy(run.model, src, cfg)
    theirs = hf_generate(hf, run, src, src_order, tgt_order, 12, num_beams=1, do_sample=False)
    assert mine == theirs


def varied_lines() -> list[str]:
    """1,000 lines: the toy corpus, real sentences, numbers, punctuation, casing, scripts."""
    lines = toy_lines(300) + toy_lines(200, "de")
    news = MULTI30K / "val.en.gz"
    if news.is_file():
        import gzip
        lines += gzip.open(news, "rt", encoding="utf-8").read().splitlines()[:200]
    extras = ["12,345.67 km/h", "Call +49 (0)30 123-456!", "ÄÖÜ äöü ß", "THE CAPITAL CITY",
              "Москва — столица России.", "東京は日本の首都です。", "مرحبا بالعالم", "emoji 🙂 ok",
              "tabs\tand  double  spaces", "«quotes» „Anführung“ 'single'", "e-mail: a@b.de",
              "100% (approx.) ~ 3/4", "Ünïcödé ñ ç ø å", "a...b---c", "<b>bold</b> & more"]
    i = 0
    while len(lines) < 1000:
        lines.append(f"{extras[i % len(extras)]} {i}" if i % 3 else extras[i % len(extras)])
        i += 1
    return lines[:1000]


@pytest.mark.parametrize("name", ["shared-swish", "separate-gelu"])
def test_token_ids_equal_marian_tokenizers(marian, name):
    directory, run, _ = marian[name]
    src_order, tgt_order = run_orders(run)
    theirs = hf_tokenizer(directory)
    lines = varied_lines()
    mine = [src_order[run.src_vocab.encode(t)].tolist() for t in run.src_tok.tokenize_many(lines)]
    assert mine == [theirs(line).input_ids for line in lines]
    targets = [tgt_order[run.tgt_vocab.encode(t) + [3]].tolist()
               for t in run.tgt_tok.tokenize_many(lines)]
    assert targets == [theirs(text_target=line).input_ids for line in lines]


def test_a_language_code_stays_one_token(tmp_path):
    directory = build_marian(tmp_path / "multi", extra=(">>fra<<", ">>deu<<"))
    import_hf(str(directory), tmp_path / "run")
    run = load_run(tmp_path / "run")
    tokens = run.src_tok.tokenize(">>fra<< A red dog.")
    assert tokens[0] == ">>fra<<" and tokens[-1] == "</s>"
    assert run.src_vocab.encode(tokens[:1]) != [1]  # a token of the vocabulary, not <unk>
    src_order, _ = run_orders(run)
    ids = src_order[run.src_vocab.encode(tokens)].tolist()
    assert ids == hf_tokenizer(directory)(">>fra<< A red dog.").input_ids
    assert run.src_tok.detokenize(tokens) == ">>fra<< A red dog."


def test_detokenize_undoes_tokenize_on_text_in_normal_form(marian):
    run = marian["shared-swish"][1]
    for line in toy_lines(300) + toy_lines(300, "de"):
        assert run.tgt_tok.detokenize(run.tgt_tok.tokenize(line)) == line
        assert run.src_tok.detokenize(run.src_tok.tokenize(line)) == line


@pytest.mark.parametrize("name", VARIANTS)
def test_export_and_import_again_gives_bit_identical_weights(marian, name, tmp_path):
    directory, run, _ = marian[name]
    write_export(run, tmp_path)
    import_hf(str(tmp_path), tmp_path.parent / f"{tmp_path.name}.again")
    again = load_run(tmp_path.parent / f"{tmp_path.name}.again").model.state_dict()
    mine = run.model.state_dict()
    assert mine.keys() == again.keys()
    assert all(torch.equal(mine[k], again[k]) for k in mine)
    # and what transformers saved comes back as it was, tensor for tensor
    from safetensors.torch import load_file
    original, exported = load_file(directory / "model.safetensors"), load_file(
        tmp_path / "model.safetensors")
    assert original.keys() == exported.keys()
    assert all(torch.equal(original[k], exported[k]) for k in original)


def test_the_export_works_in_transformers_pipeline(marian, tmp_path):
    from transformers import MarianMTModel, MarianTokenizer
    _, run, _ = marian["separate-gelu"]
    write_export(run, tmp_path)
    model = MarianMTModel.from_pretrained(tmp_path).eval()
    tok = MarianTokenizer.from_pretrained(tmp_path)
    lines = toy_lines(6)
    with torch.no_grad():
        out = model.generate(**tok(lines, return_tensors="pt", padding=True), num_beams=1,
                             max_new_tokens=11)
    theirs = tok.batch_decode(out, skip_special_tokens=True)
    mine = Translator(run, DecodeConfig(max_len_a=0.0, max_len_b=10)).translate(lines)
    assert mine == theirs


# --- what mt cannot represent is refused, by name --------------------------------------------

@pytest.mark.parametrize("key, value, named", [
    ("normalize_before", True, "normalize_before"),
    ("activation_function", "gelu_new", "activation_function"),
    ("static_position_embeddings", False, "static_position_embeddings"),
    ("decoder_start_token_id", 0, "decoder_start_token_id"),
    ("decoder_ffn_dim", 48, "decoder_ffn_dim"),
    ("model_type", "bart", "model_type"),
    # values that reached arithmetic unchecked: each a traceback before
    ("encoder_attention_heads", 0, "encoder_attention_heads: 0 is not an integer from 1"),
    ("dropout", "high", 'dropout: "high" is not a rate in [0, 1)'),
    ("dropout", None, "dropout: null is not a rate"),
    ("attention_dropout", 1.5, "attention_dropout: 1.5 is not a rate"),
    ("scale_embedding", "yes", 'scale_embedding: "yes" is not true or false'),
    ("activation_function", ["gelu"], "activation_function"),
    ("d_model", True, "d_model: true is not an integer"),
    ("max_position_embeddings", 2**31 - 1, "max_position_embeddings: 2147483647 is not an "
                                           "integer from 3 to 65,536"),
])
def test_a_config_mt_cannot_represent_is_one_line_naming_the_key(marian, tmp_path, cli, key,
                                                                 value, named):
    directory = marian["shared-swish"][0]
    copy = tmp_path / "variant"
    copy.mkdir()
    for f in directory.iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    config = json.loads((copy / "config.json").read_text())
    config[key] = value
    (copy / "config.json").write_text(json.dumps(config))
    r = cli("import", "hf", str(copy), "--out", str(tmp_path / "run"))
    assert_user_error(r, 5, named)
    assert not (tmp_path / "run").exists()


def test_a_model_with_few_positions_imports_with_a_max_len_that_fits(tmp_path, cli):
    """mt's default data.max_len (100) does not fit 64 positions: the import sets what its
    model needs (it was refused, exit 3)."""
    directory = build_marian(tmp_path / "short", max_positions=64)
    r = cli("import", "hf", str(directory), "--out", str(tmp_path / "run"))
    assert r.code == 0, r.err
    run = load_run(tmp_path / "run")
    assert run.cfg.model.max_positions == 64 and run.cfg.data.max_len == 62
    r = cli("translate", str(tmp_path / "run"), stdin=b"I need seven books.\n")
    assert r.code == 0 and len(r.out.splitlines()) == 1, r.err
