"""Pictures: `mt plot` training curves and `mt translate --attention` heatmaps, as PNG files."""

import shutil
import struct
import sys
from dataclasses import replace

import pytest
import torch

from conftest import assert_user_error, run_mt
from mt.checkpoint import load_run
from mt.commands.heatmap import translate_with_attention
from mt.commands.plot import DPI, HEIGHT, WIDTH, plot_runs
from mt.config import ModelConfig
from mt.errors import ConfigError, DataError
from mt.model import make_model
from mt.translator import Translator
from mt.vocab import BOS, PAD

TWO_LINES = "Yesterday we saw forty two red dogs.\nI need seven hundred eleven books.\n"


def png_size(path) -> tuple[int, int]:
    """(width, height) from a PNG's header, after checking it is one."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    assert data[-8:-4] == b"IEND"  # complete, not cut short
    return struct.unpack(">II", data[16:24])


def test_plot_one_run_and_several_overlaid(tiny_run, tmp_path):
    one = tmp_path / "one.png"
    r = run_mt("plot", str(tiny_run), "-o", str(one))
    assert r.code == 0, r.err
    assert r.out.strip() == str(one)
    assert png_size(one) == (WIDTH * DPI, HEIGHT * DPI)
    other = tmp_path / "other"  # a second run: the same curves under another name
    other.mkdir()
    shutil.copy(tiny_run / "metrics.jsonl", other / "metrics.jsonl")
    two = tmp_path / "two.png"
    assert run_mt("plot", str(tiny_run), str(other), "-o", str(two)).code == 0
    assert png_size(two) == png_size(one)
    assert two.read_bytes() != one.read_bytes()  # a second legend entry at least


def test_plot_of_a_run_without_metrics(tmp_path):
    empty = tmp_path / "fresh"
    empty.mkdir()
    out = tmp_path / "c.png"
    assert_user_error(run_mt("plot", str(empty), "-o", str(out)), 4, str(empty),
                      "no metrics to plot yet")
    (empty / "metrics.jsonl").write_text('{"event": "train", "st')  # a line cut short
    with pytest.raises(DataError, match="no metrics"):
        plot_runs([empty], out)
    with pytest.raises(DataError, match="no such run directory"):
        plot_runs([tmp_path / "nope"], out)
    assert not out.exists()


def test_cross_attention_weights_leave_the_outputs_unchanged(tiny_run):
    """The weights come from the hand-written attention path: it must compute what the fused
    kernel computes, and the weights must be distributions over the real source tokens."""
    run = load_run(tiny_run)
    model = run.model
    src = torch.tensor([[5, 6, 7, 8], [9, 10, PAD, PAD]])
    tgt_in = torch.tensor([[BOS, 4, 5], [BOS, 6, 7]])
    weights = model.cross_attention(src, tgt_in)
    assert len(weights) == model.cfg.n_dec_layers
    H = model.cfg.n_heads
    for w in weights:
        assert w.shape == (2, H, 3, 4)
        assert torch.allclose(w.sum(-1), torch.ones(2, H, 3), atol=1e-5)
        assert torch.all(w[1, :, :, 2:] == 0)  # padding gets no attention
    layer = model.decoder[0]
    with torch.no_grad():  # as in cross_attention: without gradients the encoder's kernels differ
        src_mask = model.src_mask(src)
        cache = model.start_cache(model.encode(src, src_mask), src_mask)
        x = model._embed(model.tgt_embed, tgt_in, 0)
        fused = layer(x, None, cache.cross[0], src_mask, None, True)
        by_hand = layer(x, None, cache.cross[0], src_mask, None, True, need_weights=True)
    assert fused[2] is None
    assert torch.allclose(fused[0], by_hand[0], atol=1e-5)
    assert torch.equal(by_hand[2], weights[0])


def test_attention_pictures_for_two_lines(tiny_run, tmp_path):
    pictures = tmp_path / "att"
    plain = Translator(load_run(tiny_run)).translate(TWO_LINES.splitlines())
    r = run_mt("translate", str(tiny_run), "--attention", str(pictures), input=TWO_LINES)
    assert r.code == 0, r.err
    assert r.out.splitlines() == plain  # the translations as without --attention
    assert sorted(p.name for p in pictures.iterdir()) == ["0001.png", "0002.png"]
    w1, h1 = png_size(pictures / "0001.png")
    assert w1 > 300 and h1 > 300
    heads = tmp_path / "heads"
    src = tmp_path / "in.txt"
    src.write_text(TWO_LINES)
    translate_with_attention(tiny_run, str(src), str(tmp_path / "out.txt"), heads, layer=0,
                             heads="all")
    assert (tmp_path / "out.txt").read_text().splitlines() == plain
    assert png_size(heads / "0001.png")[0] > 3 * w1  # one panel per head, side by side


def test_attention_decodes_in_the_chosen_dtype(tiny_run, tmp_path, monkeypatch):
    """--dtype bf16 with --attention: the same bf16 model as `mt translate --dtype bf16`."""
    import mt.commands.heatmap
    seen = []

    def spy(model, *args):
        seen.append(next(model.parameters()).dtype)
        return attend(model, *args)

    attend = mt.commands.heatmap.attend
    monkeypatch.setattr(mt.commands.heatmap, "attend", spy)
    src, out = tmp_path / "in.txt", tmp_path / "out.txt"
    src.write_text(TWO_LINES)
    translate_with_attention(tiny_run, str(src), str(out), tmp_path / "att",
                             overrides=["decode.dtype=bf16"])
    assert seen == [torch.bfloat16] * 2
    run = load_run(tiny_run)
    bf16 = Translator(run, replace(run.cfg.decode, dtype="bf16")).translate(TWO_LINES.splitlines())
    assert out.read_text().splitlines() == bf16


def test_attention_with_an_empty_line_draws_no_picture(tiny_run, tmp_path):
    pictures = tmp_path / "att"
    src = "Today you have eight cats.\n\nYesterday we had sixty old houses.\n"
    out = tmp_path / "out.txt"
    r = run_mt("translate", str(tiny_run), "--attention", str(pictures), "-o", str(out),
               input=src)
    assert r.code == 0, r.err
    assert sorted(p.name for p in pictures.iterdir()) == ["0001.png", "0003.png"]
    lines = out.read_text().split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    assert lines[0].startswith("Heute") and lines[2].startswith("Gestern")


def test_attention_bad_options(tiny_run, tmp_path):
    r = run_mt("translate", str(tiny_run), "--attention", str(tmp_path / "a"),
               "--attention-layer", "7", input=TWO_LINES)
    assert_user_error(r, 3, "--attention-layer 7", "2 decoder layers")
    src = tmp_path / "in.txt"
    src.write_text(TWO_LINES)
    with pytest.raises(ConfigError, match="--attention-heads some"):
        translate_with_attention(tiny_run, str(src), "-", tmp_path / "a", heads="some")
    src.write_text("one.\n" * 101)
    with pytest.raises(DataError, match="at most 100 lines"):
        translate_with_attention(tiny_run, str(src), "-", tmp_path / "a")
    assert not (tmp_path / "a").exists()


def test_cross_attention_of_a_single_target_position():
    model = make_model(ModelConfig(d_model=16, n_heads=2, n_enc_layers=1, n_dec_layers=1,
                                   d_ff=32, dropout=0.0), 10, 12, PAD).eval()
    w = model.cross_attention(torch.tensor([[4, 5, 6]]), torch.tensor([[BOS]]))
    assert w[0].shape == (1, 2, 1, 3)


def test_pictures_without_matplotlib_name_the_extra(tiny_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"mt\[plot\]"):
        plot_runs([tiny_run], tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()
