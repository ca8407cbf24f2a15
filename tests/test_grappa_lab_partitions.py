"""zg.grappa.lab, notebooks 05-06 section, and their zg.viz builders.

Partition quality is checked against brute force over the edge list (cut edges, 1- and 2-hop
coverage straight from the definition); the traffic rows against the per-iteration rules; and
the expected byte counts against what real worker processes (gloo on loopback) sent."""

import pytest
import torch

import zg
from zg import grappa
from zg.grappa import lab as glab
from zg.grappa.comm import wire_bytes

pytestmark = pytest.mark.timeout(300)


def tiny(n=300):
    return zg.datasets.csbm(num_nodes=n, avg_degree=6, num_classes=3, feat_dim=8, seed=0)


def brute_force(g, owner):
    """Cut edges, c1 and c2 of every node from the definitions, one edge at a time."""
    indptr, indices = g.indptr.tolist(), g.indices.tolist()
    owner = owner.tolist()
    n = g.num_nodes
    local = [[u for u in indices[indptr[v]:indptr[v + 1]] if owner[u] == owner[v]] for v in range(n)]
    degree = [indptr[v + 1] - indptr[v] for v in range(n)]
    cut = sum(len(indices[indptr[v]:indptr[v + 1]]) - len(local[v]) for v in range(n))
    c1 = [1.0 if degree[v] == 0 else len(local[v]) / degree[v] for v in range(n)]
    c2 = [1.0 if degree[v] == 0 else sum(c1[u] for u in local[v]) / degree[v] for v in range(n)]
    return cut, c1, c2


@pytest.mark.parametrize("method,num_parts", [("random", 2), ("random", 3), ("metis", 4)])
def test_partition_quality_matches_brute_force(method, num_parts, require):
    if method == "metis":
        require("pymetis")
    g = tiny()
    q = glab.partition_quality(g, num_parts, method, hops=2, seed=1)
    part = q["partition"]
    assert isinstance(part, grappa.Partition) and part.num_parts == num_parts
    assert part.num_chunks == 2 * num_parts and q["method"] == method
    cut, c1, c2 = brute_force(g, part.owner(0))
    assert q["cut_edges"] == cut
    assert q["edge_cut_fraction"] == pytest.approx(cut / g.num_edges)
    assert torch.allclose(q["coverage"][1], torch.tensor(c1, dtype=torch.float32), atol=1e-6)
    assert torch.allclose(q["coverage"][2], torch.tensor(c2, dtype=torch.float32), atol=1e-6)
    assert q["coverage_1"] == pytest.approx(sum(c1) / len(c1), abs=1e-6)
    assert q["coverage_2"] == pytest.approx(sum(c2) / len(c2), abs=1e-6)
    counts = torch.bincount(part.owner(0), minlength=num_parts)
    assert q["balance"] == pytest.approx(float(counts.max()) / (g.num_nodes / num_parts))
    train = torch.bincount(part.owner(0)[g.train_idx], minlength=num_parts)
    assert q["train_nodes_min"] == int(train.min())


def test_partition_quality_agrees_with_grappa_coverage_and_later_super_epochs():
    g = tiny()
    q = glab.partition_quality(g, 2, "random", hops=3, seed=0, super_epoch=1)
    for h in (1, 2, 3):
        assert torch.allclose(q["coverage"][h], grappa.coverage(g, q["partition"], hops=h, super_epoch=1))
    cut, _, _ = brute_force(g, q["partition"].owner(1))
    assert q["cut_edges"] == cut
    assert q["coverage_1"] >= q["coverage_2"] >= q["coverage_3"]


def test_partition_quality_validates():
    g = tiny()
    with pytest.raises(ValueError, match="hops"):
        glab.partition_quality(g, 2, hops=0)
    with pytest.raises(ValueError, match="method"):
        glab.partition_quality(g, 2, "spectral")
    with pytest.raises(ValueError, match="num_parts"):
        glab.partition_quality(g, 0)
    with pytest.raises(TypeError):
        glab.partition_quality("cora", 2)


def test_partition_sweep_rows():
    g = tiny()
    rows = glab.partition_sweep(g, [2, 3], ("random",), hops=2, seed=0)
    assert [(r["method"], r["num_parts"]) for r in rows] == [("random", 2), ("random", 3)]
    for r in rows:
        assert "coverage" not in r and "partition" not in r
        q = glab.partition_quality(g, r["num_parts"], "random", hops=2, seed=0)
        assert r == {k: v for k, v in q.items() if k not in ("coverage", "partition")}
    with pytest.raises(TypeError, match="num_parts"):
        glab.partition_sweep(g, 2)
    with pytest.raises(TypeError, match="methods"):
        glab.partition_sweep(g, [2], "random")


def test_random_partitions_cut_about_what_chance_predicts():
    g = zg.datasets.csbm(num_nodes=4000, avg_degree=8, num_classes=4, feat_dim=4, seed=0)
    for P in (2, 4):
        q = glab.partition_quality(g, P, "random", hops=1, seed=0)
        assert abs(q["edge_cut_fraction"] - (P - 1) / P) < 0.02
        assert abs(q["coverage_1"] - 1 / P) < 0.02


