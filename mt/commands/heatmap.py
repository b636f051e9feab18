"""`mt translate --attention DIR`: translate a few lines and draw, for each, the decoder's
cross-attention as a heatmap (output tokens down, source tokens across) in DIR/NNNN.png."""

from __future__ import annotations

import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm import tqdm

from mt.commands.options import TranslateOptions
from mt.commands.output import check_output_path, write_output
from mt.commands.plot import DPI, pyplot, save_png
from mt.errors import ConfigError, DataError
from mt.records import AttentionSpec
from mt.textio import iter_lines

MAX_LINES = 100  # one picture per line: this is for looking at a few sentences
HEADS = ("mean", "all")  # `--attention-heads`: averaged, or one panel per head


@dataclass(frozen=True)
class Pictures:
    """`mt translate --attention DIR`: what to draw, one picture per line."""

    directory: Path
    layer: int = -1  # a decoder layer, from 0; -1 the last
    heads: str = "mean"  # one of HEADS


def translate_with_attention(run_path: Path, src: str, out: str, pictures: Pictures,
                             options: TranslateOptions = TranslateOptions()) -> int:
    """Translate src (at most MAX_LINES lines) to out as `mt translate` does (the Translator's
    one path: tags, truncation, dtype), and write one attention picture per non-empty line:
    DIR/0001.png for line 1, and so on."""
    if pictures.heads not in HEADS:
        raise ConfigError(f"--attention-heads {pictures.heads}: expected {' or '.join(HEADS)}")
    directory, layer = Path(pictures.directory), pictures.layer
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
    translator = options.load(run_path)
    n_layers = len(translator.model.decoder)
    if not -n_layers <= layer < n_layers:
        raise ConfigError(f"--attention-layer {layer}: the model has {n_layers} decoder layers "
                          f"(0 to {n_layers - 1}, or -1 for the last)")
    # Every head of the layer, exact, and the row that predicts <eos>: heatmap averages them.
    spec = AttentionSpec(layer, heads=True, end=True, decimals=None)
    found = translator.translate_nbest(lines, attention=spec)
    directory.mkdir(parents=True, exist_ok=True)
    texts = [translations[0].text for translations in found]
    for n, translations in enumerate(tqdm(found, desc="attention", unit=" lines",
                                          disable=None, file=sys.stderr), 1):
        best = translations[0]
        if best.attention is None:  # an empty line: an empty translation and no picture
            continue
        title = f"line {n}, decoder layer {layer % n_layers}, heads {pictures.heads}"
        a = best.attention
        figure = heatmap(plt, torch.tensor(a.weights), a.src_labels, a.out_labels,
                         pictures.heads, title, best.text)
        save_png(figure, directory / f"{n:04d}.png")
    write_output(out, lambda f: f.writelines(t + "\n" for t in texts))
    return len(texts)


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
