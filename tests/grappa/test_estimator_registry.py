"""An estimator written outside the package: one subclass of zg.grappa.Estimator and one
register_estimator line, then TrainConfig, gradient_error and grappa.train (real worker
processes) take its name. Also what the registry refuses (an unknown name, a duplicate, a class
without the required method).

The toy estimator is defined at the top level of this module, as register_estimator's docstring
asks: grappa.train starts its workers with "spawn", the run's TrainConfig carries the class to
them by reference, and each worker imports this module to find it. It is registered only while a
test uses it (the fixture), so the other tests' loops over grappa.ESTIMATORS never meet it.
"""

import math
import pickle

import pytest
import torch
from graphs import tiny

import zg
from zg import grappa
from zg.grappa import Estimator, register_estimator, unregister_estimator

pytestmark = pytest.mark.timeout(300)

SMALL = dict(
    batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240, lr=0.02
)


class HalfEstimator(Estimator):
    """ "half": the mean estimator at half strength, s_p = 0.5 / P, factors 1 / n_p (the base
    class's). It needs no stats from the other workers, so it gives its scale locally."""

    name = "half"
    needs_stats = False

    def scales(self, stats):
        P = stats.shape[0]
        return torch.full((P,), 0.5 / P, dtype=torch.float64, device=stats.device), {}

    def worker_scale(self, weights, valid, rank, num_workers, stats):
        return torch.full((), 0.5 / num_workers, dtype=torch.float64, device=weights.device), {}


@pytest.fixture
def half():
    register_estimator(HalfEstimator)
    try:
        yield HalfEstimator
    finally:
        unregister_estimator("half")


def test_a_registered_estimator_is_built_checked_and_combined_by_name(half):
    est = Estimator("half", "coverage")
    assert type(est) is HalfEstimator and est.name == "half" and est.weighting == "coverage"
    assert "half" in grappa.ESTIMATORS and grappa.ESTIMATOR_CLASSES["half"] is HalfEstimator
    assert register_estimator(HalfEstimator) is HalfEstimator  # the same class again: no change
    factors, scale, info = est.combine(torch.tensor([2.0, 1.0, 4.0, 3.0]), 1, 2)
    assert torch.allclose(factors, torch.full((4,), 0.25)) and scale == 0.25 and info == {}
    cfg = grappa.TrainConfig(estimator="half", workers=2).validated()
    assert type(cfg.estimator_object) is HalfEstimator
    # gradient_error: the combined gradient is exactly half the mean estimator's.
    g = tiny()
    torch.manual_seed(0)
    model = zg.models.build("sage", g.feat_dim, 16, g.num_classes, 2).eval()
    part = grappa.partition(g, 2, "random", 0)
    grads = grappa.gradient.combined_gradients(
        g, model, part, [Estimator("mean"), Estimator("half")]
    )
    assert torch.equal(grads["half"], 0.5 * grads["mean"])
    assert set(grappa.gradient_error(g, model, part, "all")) == set(grappa.ESTIMATORS)


def test_the_config_carries_the_class_to_a_process_that_never_registered_it(half):
    """What a spawned worker receives: the pickled TrainConfig registers the class on arrival."""
    data = pickle.dumps(grappa.TrainConfig(estimator="half", workers=2))
    unregister_estimator("half")  # as in a fresh worker process
    assert "half" not in grappa.ESTIMATORS
    cfg = pickle.loads(data)
    assert grappa.ESTIMATOR_CLASSES["half"] is HalfEstimator
    assert type(cfg.estimator_object) is HalfEstimator
    # A built-in estimator travels by name alone.
    assert b"HalfEstimator" not in pickle.dumps(grappa.TrainConfig(estimator="mean", workers=2))


@pytest.mark.slow
def test_train_runs_an_estimator_defined_outside_the_package(half):
    """grappa.train(estimator="half") on 2 worker processes: the history names it, every worker's
    hook scale is 0.5 / P = 0.25 (the mean estimator's, in the same process group: 0.5), and
    like "mean" it sends no scalars."""
    g = tiny()
    runs = [
        dict(workers=2, estimator=name, repartition_every=1, epochs=1, seed=0, **SMALL)
        for name in ("half", "mean")
    ]
    half_run, mean_run = grappa.train_many(g, runs)
    assert half_run["config"]["estimator"] == "half" and mean_run["config"]["estimator"] == "mean"
    (epoch,) = half_run["epochs"]
    assert epoch["worker_scale"] == {"min": [0.25] * 2, "mean": [0.25] * 2, "max": [0.25] * 2}
    assert mean_run["epochs"][0]["worker_scale"]["mean"] == [0.5] * 2
    assert epoch["bytes_by_kind"]["scalars"] == [0, 0]
    assert math.isfinite(epoch["loss"])


def test_unknown_estimator_is_refused_naming_the_registered_ones():
    with pytest.raises(ValueError, match="estimator") as caught:
        Estimator("half")
    for name in grappa.ESTIMATORS:
        assert repr(name) in str(caught.value)
    with pytest.raises(ValueError, match="estimator"):
        grappa.TrainConfig(estimator="half", workers=2).validated()
    with pytest.raises(TypeError, match="estimator"):
        Estimator(3)
    with pytest.raises(ValueError, match="'mean'"):  # a class given another's name
        grappa.estimators.BatchEstimator("mean")


def test_the_registry_refuses_duplicates_incomplete_classes_and_non_estimators(half):
    class OtherHalf(HalfEstimator):
        pass

    with pytest.raises(ValueError, match="'half' is registered already"):
        register_estimator(OtherHalf)

    class Incomplete(Estimator):  # no scales()
        name = "incomplete"

    with pytest.raises(TypeError, match="lacks the required method.*scales"):
        register_estimator(Incomplete)
    assert "incomplete" not in grappa.ESTIMATORS

    class Nameless(HalfEstimator):
        name = ""

    with pytest.raises(ValueError, match="must set name"):
        register_estimator(Nameless)

    class NotAnEstimator:
        name = "plain"

        def scales(self, stats):
            return stats[:, 0], {}

    with pytest.raises(TypeError, match="subclass of zg.grappa.Estimator"):
        register_estimator(NotAnEstimator)
    with pytest.raises(ValueError, match="built into the kit"):
        unregister_estimator("batch")
