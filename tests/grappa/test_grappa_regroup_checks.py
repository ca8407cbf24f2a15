"""Internal values are checked once (issue 57): a Grappa worker's repartition hands its one
Engine new local data through the kit's internal paths, which check nothing again, and reads
the machine's memory once.

The counter is the bench's (``bench/regroup_checks.py``, :class:`CheckCount`): a profiler that
sees every call of the kit's checks, of its validating public entry points and of the memory
read, whatever name bound them. The worker is rank 0 of P built as ``run_worker`` builds it;
regrouping needs no process group. That the values trained on stay bit for bit those of the
checked path is tested beside the Engine's regroup (tests/core/test_engine_position.py) and by
every distributed test.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from graphs import tiny
from script_loader import load_script

import zg
from zg.grappa import Estimator, register_estimator, unregister_estimator

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    module, restore = load_script(ROOT / "bench" / "regroup_checks.py", "_regroup_checks_bench")
    restore()
    return module


@pytest.fixture(scope="module")
def cora():
    return zg.datasets.load("cora")


def worker_after_first_build(bench, g, **config):
    """A worker of the kit's defaults (P = 4, rank 0) after its first build (super-epoch 0),
    and the counts of that build."""
    from zg.grappa.plan import check_plan, make_partition
    from zg.grappa.worker import _Worker

    cfg = bench.worker_config(**config)
    part = make_partition(g, cfg)
    check_plan(g, cfg, part)
    with bench.quiet_threads():
        worker = _Worker(cfg, g, part, 0, cfg.workers, torch.device("cpu"))
        with bench.CheckCount() as first:
            worker.enter(0)
    return worker, first


@pytest.mark.parametrize(
    "config",
    [
        dict(step_shapes="dynamic"),
        dict(step_shapes="envelope"),
        dict(step_shapes="envelope", envelope="worst_case"),
        dict(step_shapes="dynamic", batching="full"),
        dict(step_shapes="envelope", estimator="reference"),
        dict(step_shapes="dynamic", estimator="mean", halo=False, method="random"),
    ],
    ids=lambda c: "-".join(str(v) for v in c.values()),
)
def test_a_repartition_checks_no_value_again_and_reads_the_memory_once(bench, cora, config):
    worker, first = worker_after_first_build(bench, cora, **config)
    assert first.memory_reads == 1, first.record()  # the first build: one reading too
    assert first.by_name["Engine.__init__"] == 1  # checked as a user's Engine is
    engine = worker.engine
    for s in (1, 2):
        with bench.CheckCount() as regroup:
            worker.enter(s)
        assert worker.engine is engine and worker.local.super_epoch == s
        record = regroup.record()
        assert regroup.checks == 0 and regroup.public == 0, record
        assert regroup.memory_reads == 1, record


def test_explicit_envelope_sizes_are_checked_against_each_new_local_graph(bench, cora):
    """The one check a repartition keeps: sizes the user gave, against a local graph no check
    has seen (its node count and the worker's rows are new)."""
    worker, _ = worker_after_first_build(bench, cora, step_shapes="envelope", envelope=[400, 200])
    with bench.CheckCount() as regroup:
        worker.enter(1)
    assert regroup.checks == 1 and regroup.by_name["Envelope._check_fits"] == 1
    assert regroup.public == 0 and regroup.memory_reads == 1
    assert worker.engine.envelope.sizes == [400, 200]
    with pytest.raises(ValueError, match="larger than any batch can fill"):
        worker_after_first_build(bench, cora, step_shapes="envelope", envelope=[5000, 200])


class HopsOnlyWeights(Estimator):
    """An estimator whose ``local_weights`` takes (local, hops) alone: the worker must not hand
    it the coverage it computes for itself."""

    name = "hops_only_weights"
    calls: list = []

    def scales(self, stats):
        P = stats.shape[0]
        return torch.full((P,), 1.0 / P, dtype=torch.float64, device=stats.device), {}

    def local_weights(self, local, hops):
        HopsOnlyWeights.calls.append(hops)
        return Estimator.local_weights(self, local, hops)


def test_an_estimator_without_a_coverage_parameter_still_gets_its_weights(bench):
    register_estimator(HopsOnlyWeights)
    try:
        HopsOnlyWeights.calls.clear()
        worker, _ = worker_after_first_build(
            bench, tiny(), step_shapes="dynamic", estimator="hops_only_weights", batch_size=16
        )
        worker.enter(1)
    finally:
        unregister_estimator(HopsOnlyWeights.name)
    assert HopsOnlyWeights.calls == [worker.cfg.num_layers] * 2


def test_the_weights_given_the_workers_coverage_are_the_weights_computed_afresh(cora):
    """The worker hands its coverage to the estimator instead of having it computed twice:
    the same weights, bit for bit."""
    from zg.grappa.coverage import local_coverage
    from zg.grappa.estimators import local_weights

    part = sys.modules["zg.grappa.partition"].partition(cora, 4, "random", 0)
    for name in ("node", "batch", "shrink", "reference", "mean"):
        estimator = zg.grappa.TrainConfig(workers=4, estimator=name).validated().estimator_object
        local = part.local_graph(cora, 1, 0)
        given = local_weights(estimator, local, 2, coverage=local_coverage(local, 2))
        assert torch.equal(given, local_weights(estimator, local, 2)), name


def test_the_internal_local_graph_is_the_checked_one(cora):
    """``Partition._local_graph`` (no checks) builds what ``local_graph`` built through
    ``zg.Graph(...)``'s validation: the same arrays, bit for bit, for every worker and
    super-epoch, with and without the halo and the partner sweep."""
    partition = sys.modules["zg.grappa.partition"].partition
    for kwargs in (
        dict(method="random", halo=True),
        dict(method="random", halo=False, num_chunks=8),
        dict(method="random", halo=True, schedule="partner_sweep"),
    ):
        part = partition(cora, 4, seed=0, **kwargs)
        for worker in range(4):
            for s in range(3):
                local = part._local_graph(cora, worker, s).graph
                checked = zg.Graph(
                    local.indptr, local.indices, x=local.x, y=local.y,
                    train_idx=local.train_idx, num_classes=cora.num_classes,
                )  # fmt: skip
                for name in ("indptr", "indices", "x", "y", "train_idx"):
                    assert torch.equal(getattr(local, name), getattr(checked, name)), name
                assert local.num_classes == checked.num_classes
                assert local.val_idx is None and local.test_idx is None
