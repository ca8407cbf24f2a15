"""Gone: the training pipelines are modes of :class:`zg.Engine`.

``zg.pipeline`` held a second epoch loop beside the Engine's. What replaced each name:

==============================  ==============================================================
``DynamicPipeline(g, m, ...)``  ``zg.Engine(g, m, fanouts, batch_size, mode="dynamic")``
``EnvelopePipeline(g, m, ...)`` ``zg.Engine(g, m, fanouts, batch_size, mode="eager")``
``DGLPipeline(g, m, ...)``      ``zg.Engine(g, dgl_model, fanouts, batch_size, mode="dgl")``
``pipe.train_step(seeds, e, b)`` ``engine.run_batch(b, epoch=e)``
``pipe.sample(seeds, e, b)``    ``engine.sample(b, epoch=e)``
``pipe.train_epoch()``          ``engine.train_epoch()`` (one stats record: ``EpochStats``)
``epoch_order``, ``batch_ranges`` ``zg.rng.epoch_order``, ``zg.rng.batch_ranges``
``masked_cross_entropy``, ``STAGES`` ``zg.step.masked_cross_entropy``, ``zg.step.STAGES``
==============================  ==============================================================

The plain helpers still import from here (with a DeprecationWarning); the classes raise an
error that names their replacement.
"""

from __future__ import annotations

import warnings

_MOVED = {
    "epoch_order": "zg.rng",
    "batch_ranges": "zg.rng",
    "masked_cross_entropy": "zg.step",
    "STAGES": "zg.step",
    "make_optimizer": "zg.optim",
}
_REPLACED = {
    "Pipeline": 'zg.Engine(..., mode="eager" | "dynamic" | "dgl")',
    "DynamicPipeline": 'zg.Engine(g, model, fanouts, batch_size, mode="dynamic")',
    "EnvelopePipeline": 'zg.Engine(g, model, fanouts, batch_size, mode="eager")',
    "EpochTiming": "zg.EpochStats (what Engine.train_epoch returns)",
}


def __getattr__(name):
    if name in _MOVED:
        import importlib

        warnings.warn(
            f"zg.pipeline.{name} moved to {_MOVED[name]}.{name}", DeprecationWarning, stacklevel=2
        )
        return getattr(importlib.import_module(_MOVED[name]), name)
    if name in _REPLACED:
        raise AttributeError(
            f"zg.pipeline.{name} is gone: use {_REPLACED[name]} (see docs/what_changed.md)"
        )
    raise AttributeError(f"module 'zg.pipeline' has no attribute {name!r}")
