"""mt.train.step.UpdateStep on its own: the record of one update, the non-finite policy (skip,
count, give up after MAX_BAD_STEPS), an idle rank's update, and a signal travelling through the
step's flags."""

import math

import pytest
import torch

from mt.config import ModelConfig, TrainConfig
from mt.data import Batch, pad
from mt.model import make_model
from mt.train.distributed import Group
from mt.train.schedule import lr_at
from mt.train.state import Clock, Progress
from mt.train.step import MAX_BAD_STEPS, UpdateStep
from mt.train.stopping import Stopping, StopReason
from mt.vocab import BOS, EOS

V = 20


def batch() -> Batch:
    src = [[5, 6, 7, 8], [9, 10]]
    tgt = [[11, 12, 13], [14, 15, 16, 17]]
    return Batch(pad(src), pad([[BOS] + t for t in tgt]), pad([t + [EOS] for t in tgt]),
                 sum(len(t) + 1 for t in tgt))


@pytest.fixture
def update(tmp_path) -> UpdateStep:
    torch.manual_seed(0)
    cfg = TrainConfig(lr=1e-3, warmup=4, clip_norm=0.0)
    model = make_model(ModelConfig(d_model=32, n_heads=4, n_enc_layers=1, n_dec_layers=1,
                                   d_ff=64, dropout=0.0, max_positions=32), V, V)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    scaler = torch.amp.GradScaler("cuda", enabled=False)
    group = Group("cpu")
    stopping = Stopping(cfg, Clock(), group, tmp_path / "last.pt")
    return UpdateStep(cfg, model, optimizer, scaler, None, group, stopping)


def weights(update: UpdateStep) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in update.model.state_dict().items()}


def nan_net(update: UpdateStep):
    return lambda *a, **kw: update.model(*a, **kw) * float("nan")


def test_an_update_reports_its_loss_and_statistics_and_steps_on_the_schedule(update):
    b, before = batch(), weights(update)
    result = update(update.model, [b], False, Progress())
    loss_sum, nll_sum, tokens = result.stats.tolist()
    assert not result.skipped and not result.give_up and result.in_a_row == 0
    assert tokens == b.n_tgt_tokens == 9
    assert 0 < nll_sum < loss_sum  # label smoothing adds to the NLL
    assert float(result.loss) == pytest.approx(loss_sum / tokens)
    assert math.isfinite(float(update.grad_norm)) and float(update.grad_norm) > 0
    assert update.optimizer.param_groups[0]["lr"] == lr_at(1, 1e-3, 4)  # the step about to be
    assert any(not torch.equal(before[k], v) for k, v in weights(update).items())


def test_a_nonfinite_loss_skips_counts_and_gives_up_after_max_bad_steps(update):
    b, before, p = batch(), weights(update), Progress()
    for i in range(1, MAX_BAD_STEPS + 1):
        result = update(nan_net(update), [b], False, p)
        assert result.skipped == "nonfinite_loss" and result.why == "loss is not finite"
        assert math.isnan(float(result.loss))
        assert result.in_a_row == update.bad_steps == update.skipped_steps == i
        assert result.give_up == (i == MAX_BAD_STEPS)
        assert all(q.grad is None for q in update.model.parameters())  # nothing left to apply
    assert all(torch.equal(before[k], v) for k, v in weights(update).items())
    # A good update resets the count in a row, not the total.
    assert not update(update.model, [b], False, p).skipped
    assert (update.bad_steps, update.skipped_steps) == (0, MAX_BAD_STEPS)


def test_a_nonfinite_gradient_skips_the_update(update):
    before = weights(update)
    param = next(update.model.parameters())
    hook = param.register_hook(lambda g: g * float("inf"))  # a finite loss, overflowing grads
    result = update(update.model, [batch()], False, Progress())
    hook.remove()
    assert result.skipped == "nonfinite_grad" and result.in_a_row == 1
    assert math.isfinite(float(result.stats[0]))
    assert all(torch.equal(before[k], v) for k, v in weights(update).items())


def test_an_idle_rank_adds_nothing(update):
    """The epoch's last update can leave a rank without a batch: it runs one at weight 0."""
    before = weights(update)
    result = update(update.model, [batch()], True, Progress())
    assert not result.skipped
    assert result.stats.tolist() == [0.0, 0.0, 0.0] and float(result.loss) == 0.0
    assert all(torch.equal(before[k], v) for k, v in weights(update).items())


def test_a_signal_reaches_the_stop_reason_through_the_steps_flags(update):
    update(update.model, [batch()], False, Progress())
    assert update.stopping.reason is None
    update.stopping.signalled = True
    update(update.model, [batch()], False, Progress())
    assert update.stopping.reason is StopReason.SIGNAL and update.stopping.interrupted()
