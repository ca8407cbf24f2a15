"""Shared test fixtures.

Optional components (DGL, pymetis, plotly, ...) are reached through the ``require`` fixture:
in the reference environment (``ZG_REFERENCE_ENV=1``, set by ``make test``) a missing module is
a test *error*; elsewhere (``make test-modern``: recent torch, no DGL) the test is skipped.
"""

import importlib
import os

import pytest
import torch

from zg.interop import VERSION_CHECK, blocked_imports

os.environ.setdefault("DGLBACKEND", "pytorch")

REFERENCE_ENV = os.environ.get("ZG_REFERENCE_ENV") == "1"


def require_module(name: str):
    try:
        # As zg imports them: without ogb's PyPI version check (see zg.interop.VERSION_CHECK),
        # which DGL triggers too when ogb is installed.
        with blocked_imports(*VERSION_CHECK):
            return importlib.import_module(name)
    except ImportError as exc:
        if REFERENCE_ENV:
            pytest.fail(
                f"{name} is missing in the reference environment ({exc}); it is pinned "
                "in requirements/reference.txt and must be installed",
                pytrace=False,
            )
        pytest.skip(f"{name} is not installed in this environment")


@pytest.fixture
def require():
    """``require("dgl")`` returns the module, or skips (modern env) / fails (reference env)."""
    return require_module


@pytest.fixture
def dgl():
    return require_module("dgl")


@pytest.fixture
def viz():
    """``zg.viz`` (plotly required as ``require`` does), with plotly's default renderer and
    template restored afterwards (``setup_notebook`` changes them)."""
    require_module("plotly")
    import plotly.io as pio

    import zg.viz

    renderer, template = pio.renderers.default, pio.templates.default
    yield zg.viz
    pio.renderers.default, pio.templates.default = renderer, template


_KIT_CODE: list = []  # (function, code, defaults, kwdefaults) of every function a lab holds


def _kit_code() -> list:
    """The kit's own code of every function the labs hold, read once, before any test holds
    one (the first test that asks)."""
    if not _KIT_CODE:
        import zg_course.labs

        _KIT_CODE.extend(
            (fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__)
            for _, targets in zg_course.labs._lab_references().values()
            for target in targets
            for fn in zg_course.labs._functions_of(target)
        )
    return _KIT_CODE


@pytest.fixture(autouse=True)
def labs_held_then_restored():
    """Every function the labs hold (zg_course.labs.hold_references) gets the kit's code back after
    every test: a hold lasts for the process and keeps the namespaces it was made for, so a
    test that runs a lab's setup (test_labs.py, the tamper scan's) would change what the tests
    after it see (a held function's source, and which frames count as a student's)."""
    saved = _kit_code()
    yield
    for fn, code, defaults, kwdefaults in saved:
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def torch_modes_restored():
    """A test that leaves torch's process-wide modes changed (autograd off, a different default
    dtype, a dispatch mode left on the stack, deterministic algorithms) fails at its own teardown
    and the modes are put back: otherwise the tests after it fail far away ("element 0 of
    tensors does not require grad") and the one that changed them passes."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    before = (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
        len(_get_current_dispatch_mode_stack()),
    )
    yield
    after = (
        torch.is_grad_enabled(),
        torch.is_inference_mode_enabled(),
        torch.get_default_dtype(),
        torch.are_deterministic_algorithms_enabled(),
        len(_get_current_dispatch_mode_stack()),
    )
    if after != before:
        torch.set_grad_enabled(before[0])
        torch.set_default_dtype(before[2])
        torch.use_deterministic_algorithms(before[3])
        names = (
            "grad enabled",
            "inference mode",
            "default dtype",
            "deterministic",
            "dispatch modes",
        )
        changed = [f"{n}: {a} -> {b}" for n, a, b in zip(names, before, after) if a != b]
        pytest.fail("the test left torch's process-wide modes changed: " + "; ".join(changed))


def pytest_sessionstart(session):
    """Compile the fused sampling kernel (or load numba's cache) once, before any test's
    timeout starts: a fresh checkout compiles it for tens of seconds on a busy machine."""
    from zg import kernels

    if kernels.available():
        kernels.sampling.warm_up()


@pytest.fixture
def alarm():
    """Turn a block (a tool opening a FIFO) into a failure after 30 s."""
    import signal

    def ring(signum, frame):
        raise TimeoutError("the tool blocked (opened a FIFO?)")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(30)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)
