"""mt/loss.py: the label-smoothed loss of the output projection, a slice of rows at a time,
and its gradients."""

import math

import pytest
import torch

import mt.loss
from mt.loss import label_smoothed_loss
from mt.vocab import PAD


def test_label_smoothed_loss_matches_hand_computation():
    torch.manual_seed(1)
    states, weight = torch.randn(2, 3, 4), torch.randn(5, 4)
    logits = states @ weight.T
    target = torch.tensor([[2, 4, PAD], [1, 3, 3]])
    eps = 0.1
    loss, nll = label_smoothed_loss(states, weight, target, eps)
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
    assert label_smoothed_loss(states, weight, target, 0.0)[0].item() == pytest.approx(
        want_nll, rel=1e-5)


def reference(states, weight, target, eps):
    """The loss through autograd, on the whole (N, V) logits."""
    lp = (states @ weight.T).log_softmax(-1).view(-1, weight.size(0))
    keep = target.view(-1) != PAD
    picked = -lp.gather(1, target.view(-1, 1)).squeeze(1)
    return ((1 - eps) * picked - eps * lp.mean(-1))[keep].sum(), picked[keep].sum()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
@pytest.mark.parametrize("slice_elements", [7, 14, 35, 1 << 22])  # rows a slice: 1, 2, 5
# (the last slice padded), all
def test_label_smoothed_loss_gradients_match_autograd(eps, slice_elements, monkeypatch):
    """The gradients of the states and of the weight, computed a slice at a time in the
    forward pass, against autograd through log-softmax (float64), pad rows included, with an
    upstream gradient other than 1."""
    monkeypatch.setattr(mt.loss, "SLICE_ELEMENTS", slice_elements)
    torch.manual_seed(2)
    states = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(7, 5, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([[2, 4, PAD, 6], [1, 3, 3, PAD], [5, 5, 0, 2]])
    loss, nll = label_smoothed_loss(states, weight, target, eps, torch.float64)
    (2.5 * loss).backward()
    ref_s, ref_w = (x.detach().clone().requires_grad_(True) for x in (states, weight))
    want, want_nll = reference(ref_s, ref_w, target, eps)
    (2.5 * want).backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-12)
    assert nll.item() == pytest.approx(want_nll.item(), rel=1e-12)
    torch.testing.assert_close(states.grad, ref_s.grad, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(weight.grad, ref_w.grad, rtol=1e-10, atol=1e-12)
    assert not nll.requires_grad


def test_label_smoothed_loss_in_bf16_keeps_the_inputs_dtypes():
    """Under bf16 the projection runs in bf16 (as autocast's would) and each gradient comes
    back in its input's dtype, close to float32's."""
    torch.manual_seed(3)
    states = torch.randn(4, 6, 16, requires_grad=True)
    weight = torch.randn(50, 16, requires_grad=True)
    target = torch.randint(1, 50, (4, 6))
    loss, _ = label_smoothed_loss(states, weight, target, 0.1, torch.bfloat16)
    loss.backward()
    ref_s, ref_w = (x.detach().clone().requires_grad_(True) for x in (states, weight))
    reference(ref_s, ref_w, target, 0.1)[0].backward()
    assert states.grad.dtype == weight.grad.dtype == torch.float32
    torch.testing.assert_close(states.grad, ref_s.grad, rtol=0.05, atol=0.02)
    torch.testing.assert_close(weight.grad, ref_w.grad, rtol=0.05, atol=0.02)


def test_no_gradients_are_kept_without_grad():
    """Validation (no_grad) computes the loss only: nothing is saved for a backward."""
    states = torch.randn(2, 3, 4, requires_grad=True)
    with torch.no_grad():
        loss, nll = label_smoothed_loss(states, torch.randn(5, 4), torch.ones(2, 3).long(), 0.1)
    assert loss.grad_fn is None and torch.isfinite(nll)
