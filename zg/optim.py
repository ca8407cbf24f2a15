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

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from ._checks import real_arg

__all__ = [
    "DeviceAdam",
    "DeviceSGD",
    "make_optimizer",
    "OPTIMIZERS",
    "OptimizerSpec",
    "adam",
    "sgd",
    "optimizer_spec",
]

OPTIMIZERS = ("adam", "sgd")


# Above this a learning rate or weight decay is a typo (and overflows float32 arithmetic).
MAX_HYPER = 1e4


def _check_hyper(
    value, name: str, low: float = 0.0, open_low: bool = False, high: float = MAX_HYPER
) -> float:
    """A finite real in [low, high] (> low if open_low), through :func:`zg._checks.real_arg`; a
    0-d tensor is read as its number."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype.is_complex:
        value = float(value)
    # A learning rate must be a normal float: a subnormal one (1e-320) is no step at all.
    return real_arg(value, name, low=low, low_open=open_low, high=high, normal=name == "lr")


class _DeviceLR:
    """Keeps each param group's learning rate in a 0-d device tensor too, so a step captured
    in a CUDA Graph reads the current rate: :meth:`set_lr` changes it after capture."""

    # Host bookkeeping of the in-place update, so zg.Engine can tell a step an exception tore
    # (parameters partly written) from one that ran whole or not at all.
    writing = False  # True while step() writes parameters and moments in place
    steps_taken = 0  # step() calls that ran to their end

    def _init_lr(self) -> None:
        self._lr = [
            torch.tensor(float(g["lr"]), dtype=torch.float64, device=g["params"][0].device)
            for g in self.param_groups
        ]

    def set_lr(self, lr: float) -> None:
        """Set every group's learning rate, in place (a captured step sees it)."""
        lr = _check_hyper(lr, "lr", open_low=True)
        for group, tensor in zip(self.param_groups, self._lr):
            group["lr"] = lr
            tensor.fill_(lr)

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        self.writing = False  # whatever a torn step left, the state is the checkpoint's
        for group, tensor in zip(self.param_groups, self._lr):
            tensor.fill_(float(group["lr"]))


