"""Documented training configurations that reach a stated accuracy (tested in tests/).

    model, engine_kwargs, epochs = zg.recipes.cora_sage()
    eng = zg.Engine(g, model, **engine_kwargs); eng.fit(epochs)

``cora_sage``: 2-layer GraphSAGE-mean, hidden 64, dropout 0.6, Adam lr 1e-2 with weight decay
1e-2, fanouts [10, 10], batch 140 (the whole training split: one iteration per epoch), 100
epochs, seed 0, full-neighbour evaluation. tests/core/test_recipes.py trains it and asserts
the accuracy it reaches on this kit's Cora split (the threshold is written there).
"""

from __future__ import annotations

from . import models, optim

__all__ = ["cora_sage"]


def cora_sage(seed: int = 0):
    """(model, engine kwargs, epochs) of the documented Cora configuration."""
    import torch

    from ._checks import seed_arg

    seed = seed_arg(seed)
    torch.manual_seed(seed)
    model = models.SAGE(1433, 64, 7, num_layers=2, dropout=0.6)
    kwargs = dict(
        fanouts=[10, 10],
        batch_size=140,
        optimizer=optim.adam(lr=1e-2, weight_decay=1e-2),
        seed=seed,
    )
    return model, kwargs, 100
