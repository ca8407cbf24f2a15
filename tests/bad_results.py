"""Bad results a plug-in may hand back, generated from a good one and the contract it is held
to (``zg._checks.returned_tensor``): the wrong kind, shape, length, dtype or device, NaN, inf,
a negative value, autograd where it is wrong. Each comes with the error class the check must
raise and a phrase the error must hold (the problem, in the check's own words), so a test
over every plug-in method asserts the same three things: the class and method named once,
what came back, and what is wrong with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from zg._checks import described

SHAPE = ("none", "python_float", "list", "extra_dim", "missing_dim", "longer", "shorter")
DTYPE = ("integer_dtype", "bool_dtype", "float_dtype")
DEVICE = ("other_device",)
VALUES = ("nan", "inf", "negative")
GRAD = ("requires_grad", "detached")
PROBLEMS = SHAPE + DTYPE + DEVICE + VALUES + GRAD


@dataclass(frozen=True)
class Contract:
    """What a method must return: ``dims`` dimensions (the first one's size may be checked),
    a dtype ``kind``, a checked ``device``, checked ``values`` (``nonnegative``), and
    ``requires_grad`` (None: not checked)."""

    dims: int
    kind: str = "float"
    sized: bool = True  # the first size is checked (an exact int in the contract)
    device: bool = True
    values: bool = False
    nonnegative: bool = False
    requires_grad: bool | None = None

    def problems(self) -> tuple[str, ...]:
        """The problems this contract refuses."""
        out = ["none", "python_float", "list", "extra_dim"]
        if self.dims:
            out.append("missing_dim")
            if self.sized:
                out += ["longer", "shorter"]
        out += [d for d in DTYPE if not d.startswith(self.kind)]
        if self.device:
            out.append("other_device")
        if self.values and self.kind == "float":
            out += ["nan", "inf"] + (["negative"] if self.nonnegative else [])
        if self.requires_grad is False and self.kind == "float":
            out.append("requires_grad")
        if self.requires_grad is True:
            out.append("detached")
        return tuple(out)


def bad(problem: str, good: torch.Tensor):
    """``good`` (a correct result) turned into a result with ``problem``."""
    g = good.detach()
    if problem == "none":
        return None
    if problem == "python_float":
        return 0.5
    if problem == "list":
        return g.tolist()
    if problem == "extra_dim":
        return g.unsqueeze(-1)
    if problem == "missing_dim":
        return g.reshape(-1)[0] if g.dim() == 1 else g.select(-1, 0)
    if problem == "longer":
        return torch.cat([g, g[:1]])
    if problem == "shorter":
        return g[:-1]
    if problem == "integer_dtype":
        return g.to(torch.int64)
    if problem == "bool_dtype":
        return g != 0
    if problem == "float_dtype":
        return g.to(torch.float32)
    if problem == "other_device":  # a device no CPU result is on, real on every machine
        return torch.empty(g.shape, dtype=g.dtype, device="meta")
    if problem in VALUES:
        value = {"nan": math.nan, "inf": math.inf, "negative": -1.0}[problem]
        out = g.clone().to(torch.float64 if g.dtype == torch.float64 else torch.float32)
        out.view(-1)[-1] = value
        return out.requires_grad_(good.requires_grad)  # only the values are wrong
    if problem == "requires_grad":
        return g.clone().requires_grad_(True)
    if problem == "detached":
        return g.clone()
    raise AssertionError(problem)


def error_for(problem: str, value) -> tuple[type[Exception], str]:
    """(the error class, a phrase the message must hold) for ``value`` made with ``problem``."""
    if problem in VALUES:
        shown = {"nan": "nan", "inf": "inf", "negative": "-1.0"}[problem]
        return ValueError, f"holding {shown} at flat index"
    if problem == "requires_grad":
        return TypeError, "requiring grad; expected"
    if problem == "detached":
        return TypeError, "not requiring grad"
    return TypeError, f"returned {described(value)}; expected"


def assert_names(message: str, who: str, problem: str, value) -> None:
    """The message names ``who`` once, at its start, what came back and what is wrong."""
    _, phrase = error_for(problem, value)
    assert message.startswith(f"{who} returned "), message
    assert message.count(who.split(".")[0]) == 1, message
    assert phrase in message, (phrase, message)
    if problem == "other_device":
        assert "on meta" in message and "on cpu" in message, message