def test_traffic_rows_follow_the_rules():
    g = tiny()
    parts = [grappa.partition(g, 2, "random", seed=0), grappa.partition(g, 3, "random", seed=0)]
    rows = glab.traffic_rows(g, parts, fanouts=[4, 4], batch_sizes=[32, 64], hidden_dim=8, seed=0)
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
        fetch = glab.feature_fetch_traffic(g, part, [4, 4], r["batch_size"], seed=0)
        assert r["feature_bytes"] == pytest.approx(sum(fetch["bytes_per_epoch"]) / P)
        assert r["ratio"] == pytest.approx(r["feature_bytes"] / r["gradient_bytes"])
        assert r["break_even_rows"] == pytest.approx(per_iteration / (g.feat_dim * 4))
        assert r["remote_rows_per_iteration"] == pytest.approx(fetch["remote_rows_per_iteration"])
    with pytest.raises(TypeError, match="batch_sizes"):
        glab.traffic_rows(g, parts, fanouts=[4, 4], batch_sizes=32)
    with pytest.raises(TypeError, match="Partition"):
        glab.traffic_rows(g, ["p"], fanouts=[4, 4], batch_sizes=[32])


def fake_history(trainer="grappa", workers=2, val=(0.5, 0.6, 0.7, 0.8), kinds=None):
    kinds = kinds or {"gradients": [10, 10], "scalars": [1, 1], "features": [0, 0], "parameters": [0, 0]}
    epochs = [{"epoch": i, "val_acc": v, "test_acc": v - 0.1, "mean_coverage": [0.5, 0.7][:workers],
               "bytes_by_kind": {k: [b * (i + 1) for b in per] for k, per in kinds.items()}}
              for i, v in enumerate(val)]
    return {"config": {"trainer": trainer}, "workers": workers, "epochs": epochs, "seconds_per_epoch": 0.1,
            "final": {"test_acc": val[-1] - 0.1, "val_acc": val[-1], "best_val_acc": max(val),
                      "test_acc_at_best_val": max(val) - 0.1}}


def test_bytes_sent_and_trainer_rows_from_a_history():
    h = fake_history()
    assert glab.bytes_sent(h) == {"gradients": [100, 100], "scalars": [10, 10], "features": [0, 0],
                                  "parameters": [0, 0]}
    (row,) = glab.trainer_rows({"mine": h})
    assert row["run"] == "mine" and row["trainer"] == "grappa" and row["workers"] == 2
    assert row["late_val_acc"] == pytest.approx(0.75)                  # mean of the later half
    assert row["mean_coverage"] == pytest.approx(0.6)
    assert row["gradients_per_epoch"] == pytest.approx(25.0) and row["scalars_per_epoch"] == pytest.approx(2.5)
    assert row["test_acc_at_best_val"] == pytest.approx(0.7)
    with pytest.raises(TypeError):
        glab.bytes_sent({"no": "epochs"})
    with pytest.raises(ValueError):
        glab.trainer_rows({})


def test_run_trainers_rejects_bad_runs_before_starting_anything():
    g = tiny()
    with pytest.raises(TypeError, match="runs"):
        glab.run_trainers(g, "grappa")
    with pytest.raises(TypeError, match="trainer"):
        glab.run_trainers(g, [{"estimator": "batch"}])
    with pytest.raises(ValueError, match="labelled"):
        glab.run_trainers(g, ["isolated", {"trainer": "isolated"}])
    with pytest.raises(ValueError, match="trainer"):
        glab.run_trainers(g, ["nonsense"], workers=2, epochs=1)


def test_expected_bytes_equal_what_real_workers_sent():
    """Every trainer, real processes: bytes_sent(history) == expected_bytes(config)."""
    g = tiny()
    common = dict(workers=2, epochs=2, seed=3, batch_size=64, hidden_dim=8, fanouts=[4, 4],
                  timeout=60, run_timeout=240, threads=1)
    runs = ["single", "isolated", {"trainer": "grappa", "estimator": "batch", "repartition_every": 1},
            {"trainer": "psgd_pa", "average_every": 3}, "feature_fetch"]
    histories = glab.run_trainers(g, runs, **common)
    assert list(histories) == ["single", "isolated", "grappa", "psgd_pa", "feature_fetch"]
    assert histories["single"]["workers"] == 1 and histories["grappa"]["workers"] == 2
    for label, h in histories.items():
        assert glab.bytes_sent(h) == glab.expected_bytes(g, h), label
    sent = {label: glab.bytes_sent(h) for label, h in histories.items()}
    assert sum(sent["feature_fetch"]["features"]) > 0 and sum(sent["grappa"]["scalars"]) > 0
    assert sum(sent["psgd_pa"]["parameters"]) > 0 and sum(sent["psgd_pa"]["gradients"]) == 0
    rows = glab.trainer_rows(histories)
    assert [r["run"] for r in rows] == list(histories)
    assert all(0.0 <= r["late_val_acc"] <= 1.0 for r in rows)


def test_average_rows():
    a = [{"run": "x", "trainer": "grappa", "acc": 0.5, "bytes": 10}, {"run": "y", "trainer": "single", "acc": 1.0, "bytes": 0}]
    b = [{"run": "y", "trainer": "single", "acc": 0.5, "bytes": 0}, {"run": "x", "trainer": "grappa", "acc": 0.7, "bytes": 20}]
    rows = glab.average_rows([a, b])
    assert [r["run"] for r in rows] == ["x", "y"]
    assert rows[0]["acc"] == pytest.approx(0.6) and rows[0]["bytes"] == 15 and rows[0]["seeds"] == 2
    assert rows[1]["acc"] == pytest.approx(0.75) and rows[1]["trainer"] == "single"
    assert glab.average_rows([a]) == [{**r, "seeds": 1} for r in a]
    with pytest.raises(ValueError, match="missing"):
        glab.average_rows([a, b[:1]])
    with pytest.raises(ValueError, match="differs"):
        glab.average_rows([a, [{**b[0]}, {**b[1], "trainer": "isolated"}]])
    with pytest.raises(ValueError):
        glab.average_rows([])
