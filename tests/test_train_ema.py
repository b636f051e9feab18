"""mt/train/ema.py: the moving average of the weights, by hand and in the Trainer; what each
checkpoint holds with it; a kill and --resume with it is bit-exact."""

import pytest
import torch

from conftest import CONFIG, TINY, corpus
from mt.checkpoint import load_checkpoint
from mt.commands.train import train
from mt.config import load_config
from mt.errors import ConfigError
from mt.train.ema import EMA
from mt.train.loop import Trainer

SMALL = [*TINY, "model.d_model=32", "model.d_ff=64", "train.max_tokens=400", "train.amp=none",
         "train.eval_bleu=false", "train.metric=loss", "train.warmup=10", "train.threads=1"]


def by_hand(history: list[dict], decay: float) -> dict:
    """The average of the weights after each update, in float64: e = d e + (1 - d) w, with
    d = min(decay, (1 + n) / (10 + n)) at update n, from the initial weights."""
    avg = {k: v.double() for k, v in history[0].items() if v.is_floating_point()}
    for n, weights in enumerate(history[1:], start=1):
        d = min(decay, (1 + n) / (10 + n))
        avg = {k: d * a + (1 - d) * weights[k].double() for k, a in avg.items()}
    return avg


def test_the_average_is_the_formula_and_applying_it_is_undone_exactly():
    model = torch.nn.Linear(4, 3)
    ema = EMA(model, 0.9)
    history = [{k: v.clone() for k, v in model.state_dict().items()}]
    for _ in range(30):  # past the ramp: (1 + n) / (10 + n) reaches 0.9 at n = 80
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update(model)
        history.append({k: v.clone() for k, v in model.state_dict().items()})
    assert ema.decay_at(1) == 2 / 11 and ema.decay_at(200) == 0.9
    for k, v in by_hand(history, 0.9).items():
        assert torch.allclose(ema.shadow[k].double(), v, atol=1e-6), k
    raw = {k: v.clone() for k, v in model.state_dict().items()}
    with ema.applied(model):
        assert all(torch.equal(model.state_dict()[k], ema.shadow[k]) for k in raw)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in raw.items())


@pytest.mark.slow
def test_trainer_averages_the_raw_weights_of_each_update_not_skipped(tmp_path):
    cfg = load_config(CONFIG, [*SMALL, f"data.dir={corpus(tmp_path, n=200)}",
                               "train.ema_decay=0.5"])
    t = Trainer(cfg, tmp_path / "run", "cpu")
    t.prepare_run_dir()
    t.load_data()
    t.build()
    snap = lambda: {k: v.clone() for k, v in t.model.state_dict().items()}  # noqa: E731
    history = [snap()]
    batches = t.train_data.batches(400, seed=1)
    for b in batches[:6]:
        t.step(b)
        history.append(snap())
    net = t.net
    t.net = lambda *a, **kw: net(*a, **kw) * float("nan")
    t.step(batches[6])  # skipped: weights and average stay
    assert t.ema.updates == 6 and t.progress.step == 7
    for k, v in by_hand(history, 0.5).items():
        assert torch.allclose(t.ema.shadow[k].double(), v, atol=1e-6), k
    assert any(not torch.equal(v, history[-1][k]) for k, v in t.ema.shadow.items())
    t.net = net
    raw = snap()
    before = t.validate()["val_loss"]
    assert all(torch.equal(t.model.state_dict()[k], v) for k, v in raw.items())
    t.ema = None
    assert t.validate()["val_loss"] != before  # it validated the average, not the raw weights


@pytest.mark.parametrize("value", ["1.0", "-0.1"])
def test_ema_decay_out_of_range_is_refused(value):
    with pytest.raises(ConfigError, match=rf"--set train.ema_decay={value}: train.ema_decay "
                       r"must be in \[0, 1\)"):
        load_config(CONFIG, [f"train.ema_decay={value}"])


@pytest.mark.slow
def test_resume_with_ema_is_bit_exact_and_checkpoints_hold_what_they_say(tmp_path):
    """2N steps straight, or N then --resume to 2N: the same raw weights and average, bit for
    bit. last.pt holds the raw weights and the average; best.pt the average."""
    common = [*SMALL, "model.dropout=0.1", f"data.dir={corpus(tmp_path, n=300)}",
              "train.eval_every=1000", "train.ema_decay=0.9"]
    train(CONFIG, [*common, "train.max_steps=16"], tmp_path / "straight", "cpu", False)
    train(CONFIG, [*common, "train.max_steps=8"], tmp_path / "split", "cpu", False)
    train(CONFIG, [*common, "train.max_steps=16"], tmp_path / "split", "cpu", True)
    a, b = (load_checkpoint(tmp_path / run / "last.pt") for run in ("straight", "split"))
    assert a["step"] == b["step"] == 16 and a["ema"]["updates"] == b["ema"]["updates"] == 16
    for name, tensor in a["model"].items():
        assert torch.equal(tensor, b["model"][name]), name
    for name, tensor in a["ema"]["shadow"].items():
        assert torch.equal(tensor, b["ema"]["shadow"][name]), name
    assert any(not torch.equal(v, a["model"][k]) for k, v in a["ema"]["shadow"].items())
    best = load_checkpoint(tmp_path / "straight" / "best.pt")
    assert "ema" not in best and best["step"] == 16
    for name, tensor in best["model"].items():
        assert torch.equal(tensor, a["ema"]["shadow"][name]), name
