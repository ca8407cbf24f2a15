"""Structure: the per-iteration ZeroGNN path never builds a tensor from Python data on the
device (``torch.tensor(x, device=...)`` / ``torch.as_tensor(x, device=...)``). On CUDA that is a
copy from pageable host memory, and the host waits for the device: the H200 check found three
such sites in the eager envelope step (3 CUDA syncs per iteration that SyncAudit did not see).
Scalars are written by fill kernels instead (``zg.rng.device_scalar``). The CUDA test
``test_envelope_step_makes_no_cuda_sync_on_cuda`` checks the property on a GPU; this test keeps
the pattern out on the CPU-only CI."""

import ast
from pathlib import Path

ZG = Path(__file__).resolve().parents[2] / "zg"
# The modules an iteration runs through (sampling, the step, the engine's loop, the model).
PATH_MODULES = (
    "sampling.py",
    "step.py",
    "engine.py",
    "observe.py",
    "optim.py",
    "models.py",
    "blocks.py",
    "rng.py",
    "kernels/__init__.py",
    "kernels/sampling.py",
    "kernels/aggregate.py",
)
# Functions that run once per engine or optimizer, never per iteration.
ONCE = {
    ("engine.py", "__init__"),
    ("optim.py", "_init_lr"),
    ("sampling.py", "_hop_constants"),
}  # once per sampler (EnvelopeSampler.__init__; a rebuild after an overflow, already a host decision)


def device_tensor_calls(source: str):
    """(line, function) of every torch.tensor / torch.as_tensor call with a device= keyword."""
    found = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("tensor", "as_tensor")
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "torch"
                and any(k.arg == "device" for k in node.keywords)
            ):
                found.append((node.lineno, fn.name))
    return found


def test_the_detector_finds_the_pattern():
    src = "import torch\ndef f(x, dev):\n    return torch.tensor(x, device=dev)\ndef g(x):\n    return torch.tensor(x)\n"
    assert device_tensor_calls(src) == [(3, "f")]


def test_no_tensor_from_python_data_on_the_device_in_the_iteration_path():
    offenders = []
    for name in PATH_MODULES:
        for line, fn in device_tensor_calls((ZG / name).read_text()):
            if (name, fn) not in ONCE:
                offenders.append(f"zg/{name}:{line} in {fn}")
    assert not offenders, (
        "torch.tensor/as_tensor(..., device=...) on the per-iteration path (a pageable "
        "host-to-device copy: the host waits on CUDA); use zg.rng.device_scalar or a "
        "preallocated buffer: " + ", ".join(offenders)
    )
