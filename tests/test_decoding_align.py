"""mt/decoding/align.py and `--align`: tokens merged to whitespace words (spaCy joiners,
SentencePiece pieces), valid Pharaoh pairs within both lengths, the toy task's reordering
matched against a hand-made gold alignment (tests/toy_gold.py), and the output formats."""

from __future__ import annotations

import json
import random
import re
from types import SimpleNamespace

import pytest
import torch
from toy_gold import gold

from conftest import TOY, assert_user_error
from mt.checkpoint import load_run
from mt.data import pad
from mt.decoding.align import cross_attention, pharaoh, token_words, word_alignment
from mt.tokenizers.spacy_words import SpacyTokenizer
from mt.tokenizers.text import ESCAPE, MARK
from mt.translator import Translator

PAIR = re.compile(r"(\d+)-(\d+)")


def test_tokens_are_merged_to_the_words_of_their_text():
    spacy = SpacyTokenizer("en")
    toks = spacy.tokenize("Hello, (big) world's end.")
    assert toks == ["Hello", MARK + ",", "(" + MARK, "big", MARK + ")", "world", MARK + "'s",
                    "end", MARK + "."]
    assert token_words(toks, spacy) == [0, 0, 1, 1, 1, 2, 2, 3, 3]
    pieces = ["▁Hel", "lo", "▁", "wor", "ld", "s"]  # as SentencePiece marks word starts
    pieces_tok = SimpleNamespace(detokenize=lambda p: "".join(p).replace("▁", " ").strip())
    assert token_words(pieces, pieces_tok) == [0, 0, 0, 1, 1, 1]


def test_spacy_token_words_in_one_pass_equal_one_detokenize_a_prefix():
    # the one-pass form must give what the definition gives, on text and on odd tokens
    spacy = SpacyTokenizer("de")
    by_prefix = SimpleNamespace(detokenize=spacy.detokenize)
    lines = ["Ein Mann (mit Hut) fährt, schnell: 10.000 km/h!", "„Zitat“ -- und ... so.",
             "x" + MARK + "y", "a  b", ""]
    cases = [spacy.tokenize(line) for line in lines]
    rng = random.Random(0)
    atoms = ["a", "bc", MARK, " ", "", ".", MARK + "x", "x" + MARK, MARK + " " + MARK,
             "  ", "d e", ESCAPE + "m", MARK + MARK]
    cases += [[rng.choice(atoms) + rng.choice(atoms) for _ in range(rng.randint(0, 8))]
              for _ in range(3000)]
    for toks in cases:
        assert spacy.token_words(toks) == token_words(toks, by_prefix), toks


def test_sentencepiece_token_words_in_one_pass_equal_one_detokenize_a_prefix(spm_run):
    tok = load_run(spm_run).tgt_tok
    by_prefix = SimpleNamespace(detokenize=tok.detokenize)
    lines = (TOY / "toy.test.de").read_text(encoding="utf-8").splitlines()[:50]
    cases = [tok.tokenize(line) for line in lines + ["a  b ", " x", "ünï ▁ z", "€ 😀 ."]]
    pieces = [p for p in tok.fixed_vocab[4:] if "<" not in p][:60]
    rng = random.Random(0)
    cases += [[rng.choice(pieces + ["▁", "▁▁"]) for _ in range(rng.randint(0, 8))]
              for _ in range(2000)]
    assert all(tok.token_words(toks) is not None for toks in cases[:50])  # the one pass
    for toks in cases:
        assert token_words(toks, tok) == token_words(toks, by_prefix), toks
    odd = ["▁a", "<0xE2>", "not-a-piece", "x" + ESCAPE + "m"]
    assert tok.token_words(odd) is None  # not plain pieces: detokenized prefix by prefix
    assert token_words(odd, tok) == token_words(odd, by_prefix)


def test_word_alignment_sums_source_tokens_and_averages_target_tokens():
    # 3 target tokens (words 0, 1, 1) over 4 source tokens (words 0, 0, 1, 2)
    w = torch.tensor([[0.3, 0.3, 0.4, 0.0],
                      [0.0, 0.1, 0.0, 0.9],
                      [0.6, 0.0, 0.4, 0.0]])
    # word 0 -> source word 0 (0.6 beats 0.4); word 1 -> mean of rows 1, 2: (0.35, 0.2, 0.45)
    assert word_alignment(w, [0, 0, 1, 2], [0, 1, 1]) == [(0, 0), (2, 1)]
    assert word_alignment(w[:0], [], []) == []
    assert pharaoh([(0, 0), (2, 1)]) == "0-0 2-1"


def _check_pharaoh(src: str, text: str, alignment: str) -> None:
    pairs = [tuple(map(int, p.groups())) for p in PAIR.finditer(alignment)]
    assert alignment == " ".join(f"{i}-{j}" for i, j in pairs)  # nothing else in it
    assert pairs == sorted(set(pairs))
    assert all(i < len(src.split()) and j < len(text.split()) for i, j in pairs)
    assert {j for _, j in pairs} == set(range(len(text.split())))  # one link per target word


