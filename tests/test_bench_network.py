"""bench/network.py's GPU compute bound: which GPU row may bound a products worker's compute, and
the link model's ratio with that compute (the formula by hand)."""

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def network():
    spec = importlib.util.spec_from_file_location("bench_network", ROOT / "bench" / "network.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    for p in (str(ROOT / "bench"), str(ROOT / "tools")):
        while p in sys.path:
            sys.path.remove(p)


def projection(worker_rows=100.0, feat_dim=100, hidden=64):
    rows = [{"design": "feature_fetch", "link": "1gbit", "iterations": 10, "link_seconds": 10.0},
            {"design": "grappa", "link": "1gbit", "iterations": 10, "link_seconds": 0.01}]
    return {"input_rows_per_iteration": worker_rows, "seeds_per_worker": 512.0, "graph": {"feat_dim": feat_dim},
            "hidden_dim": hidden, "fanouts": [15, 10, 5], "rows": rows,
            "per_iteration": {"grappa": {"bytes": 1}, "feature_fetch": {"bytes": 2}}}


def gpu(*rows):
    return {"machine": {"cuda": "a GPU"},
            "rows": [{"graph": "g", "variant": v, "batch_size": b, "seconds_per_iteration": s,
                      "oracle_mean_counts": [n, 1.0, 1.0]} for v, b, s, n in rows]}


def test_the_slowest_row_that_does_at_least_the_workers_work_bounds_it(network):
    # 5 s: too few input rows to bound; 1 s: too few seeds; 0.2 s is the slowest that qualifies.
    out = network.gpu_compute_bound(projection(), gpu(("dynamic", 4096, 5.0, 50.0), ("dynamic", 256, 1.0, 500.0),
                                                      ("envelope_captured", 1024, 0.1, 200.0),
                                                      ("dynamic", 1024, 0.2, 200.0)))
    assert out["compute_seconds_per_iteration_at_most"] == 0.2
    assert out["from"]["variant"] == "dynamic" and out["from"]["batch_size"] == 1024
    assert out["speedups"]["1gbit"] == pytest.approx((0.2 + 1.0) / (0.2 + 0.001))
    assert "not measured" in out["label"]


@pytest.mark.parametrize("change", [dict(worker_rows=1e9), dict(feat_dim=1000), dict(hidden=1024)])
def test_no_bound_when_no_row_does_at_least_the_workers_work(network, change):
    assert network.gpu_compute_bound(projection(**change), gpu(("dynamic", 1024, 0.2, 200.0))) is None
