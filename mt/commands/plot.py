"""`mt plot`: training curves of one or more runs (loss, validation BLEU, learning rate, peak
memory) as one PNG, read from each run's metrics.jsonl."""

from __future__ import annotations

from pathlib import Path

from mt.errors import ConfigError, DataError
from mt.log import warn
from mt.textio import atomic_write
from mt.train.memory import MEMORY_KEYS
from mt.train.metrics_log import METRICS, read_metrics

WIDTH, HEIGHT, DPI = 20, 4, 100  # inches and dots per inch: a 2000 x 400 pixel picture


def series(records: list[dict], event: str, key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of one field over the records of one event, numeric values only."""
    points = [(r["step"], r[key]) for r in records if r.get("event") == event
              and isinstance(r.get(key), (int, float)) and not isinstance(r.get(key), bool)]
    return [s for s, _ in points], [v for _, v in points]


def pyplot():
    """matplotlib.pyplot drawing to files only, or a one-line error naming the extra."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display needed
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("pictures need matplotlib: pip install 'mt[plot]'") from None
    return plt


def save_png(fig, out: Path) -> None:
    """Write a figure as PNG at out, atomically, and free it."""
    atomic_write(Path(out), lambda tmp: fig.savefig(tmp, format="png", dpi=DPI))
    fig.clf()
    pyplot().close(fig)


def plot_runs(runs: list[Path], out: Path) -> Path:
    """Draw the runs' curves into one PNG at out (written atomically)."""
    plt = pyplot()
    found = {}
    for run in runs:
        records = read_metrics(run)
        if records:
            found[run] = records
        else:
            warn(f"{run}: no metrics yet (no records in {METRICS}); left out of the plot")
    if not found:
        names = ", ".join(str(r) for r in runs)
        raise DataError(f"{names}: no metrics to plot yet; train first, or wait for the first "
                        f"log line (train.log_every steps)")
    fig, (loss_ax, bleu_ax, lr_ax, mem_ax) = plt.subplots(1, 4, figsize=(WIDTH, HEIGHT), dpi=DPI)
    for i, (run, records) in enumerate(found.items()):
        color = f"C{i % 10}"
        name = (run if run.is_dir() else run.parent).resolve().name  # the run's directory
        loss_ax.plot(*series(records, "train", "loss"), color=color, label=f"{name} train")
        loss_ax.plot(*series(records, "valid", "val_loss"), color=color, linestyle="--",
                     marker=".", label=f"{name} valid")
        bleu_ax.plot(*series(records, "valid", "val_bleu"), color=color, marker=".", label=name)
        lr_ax.plot(*series(records, "train", "lr"), color=color, label=name)
        for key, style in zip(MEMORY_KEYS, ("-", ":"), strict=True):
            steps, mib = series(records, "valid", key)
            if steps:
                mem_ax.plot(steps, [m / 1024 for m in mib], color=color, linestyle=style,
                            marker=".", label=f"{name} {key.split('_')[1]}")
    for ax, title in ((loss_ax, "loss (train: label-smoothed; valid: NLL)"),
                      (bleu_ax, "validation BLEU"), (lr_ax, "learning rate"),
                      (mem_ax, "peak memory, GiB (rss: resident; cuda: allocated)")):
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    save_png(fig, out)
    return Path(out)
