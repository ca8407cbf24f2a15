"""zg.grappa.lab (notebooks 07-08) and their zg.viz figures, against trusted references: the
estimators' own gradient_error, brute-force loops over nodes and edges, and the byte ledgers
of real multi-process runs."""

import math

import pytest
import torch

import zg
from zg import grappa
from zg.grappa import lab as glab
from zg.grappa.comm import LINKS, Link, rounds, wire_bytes

pytestmark = pytest.mark.timeout(300)

REAL = dict(batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240,
            threads=1)


def small(seed=0, n=200):
    g = zg.datasets.csbm(num_nodes=n, avg_degree=6, num_classes=3, feat_dim=8, seed=seed)
    torch.manual_seed(seed)
    model = zg.models.SAGE(8, 8, 3, num_layers=2)
    return g, model


# ----------------------------------------------------------------------------- notebook 07


def test_error_rows_flatten_gradient_error():
    g, model = small()
    parts = grappa.random_partitions(g, 2, count=2)
    err = grappa.gradient_error(g, model, parts, estimator="all", weighting=["inverse", "coverage"])
    rows = glab.error_rows(err, partition="random")
    assert len(rows) == 2 * len(grappa.ESTIMATORS)
    for row in rows:
        e = err[row["weighting"]][row["estimator"]]
        assert row["partition"] == "random" and row["bias"] == e["bias"] and row["variance"] == e["variance"]
        assert row["relative_mse"] == pytest.approx(row["bias_squared"] + row["variance"], rel=1e-9, abs=1e-12)
    one = grappa.gradient_error(g, model, parts, estimator=["mean", "batch"])
    assert [r["estimator"] for r in glab.error_rows(one, weighting="inverse")] == ["mean", "batch"]
    with pytest.raises(ValueError, match="weighting"):
        glab.error_rows(one)
    with pytest.raises(ValueError, match="errors"):
        glab.error_rows({})


def test_shrink_sweep_matches_gradient_error_at_every_lambda():
    g, model = small(seed=1)
    parts = grappa.random_partitions(g, 3, count=2, seed=4)
    lambdas = [0.0, 0.3, 0.75, 1.0]
    model.train()
    sweep = glab.shrink_sweep(g, model, parts, lambdas, super_epochs=[0, 1])
    assert model.training, "the model's mode is restored"
    assert sweep["draws"] == 4 and len(sweep["auto_lambda"]) == 4
    for i, lam in enumerate(lambdas):                       # independent recomputation per lambda
        direct = grappa.gradient_error(g, model, parts, "shrink", shrink=lam, super_epochs=[0, 1])
        for key in ("bias", "variance", "relative_mse", "relative_error", "cosine"):
            assert sweep[key][i] == pytest.approx(direct[key], rel=1e-9, abs=1e-12), (lam, key)
    ends = grappa.gradient_error(g, model, parts, ["batch", "uniform"], super_epochs=[0, 1])
    assert sweep["bias"][0] == pytest.approx(ends["batch"]["bias"], rel=1e-12)
    assert sweep["bias"][-1] == pytest.approx(ends["uniform"]["bias"], rel=1e-12)


def test_shrink_sweep_auto_lambda_is_the_one_the_estimator_uses():
    g, model = small(seed=2)
    part = grappa.partition(g, 2, seed=1)
    sweep = glab.shrink_sweep(g, model, part, [0.0])
    lam = sweep["auto_lambda"][0]
    assert 0.0 <= lam <= 1.0
    auto = grappa.gradient_error(g, model, part, "shrink", shrink="auto")
    fixed = grappa.gradient_error(g, model, part, "shrink", shrink=lam)
    assert auto["relative_error"] == pytest.approx(fixed["relative_error"], rel=1e-9, abs=1e-12)


def test_shrink_sweep_validates():
    g, model = small()
    part = grappa.partition(g, 2)
    with pytest.raises(ValueError, match="lambdas"):
        glab.shrink_sweep(g, model, part, [1.5])
    with pytest.raises(ValueError, match="lambdas"):
        glab.shrink_sweep(g, model, part, [])
    with pytest.raises(TypeError, match="model"):
        glab.shrink_sweep(g, torch.nn.Linear(2, 2), part, [0.5])
    with pytest.raises(TypeError, match="parts"):
        glab.shrink_sweep(g, model, "random", [0.5])


# ----------------------------------------------------------------------------- notebook 08: schedules


