"""DeviceAdam: Adam whose every decision stays on the device, so a step never syncs.

Where it sits: the ``step`` stage of the iteration (seeds -> sample -> gather -> forward ->
loss -> backward -> **step**). ``torch.optim.Adam`` reads its step counter on the host
(``.item()``, one sync per parameter) unless ``capturable=True``, which PyTorch allows only on
accelerators. DeviceAdam keeps the step counter as a 0-d tensor on the parameters' device on
every device, and takes an optional 0-d bool ``apply`` tensor: where it is False the step is a
no-op *on the device*, leaving parameters, both moments and the step counter bit-for-bit
unchanged. The engine uses that to skip every step after an envelope overflow without asking
the host.

The update is PyTorch's Adam (Kingma & Ba, with PyTorch's L2 ``weight_decay``)::

    t <- t + 1;  g <- g + wd * p
    m <- b1 m + (1 - b1) g;        v <- b2 v + (1 - b2) g^2
    p <- p - lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
"""

from __future__ import annotations

from typing import Iterable, Optional

import torch

__all__ = ["DeviceAdam"]


class DeviceAdam(torch.optim.Optimizer):
    """Adam with a device-resident step counter and an on-device skip (see module docstring)."""

    def __init__(self, params: Iterable, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr}")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        if not eps >= 0 or not weight_decay >= 0:
            raise ValueError(f"eps and weight_decay must be >= 0, got {eps}, {weight_decay}")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay))
        # State is created eagerly so that buffers have fixed addresses before any capture.
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)

    @torch.no_grad()
    def step(self, closure=None, apply: Optional[torch.Tensor] = None):
        """One Adam step; with ``apply`` (bool 0-d tensor) False, a bit-exact no-op."""
        if closure is not None:
            raise ValueError("DeviceAdam does not take a closure")
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
                grad = p.grad if wd == 0 else p.grad.add(p, alpha=wd)
                t = step + 1
                new_m = torch.lerp(m, grad, 1 - beta1)                 # b1 m + (1 - b1) g
                new_v = v * beta2 + grad * grad * (1 - beta2)
                t64 = t.double()                                       # bias terms in float64, as PyTorch
                bias1 = (1 - torch.pow(beta1, t64)).to(p.dtype)
                bias2_sqrt = torch.sqrt(1 - torch.pow(beta2, t64)).to(p.dtype)
                denom = new_v.sqrt() / bias2_sqrt + eps
                new_p = p - (lr / bias1) * new_m / denom
                if apply is None:
                    step.copy_(t); m.copy_(new_m); v.copy_(new_v); p.copy_(new_p)
                else:
                    step.copy_(torch.where(apply, t, step))
                    m.copy_(torch.where(apply, new_m, m))
                    v.copy_(torch.where(apply, new_v, v))
                    p.copy_(torch.where(apply, new_p, p))
        return None
