"""One seed rule everywhere: every public entry point that takes a seed accepts exactly the ints
in [0, 2**63 - 1] (Python or numpy) and refuses everything else with the one message of
:func:`zg._checks.seed_arg`; the multi-process ones refuse before any process starts.

One hypothesis strategy of seed values (negative, too large, bools, floats, numpy ints, valid
ones) is applied to every entry point; each is built on a tiny graph. The expected outcome of a
value is what ``seed_arg`` does with it, so the rule is written once, there. Entry points that
start processes (``grappa.train``, ``grappa.train_many``, ``parallel.train``,
``labs.hook_on_workers``, ``experiments.train_together``) have their process start replaced by
one that raises :class:`Started`: a valid seed reaches it, a bad one must be refused before."""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from graphs import tiny
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import zg
import zg.baselines.features
import zg.experiments.together
import zg.experiments.traffic
import zg.parallel
import zg.recipes
import zg_course.labs
from zg import _checks, grappa
from zg import experiments as ex

partition_module = importlib.import_module(
    "zg.grappa.partition"
)  # (grappa.partition: the function)

SEED_MAX = 2**63 - 1

# The one strategy: every kind of value a caller might pass as a seed.
SEEDS = st.one_of(
    st.integers(0, SEED_MAX),  # valid
    st.integers(max_value=-1),  # negative
    st.integers(min_value=2**63, max_value=2**70),  # beyond an int64
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**31), 2**31 - 1).map(np.int32),
    st.integers(-(2**63), SEED_MAX).map(np.int64),
    st.integers(0, 2**64 - 1).map(np.uint64),
    st.sampled_from([np.float64(1.0), np.bool_(True), "1", None]),
)
# The edge cases, always tried (besides what hypothesis draws).
EDGES = [0, 1, SEED_MAX, -1, -(2**63), 2**63, True, False, 1.0, np.int64(7), np.uint64(2**63)]


def expected(seed: Any) -> tuple[type[Exception], str] | None:
    """What the rule says of ``seed``: None (accepted) or (exception type, message)."""
    try:
        _checks.seed_arg(seed)
    except (TypeError, ValueError) as exc:
        return type(exc), str(exc)
    return None


class Started(Exception):
    """Raised in place of starting worker processes: the seed was accepted."""


def _no_processes(*args: Any, **kwargs: Any) -> None:
    raise Started


@pytest.fixture(autouse=True)
def no_worker_processes(monkeypatch):
    """Every way the kit starts processes raises Started instead (a bad seed must never get
    that far)."""
    for name in ("zg.grappa.launch", "zg.grappa.train", "zg.parallel", "zg_course.labs"):
        module = importlib.import_module(name)  # (zg.grappa.train is also the function)
        monkeypatch.setattr(module, "spawn", _no_processes)


# ----------------------------------------------------------------------------- entry points

_GRAPH: dict[str, zg.Graph] = {}


def graph() -> zg.Graph:
    if "g" not in _GRAPH:
        _GRAPH["g"] = tiny(60)
    return _GRAPH["g"]


def _model(g: zg.Graph) -> torch.nn.Module:
    return zg.models.build("sage", g.feat_dim, 8, g.num_classes, 2, dropout=0.0)


def _hook(state, bucket):  # a DDP communication hook for labs.hook_on_workers (never run here)
    return bucket


@dataclass
class Entry:
    name: str
    call: Callable[[Any], Any]  # seed -> runs the entry point with that seed
    spawns: bool = False  # starts processes: an accepted seed raises Started
    examples: int = 8  # hypothesis draws besides EDGES (fewer for the slower entry points)


def _engine(seed):
    g = graph()
    return zg.Engine(g, _model(g), [2, 2], 8, mode="dynamic", seed=seed)