def brute_pairs(part, upto):
    C = part.num_chunks
    met = set()
    for s in range(upto):
        for p in range(part.num_parts):
            chunks = part.chunks(p, s)
            met |= {(a, b) for a in chunks for b in chunks if a < b}
    return len(met) / (C * (C - 1) // 2)


@pytest.mark.parametrize("schedule,parts,chunks", [("round_robin", 2, 4), ("fixed_base", 2, 4),
                                                   ("round_robin", 3, 9), ("fixed_base", 3, 9)])
def test_chunk_pairs_met_against_the_schedule(schedule, parts, chunks):
    g, _ = small()
    part = grappa.partition(g, parts, num_chunks=chunks, schedule=schedule)
    got = glab.chunk_pairs_met(part, 6)
    assert got == pytest.approx([brute_pairs(part, s) for s in range(1, 7)])
    assert all(b >= a for a, b in zip(got, got[1:]))
    if schedule == "round_robin":
        assert got[part.num_super_epochs - 1] == 1.0
    else:
        assert got[-1] < 1.0                                   # base chunks never meet
    assert glab.chunk_pairs_met(grappa.partition(g, 2, num_chunks=2), 3) == [0.0] * 3
    with pytest.raises(ValueError, match="super_epochs"):
        glab.chunk_pairs_met(part, 0)


def test_edges_exposed_brute_force():
    g, _ = small(n=150)
    part = grappa.partition(g, 2, schedule="round_robin", seed=3)
    got = glab.edges_exposed(g, part, 4)
    src, dst = g.edges()
    seen = set()
    for s in range(4):
        owner = part.owner(s).tolist()
        seen |= {e for e, (a, b) in enumerate(zip(src.tolist(), dst.tolist())) if owner[a] == owner[b]}
        assert got[s] == pytest.approx(len(seen) / g.num_edges)
    assert got[0] == pytest.approx(1 - part.stats(g)["edge_cut_fraction"])
    assert got[2] == 1.0                                       # C - 1 = 3 super-epochs: every pair met


def test_repartition_bytes_brute_force():
    g, _ = small(n=120)
    part = grappa.partition(g, 2, schedule="round_robin", seed=1)
    got = glab.repartition_bytes(g, part, 4)
    deg = g.in_degrees().tolist()
    for s in range(1, 4):
        before, now = part.owner(s - 1).tolist(), part.owner(s).tolist()
        moved = [v for v in range(g.num_nodes) if before[v] != now[v]]
        expected = sum(g.feat_dim * 4 + 8 + 8 * deg[v] for v in moved)
        assert got[s - 1] == expected
    assert glab.repartition_bytes(g, grappa.partition(g, 2, num_chunks=2), 3) == [0, 0]
    assert glab.repartition_bytes(g, part, 1) == []


# ----------------------------------------------------------------------------- notebook 08: bytes


@pytest.fixture(scope="module")
def real_runs():
    """One grappa (batch) and one feature_fetch run, 2 workers, 2 epochs, shared partition."""
    g = zg.datasets.csbm(num_nodes=600, avg_degree=6, num_classes=3, feat_dim=12, seed=5)
    part = grappa.partition(g, 2, seed=2)
    base = dict(workers=2, epochs=2, seed=3, partition=part, **REAL)
    hist = grappa.train_many(g, [dict(trainer="grappa", estimator="batch", **base),
                                 dict(trainer="feature_fetch", **base)])
    return g, part, dict(zip(["grappa", "feature_fetch"], hist))


def test_feature_fetch_traffic_equals_the_real_runs_ledger(real_runs):
    g, part, hist = real_runs
    counted = glab.feature_fetch_traffic(g, part, REAL["fanouts"], REAL["batch_size"], epochs=2, seed=3)
    epochs = hist["feature_fetch"]["epochs"]
    real = [sum(e["bytes_by_kind"]["features"][w] for e in epochs) / 2 for w in range(2)]
    assert counted["bytes_per_epoch"] == real
    assert counted["iterations_per_epoch"] == epochs[0]["iterations"]
    assert 0 < counted["remote_rows_per_iteration"] < counted["input_rows_per_iteration"]


def test_gradient_traffic_equals_the_real_runs_ledger(real_runs):
    g, _, hist = real_runs
    model = zg.models.SAGE(g.feat_dim, REAL["hidden_dim"], g.num_classes, num_layers=2)
    for name, estimator in (("grappa", "batch"), ("feature_fetch", "mean")):
        traffic = glab.gradient_traffic(model, 2, estimator=estimator)
        for e in hist[name]["epochs"]:
            I = e["iterations"]
            assert e["bytes_by_kind"]["gradients"] == [traffic["gradient_bytes"] * I] * 2
            assert e["bytes_by_kind"]["scalars"] == [traffic["scalar_bytes"] * I] * 2
        if name == "grappa":
            assert hist[name]["epochs"][0]["rounds"] == [traffic["rounds"] * I] * 2
    one = glab.gradient_traffic(model, 1)
    assert one["bytes"] == 0 and one["rounds"] == 0
    assert glab.gradient_traffic(model, 4)["gradient_bytes"] == 6 * 4 * one["parameters"] // 4
    with pytest.raises(ValueError, match="estimator"):
        glab.gradient_traffic(model, 2, estimator="median")


def test_fetch_traffic_model_near_the_counted_traffic():
    g = zg.datasets.csbm(num_nodes=3000, avg_degree=8, num_classes=3, feat_dim=16, seed=0)
    part = grappa.partition(g, 2, seed=0)
    counted = glab.feature_fetch_traffic(g, part, [5, 5], 256, seed=0)
    seeds = g.train_idx.numel() / (2 * counted["iterations_per_epoch"])
    model = glab.fetch_traffic_model(counted["input_rows_per_iteration"], seeds, 2, g.feat_dim)
    assert model["remote_rows"] == pytest.approx(counted["remote_rows_per_iteration"], rel=0.15)
    assert model["bytes"] == pytest.approx(counted["bytes_per_iteration"], rel=0.15)
    assert model["rounds"] == 3 * rounds("all_to_all", 2)
    assert glab.fetch_traffic_model(100, 10, 1, 8) == {"remote_rows": 0.0, "bytes": 0.0, "rounds": 0}
    with pytest.raises(ValueError, match="seeds"):
        glab.fetch_traffic_model(10, 20, 2, 8)


def test_scaling_rows_are_consistent():
    graphs = [zg.datasets.rmat(scale=s, edge_factor=4, feat_dim=8, num_classes=3, seed=0) for s in (7, 8, 9)]
    rows = glab.scaling_rows(graphs, workers=2, fanouts=[5, 5], batch_size=128, hidden_dim=8)
    assert [r["nodes"] for r in rows] == [128, 256, 512]
    assert len({r["gradient_bytes_per_iteration"] for r in rows}) == 1
    for g, r in zip(graphs, rows):
        part = grappa.partition(g, 2, "random", 0)
        assert r["edge_cut_fraction"] == part.stats(g)["edge_cut_fraction"]
        assert r["mean_coverage"] == pytest.approx(float(grappa.coverage(g, part, 2)[g.train_idx].mean()))
        assert r["iterations_per_epoch"] == math.ceil(g.train_idx.numel() / 128)
        assert r["fetch_bytes_per_epoch"] == pytest.approx(
            (r["feature_bytes_per_iteration"] + r["gradient_bytes_per_iteration"]) * r["iterations_per_epoch"])
    with pytest.raises(ValueError, match="graphs"):
        glab.scaling_rows([], workers=2, fanouts=[5], batch_size=8)


def test_epoch_projection_by_hand():
    per_iteration = {"a": {"seconds": 0.01, "bytes": 1e6, "rounds": 4}, "b": {"seconds": 0.02, "bytes": 10.0, "rounds": 1}}
    link = Link("test", bandwidth=1e8, latency=1e-4)
    rows = glab.epoch_projection(per_iteration, 1000, [link])
    a, b = rows
    assert a["design"] == "a" and a["link"] == "test" and a["iterations"] == 1000
    assert a["compute_seconds"] == pytest.approx(10.0)
    assert a["link_seconds"] == pytest.approx(1000 * (4 * 1e-4 + 1e6 / 1e8))
    assert a["projected_seconds"] == pytest.approx(a["compute_seconds"] + a["link_seconds"])
    assert b["link_seconds"] == pytest.approx(1000 * (1e-4 + 10 / 1e8))
    assert len(glab.epoch_projection(per_iteration, 10)) == 2 * len(LINKS)
    with pytest.raises(ValueError, match="lacks"):
        glab.epoch_projection({"a": {"seconds": 1.0}}, 10)
    with pytest.raises(ValueError, match="iterations"):
        glab.epoch_projection(per_iteration, 0)
    with pytest.raises(TypeError, match="links"):
        glab.epoch_projection(per_iteration, 10, ["1GbE"])
    assert wire_bytes("all_reduce", 8, 2) == 8                      # the rule the rows rest on
