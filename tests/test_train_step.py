"""mt/train/step.py: UpdateStep on its own: the record of one update, the non-finite policy
(skip, count, give up after MAX_BAD_STEPS), an idle rank's update, and a signal travelling
through the step's flags; and through the Trainer: k micro-batches (train.accum_steps) equal one
batch of their union, and CPU bf16 autocast trains."""

import math

import pytest
import torch

from conftest import exact_trainer
from mt.config import ModelConfig, TrainConfig
from mt.data import Batch, pad
from mt.device import autocast_dtype, cpu_has_native_bf16
from mt.model import make_model
from mt.train.distributed import Group
from mt.train.schedule import lr_at
from mt.train.state import Clock, Progress
from mt.train.step import MAX_BAD_STEPS, UpdateStep
from mt.train.stopping import Stopping, StopReason
from mt.vocab import BOS, EOS, PAD

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


def merge(batches: list[Batch]) -> Batch:
    """One batch holding the sentences of several (padded to the longest)."""
    rows = lambda name: [r[r != PAD].tolist() for b in batches for r in getattr(b, name)]  # noqa: E731
    return Batch(pad(rows("src")), pad(rows("tgt_in")), pad(rows("tgt_out")),
                 sum(b.n_tgt_tokens for b in batches))


def test_k_micro_batches_equal_one_batch_of_their_union(toy300, tmp_path):
    accumulated = exact_trainer(toy300, tmp_path / "a", "train.accum_steps=3")
    whole = exact_trainer(toy300, tmp_path / "b")
    three = accumulated.train_data.batches(400, seed=1)[:3]
    assert len({b.src.size(1) for b in three}) > 1  # the union needs more padding than each
    loss_k = accumulated.step(*three)
    loss_1 = whole.step(merge(three))
    assert torch.allclose(loss_k, loss_1, rtol=1e-6), (loss_k, loss_1)
    for (name, a), b in zip(accumulated.model.named_parameters(), whole.model.parameters()):
        # Gradients, not weights: Adam's first step is lr * sign(grad), so a gradient that is
        # zero up to rounding (the key bias's) moves a weight by +-lr either way.
        assert a.grad is not None and torch.allclose(a.grad, b.grad, rtol=1e-4, atol=1e-7), name
    assert accumulated.progress.step == whole.progress.step == 1


def test_cpu_bf16_autocast_trains(toy300, tmp_path):
    assert autocast_dtype("bf16", torch.device("cpu")) == torch.bfloat16
    assert autocast_dtype("none", torch.device("cpu")) is None
    assert autocast_dtype("fp16", torch.device("cpu")) is None  # fp16 is for CUDA
    auto = torch.bfloat16 if cpu_has_native_bf16() else None  # never emulated bf16
    assert autocast_dtype("auto", torch.device("cpu")) == auto
    assert isinstance(cpu_has_native_bf16(), bool)
    t = exact_trainer(toy300, tmp_path / "run", "train.amp=bf16")
    batch = t.train_data.batches(400, seed=1)[0]
    seen = []
    linear = next(m for m in t.model.decoder.modules() if isinstance(m, torch.nn.Linear))
    hook = linear.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    losses = [float(t.step(batch)) for _ in range(20)]
    hook.remove()
    assert seen[0] == torch.bfloat16  # the matrix products ran in bf16
    assert all(p.dtype == torch.float32 for p in t.model.parameters())  # weights stay fp32
    assert losses[-1] < losses[0] * 0.7, losses
