"""`mt translate --attention DIR`: translate a few lines and draw, for each, the decoder's
cross-attention as a heatmap (output tokens down, source tokens across) in DIR/NNNN.png."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import torch
from tqdm import tqdm

from mt.checkpoint import Run, load_run
from mt.commands.output import check_output_path, write_output
from mt.commands.plot import DPI, pyplot, save_png
from mt.config import DecodeConfig
from mt.errors import ConfigError, DataError
from mt.model import Seq2Seq
from mt.textio import iter_lines
from mt.tokenizers.text import MARK
from mt.translator import ModelSearch, Translator
from mt.vocab import BOS, EOS, SPECIALS

MAX_LINES = 100  # one picture per line: this is for looking at a few sentences
HEADS = ("mean", "all")  # `--attention-heads`: averaged, or one panel per head


def translate_with_attention(run_path: Path, src: str, out: str, directory: Path,
                             layer: int = -1, heads: str = "mean", device: str = "cpu",
                             overrides: Sequence[str] = ()) -> int:
    """Translate src (at most MAX_LINES lines) to out as `mt translate` does, and write one
    attention picture per non-empty line: DIR/0001.png for line 1, and so on.

    overrides: `key=value` items over the run's saved config, as for translate_file."""
    if heads not in HEADS:
        raise ConfigError(f"--attention-heads {heads}: expected {' or '.join(HEADS)}")
    directory = Path(directory)
    if directory.exists() and not directory.is_dir():
        raise DataError(f"{directory}: exists and is not a directory; give a directory for "
                        "the attention pictures")
    check_output_path(out)
    lines = []
    for line in iter_lines(src):
        if len(lines) == MAX_LINES:
            raise DataError(f"{src}: --attention draws one picture per line, for at most "
                            f"{MAX_LINES} lines; give a shorter input")
        lines.append(line)
    plt = pyplot()  # fail on a missing extra before loading the model
    run = load_run(run_path, device, overrides)
    n_layers = len(run.model.decoder)
    if not -n_layers <= layer < n_layers:
        raise ConfigError(f"--attention-layer {layer}: the model has {n_layers} decoder layers "
                          f"(0 to {n_layers - 1}, or -1 for the last)")
    decode = run.cfg.decode
    translator = Translator(run, device=device)
    directory.mkdir(parents=True, exist_ok=True)
    texts = []
    for n, toks in enumerate(tqdm(translator.src_tok.tokenize_many(lines), desc="attention",
                                  unit=" lines", disable=None, file=sys.stderr), 1):
        toks = toks[: run.cfg.model.max_positions]
        if not toks:  # an empty line: an empty translation and no picture
            texts.append("")
            continue
        out_ids, weights = attend(translator.model, run, decode, toks, layer, device)
        out_toks = [run.tgt_vocab.itos[i] for i in out_ids] + [SPECIALS[EOS]]
        text = translator.detokenize(out_ids)
        texts.append(text)
        title = f"line {n}, decoder layer {layer % n_layers}, heads {heads}"
        # The joiner mark is not in matplotlib's default font: shown as a middle dot.
        shown = [[t.replace(MARK, "\u00b7") for t in side] for side in (toks, out_toks)]
        figure = heatmap(plt, weights, *shown, heads, title, text)
        save_png(figure, directory / f"{n:04d}.png")
    write_output(out, lambda f: f.writelines(t + "\n" for t in texts))
    return len(texts)


def attend(model: Seq2Seq, run: Run, decode: DecodeConfig, toks: list[str], layer: int,
           device: str) -> tuple[list[int], torch.Tensor]:
    """Translate one tokenized line as `mt translate` would (greedy or beam; model: the
    Translator's, so in decode.dtype), then one teacher-forced pass over the output for the
    layer's cross-attention weights (H, T, S), T = output tokens + <eos>."""
    src = torch.tensor([run.src_vocab.encode(toks)], device=device)  # (1, S)
    out_ids = ModelSearch(model).search(src, decode, scored=False)[0][0].tokens
    tgt_in = torch.tensor([[BOS, *out_ids]], device=device)  # (1, T): row t predicts token t
    return out_ids, model.cross_attention(src, tgt_in)[layer][0].float().cpu()


def heatmap(plt, weights: torch.Tensor, src_toks: list[str], out_toks: list[str], heads: str,
            title: str, text: str):
    """A figure of weights (H, T, S): heads averaged into one panel, or one panel per head;
    title and the translation's text above."""
    panels = [weights.mean(0)] if heads == "mean" else list(weights)
    T, S = len(out_toks), len(src_toks)
    width, height = 1.5 + 0.32 * max(S, 6), 1.8 + 0.28 * max(T, 6)  # inches, per panel
    fig, axes = plt.subplots(1, len(panels), figsize=(width * len(panels), height), dpi=DPI,
                             squeeze=False)
    for h, (ax, panel) in enumerate(zip(axes[0], panels)):
        ax.imshow(panel.numpy(), cmap="Blues", vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(S), src_toks, rotation=90, fontsize=8)
        ax.set_yticks(range(T), out_toks, fontsize=8)
        ax.set_xlabel("source")
        if h == 0:
            ax.set_ylabel("output")
        if heads == "all":
            ax.set_title(f"head {h}", fontsize=9)
    text = textwrap.fill(text, width=int(11 * width * len(panels)))  # about 11 chars an inch
    fig.suptitle(f"{title}\n{text}", fontsize=9)
    fig.tight_layout()
    return fig
