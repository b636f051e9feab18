"""mt/commands/heatmap.py: `mt translate --attention` pictures, as PNG files."""

from dataclasses import replace

import pytest
import torch

from conftest import ROOT, TINY, TOY, TWO_LINES, assert_user_error, png_size
from mt.checkpoint import load_run
from mt.commands.heatmap import Pictures, translate_with_attention
from mt.commands.options import TranslateOptions
from mt.errors import ConfigError, DataError
from mt.translator import Translator


def test_attention_pictures_for_two_lines(cli, tiny_run, tmp_path):
    pictures = tmp_path / "att"
    plain = Translator(load_run(tiny_run)).translate(TWO_LINES.splitlines())
    r = cli("translate", str(tiny_run), "--attention", str(pictures), stdin=TWO_LINES.encode())
    assert r.code == 0, r.err
    assert r.out.splitlines() == plain  # the translations as without --attention
    assert sorted(p.name for p in pictures.iterdir()) == ["0001.png", "0002.png"]
    w1, h1 = png_size(pictures / "0001.png")
    assert w1 > 300 and h1 > 300
    heads = tmp_path / "heads"
    src = tmp_path / "in.txt"
    src.write_text(TWO_LINES)
    translate_with_attention(tiny_run, str(src), str(tmp_path / "out.txt"),
                             Pictures(heads, layer=0, heads="all"))
    assert (tmp_path / "out.txt").read_text().splitlines() == plain
    assert png_size(heads / "0001.png")[0] > 3 * w1  # one panel per head, side by side


def test_attention_decodes_in_the_chosen_dtype(tiny_run, tmp_path, monkeypatch):
    """--dtype bf16 with --attention: the same bf16 model as `mt translate --dtype bf16`."""
    import mt.decoding.align
    seen = []

    def spy(model, *args):
        seen.append(next(model.parameters()).dtype)
        return attend(model, *args)

    attend = mt.decoding.align.cross_attention
    monkeypatch.setattr(mt.decoding.align, "cross_attention", spy)
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(TWO_LINES)
    translate_with_attention(tiny_run, str(src), str(out), Pictures(tmp_path / "att"),
                             TranslateOptions(overrides=("decode.dtype=bf16",)))
    assert seen and set(seen) == {torch.bfloat16}
    run = load_run(tiny_run)
    bf16 = Translator(run, replace(run.cfg.decode, dtype="bf16")).translate(TWO_LINES.splitlines())
    assert out.read_text().splitlines() == bf16


def test_attention_with_an_empty_line_draws_no_picture(cli, tiny_run, tmp_path):
    pictures = tmp_path / "att"
    src = "Today you have eight cats.\n\nYesterday we had sixty old houses.\n"
    out = tmp_path / "out.txt"
    r = cli("translate", str(tiny_run), "--attention", str(pictures), "-o", str(out),
            stdin=src.encode())
    assert r.code == 0, r.err
    assert sorted(p.name for p in pictures.iterdir()) == ["0001.png", "0003.png"]
    lines = out.read_text().split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    assert lines[0].startswith("Heute") and lines[2].startswith("Gestern")


def test_attention_bad_options(cli, tiny_run, tmp_path):
    r = cli("translate", str(tiny_run), "--attention", str(tmp_path / "a"),
            "--attention-layer", "7", stdin=TWO_LINES.encode())
    assert_user_error(r, 3, "--attention-layer 7", "2 decoder layers")
    src = tmp_path / "in.txt"
    src.write_text(TWO_LINES)
    with pytest.raises(ConfigError, match="--attention-heads some"):
        translate_with_attention(tiny_run, str(src), "-", Pictures(tmp_path / "a", heads="some"))
    src.write_text("one.\n" * 101)
    with pytest.raises(DataError, match="at most 100 lines"):
        translate_with_attention(tiny_run, str(src), "-", Pictures(tmp_path / "a"))
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
def test_attention_applies_the_corpus_tag_as_translate_does(cli, tmp_path):
    """decode.tag with --attention: the tag goes before each source line, as in `mt translate`
    (the pictures used to bypass it), and the picture's columns are the line's own tokens."""
    run = tmp_path / "tagged"
    sets = [*TINY, "data.train=[{prefix: toy.train, tag: <2de>}]", "train.max_epochs=1",
            "train.eval_bleu=false", "train.metric=loss"]
    r = cli("train", str(ROOT / "configs" / "toy.yaml"), "--out", str(run),
            *[a for s in sets for a in ("--set", s)])
    assert r.code == 0, r.err
    lines = (TOY / "toy.test.en").read_text(encoding="utf-8").splitlines()[:8]
    src = tmp_path / "in.txt"
    src.write_text("\n".join(lines) + "\n")
    translator = Translator.load(run)
    # A model trained this little may stop at once: min_len gives it words to differ in.
    tagged = translator.translate(lines, tag="<2de>", min_len=4)
    assert tagged != translator.translate(lines, min_len=4)  # else this test could not tell
    out = tmp_path / "out.txt"
    r = cli("translate", str(run), "--tag", "<2de>", "--min-len", "4", "--attention",
            str(tmp_path / "att"), "-i", str(src), "-o", str(out))
    assert r.code == 0, r.err
    assert out.read_text().splitlines() == tagged
    attention = translator.translate_nbest(lines[:1], tag="<2de>", attention=True)[0][0].attention
    assert "<2de>" not in attention.src_tokens and len(attention.weights[0]) == len(
        attention.src_tokens)
