"""zg: a teaching and analysis kit for ZeroGNN (host-free, envelope-sized, CUDA-Graph-captured
GNN training iterations) and Grappa (gradient-only distributed GNN training).

    import zg
    g = zg.datasets.load("cora")
    env = zg.Envelope.profile(g, fanouts=[15, 10, 5], batch_size=1024)
    mb = zg.EnvelopeSampler(g, [15, 10, 5], 1024, envelope=env).sample(g.train_idx[:1024])
"""

from . import (
    audit,
    datasets,
    engine,
    envelope,
    errors,
    inference,
    log,
    models,
    observe,
    optim,
    recipes,
    rng,
    sampling,
    step,
)
from .baselines.dgl import DGLSampler  # DGL itself is imported when one is built
from .blocks import Block
from .engine import Engine, EpochStats, StepHooks
from .envelope import Envelope
from .graph import Graph
from .sampling import DynamicSampler, EnvelopeSampler, MiniBatch, Sampler, StaticSampler

__version__ = "0.4.0"

# The distributed wing (zg.parallel and the zg.grappa modules it starts) is imported when first
# used, so `import zg` stays light for single-process work: `zg.parallel` and `from zg import
# grappa` both load it then.
_LAZY = ("parallel", "grappa")


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Graph",
    "Block",
    "Engine",
    "EpochStats",
    "StepHooks",
    "Envelope",
    "DynamicSampler",
    "EnvelopeSampler",
    "DGLSampler",
    "MiniBatch",
    "Sampler",
    "StaticSampler",
    "audit",
    "datasets",
    "engine",
    "envelope",
    "errors",
    "inference",
    "log",
    "models",
    "observe",
    "optim",
    "parallel",
    "recipes",
    "rng",
    "sampling",
    "step",
    "__version__",
]
