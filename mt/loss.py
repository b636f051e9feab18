"""Label-smoothed cross-entropy with a hand-written gradient.

Through autograd, the backward passes of the loss's mean, gather and log-softmax each allocate
and fill another tensor of the largest activation's size, (B*T, V). The gradient is known in
closed form (softmax minus the smoothed target), so backward writes it into the saved
log-probabilities instead, in four in-place passes.
"""

from __future__ import annotations

import torch

from mt.vocab import PAD


class _SmoothedCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, logits, target, smoothing):
        """logits (N, V) float32 (or 64), target (N,), N = B*T -> (loss sum, NLL sum) over
        non-pad rows."""
        keep = target != PAD
        lprobs = torch.log_softmax(logits, dim=-1)  # (N, V)
        nll = -lprobs.gather(1, target[:, None]).squeeze(1)
        smooth = -lprobs.mean(dim=-1)
        loss = ((1.0 - smoothing) * nll + smoothing * smooth).masked_fill(~keep, 0.0).sum()
        ctx.save_for_backward(lprobs, target, keep)
        ctx.smoothing = smoothing
        return loss, nll.masked_fill(~keep, 0.0).sum()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss, grad_nll):
        # d loss / d logits = softmax - (1 - eps) * onehot(target) - eps / V, on non-pad rows.
        # The NLL sum is reported, never differentiated (it is returned detached). Built in
        # place in the saved log-probabilities, which nothing else holds: no new (N, V) tensor.
        lprobs, target, keep = ctx.saved_tensors
        eps, V = ctx.smoothing, lprobs.size(-1)
        grad = lprobs.exp_().sub_(eps / V)
        grad.scatter_add_(1, target[:, None], grad.new_full((grad.size(0), 1), eps - 1.0))
        grad.mul_((keep * grad_loss)[:, None].to(grad.dtype))
        return grad, None, None


def label_smoothed_loss(logits: torch.Tensor, target: torch.Tensor, smoothing: float
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy and summed NLL (detached) over non-pad targets.

    logits (B, T, V), target (B, T). Smoothing spreads `smoothing` uniformly over all V
    classes (the target included), as torch's cross_entropy does.
    """
    logits = logits.reshape(-1, logits.size(-1))
    if logits.element_size() < 4:  # bf16/fp16 (autocast): the softmax sums in float32
        logits = logits.float()
    loss, nll = _SmoothedCE.apply(logits, target.reshape(-1), smoothing)
    return loss, nll.detach()
