"""zg.experiments.together: host syncs inside a Grappa worker per sampler, and the three
variants trained side by side with real worker processes (notebook 09)."""

import pytest

import zg
from zg import experiments as ex

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=400, avg_degree=6, num_classes=3, feat_dim=8, seed=0)


def test_worker_syncs_counts_the_waits_of_each_sampler(graph):
    out = ex.worker_syncs(graph, workers=2, fanouts=[4, 3], batch_size=64, seed=1)
    assert out["envelope"]["host_syncs"] == 0 and out["envelope"]["dynamic_shape_ops"] == 0
    # The dynamic sampler reads at least one count per hop back on the host.
    assert out["dynamic"]["host_syncs"] >= 2 and out["dynamic"]["dynamic_shape_ops"] >= 2
    assert abs(out["rows"] - 32) <= 4  # about 64 global seeds over 2 random partitions
    assert len(out["envelope_sizes"]) == 2 and out["envelope_sizes"][1] >= out["rows"]
    assert 0 < out["local_nodes"] < graph.num_nodes  # a partition, not the graph


@pytest.mark.slow
def test_train_together_trains_the_three_variants(graph):
    result = ex.train_together(
        graph,
        workers=2,
        epochs=2,
        batch_size=64,
        fanouts=[4, 3],
        hidden_dim=8,
        seed=0,
        timeout=60,
        run_timeout=240,
    )
    rows = {r["variant"]: r for r in result["rows"]}
    assert list(rows) == list(ex.TOGETHER)
    for name, h in result["histories"].items():
        assert h["config"]["trainer"] == ex.TOGETHER[name]["trainer"]
        assert h["config"]["step_shapes"] == ex.TOGETHER[name]["step_shapes"]
        assert len(h["epochs"]) == 2 and rows[name]["test_acc"] == h["final"]["test_acc"]
        total = sum(sum(per_worker) for per_worker in rows[name]["bytes_by_kind"].values())
        assert total == sum(sum(e["bytes_sent"]) for e in h["epochs"])  # by kind adds up
    assert "features" not in rows["grappa + envelope"]["bytes_by_kind"]
    assert "features" not in rows["grappa + dynamic"]["bytes_by_kind"]
    assert sum(rows["feature fetch"]["bytes_by_kind"]["features"]) > 0
    # Same model on both Grappa variants: the same gradient bytes per executed iteration, plus
    # the 4-byte overflow flag the envelope variant adds to its gradient all-reduce.
    env, dyn = rows["grappa + envelope"], rows["grappa + dynamic"]
    hist = result["histories"]["grappa + envelope"]
    iterations = sum(e["iterations"] for e in hist["epochs"])
    executed = iterations + env["rewound_batches"]
    for e_bytes, d_bytes in zip(
        env["bytes_by_kind"]["gradients"], dyn["bytes_by_kind"]["gradients"]
    ):
        assert e_bytes == (d_bytes // iterations + 4) * executed


def test_train_together_rejects_unknown_variants(graph):
    with pytest.raises(ValueError, match="variants"):
        ex.train_together(graph, variants=["grappa + magic"])
    with pytest.raises(ValueError, match="variants"):
        ex.train_together(graph, variants=[])
