"""grappa.train's front end: ``train(g, config=None, **overrides)`` builds the config every
worker runs (seen here without starting a process), and the renamed "source" (a worker's local
data) still reads under its old names, with a DeprecationWarning."""

from __future__ import annotations

import importlib
import inspect
import warnings

import pytest
from graphs import tiny

from zg import grappa
from zg.grappa.config import TrainConfig

train_module = importlib.import_module("zg.grappa.train")  # (grappa.train is the function)


class Started(Exception):
    pass


@pytest.fixture
def launched(monkeypatch):
    """The configs train() would start the workers with (no process starts)."""
    seen: list = []

    def spawn(fn, workers, args, **kwargs):
        _, jobs, *_ = args  # (graph, jobs, the level the workers log at)
        seen.extend(cfg for cfg, *_ in jobs)  # (config, partition, history path, progress file)
        raise Started

    monkeypatch.setattr(train_module, "spawn", spawn)
    return seen


def run(launched, *args, **kwargs) -> TrainConfig:
    with pytest.raises(Started):
        grappa.train(*args, **kwargs)
    return launched.pop()


G = tiny(60)


def test_the_signature_is_g_config_and_overrides():
    params = inspect.signature(grappa.train).parameters
    assert list(params) == ["g", "config", "partition", "overrides"]
    assert params["config"].default is None
    assert params["partition"].kind is inspect.Parameter.KEYWORD_ONLY
    doc = grappa.train.__doc__
    assert "docs/grappa.md" in doc and "config:" in doc and "**overrides:" in doc
    # The options named are TrainConfig's fields, not the renamed ones.
    assert "mode=" not in doc.replace("``mode=`` (now", "") and "runtime: sampler" not in doc


def test_keywords_alone_take_trains_defaults(launched):
    cfg = run(launched, G, epochs=3, seed=5, method="random")
    assert (cfg.epochs, cfg.seed, cfg.method) == (3, 5, "random")
    assert cfg.workers == train_module.TRAIN_WORKERS  # train()'s P, not TrainConfig's 2
    assert cfg.estimator == "batch" and cfg.repartition_every == 5


def test_a_config_runs_as_it_is_and_overrides_replace_its_fields(launched):
    config = TrainConfig(workers=2, epochs=4, seed=1, method="random", hidden_dim=8)
    assert run(launched, G, config) == config.validated()
    cfg = run(launched, G, config, seed=9, epochs=2)
    assert (cfg.seed, cfg.epochs, cfg.hidden_dim, cfg.workers) == (9, 2, 8, 2)
    assert config.seed == 1 and config.epochs == 4  # the caller's config is not changed
    # The defaults the config resolved for its trainer stay: a new trainer needs its own.
    with pytest.raises(ValueError, match="repartition_every"):
        grappa.train(G, config, trainer="isolated", estimator="mean")
    cfg = run(
        launched, G, config=config, trainer="isolated", estimator="mean", repartition_every=None
    )
    assert cfg.trainer == "isolated"


def test_train_many_takes_configs_and_dicts_with_a_config(launched):
    config = TrainConfig(workers=2, method="random")
    with pytest.raises(Started):
        grappa.train_many(G, [config, dict(config=config, seed=3), dict(workers=2, seed=4)])
    assert [c.seed for c in launched] == [0, 3, 4]


def test_bad_front_end_calls_are_refused_before_any_process(launched):
    with pytest.raises(TypeError, match="config must be a zg.grappa.TrainConfig or None.*keywords"):
        grappa.train(G, 4)  # the old positional workers
    with pytest.raises(TypeError, match="positional"):
        grappa.train(G, None, "batch")  # the old positional estimator
    with pytest.raises(TypeError, match="pass a dict's fields as keywords"):
        grappa.train(G, {"workers": 2})
    with pytest.raises(ValueError, match="preset= cannot override a config"):
        grappa.train(G, TrainConfig(workers=2), preset="reference")
    with pytest.raises(TypeError, match=r"unknown option\(s\) \['colour'\]"):
        grappa.train(G, TrainConfig(workers=2), colour="red")
    with pytest.raises(ValueError, match="seed must be in"):
        grappa.train(G, TrainConfig(workers=2), seed=-1)
    assert launched == []


def test_renamed_options_still_map_with_a_warning(launched):
    with pytest.warns(DeprecationWarning, match="batching="):
        cfg = run(launched, G, TrainConfig(workers=2, method="random"), mode="full")
    assert cfg.batching == "full"


def test_the_old_names_of_local_data_read_with_a_warning():
    from zg.grappa.local import LocalData, worker_batches
    from zg.grappa.remote import FeatureFetchData
    from zg.grappa.roles import Role

    with pytest.warns(DeprecationWarning, match="zg.grappa.local.LocalData"):
        from zg.grappa.sources import IsolatedSource
    assert IsolatedSource is LocalData
    with pytest.warns(DeprecationWarning, match="zg.grappa.local.worker_batches"):
        from zg.grappa.sources import worker_batches as old

    assert old is worker_batches
    with pytest.warns(DeprecationWarning, match="FeatureFetchData"):
        from zg.grappa.remote import FeatureFetchSource
    assert FeatureFetchSource is FeatureFetchData
    with pytest.warns(DeprecationWarning, match="zg.grappa.local.LocalData"):
        assert train_module.IsolatedSource is LocalData
    with pytest.warns(DeprecationWarning, match="make_local_data"):
        assert Role.make_source(_StubRole(), 1, 2) == (1, 2)  # calls the new name
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new names read silently
        importlib.import_module("zg.grappa.sources")  # importing the module alone is silent
        from zg.grappa.local import LocalData as again  # noqa: F401


class _StubRole:
    def make_local_data(self, *args):
        return args
