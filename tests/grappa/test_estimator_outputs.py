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


# ----------------------------------------------------------------------------- generated bad values
# Every method of an estimator a researcher may write, against one generator of bad results
# (tests/bad_results.py): each refusal names the class and the method once, what came back,
# and the problem, through the one check (zg._checks.returned_tensor).

from bad_results import VALUES, Contract, bad, error_for  # noqa: E402

STATS = torch.tensor([[4.0, 5.0, 7.0], [3.0, 4.0, 6.0]], dtype=torch.float64)  # P = 2


class Mutated(Estimator):
    """An estimator whose method ``method`` hands back a bad result made with ``problem``."""

    name, needs_stats = "mutated", True
    method, problem = "", ""

    def _maybe(self, method, value):
        return bad(self.problem, value) if method == self.method else value

    def scales(self, stats):
        scales, info = BatchEstimatorArithmetic.scales(stats)
        return self._maybe("scales", scales), {"lambda": self._maybe("info", info["lambda"])}

    def factors(self, weights, valid, stats):
        return self._maybe("factors", Estimator.factors(self, weights, valid, stats))

    def local_weights(self, local, hops, coverage=None):
        return self._maybe("local_weights", Estimator.local_weights(self, local, hops, coverage))


class BatchEstimatorArithmetic:
    @staticmethod
    def scales(stats):
        W_p = stats[:, 1]
        lam = torch.zeros((), dtype=torch.float64, device=stats.device)
        return W_p / W_p.sum(), {"lambda": lam}


def _mutated(method, problem):
    est = Mutated()
    object.__setattr__(est, "method", method)  # frozen dataclass: set on the instance
    object.__setattr__(est, "problem", problem)
    return est


def _step(est):  # what a worker's step runs: shapes, dtypes, devices, autograd (no device read)
    est.combine_device(torch.ones(4), torch.ones(4, dtype=torch.bool), 1, 2, STATS)


def _before_start(est):  # TrainConfig.validated: values too, on made-up batches
    est.check_outputs(3)


def _local_weights(est):  # where a worker builds its local graph: values too (once, not a step)
    g = tiny()
    local = grappa.partition(g, 2, method="random", seed=0).local_graph(g, 0, 0)
    grappa.estimators.local_weights(est, local, 2)


SITES = {  # method -> (the call, the name, the contract it is held to there)
    "scales": (
        lambda e: e.checked_scales(STATS),
        "Mutated.scales()",
        Contract(1, values=True, nonnegative=True, requires_grad=False),
    ),  # fmt: skip
    "info": (_step, "Mutated.scales() info['lambda']", Contract(0)),
    "factors": (_step, "Mutated.factors()", Contract(1, requires_grad=False)),
    "factor_values": (
        _before_start,
        "Mutated.factors()",
        Contract(1, values=True, nonnegative=True, device=False, sized=False),
    ),  # fmt: skip
    "local_weights": (
        _local_weights,
        "Mutated.local_weights()",
        Contract(1, values=True, nonnegative=True, requires_grad=False),
    ),  # fmt: skip
}
CASES = [(site, p) for site, (_, _, c) in SITES.items() for p in c.problems()]


@settings(max_examples=120, deadline=None)
@given(case=st.sampled_from(CASES))
def test_each_estimator_method_names_itself_for_every_generated_bad_value(case):
    site, problem = case
    call, who, _ = SITES[site]
    method = "factors" if site == "factor_values" else site
    if site == "factor_values" and problem not in VALUES:
        return  # the other problems of factors() are the step's: the "factors" site
    est = _mutated(method, problem)
    good = {"factors": torch.ones(4) / 4}.get(method)
    error, _ = error_for(problem, good)
    with pytest.raises(error) as caught:
        call(est)
    message = str(caught.value)
    assert message.startswith(f"{who} returned "), message
    assert message.count("Mutated") == 1, message
    if problem in VALUES:
        assert "holding" in message and "finite values" in message, message
    elif problem == "requires_grad":
        assert "requiring grad" in message and "that does not require grad" in message
    elif problem == "other_device":
        assert "on meta" in message and "on cpu" in message, message
    else:
        assert "; expected a " in message, message


