"""What a registered estimator returns is checked where it comes back: a ``scales()`` result
that is a float, of the wrong length, shape or dtype, or holds NaN, inf or negative values is
refused with one error naming the class and the method and what it must return, before any
worker starts (``TrainConfig.validated`` runs the arithmetic once on made-up batches); inside a
worker the shapes are checked at every step and the scales' values at every epoch's exchange
(one real run shows it, with an estimator that misbehaves only inside a worker).

The estimator classes live at the top level of this module: a spawned worker imports it to
find the one the real run uses.
"""

import math

import pytest
import torch
import torch.distributed as dist
from graphs import tiny
from hypothesis import given, settings
from hypothesis import strategies as st

from zg import grappa
from zg.grappa import Estimator, TrainConfig, register_estimator, unregister_estimator

pytestmark = pytest.mark.timeout(300)


def _good(P: int) -> torch.Tensor:
    return torch.full((P,), 1.0 / P, dtype=torch.float64)


def _bad_scales(kind: str, P: int):
    """One wrong ``scales()`` result for P workers."""
    if kind == "float":
        return 1.0 / P, {}
    if kind == "short":
        return _good(P)[:-1], {}
    if kind == "long":
        return torch.cat([_good(P), _good(1)]), {}
    if kind == "2d":
        return _good(P).view(P, 1), {}
    if kind == "int":
        return torch.ones(P, dtype=torch.int64), {}
    if kind == "bare":
        return _good(P)  # the tensor alone, not the pair
    if kind == "nan":
        return torch.where(torch.arange(P) == P - 1, math.nan, _good(P)), {}
    if kind == "inf":
        return torch.where(torch.arange(P) == 0, math.inf, _good(P)), {}
    if kind == "negative":
        return -_good(P), {}
    raise AssertionError(kind)


SHAPE_KINDS = ("float", "short", "long", "2d", "int", "bare")
VALUE_KINDS = ("nan", "inf", "negative")


class _Misbehaving(Estimator):
    """An estimator whose ``scales()`` returns one kind of wrong result (``kind``)."""

    needs_stats = True
    kind = ""

    def scales(self, stats):
        return _bad_scales(self.kind, stats.shape[0])


BAD = {
    kind: type(
        f"Bad{kind.title()}Estimator", (_Misbehaving,), {"name": f"bad_{kind}", "kind": kind}
    )
    for kind in SHAPE_KINDS + VALUE_KINDS
}
for _cls in BAD.values():
    globals()[_cls.__name__] = _cls  # importable by name (as pickle finds a class)


class NegativeInWorkersEstimator(Estimator):
    """Fine on the host's made-up batches, negative scales inside a worker (a data-dependent
    fault the check before the start cannot see)."""

    name = "negative_in_workers"

    def scales(self, stats):
        P = stats.shape[0]
        sign = -1.0 if dist.is_available() and dist.is_initialized() else 1.0
        return torch.full((P,), sign / P, dtype=torch.float64, device=stats.device), {}


@pytest.fixture
def registered():
    for cls in (*BAD.values(), NegativeInWorkersEstimator):
        register_estimator(cls)
    try:
        yield
    finally:
        for cls in (*BAD.values(), NegativeInWorkersEstimator):
            unregister_estimator(cls.name)


@pytest.mark.parametrize("kind", SHAPE_KINDS + VALUE_KINDS)
def test_validated_refuses_each_bad_kind_naming_the_class_and_method(registered, kind):
    cls = BAD[kind]
    error = TypeError if kind in SHAPE_KINDS else ValueError
    with pytest.raises(error) as caught:
        TrainConfig(estimator=cls.name, workers=3).validated()
    message = str(caught.value)
    assert message.startswith(f"{cls.__name__}.scales() returned ")
    assert "expected" in message and "1-D float tensor of length" in message
    assert message.count(cls.__name__) == 1  # said once
    assert caught.value.config_field == "estimator"


