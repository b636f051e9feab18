"""Label-smoothed cross-entropy of the output projection, a slice of rows at a time.

The (B*T, V) logits are the largest activations by far: their float32 copy, log-probabilities
and gradient would each take 160 MB for a 6,000-token batch and a 6,000-word vocabulary, and
under autograd they coexist at the step's peak of memory. The gradient is known in closed form
(softmax minus the smoothed target), so the forward pass computes the projection, the loss and
both gradients (of the states and of the projection's weight) for a slice of rows at a time and
keeps only the gradients, (B*T, D) and (V, D): no (B*T, V) tensor outlives its slice.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from mt.vocab import PAD

SLICE_ELEMENTS = 1 << 22  # logits in one slice on CPU: 16 MB in float32
GPU_SLICE_ELEMENTS = 1 << 26  # 256 MB: fewer, larger matrix products keep a GPU busy


class _ProjectedCE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, states, weight, target, smoothing, dtype, grads, bias):
        """states (N, D), weight (V, D), target (N,), N = B*T, bias (V,) or None (a constant:
        model.logits_bias); the projection in `dtype`
        (autocast's, or float32); with `grads`, both gradients for backward. -> (loss sum,
        NLL sum) over non-pad rows, in float32 (float64 for float64)."""
        N, V = states.size(0), weight.size(0)
        size = SLICE_ELEMENTS if states.device.type == "cpu" else GPU_SLICE_ELEMENTS
        rows = max(1, size // V)
        h = states.to(dtype)
        if N % rows and N > rows:  # the last slice padded: every slice of one shape, whose
            pad = rows - N % rows   # kernels oneDNN builds once (mt.threads.KERNEL_CACHES)
            h, target = F.pad(h, (0, 0, 0, pad)), F.pad(target, (0, pad), value=PAD)
        keep = target != PAD
        w = weight.to(dtype)
        b = None if bias is None else bias.to(dtype)
        # fp16's gradients would underflow without the loss scale, unknown here: float32.
        gdt = torch.float32 if dtype == torch.float16 else dtype
        hg, wg = h.to(gdt), w.to(gdt)
        acc = torch.promote_types(dtype, torch.float32)  # the softmax's and the sums' dtype
        loss = states.new_zeros((), dtype=acc)
        nll = loss.clone()
        if grads:
            grad_h = torch.empty(h.size(0), weight.size(1), dtype=gdt, device=states.device)
            grad_w = torch.zeros(weight.shape, dtype=acc, device=states.device)
        for i in range(0, h.size(0), rows):
            t, k = target[i:i + rows, None], keep[i:i + rows]
            logits = h[i:i + rows] @ w.T if b is None else torch.addmm(b, h[i:i + rows], w.T)
            lprobs = torch.log_softmax(logits, dim=-1, dtype=acc)
            picked = -lprobs.gather(1, t).squeeze(1)
            smooth = -lprobs.mean(dim=-1)
            loss += ((1.0 - smoothing) * picked + smoothing * smooth).masked_fill(~k, 0.0).sum()
            nll += picked.masked_fill(~k, 0.0).sum()
            if grads:
                # d loss / d logits = softmax - (1 - eps) * onehot(target) - eps / V, on
                # non-pad rows, built in place in the slice's log-probabilities.
                g = lprobs.exp_().sub_(smoothing / V)
                g.scatter_add_(1, t, g.new_full(t.shape, smoothing - 1.0))
                g = g.mul_(k[:, None]).to(gdt)
                torch.mm(g, wg, out=grad_h[i:i + rows])
                grad_w += g.T @ hg[i:i + rows]
        if grads:
            ctx.save_for_backward(grad_h[:N], grad_w)
            ctx.dtypes = states.dtype, weight.dtype
        return loss, nll

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad_loss, grad_nll):
        # The NLL sum is reported, never differentiated (it is returned detached).
        grad_h, grad_w = ctx.saved_tensors
        return ((grad_h * grad_loss).to(ctx.dtypes[0]), (grad_w * grad_loss).to(ctx.dtypes[1]),
                None, None, None, None, None)


def label_smoothed_loss(states: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                        smoothing: float, dtype: torch.dtype | None = None,
                        bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Summed label-smoothed cross-entropy of the logits states @ weight.T, and summed NLL
    (detached), over non-pad targets.

    states (B, T, D): the decoder's (Seq2Seq.forward with project=False); weight (V, D): the
    generator's; target (B, T); dtype: the projection's (autocast's dtype; None: float32);
    bias (V,): added to the logits, untrained (model.logits_bias), or None.
    Smoothing spreads `smoothing` uniformly over all V classes (the target included), as
    torch's cross_entropy does.
    """
    grads = torch.is_grad_enabled() and (states.requires_grad or weight.requires_grad)
    loss, nll = _ProjectedCE.apply(states.reshape(-1, states.size(-1)), weight,
                                   target.reshape(-1), smoothing, dtype or torch.float32, grads,
                                   bias)
    return loss, nll.detach()