ENTRIES = [
    Entry("DynamicSampler", lambda s: zg.DynamicSampler(graph(), [2, 2], seed=s)),
    Entry("EnvelopeSampler", lambda s: zg.EnvelopeSampler(graph(), [2, 2], 8, seed=s)),
    Entry(
        "Envelope.profile", lambda s: zg.Envelope.profile(graph(), [2, 2], 8, num_batches=1, seed=s)
    ),
    Entry("Engine", _engine, examples=4),
    Entry(
        "datasets.csbm",
        lambda s: zg.datasets.csbm(num_nodes=20, avg_degree=2, num_classes=2, feat_dim=2, seed=s),
    ),
    Entry(
        "datasets.rmat",
        lambda s: zg.datasets.rmat(scale=4, edge_factor=2, feat_dim=2, num_classes=2, seed=s),
    ),
    Entry(
        "datasets.products_like",
        lambda s: zg.datasets.products_like(
            num_nodes=40, avg_degree=3, feat_dim=2, num_classes=2, seed=s, cache=False
        ),
    ),
    Entry(
        "datasets.products_like_path",
        lambda s: zg.datasets.products_like_path(
            num_nodes=40, avg_degree=3, num_classes=2, seed=s, cache_dir="/nonexistent"
        ),
    ),
    Entry("grappa.partition", lambda s: grappa.partition(graph(), 2, seed=s)),
    Entry(
        "grappa.partition.chunk_nodes",
        lambda s: partition_module.chunk_nodes(graph(), 2, seed=s),
    ),
    Entry("grappa.random_partitions", lambda s: grappa.random_partitions(graph(), 2, 1, seed=s)),
    Entry("grappa.TrainConfig", lambda s: grappa.TrainConfig(seed=s).validated()),
    Entry("grappa.TrainConfig.from_dict", lambda s: grappa.TrainConfig.from_dict({"seed": s})),
    Entry(
        "grappa.train",
        lambda s: grappa.train(graph(), workers=2, epochs=1, seed=s, method="random"),
        spawns=True,
    ),
    Entry(
        "grappa.train(config)",
        lambda s: grappa.train(graph(), grappa.TrainConfig(workers=2, method="random"), seed=s),
        spawns=True,
    ),
    Entry(
        "grappa.train_many",
        lambda s: grappa.train_many(graph(), [dict(workers=2, seed=s, method="random")]),
        spawns=True,
    ),
    Entry(
        "parallel.train",
        lambda s: zg.parallel.train(
            graph(), workers=2, epochs=1, batch_size=8, fanouts=[2], seed=s
        ),
        spawns=True,
    ),
    Entry(
        "labs.hook_on_workers",
        lambda s: zg_course.labs.hook_on_workers(_hook, [1.0, 1.0], seed=s),
        spawns=True,
    ),
    Entry(
        "baselines.feature_only_accuracy",
        lambda s: zg.baselines.features.feature_only_accuracy(graph(), epochs=1, seed=s),
    ),
    Entry("recipes.cora_sage", lambda s: zg.recipes.cora_sage(seed=s), examples=2),
    Entry("experiments.partition_quality", lambda s: ex.partition_quality(graph(), 2, seed=s)),
    Entry(
        "experiments.sweep_partitions",
        lambda s: ex.sweep_partitions(graph(), [2], ["random"], seed=s),
    ),
    Entry(
        "experiments.traffic_rows",
        lambda s: ex.traffic_rows(
            graph(),
            [grappa.partition(graph(), 2)],
            fanouts=[2],
            batch_sizes=[16],
            hidden_dim=4,
            seed=s,
        ),
        examples=4,
    ),
    Entry(
        "experiments.feature_fetch_traffic",
        lambda s: ex.traffic.feature_fetch_traffic(
            graph(), grappa.partition(graph(), 2), [2], 16, seed=s
        ),
        examples=4,
    ),
    Entry(
        "experiments.scaling_rows",
        lambda s: ex.traffic.scaling_rows(
            [graph()], workers=2, fanouts=[2], batch_size=16, hidden_dim=4, seed=s
        ),
        examples=4,
    ),
    Entry(
        "experiments.measure_hop_metadata",
        lambda s: ex.measure_hop_metadata(graph(), [2, 2], [0, 1, 2], seed=s),
    ),
    Entry(
        "experiments.audit_samplers",
        lambda s: ex.audit_samplers(graph(), [2, 2], [0, 1, 2], seed=s),
        examples=4,
    ),
    Entry(
        "experiments.bias_vs_workers",
        lambda s: ex.bias_vs_workers(
            graph(),
            _model(graph()),
            [2],
            draws=1,
            method="random",
            estimators=["mean"],
            super_epochs=[0],
            seed=s,
        ),
        examples=2,
    ),
    Entry(
        "experiments.worker_syncs",
        lambda s: ex.together.worker_syncs(graph(), workers=2, fanouts=[2], batch_size=8, seed=s),
        examples=2,
    ),
    Entry(
        "experiments.train_together",
        lambda s: ex.together.train_together(
            graph(), workers=2, epochs=1, batch_size=8, fanouts=[2], seed=s, method="random"
        ),
        spawns=True,
    ),
    Entry(
        "experiments.profile_modes",
        lambda s: ex.profile_modes(
            graph(),
            [2],
            8,
            hidden_dim=4,
            iterations=1,
            warmup=0,
            repeats=1,
            seed=s,
            include_dgl=False,
        ),
        examples=2,
    ),
    Entry(
        "experiments.sample_counts",
        lambda s: ex.sample_counts(graph(), [2], 8, num_batches=1, seed=s),
    ),
    Entry(
        "experiments.overflow_curve",
        lambda s: ex.overflow_curve(
            graph(), [2], 8, margins=[0.0], profile_batches=1, held_out_batches=1, seed=s
        ),
        examples=4,
    ),
]


