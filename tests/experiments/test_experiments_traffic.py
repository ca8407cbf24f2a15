"""zg.experiments.traffic: every byte count against its rule, against brute force, and against
the ledgers of real multi-process runs (gloo on loopback); the models and projections by hand
(notebooks 05, 06, 08)."""

import math

import pytest
import torch
from graphs import tiny

import zg
from zg import experiments as ex
from zg import grappa
from zg.grappa.comm import LINKS, Link, rounds, wire_bytes

pytestmark = pytest.mark.timeout(300)


REAL = dict(
    batch_size=64,
    hidden_dim=16,
    num_layers=2,
    fanouts=[5, 5],
    timeout=60,
    run_timeout=240,
    threads=1,
)


def test_traffic_rows_follow_the_rules():
    g = tiny()
    parts = [grappa.partition(g, 2, "random", seed=0), grappa.partition(g, 3, "random", seed=0)]
    rows = ex.traffic_rows(g, parts, fanouts=[4, 4], batch_sizes=[32, 64], hidden_dim=8, seed=0)
    assert [(r["num_parts"], r["batch_size"]) for r in rows] == [(2, 32), (2, 64), (3, 32), (3, 64)]
    torch.manual_seed(0)
    model = zg.models.build("sage", g.feat_dim, 8, g.num_classes, 2)
    payload = sum(p.numel() * 4 for p in model.parameters())
    for r, part in zip(rows, [parts[0]] * 2 + [parts[1]] * 2):
        P = r["num_parts"]
        iterations = -(-g.train_idx.numel() // r["batch_size"])
        assert r["iterations_per_epoch"] == iterations
        per_iteration = wire_bytes("all_reduce", payload, P) + wire_bytes("all_gather", 24, P)
        assert r["gradient_bytes"] == iterations * per_iteration
        fetch = ex.feature_fetch_traffic(g, part, [4, 4], r["batch_size"], seed=0)
        assert r["feature_bytes"] == pytest.approx(sum(fetch["bytes_per_epoch"]) / P)
        assert r["ratio"] == pytest.approx(r["feature_bytes"] / r["gradient_bytes"])
        assert r["break_even_rows"] == pytest.approx(per_iteration / (g.feat_dim * 4))
        assert r["remote_rows_per_iteration"] == pytest.approx(fetch["remote_rows_per_iteration"])
    with pytest.raises(TypeError, match="batch_sizes"):
        ex.traffic_rows(g, parts, fanouts=[4, 4], batch_sizes=32)
    with pytest.raises(TypeError, match="Partition"):
        ex.traffic_rows(g, ["p"], fanouts=[4, 4], batch_sizes=[32])


@pytest.mark.slow
def test_expected_bytes_equal_what_real_workers_sent():
    """Every trainer, real processes: bytes_sent(history) == expected_bytes(config)."""
    g = tiny()
    common = dict(
        workers=2,
        epochs=2,
        seed=3,
        batch_size=64,
        hidden_dim=8,
        fanouts=[4, 4],
        timeout=60,
        run_timeout=240,
        threads=1,
    )
    runs = [
        "single",
        "isolated",
        {"trainer": "grappa", "estimator": "batch", "repartition_every": 1},
        {"trainer": "psgd_pa", "average_every": 3},
        "feature_fetch",
    ]
    histories = ex.run_trainers(g, runs, **common)
    assert list(histories) == ["single", "isolated", "grappa", "psgd_pa", "feature_fetch"]
    assert histories["single"]["workers"] == 1 and histories["grappa"]["workers"] == 2
    for label, h in histories.items():
        assert ex.bytes_sent(h) == ex.expected_bytes(g, h), label
    sent = {label: ex.bytes_sent(h) for label, h in histories.items()}
    assert sum(sent["feature_fetch"]["features"]) > 0 and sum(sent["grappa"]["scalars"]) > 0
    assert sum(sent["psgd_pa"]["parameters"]) > 0 and sum(sent["psgd_pa"]["gradients"]) == 0
    rows = ex.trainer_rows(histories)
    assert [r["run"] for r in rows] == list(histories)
    assert all(0.0 <= r["late_val_acc"] <= 1.0 for r in rows)


def test_repartition_bytes_brute_force():
    g = tiny(120)
    part = grappa.partition(g, 2, schedule="round_robin", seed=1)
    got = ex.repartition_bytes(g, part, 4)
    deg = g.in_degrees().tolist()
    for s in range(1, 4):
        before, now = part.owner(s - 1).tolist(), part.owner(s).tolist()
        moved = [v for v in range(g.num_nodes) if before[v] != now[v]]
        expected = sum(g.feat_dim * 4 + 8 + 8 * deg[v] for v in moved)
        assert got[s - 1] == expected
    assert ex.repartition_bytes(g, grappa.partition(g, 2, num_chunks=2), 3) == [0, 0]
    assert ex.repartition_bytes(g, part, 1) == []


@pytest.fixture(scope="module")
def real_runs():
    """One grappa (batch) and one feature_fetch run, 2 workers, 2 epochs, shared partition."""
    g = zg.datasets.csbm(num_nodes=600, avg_degree=6, num_classes=3, feat_dim=12, seed=5)
    part = grappa.partition(g, 2, seed=2)
    base = dict(workers=2, epochs=2, seed=3, partition=part, **REAL)
    hist = grappa.train_many(
        g,
        [dict(trainer="grappa", estimator="batch", **base), dict(trainer="feature_fetch", **base)],
    )
    return g, part, dict(zip(["grappa", "feature_fetch"], hist))


@pytest.mark.slow
def test_feature_fetch_traffic_equals_the_real_runs_ledger(real_runs):
    g, part, hist = real_runs
    counted = ex.feature_fetch_traffic(
        g, part, REAL["fanouts"], REAL["batch_size"], epochs=2, seed=3
    )
    epochs = hist["feature_fetch"]["epochs"]
    real = [sum(e["bytes_by_kind"]["features"][w] for e in epochs) / 2 for w in range(2)]
    assert counted["bytes_per_epoch"] == real
    assert counted["iterations_per_epoch"] == epochs[0]["iterations"]
    assert 0 < counted["remote_rows_per_iteration"] < counted["input_rows_per_iteration"]


def test_gradient_traffic_equals_the_real_runs_ledger(real_runs):
    g, _, hist = real_runs
    model = zg.models.SAGE(g.feat_dim, REAL["hidden_dim"], g.num_classes, num_layers=2)
    for name, estimator in (("grappa", "batch"), ("feature_fetch", "mean")):
        traffic = ex.gradient_traffic(model, 2, estimator=estimator)
        for e in hist[name]["epochs"]:
            I = e["iterations"]
            assert e["bytes_by_kind"]["gradients"] == [traffic["gradient_bytes"] * I] * 2
            assert e["bytes_by_kind"]["scalars"] == [traffic["scalar_bytes"] * I] * 2
        if name == "grappa":
            assert hist[name]["epochs"][0]["rounds"] == [traffic["rounds"] * I] * 2
    one = ex.gradient_traffic(model, 1)
    assert one["bytes"] == 0 and one["rounds"] == 0
    assert ex.gradient_traffic(model, 4)["gradient_bytes"] == 6 * 4 * one["parameters"] // 4
    with pytest.raises(ValueError, match="estimator"):
        ex.gradient_traffic(model, 2, estimator="median")


def test_fetch_traffic_model_near_the_counted_traffic():
    g = zg.datasets.csbm(num_nodes=3000, avg_degree=8, num_classes=3, feat_dim=16, seed=0)
    part = grappa.partition(g, 2, seed=0)
    counted = ex.feature_fetch_traffic(g, part, [5, 5], 256, seed=0)
    seeds = g.train_idx.numel() / (2 * counted["iterations_per_epoch"])
    model = ex.fetch_traffic_model(counted["input_rows_per_iteration"], seeds, 2, g.feat_dim)
    assert model["remote_rows"] == pytest.approx(counted["remote_rows_per_iteration"], rel=0.15)
    assert model["bytes"] == pytest.approx(counted["bytes_per_iteration"], rel=0.15)
    assert model["rounds"] == 3 * rounds("all_to_all", 2)
    assert ex.fetch_traffic_model(100, 10, 1, 8) == {"remote_rows": 0.0, "bytes": 0.0, "rounds": 0}
    with pytest.raises(ValueError, match="seeds"):
        ex.fetch_traffic_model(10, 20, 2, 8)


def test_scaling_rows_are_consistent():
    graphs = [
        zg.datasets.rmat(scale=s, edge_factor=4, feat_dim=8, num_classes=3, seed=0)
        for s in (7, 8, 9)
    ]
    rows = ex.scaling_rows(graphs, workers=2, fanouts=[5, 5], batch_size=128, hidden_dim=8)
    assert [r["nodes"] for r in rows] == [128, 256, 512]
    assert len({r["gradient_bytes_per_iteration"] for r in rows}) == 1
    for g, r in zip(graphs, rows):
        part = grappa.partition(g, 2, "random", 0)
        assert r["edge_cut_fraction"] == part.stats(g)["edge_cut_fraction"]
        assert r["mean_coverage"] == pytest.approx(
            float(grappa.coverage(g, part, 2)[g.train_idx].mean())
        )
        assert r["iterations_per_epoch"] == math.ceil(g.train_idx.numel() / 128)
        assert r["fetch_bytes_per_epoch"] == pytest.approx(
            (r["feature_bytes_per_iteration"] + r["gradient_bytes_per_iteration"])
            * r["iterations_per_epoch"]
        )
    with pytest.raises(ValueError, match="graphs"):
        ex.scaling_rows([], workers=2, fanouts=[5], batch_size=8)


def test_project_epochs_by_hand():
    per_iteration = {
        "a": {"seconds": 0.01, "bytes": 1e6, "rounds": 4},
        "b": {"seconds": 0.02, "bytes": 10.0, "rounds": 1},
    }
    link = Link("test", bandwidth=1e8, latency=1e-4)
    rows = ex.project_epochs(per_iteration, 1000, [link])
    a, b = rows
    assert a["design"] == "a" and a["link"] == "test" and a["iterations"] == 1000
    assert a["compute_seconds"] == pytest.approx(10.0)
    assert a["link_seconds"] == pytest.approx(1000 * (4 * 1e-4 + 1e6 / 1e8))
    assert a["projected_seconds"] == pytest.approx(a["compute_seconds"] + a["link_seconds"])
    assert b["link_seconds"] == pytest.approx(1000 * (1e-4 + 10 / 1e8))
    assert len(ex.project_epochs(per_iteration, 10)) == 2 * len(LINKS)
    with pytest.raises(ValueError, match="lacks"):
        ex.project_epochs({"a": {"seconds": 1.0}}, 10)
    with pytest.raises(ValueError, match="iterations"):
        ex.project_epochs(per_iteration, 0)
    with pytest.raises(TypeError, match="links"):
        ex.project_epochs(per_iteration, 10, ["1GbE"])
    assert wire_bytes("all_reduce", 8, 2) == 8  # the rule the rows rest on
