"""zg.pipeline: a shim. The moved helpers still import from here with a DeprecationWarning
naming their new home (and are the very same objects); the removed classes raise an error
naming their replacement."""

import importlib
import re

import pytest

import zg
import zg.pipeline as old


def test_the_old_pipeline_names_point_to_their_replacements():
    with pytest.warns(DeprecationWarning, match="zg.rng.epoch_order"):
        assert old.epoch_order is zg.rng.epoch_order
    for name, replacement in [
        ("DynamicPipeline", 'mode="dynamic"'),
        ("EnvelopePipeline", 'mode="eager"'),
    ]:
        with pytest.raises(AttributeError, match=replacement):
            getattr(old, name)
    from zg import baselines

    with pytest.raises(ImportError):
        from zg.baselines.dgl import DGLPipeline  # noqa: F401
    assert baselines is not None


@pytest.mark.parametrize(
    "name, home",
    [
        ("epoch_order", "zg.rng"),
        ("batch_ranges", "zg.rng"),
        ("masked_cross_entropy", "zg.step"),
        ("STAGES", "zg.step"),
        ("make_optimizer", "zg.optim"),
    ],
)
def test_every_moved_name_warns_with_its_new_home_and_is_the_same_object(name, home):
    with pytest.warns(DeprecationWarning, match=rf"zg\.pipeline\.{name} moved to {home}\.{name}"):
        value = getattr(old, name)
    assert value is getattr(importlib.import_module(home), name)


def test_the_warning_points_at_the_caller():
    """stacklevel=2: the warning names the line that read the old name, not zg/pipeline.py."""
    with pytest.warns(DeprecationWarning) as record:
        old.batch_ranges  # noqa: B018
    assert record[0].filename == __file__


@pytest.mark.parametrize(
    "name, replacement",
    [
        ("Pipeline", "zg.Engine(..., mode="),
        ("DynamicPipeline", 'mode="dynamic"'),
        ("EnvelopePipeline", 'mode="eager"'),
        ("EpochTiming", "zg.EpochStats"),
    ],
)
def test_every_removed_class_raises_naming_its_replacement(name, replacement):
    with pytest.raises(
        AttributeError, match=rf"zg\.pipeline\.{name} is gone: use .*{re.escape(replacement)}"
    ):
        getattr(old, name)
    with pytest.raises(ImportError, match=name):
        exec(f"from zg.pipeline import {name}", {})


def test_the_replacements_it_names_exist():
    """Every replacement the shim and its docstring name is a real name or a real mode."""
    assert {"dynamic", "eager", "dgl"} <= set(zg.engine.MODES)
    assert zg.EpochStats is zg.engine.EpochStats
    for name in ("run_batch", "sample", "train_epoch"):
        assert callable(getattr(zg.Engine, name))


def test_an_unknown_name_is_a_plain_attribute_error():
    with pytest.raises(AttributeError, match="module 'zg.pipeline' has no attribute 'Nonsense'"):
        old.Nonsense  # noqa: B018
    assert not hasattr(old, "train_epoch"), "the shim holds no epoch loop of its own"
