"""mt/commands/plot.py: `mt plot` training curves as PNG files."""

import shutil
import sys

import pytest

from conftest import assert_user_error, png_size
from mt.commands.plot import DPI, HEIGHT, WIDTH, plot_runs
from mt.errors import ConfigError, DataError


def test_plot_one_run_and_several_overlaid(cli, tiny_run, tmp_path):
    one = tmp_path / "one.png"
    r = cli("plot", str(tiny_run), "-o", str(one))
    assert r.code == 0, r.err
    assert r.out.strip() == str(one)
    assert png_size(one) == (WIDTH * DPI, HEIGHT * DPI)
    other = tmp_path / "other"  # a second run: the same curves under another name
    other.mkdir()
    shutil.copy(tiny_run / "metrics.jsonl", other / "metrics.jsonl")
    two = tmp_path / "two.png"
    assert cli("plot", str(tiny_run), str(other), "-o", str(two)).code == 0
    assert png_size(two) == png_size(one)
    assert two.read_bytes() != one.read_bytes()  # a second legend entry at least


def test_plot_of_a_run_without_metrics(tmp_path, cli):
    empty = tmp_path / "fresh"
    empty.mkdir()
    out = tmp_path / "c.png"
    assert_user_error(cli("plot", str(empty), "-o", str(out)), 4, str(empty),
                      "no metrics to plot yet")
    (empty / "metrics.jsonl").write_text('{"event": "train", "st')  # a line cut short
    with pytest.raises(DataError, match="no metrics"):
        plot_runs([empty], out)
    with pytest.raises(DataError, match="no such run directory"):
        plot_runs([tmp_path / "nope"], out)
    assert not out.exists()


def test_pictures_without_matplotlib_name_the_extra(tiny_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    with pytest.raises(ConfigError, match=r"mt\[plot\]"):
        plot_runs([tiny_run], tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()