class DeviceAdam(_DeviceLR, torch.optim.Optimizer):
    """Adam with a device-resident step counter and an on-device skip (see module docstring).

    Launches: each parameter group's moments live in one flat buffer per moment (``exp_avg`` and
    ``exp_avg_sq`` of each parameter are views into it) and the group shares one step counter,
    so a step is about 30 ops whatever the number of parameter tensors (gather the gradients and
    parameters with one ``cat`` each, the update on the flat buffers, the gate, one
    ``_foreach_copy_`` back), where a loop over parameters launches about 29 per tensor. The
    arithmetic is the same element by element, so both give the same bits
    (``tests/core/test_optim.py``). A group that mixes devices or dtypes, or a step where some
    parameter has no gradient, takes the loop.
    """

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas=(0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ):
        lr = _check_hyper(lr, "lr", open_low=True)
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas}")
        eps = _check_hyper(eps, "eps")
        weight_decay = _check_hyper(weight_decay, "weight_decay")
        super().__init__(
            params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        )
        self._init_lr()
        # (betas, device) -> the bias-correction constants of the update, made on first use.
        self._bias_constants: dict = {}
        # State is created eagerly so that buffers have fixed addresses before any capture.
        self._flat = []
        for group in self.param_groups:
            params = group["params"]
            flat = None
            if params and len({(q.device, q.dtype) for q in params}) == 1:
                total = sum(q.numel() for q in params)
                flat = {
                    "exp_avg": params[0].new_zeros(total),
                    "exp_avg_sq": params[0].new_zeros(total),
                    "step": torch.zeros((), dtype=torch.float32, device=params[0].device),
                }
            self._flat.append(flat)
            self._bind(group, flat, fresh=True)

    def _bind(self, group, flat, fresh: bool) -> None:
        """Point every parameter's state at its slice of the group's flat buffers (copying
        what ``self.state`` holds now unless ``fresh``)."""
        offset = 0
        for p in group["params"]:
            state = self.state[p]
            if flat is None:
                if fresh:
                    state["step"] = torch.zeros((), dtype=torch.float32, device=p.device)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                continue
            for name in ("exp_avg", "exp_avg_sq"):
                view = flat[name][offset : offset + p.numel()].view_as(p)
                if not fresh:
                    view.copy_(state[name])
                state[name] = view
            if not fresh:
                flat["step"].copy_(state["step"])
            state["step"] = flat["step"]
            offset += p.numel()

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        self.writing = False  # whatever a torn step left, the state is the checkpoint's
        for group, flat in zip(self.param_groups, self._flat):
            if flat is not None:
                steps = [self.state[p]["step"] for p in group["params"] if "step" in self.state[p]]
                if any(not torch.equal(steps[0].float().cpu(), t.float().cpu()) for t in steps[1:]):
                    raise ValueError(
                        "optimizer state: the parameters of a group have different "
                        "step counts; DeviceAdam keeps one per group"
                    )
            self._bind(group, flat, fresh=False)

    def zero_grad(self, set_to_none: bool = True) -> None:
        if set_to_none:
            return super().zero_grad(set_to_none=True)
        grads = [p.grad for g in self.param_groups for p in g["params"] if p.grad is not None]
        if grads:
            torch._foreach_zero_(grads)  # one multi-tensor launch, not one per parameter

    @torch.no_grad()
    def step(self, closure=None, apply: torch.Tensor | None = None):
        """One Adam step; with ``apply`` (bool 0-d tensor) False, a bit-exact no-op."""
        if closure is not None:
            raise ValueError("DeviceAdam does not take a closure")
        self.writing = True  # in-place writes under way (see zg.engine: a torn step)
        for group, lr, flat in zip(self.param_groups, self._lr, self._flat):
            params = group["params"]
            if flat is not None and params and all(p.grad is not None for p in params):
                self._step_flat(group, lr, flat, apply)
                continue
            for p in params:
                if p.grad is None:
                    continue
                state = self.state[p]
                _adam_update(
                    p,
                    p.grad,
                    state["exp_avg"],
                    state["exp_avg_sq"],
                    state["step"],
                    group,
                    lr,
                    apply,
                    self._constants(group, p.device),
                    write=True,
                )
        self.steps_taken, self.writing = self.steps_taken + 1, False
        return None

    def _constants(self, group, device: torch.device):
        """(float64 [2] ``[beta1, beta2]``, bool [2] ``[False, True]``) on ``device``, made once
        per (betas, device) by the first step (fills, no host-to-device copy)."""
        beta1, beta2 = group["betas"]
        key = (beta1, beta2, torch.device(device))
        if key not in self._bias_constants:
            betas = torch.full((2,), beta1, dtype=torch.float64, device=device)
            betas[1:].fill_(beta2)
            second = torch.arange(2, device=device) == 1
            self._bias_constants[key] = (betas, second)
        return self._bias_constants[key]

    def _step_flat(self, group, lr, flat, apply) -> None:
        """The group's Adam step on its flat buffers: :func:`_adam_update`'s arithmetic, op for
        op (the same bits), with no [total]-sized allocation and as few passes as it allows:

        * the parameters live in one flat buffer (each parameter a view of its slice, made at
          the first step and again if a parameter was replaced), so the update writes them in
          place, with no gather before and no scatter after;
        * gradients that already lie in order in one buffer (the Grappa exchange's) are read
          there, others are gathered into a scratch buffer;
        * ungated (``apply`` None) the moments are updated in place; gated, the candidates go to
          scratch buffers and the gate selects them (an overflowed step changes nothing)."""
        params = group["params"]
        work = flat.get("work")
        if work is None:
            like = flat["exp_avg"]
            work = flat["work"] = {k: torch.empty_like(like) for k in ("grad", "m", "v", "d", "s")}
        p = flat.get("params")
        if p is None or _laid_out_in(p, params, grad=False) is None:
            p = flat["params"] = _flatten_parameters(params)  # [total], the parameters' storage
        grad = _laid_out_in(None, params, grad=True)  # the gradients' own buffer, if in order
        if grad is None:
            grad = torch.cat([q.grad.reshape(-1) for q in params], out=work["grad"])  # [total]
        m, v, step = flat["exp_avg"], flat["exp_avg_sq"], flat["step"]
        beta1, beta2 = group["betas"]
        eps, wd = group["eps"], group["weight_decay"]
        if wd != 0:  # out of place: the gradients stay what backward (and the exchange) left
            grad = torch.add(
                grad, p, alpha=wd, out=work["grad"] if grad is not work["grad"] else grad
            )
        t = step + 1
        if apply is None:
            new_m = m.lerp_(grad, 1 - beta1)  # b1 m + (1 - b1) g
            new_v = v.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        else:
            new_m = torch.lerp(m, grad, 1 - beta1, out=work["m"])
            new_v = torch.mul(v, beta2, out=work["v"]).addcmul_(grad, grad, value=1 - beta2)
        bias1, bias2_sqrt = _bias_terms(self._constants(group, p.device), t, p.dtype)
        denom = torch.sqrt(new_v, out=work["d"]).div_(bias2_sqrt).add_(eps)
        scaled_m = torch.mul(new_m, lr / bias1, out=work["s"])
        if apply is None:
            step.copy_(t)
            p.addcdiv_(scaled_m, denom, value=-1)  # p - step * m / denom, in place
            return
        torch.where(apply, t, step, out=step)
        torch.where(apply, new_m, m, out=m)
        torch.where(apply, new_v, v, out=v)
        new_p = torch.addcdiv(p, scaled_m, denom, value=-1, out=work["d"])  # denom is read
        torch.where(apply, new_p, p, out=p)


