"""mt/commands/train.py: `mt train --resume` refuses a changed setting that a resume may not
change, however it is given (--set or a config file), blaming what was typed and saying what to
do instead, before touching the run."""

from conftest import assert_user_error, saved_run, snapshot
from mt.config import load_config


def test_resume_refuses_a_changed_model_or_data_setting_however_given(cli, tmp_path):
    run = saved_run(tmp_path / "run")
    before = snapshot(run)
    r = cli("train", "--out", run, "--resume", "--set", "data.dir=elsewhere", "--device", "cpu")
    assert_user_error(r, 3, "--set data.dir=elsewhere: data.dir differs from the run being "
                      "resumed ('elsewhere', was 'data/toy'",
                      f"start a new run from this one's weights with it: --init-from {run} "
                      "--out NEW")
    changed = tmp_path / "changed.yaml"
    load_config(run / "config.yaml", ["data.train=other"]).save(changed)
    r = cli("train", changed, "--out", run, "--resume", "--device", "cpu")
    assert_user_error(r, 3, f"{changed}: data.train differs", "--init-from")
    changed = tmp_path / "changed.yaml"
    load_config(run / "config.yaml", ["model.d_model=32"]).save(changed)
    r = cli("train", changed, "--out", run, "--resume", "--device", "cpu")
    assert_user_error(r, 3, f"{changed}: model.d_model differs", "another --out")
    r = cli("train", "--out", run, "--resume", "--set", "train.lr=1e-3", "--device", "cpu")
    assert_user_error(r, 3, "--set train.lr=1e-3: train.lr differs")
    assert snapshot(run) == before and not (tmp_path / "elsewhere").exists()
