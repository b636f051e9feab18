"""mt/loss.py: the label-smoothed loss and its hand-written backward."""

import math

import pytest
import torch

from mt.loss import label_smoothed_loss
from mt.vocab import PAD


def test_label_smoothed_loss_matches_hand_computation():
    torch.manual_seed(1)
    logits = torch.randn(2, 3, 5)
    target = torch.tensor([[2, 4, PAD], [1, 3, 3]])
    eps = 0.1
    loss, nll = label_smoothed_loss(logits, target, eps)
    want_loss, want_nll = 0.0, 0.0
    for b in range(2):
        for t in range(3):
            y = target[b, t].item()
            if y == PAD:
                continue
            logp = [logits[b, t, c].item() - math.log(sum(math.exp(logits[b, t, j].item())
                                                          for j in range(5))) for c in range(5)]
            # (1 - eps) on the target, eps spread evenly over all 5 classes.
            want_loss += -sum(((1 - eps) * (c == y) + eps / 5) * logp[c] for c in range(5))
            want_nll += -logp[y]
    assert loss.item() == pytest.approx(want_loss, rel=1e-5)
    assert nll.item() == pytest.approx(want_nll, rel=1e-5)
    assert label_smoothed_loss(logits, target, 0.0)[0].item() == pytest.approx(want_nll, rel=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothed_loss_gradient_matches_autograd(eps):
    """The hand-written backward against autograd through log-softmax (float64), pad rows
    included, with an upstream gradient other than 1; and it flows from bf16 logits."""
    torch.manual_seed(2)
    logits = torch.randn(3, 4, 7, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[2, 4, PAD, 6], [1, 3, 3, PAD], [5, 5, 0, 2]])
    loss, nll = label_smoothed_loss(logits, target, eps)
    (2.5 * loss).backward()
    ref = logits.detach().clone().requires_grad_(True)
    lp = ref.log_softmax(-1).view(-1, 7)
    keep = target.view(-1) != PAD
    want = (((1 - eps) * -lp.gather(1, target.view(-1, 1)).squeeze(1) - eps * lp.mean(-1))
            [keep].sum())
    (2.5 * want).backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-12)
    assert nll.item() == pytest.approx(-lp.gather(1, target.view(-1, 1)).squeeze(1)[keep]
                                       .sum().item(), rel=1e-12)
    torch.testing.assert_close(logits.grad, ref.grad, rtol=1e-10, atol=1e-12)
    assert not nll.requires_grad
    half = logits.detach().bfloat16().requires_grad_(True)
    label_smoothed_loss(half, target, eps)[0].backward()
    assert half.grad.dtype == torch.bfloat16 and torch.isfinite(half.grad).all()
