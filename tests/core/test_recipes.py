"""zg.recipes: each recipe builds what its docstring says, and reaches the accuracy it states."""

import inspect

import pytest
import torch

import zg
from zg import models
from zg.engine import Engine


@pytest.fixture(scope="module")
def cora():
    return zg.datasets.load("cora")


def test_cora_sage_builds_what_its_docstring_says():
    model, kwargs, epochs = zg.recipes.cora_sage()
    doc = " ".join(zg.recipes.__doc__.split())
    # The docstring's claims, each beside the value it describes.
    assert "2-layer GraphSAGE-mean" in doc
    assert type(model) is models.SAGE and len(model.layers) == 2
    assert all(isinstance(layer, models.SAGEConv) for layer in model.layers)
    assert "hidden 64" in doc and model.feature_dims == [1433, 64, 7]
    assert "dropout 0.6" in doc and model.dropout.p == 0.6
    assert "Adam lr 1e-2 with weight decay 1e-2" in doc
    assert kwargs["optimizer"] == zg.optim.OptimizerSpec("adam", 1e-2, 1e-2)
    assert "fanouts [10, 10]" in doc and kwargs["fanouts"] == [10, 10]
    assert "batch 140" in doc and kwargs["batch_size"] == 140
    assert "100 epochs" in doc and epochs == 100
    assert "seed 0" in doc and kwargs["seed"] == 0
    # Nothing else: the mode, envelope and kernel are the Engine's defaults.
    assert set(kwargs) == {"fanouts", "batch_size", "optimizer", "seed"}
    assert "full-neighbour evaluation" in doc
    assert inspect.signature(Engine.evaluate).parameters["sampled"].default is False


def test_the_docstring_names_the_test_that_asserts_the_accuracy():
    doc = " ".join(zg.recipes.__doc__.split())
    assert "tests/core/test_recipes.py trains it and asserts the accuracy" in doc


def test_cora_sage_fits_the_cora_graph_one_iteration_per_epoch(cora):
    """ "batch 140 (the whole training split: one iteration per epoch)"; the Engine takes the
    kwargs as they are (no deprecated keyword among them)."""
    import warnings

    model, kwargs, _ = zg.recipes.cora_sage()
    assert cora.train_idx.numel() == kwargs["batch_size"] == 140
    assert (cora.feat_dim, int(cora.num_classes)) == (model.feature_dims[0], model.feature_dims[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        eng = Engine(cora, model, **kwargs)
    assert len(eng.batches(0)) == 1
    assert eng.settings.optimizer == "adam"
    assert (eng.settings.lr, eng.settings.weight_decay) == (1e-2, 1e-2)


def test_cora_sage_seed_fixes_the_initial_parameters():
    a, ka, _ = zg.recipes.cora_sage(seed=0)
    torch.manual_seed(123)  # the recipe seeds torch itself
    b, _, _ = zg.recipes.cora_sage(seed=0)
    c, kc, _ = zg.recipes.cora_sage(seed=1)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not all(torch.equal(p, q) for p, q in zip(a.parameters(), c.parameters()))
    assert (ka["seed"], kc["seed"]) == (0, 1)


@pytest.mark.slow
def test_cora_sage_reaches_78_percent(cora):
    model, kwargs, epochs = zg.recipes.cora_sage()
    eng = Engine(cora, model, **kwargs)
    eng.observers = []
    eng.fit(epochs, progress=False)
    assert eng.evaluate("test") >= 0.78
