"""bench/network.py's GPU compute bound: which GPU row may bound a products worker's compute, and
the link model's ratio with that compute (the formula by hand)."""

from pathlib import Path

import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def network():
    module, restore = load_script(ROOT / "bench" / "network.py", "bench_network")
    yield module
    restore()


def projection(worker_rows=100.0, feat_dim=100, hidden=64):
    rows = [
        {"design": "feature_fetch", "link": "1gbit", "iterations": 10, "link_seconds": 10.0},
        {"design": "grappa", "link": "1gbit", "iterations": 10, "link_seconds": 0.01},
    ]
    return {
        "input_rows_per_iteration": worker_rows,
        "seeds_per_worker": 512.0,
        "graph": {"feat_dim": feat_dim},
        "hidden_dim": hidden,
        "fanouts": [15, 10, 5],
        "rows": rows,
        "per_iteration": {"grappa": {"bytes": 1}, "feature_fetch": {"bytes": 2}},
    }


def gpu(*rows):
    return {
        "machine": {"cuda": "a GPU"},
        "rows": [
            {
                "graph": "g",
                "variant": v,
                "batch_size": b,
                "seconds_per_iteration": s,
                "oracle_mean_counts": [n, 1.0, 1.0],
            }
            for v, b, s, n in rows
        ],
    }


def test_the_slowest_row_that_does_at_least_the_workers_work_bounds_it(network):
    # 5 s: too few input rows to bound; 1 s: too few seeds; 0.2 s is the slowest that qualifies.
    out = network.gpu_compute_bound(
        projection(),
        gpu(
            ("dynamic", 4096, 5.0, 50.0),
            ("dynamic", 256, 1.0, 500.0),
            ("envelope_captured", 1024, 0.1, 200.0),
            ("dynamic", 1024, 0.2, 200.0),
        ),
    )
    assert out["compute_seconds_per_iteration_at_most"] == 0.2
    assert out["from"]["variant"] == "dynamic" and out["from"]["batch_size"] == 1024
    assert out["speedups"]["1gbit"] == pytest.approx((0.2 + 1.0) / (0.2 + 0.001))
    assert "not measured" in out["label"]


@pytest.mark.parametrize("change", [dict(worker_rows=1e9), dict(feat_dim=1000), dict(hidden=1024)])
def test_no_bound_when_no_row_does_at_least_the_workers_work(network, change):
    assert (
        network.gpu_compute_bound(projection(**change), gpu(("dynamic", 1024, 0.2, 200.0))) is None
    )


def test_rows_that_record_their_sizes_are_judged_by_them(network):
    # The slower row computes on 64 features, fewer than a products worker's 100: it cannot bound
    # the worker's compute. A row without sizes (an older file) falls back to gpu_check.py's
    # constants (128 features, hidden 256, fanouts [15, 10, 5]).
    rec = gpu(
        ("dynamic", 1024, 0.5, 200.0),
        ("envelope_eager", 1024, 0.3, 200.0),
        ("dynamic", 2048, 0.4, 300.0),
    )
    rec["rows"][0].update(feat_dim=64, hidden_dim=256, fanouts=[15, 10, 5])
    rec["rows"][1].update(feat_dim=128, hidden_dim=256, fanouts=[15, 10, 5])
    out = network.gpu_compute_bound(projection(), rec)
    assert out["compute_seconds_per_iteration_at_most"] == 0.4
    assert out["from"]["sizes_from"] == "gpu_check.py's constants (older file)"
    del rec["rows"][2]
    out = network.gpu_compute_bound(projection(), rec)
    assert (
        out["compute_seconds_per_iteration_at_most"] == 0.3
        and out["from"]["sizes_from"] == "the row"
    )
    rec["rows"][1]["fanouts"] = [10, 10, 10]
    assert network.gpu_compute_bound(projection(), rec) is None


def test_gpu_check_rows_record_the_sizes_network_reads():
    # One CPU row of the check (a tiny graph, 1 batch) carries the sizes gpu_compute_bound reads.
    import torch

    import zg

    check, restore = load_script(ROOT / "bench" / "gpu_check.py", "bench_gpu_check")
    try:
        g = zg.datasets.csbm(num_nodes=300, avg_degree=5, num_classes=3, feat_dim=12, seed=0)
        row = check.measure(g, torch.device("cpu"), 32, "dynamic", None, max_batches=1)
    finally:
        restore()
    assert (row["feat_dim"], row["hidden_dim"], row["fanouts"]) == (12, check.HIDDEN, check.FANOUTS)
    assert row["iterations"] == 1