def test_a_sound_mutated_estimator_passes_every_site():
    for call, _, _ in SITES.values():
        call(_mutated("", ""))


@pytest.mark.parametrize("problem", ["none", "bare", "python_float", "other_device", "2d"])
def test_a_bad_worker_scale_is_named(problem):
    class Local(Estimator):
        name, needs_stats = "local_scale", False

        def scales(self, stats):
            return _good(stats.shape[0]), {}

        def worker_scale(self, weights, valid, rank, num_workers, stats):
            good = torch.tensor(1.0 / num_workers, dtype=torch.float64)
            if problem == "bare":
                return good  # the tensor alone, not the pair
            return (good.view(1, 1) if problem == "2d" else bad(problem, good)), {}

    with pytest.raises(TypeError) as caught:
        Local().combine_device(torch.ones(3), torch.ones(3, dtype=torch.bool), 0, 2)
    message = str(caught.value)
    assert message.startswith("Local.worker_scale() returned "), message
    assert message.count("Local") == 1 and "expected a " in message


# ----------------------------------------------------------------------------- inside a worker


class FactorsGoBadInWorkers(Estimator):
    """Sound on the host's made-up batches (the check before the start passes); inside a worker
    (a process group is up) its factors hold ``problem`` (set by the test): a data-dependent
    fault only the worker's own check can see."""

    name = "factors_go_bad"
    problem = "nan"

    def scales(self, stats):
        return BatchEstimatorArithmetic.scales(stats)[0], {}

    def factors(self, weights, valid, stats):
        f = Estimator.factors(self, weights, valid, stats)
        if dist.is_available() and dist.is_initialized():
            value = {"nan": math.nan, "inf": math.inf, "negative": -1.0}[self.problem]
            f = torch.where(valid & (torch.arange(f.numel()) == 0), value, f)  # [B], one row
        return f


@pytest.mark.parametrize(
    "step_shapes, capture", [("dynamic", False), ("envelope", False), ("envelope", True)]
)
@pytest.mark.parametrize("problem", ["nan", "inf", "negative"])
def test_bad_factors_inside_a_worker_stop_the_run_naming_the_method(step_shapes, capture, problem):
    """A worker (rank 0 of 1, this process's gloo group) runs epochs as grappa.train's workers
    do, with factors that go bad only there: the epoch's exchange, which reads the factors'
    worst value with its other numbers (no read in the step), stops the run with a ValueError
    naming FactorsGoBadInWorkers.factors(), the worker, the epoch and the value; a negative
    factor (silent gradient ascent otherwise) included. ``capture``: the captured step's
    bookkeeping (its table of per-batch numbers, on the CPU its static twin), where the worst
    value is written on the device by the step itself."""
    from zg.grappa.config import TrainConfig
    from zg.grappa.worker import _Run, _Worker

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    register_estimator(FactorsGoBadInWorkers)
    FactorsGoBadInWorkers.problem = problem
    try:
        g = tiny()
        cfg = TrainConfig(
            workers=1, estimator="factors_go_bad", step_shapes=step_shapes, batch_size=32,
            hidden_dim=8, num_layers=2, fanouts=[3, 3], epochs=2, kernel="torch", capture=capture,
        ).validated()  # fmt: skip
        dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
        try:
            part = grappa.partition(g, 1, method="random", seed=0)
            worker = _Worker(cfg, g, part, 0, 1, torch.device("cpu"))
            run = _Run(worker, g)
            worker.enter(0)
            assert (worker.loss.table is not None) == capture
            with pytest.raises(ValueError) as caught:
                for epoch in range(cfg.epochs):
                    worker.enter(0)
                    overflows, rewound = worker.train_epoch(epoch)
                    run.evaluate(epoch)
                    run.record(epoch, overflows, rewound)
                run.flush()
        finally:
            dist.destroy_process_group()
    finally:
        unregister_estimator(FactorsGoBadInWorkers.name)
    message = str(caught.value)
    shown = {"nan": "nan", "inf": "inf", "negative": "-1.0"}[problem]
    assert message.startswith(
        f"FactorsGoBadInWorkers.factors() gave worker 0 in epoch 0 the value {shown}; "
        "expected finite values >= 0"
    ), message
    assert message.count("FactorsGoBadInWorkers") == 1