def toy_gold_rate(run) -> float:
    """Per cent of the gold links of the toy validation set that the alignment finds, the
    references teacher-forced (each target word has one link; German "und" has no gold)."""
    src_lines = (TOY / "toy.val.en").read_text(encoding="utf-8").splitlines()
    tgt_lines = (TOY / "toy.val.de").read_text(encoding="utf-8").splitlines()
    src_toks = run.src_tok.tokenize_many(src_lines)
    tgt_toks = run.tgt_tok.tokenize_many(tgt_lines)
    src = pad([run.src_vocab.encode(t) for t in src_toks])
    weights = cross_attention(run.model, src, [run.tgt_vocab.encode(t) for t in tgt_toks])
    hit = total = 0
    for s, t, w, a, b in zip(src_toks, tgt_toks, weights, src_lines, tgt_lines, strict=True):
        found = word_alignment(w, token_words(s, run.src_tok),
                               token_words(t, run.tgt_tok))
        hit += len(set(found) & gold(a, b))
        total += len(gold(a, b))
    return 100 * hit / total


def test_alignments_match_the_toy_gold_and_are_valid_pharaoh(tiny_run):
    assert toy_gold_rate(load_run(tiny_run)) >= 90  # measured: 96.1 (docs/decoding.md)
    translator = Translator.load(tiny_run, align=True)
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:40] + [""]
    for options in ({}, {"beam": 3, "nbest": 3}, {"sampling": "topk", "topk": 5, "samples": 2}):
        for line, found in zip(lines, translator.translate_nbest(lines, **options), strict=True):
            for t in found:
                _check_pharaoh(line, t.text, t.alignment)
    assert translator.translate_nbest([""])[0][0].alignment == ""


def test_subword_alignments_are_merged_to_words(spm_run):
    run = load_run(spm_run)
    assert toy_gold_rate(run) >= 30  # measured: 38.4 (docs/decoding.md); chance is about 11
    translator = Translator(run)
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:40]
    for line, found in zip(lines, translator.translate_nbest(lines, align=True), strict=True):
        _check_pharaoh(line, found[0].text, found[0].alignment)


def test_cli_align_formats_and_ctranslate2(cli, tiny_run, tmp_path):
    src = tmp_path / "in.txt"
    lines = ["Today you have eight hundred seventy nine cats.", "", "We have two dogs."]
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = cli("translate", str(tiny_run), "-i", str(src), "--align")
    assert r.code == 0, r.err
    rows = r.out.splitlines()
    assert len(rows) == 3 and all(row.count("\t") == 1 for row in rows)
    for line, row in zip(lines, rows, strict=True):
        _check_pharaoh(line, *row.split("\t"))
    assert rows[0].split("\t")[1].startswith("0-0 1-2 2-1")  # Today-Heute you-du have-hast
    r = cli("translate", str(tiny_run), "-i", str(src), "--align", "--format", "jsonl")
    records = [json.loads(x) for x in r.out.splitlines()]
    assert [x["alignment"] for x in records] == [row.split("\t")[1] for row in rows]
    pytest.importorskip("ctranslate2")
    r = cli("translate", str(tiny_run), "-i", str(src), "--align", "--engine", "ctranslate2",
            "-o", str(tmp_path / "out.txt"))
    assert_user_error(r, 3, "decode.align: word alignments come from mt's own search")
    assert not (tmp_path / "out.txt").exists()


def test_alignments_reuse_the_searchs_encoder_output(tiny_run, monkeypatch):
    translator = Translator.load(tiny_run)
    model = translator.model
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:20]
    src = pad([translator.run.src_vocab.encode(t) for t in translator.src_tok.tokenize_many(
        lines)])
    outputs = [translator.run.tgt_vocab.encode(translator.tgt_tok.tokenize(t))
               for t in translator.translate(lines)]
    with torch.no_grad():
        memory = model.encode(src, model.src_mask(src))
    for a, b in zip(cross_attention(model, src, outputs, memory=memory),
                    cross_attention(model, src, outputs), strict=True):
        assert torch.equal(a, b)
    encoded = []
    encode = type(model).encode
    monkeypatch.setattr(type(model), "encode",
                        lambda self, *a: encoded.append(1) or encode(self, *a))
    for options in ({"beam": 3, "nbest": 2}, {"beam": 1}):
        encoded.clear()
        plain = translator.translate_nbest(lines, **options)
        once = len(encoded)
        aligned = translator.translate_nbest(lines, align=True, **options)
        assert len(encoded) == 2 * once > 0  # no more encoder passes for the alignments
        assert [[t.text for t in ts] for ts in aligned] == [[t.text for t in ts] for ts in plain]


def test_the_search_keeps_the_alignments_attention_as_it_goes(tiny_run, monkeypatch):
    translator = Translator.load(tiny_run)
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:30]
    for options in ({"beam": 1}, {"beam": 3}, {"beam": 4, "nbest": 2}):
        # attention asked for too: the alignment then comes from a teacher-forced pass
        forced = translator.translate_nbest(lines, align=True, attention=True, **options)
        def no_pass(*args, **kwargs):
            raise AssertionError("a second, teacher-forced pass")

        monkeypatch.setattr("mt.attention.align.cross_attention", no_pass)
        found = translator.translate_nbest(lines, align=True, **options)
        monkeypatch.undo()
        assert [[(t.text, t.alignment) for t in ts] for ts in found] == [
            [(t.text, t.alignment) for t in ts] for ts in forced]