def _laid_out_in(buffer, params, *, grad: bool):
    """The flat buffer the parameters (``grad``: their gradients) are consecutive views of, in
    order and contiguous, or None. ``buffer``: the one expected (None: found from the first)."""
    tensors = [q.grad if grad else q.data for q in params]
    if any(t is None or not t.is_contiguous() for t in tensors):
        return None
    if buffer is None:
        base = tensors[0]._base
        if base is None or base.dim() != 1:
            return None
        buffer = base
    at = buffer.data_ptr()
    for t in tensors:
        if t.data_ptr() != at or t.dtype != buffer.dtype or t.device != buffer.device:
            return None
        at += t.numel() * t.element_size()
    total = sum(t.numel() for t in tensors)
    return buffer[:total] if total <= buffer.numel() else None


def _flatten_parameters(params) -> torch.Tensor:
    """One flat buffer holding every parameter's values, each parameter re-pointed at its slice
    (``param.data``: the Parameter objects, their values and their gradients are unchanged)."""
    flat = torch.cat([q.detach().reshape(-1) for q in params])  # [total]
    offset = 0
    for q in params:
        q.data = flat[offset : offset + q.numel()].view_as(q)
        offset += q.numel()
    return flat


def _bias_terms(constants, t: torch.Tensor, dtype: torch.dtype):
    """Adam's bias terms ``(1 - b1^t, sqrt(1 - b2^t))``, computed in float64 as PyTorch does, as
    0-d tensors of ``dtype``."""
    betas, second = constants
    corrections = 1 - torch.pow(betas, t.double())  # [2]
    bias = torch.where(second, corrections.sqrt(), corrections).to(dtype)  # [2]
    return bias[0], bias[1]


def _adam_update(p, grad, m, v, step, group, lr, apply, constants, *, write: bool):
    """The Adam update of one tensor (a parameter, or a group's flat buffer): moments and step
    updated in place (gated by ``apply``); the new parameter values written into ``p`` if
    ``write``, else returned. The same arithmetic for both, so the same bits. ``constants``:
    the optimizer's (betas, second-term mask) device pair."""
    beta1, beta2 = group["betas"]
    eps, wd = group["eps"], group["weight_decay"]
    grad = grad if wd == 0 else grad.add(p, alpha=wd)
    t = step + 1
    new_m = torch.lerp(m, grad, 1 - beta1)  # b1 m + (1 - b1) g
    new_v = torch.addcmul(v * beta2, grad, grad, value=1 - beta2)  # as torch.optim.Adam
    # Both bias terms at once, in float64 as PyTorch: [1 - b1^t, sqrt(1 - b2^t)].
    bias1, bias2_sqrt = _bias_terms(constants, t, p.dtype)
    denom = new_v.sqrt() / bias2_sqrt + eps
    new_p = torch.addcdiv(p, (lr / bias1) * new_m, denom, value=-1)  # p - step * m / denom
    if apply is None:
        step.copy_(t)
        m.copy_(new_m)
        v.copy_(new_v)
    else:  # each state written in place through the gate: one op apiece
        torch.where(apply, t, step, out=step)
        torch.where(apply, new_m, m, out=m)
        torch.where(apply, new_v, v, out=v)
        new_p = torch.where(apply, new_p, p)
    if write:
        p.copy_(new_p)
    return new_p