@pytest.mark.parametrize("kind", SHAPE_KINDS)
def test_the_step_refuses_each_bad_shape_without_a_host_read(registered, kind):
    """combine_device (what a worker's step runs) checks the shapes: metadata, no device read;
    the wrong kind never becomes an IndexError or a silently taken row."""
    est = Estimator(BAD[kind].name)
    stats = torch.tensor([[4.0, 5.0, 7.0], [3.0, 4.0, 6.0]], dtype=torch.float64)
    weights, valid = torch.ones(4), torch.ones(4, dtype=torch.bool)
    with pytest.raises(TypeError, match=rf"^{BAD[kind].__name__}\.scales\(\) returned "):
        est.combine_device(weights, valid, 1, 2, stats)


@settings(max_examples=60, deadline=None)
@given(
    kind=st.sampled_from(SHAPE_KINDS + VALUE_KINDS),
    workers=st.integers(1, 9),
    weighting=st.sampled_from(grappa.WEIGHTINGS),
    floor=st.floats(1e-6, 1.0),
)
def test_check_outputs_refuses_every_generated_bad_result(kind, workers, weighting, floor):
    cls = BAD[kind]
    register_estimator(cls)
    try:
        est = Estimator(cls.name, weighting, floor)
        with pytest.raises((TypeError, ValueError)) as caught:
            est.check_outputs(workers)
        assert str(caught.value).startswith(f"{cls.__name__}.scales() returned ")
        assert f"1-D float tensor of length P={workers}" in str(caught.value)
    finally:
        unregister_estimator(cls.name)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["mean", "node", "batch", "shrink", "uniform", "reference"]),
    workers=st.integers(1, 12),
    weighting=st.sampled_from(grappa.WEIGHTINGS),
    floor=st.floats(1e-6, 1.0),
)
def test_every_built_in_estimator_passes_its_own_check(name, workers, weighting, floor):
    Estimator(name, weighting, floor).check_outputs(workers)


def test_a_bad_factor_or_worker_scale_is_named_too():
    class BadFactors(Estimator):
        name, needs_stats = "bad_factors", False

        def scales(self, stats):
            return _good(stats.shape[0]), {}

        def factors(self, weights, valid, stats):
            return -valid.to(torch.float32)

        def worker_scale(self, weights, valid, rank, num_workers, stats):
            return torch.tensor(1.0 / num_workers, dtype=torch.float64), {}

    with pytest.raises(ValueError, match=r"^BadFactors\.factors\(\) returned .* >= 0"):
        BadFactors().check_outputs(2)

    class ScalarScale(BadFactors):
        name = "scalar_scale"

        def factors(self, weights, valid, stats):
            return Estimator.factors(self, weights, valid, stats)

        def worker_scale(self, weights, valid, rank, num_workers, stats):
            return 0.5, {}

    with pytest.raises(TypeError, match=r"^ScalarScale\.worker_scale\(\) returned float 0.5"):
        ScalarScale().check_outputs(2)


def test_worker_scales_checks_values_on_the_host(registered):
    stats = torch.tensor([[4.0, 5.0, 7.0], [3.0, 4.0, 6.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"^BadNanEstimator\.scales\(\) returned .* finite"):
        grappa.estimators.worker_scales(Estimator("bad_nan"), stats)


@pytest.mark.slow
def test_a_scale_gone_negative_inside_a_worker_stops_the_run_naming_the_method(registered):
    """One real run (2 spawned workers): the check before the start passes, the workers' scales
    are negative, and the run ends with the ValueError of the epoch's exchange naming the
    estimator's method, not a generic loss error (or silent gradient ascent)."""
    cfg = TrainConfig(estimator="negative_in_workers", workers=2).validated()  # the host passes
    assert cfg.estimator == "negative_in_workers"
    with pytest.raises(ValueError) as caught:
        grappa.train(
            tiny(),
            workers=2,
            estimator="negative_in_workers",
            epochs=1,
            batch_size=64,
            hidden_dim=8,
            fanouts=[3, 3],
            timeout=60,
            run_timeout=240,
        )
    message = str(caught.value)
    assert "NegativeInWorkersEstimator.scales() gave worker" in message
    assert "expected finite values >= 0" in message