def check(entry: Entry, seed: Any) -> None:
    want = expected(seed)
    if want is None:
        if entry.spawns:
            with pytest.raises(Started):
                entry.call(seed)
        else:
            entry.call(seed)
        return
    kind, message = want
    with pytest.raises((TypeError, ValueError)) as exc:
        entry.call(seed)  # (for the spawning ones: Started here fails the test)
    assert type(exc.value) is kind and str(exc.value) == message, (entry.name, seed)


@pytest.mark.parametrize(
    "entry", ENTRIES, ids=[e.name if isinstance(e, Entry) else None for e in ENTRIES]
)
def test_every_entry_point_follows_the_one_seed_rule(entry):
    @given(seed=SEEDS)
    @settings(
        max_examples=entry.examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    def run(seed):
        check(entry, seed)

    for edge in EDGES:
        run = example(seed=edge)(run)
    run()


def test_the_rule_itself():
    """The range, the kinds and the message, written down once."""
    for seed in (0, 1, SEED_MAX, np.int64(SEED_MAX), np.uint64(5), np.int32(3)):
        out = _checks.seed_arg(seed)
        assert out == int(seed) and type(out) is int
    for seed in (-1, 2**63, np.uint64(2**63), np.int64(-5)):
        with pytest.raises(ValueError) as exc:
            _checks.seed_arg(seed)
        assert str(exc.value) == f"seed must be in [0, {SEED_MAX}], got {int(seed)}"
    for seed in (True, np.bool_(False), 1.0, math.nan, "1", None, torch.tensor(1)):
        with pytest.raises(TypeError, match=r"^seed must be an int, got "):
            _checks.seed_arg(seed)


def test_epoch_and_batch_numbers_are_not_seeds():
    """They key random streams and may be negative (a profile draws at epoch -1)."""
    sampler = zg.DynamicSampler(graph(), [2, 2], seed=0)
    sampler.sample(torch.tensor([0, 1]), epoch=-1, batch=-(2**63))
    with pytest.raises(ValueError, match="epoch must be in"):
        sampler.sample(torch.tensor([0, 1]), epoch=2**63)


@pytest.mark.parametrize("seed", [0, SEED_MAX, -1, 2**63, 10**30])
def test_the_command_line_says_the_same(seed, capsys):
    """``zg train --seed`` maps to the same rule and message; ``zg grappa --seed`` reaches
    TrainConfig's (the same) check before any process starts."""
    from zg import cli

    want = expected(seed)
    if want is None:
        assert cli._seed(str(seed)) == seed
        return
    for argv in (
        ["train", "--seed", str(seed)],
        ["grappa", "--dataset", "cora", "--seed", str(seed)],
    ):
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        # zg train: "argument --seed: seed must be ..."; zg grappa names the flag: "--seed must be"
        assert want[1].removeprefix("seed ") in err and "Traceback" not in err, (argv, err)