class DeviceSGD(_DeviceLR, torch.optim.Optimizer):
    """Plain SGD (``p <- p - lr * (g + wd * p)``) with the same on-device skip as DeviceAdam."""

    def __init__(self, params: Iterable, lr: float = 1e-2, weight_decay: float = 0.0):
        lr = _check_hyper(lr, "lr", open_low=True)
        weight_decay = _check_hyper(weight_decay, "weight_decay")
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay))
        self._init_lr()

    @torch.no_grad()
    def step(self, closure=None, apply: torch.Tensor | None = None):
        """One SGD step; with ``apply`` (bool 0-d tensor) False, a bit-exact no-op."""
        if closure is not None:
            raise ValueError("DeviceSGD does not take a closure")
        self.writing = True  # in-place writes under way (see zg.engine: a torn step)
        for group, lr in zip(self.param_groups, self._lr):
            for p in group["params"]:
                if p.grad is not None:
                    _sgd_update(p, p.grad, lr, group["weight_decay"], apply)
        self.steps_taken, self.writing = self.steps_taken + 1, False
        return None


def _sgd_update(p, grad, lr, wd, apply) -> None:
    """The SGD update of one parameter, in place, gated by ``apply`` (None: ungated)."""
    grad = grad if wd == 0 else grad.add(p, alpha=wd)
    new_p = p - lr * grad
    p.copy_(new_p if apply is None else torch.where(apply, new_p, p))


def make_optimizer(
    model: torch.nn.Module, name: str = "adam", lr: float = 3e-3, weight_decay: float = 0.0
) -> torch.optim.Optimizer:
    """ "adam" (default): :class:`DeviceAdam`; "sgd": :class:`DeviceSGD`. Both keep every
    decision on the device and take the step's ``apply`` gate (the overflow policy)."""
    lr = _check_hyper(lr, "lr", open_low=True)
    weight_decay = _check_hyper(weight_decay, "weight_decay")
    params = list(model.parameters())
    if name == "adam":
        return DeviceAdam(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return DeviceSGD(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")


@dataclass(frozen=True)
class OptimizerSpec:
    """An optimizer before it has parameters: ``name`` ("adam" | "sgd"), ``lr``, ``weight_decay``.

    What :class:`zg.Engine` takes as ``optimizer=`` (also the strings "adam" / "sgd" for the
    defaults); the Engine builds it over its model's parameters and records it in its settings.
    """

    name: str = "adam"
    lr: float = 3e-3
    weight_decay: float = 0.0

    def __post_init__(self):
        if self.name not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {self.name!r}")
        object.__setattr__(self, "lr", _check_hyper(self.lr, "lr", open_low=True))
        object.__setattr__(self, "weight_decay", _check_hyper(self.weight_decay, "weight_decay"))

    def build(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        return make_optimizer(model, self.name, self.lr, self.weight_decay)


def adam(lr: float = 3e-3, weight_decay: float = 0.0) -> OptimizerSpec:
    """:class:`DeviceAdam` with these settings, for ``zg.Engine(..., optimizer=zg.optim.adam(lr=...))``."""
    return OptimizerSpec("adam", lr, weight_decay)


def sgd(lr: float = 3e-3, weight_decay: float = 0.0) -> OptimizerSpec:
    """:class:`DeviceSGD` with these settings, for ``zg.Engine(..., optimizer=zg.optim.sgd(lr=...))``."""
    return OptimizerSpec("sgd", lr, weight_decay)


def optimizer_spec(optimizer: Any) -> OptimizerSpec:
    """ "adam" | "sgd" | an :class:`OptimizerSpec` -> the spec (TypeError / ValueError name ``optimizer``)."""
    if isinstance(optimizer, OptimizerSpec):
        return optimizer
    if isinstance(optimizer, str):
        return OptimizerSpec(optimizer)
    raise TypeError(
        f"optimizer must be 'adam', 'sgd', zg.optim.adam(...), zg.optim.sgd(...) or a "
        f"zg.optim.DeviceAdam/DeviceSGD, got {type(optimizer).__name__}"
    )
