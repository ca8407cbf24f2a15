"""zg.experiments.scaling: reading bench/scaling.py's results and summarising cost growth."""

import json
import math

import numpy as np
import pytest

from zg import experiments as ex
from zg.experiments import results
from zg.step import STAGES


def fake_result(quick=False):
    """A bench/scaling.py-shaped result: time = a * nodes^0.5 * batch^0.8, DGL twice as slow."""
    rows = []
    for pipeline, a in (("dgl", 2.0), ("zg_envelope", 1.0)):
        for n, b in (
            (100_000, 1024),
            (400_000, 1024),
            (1_600_000, 1024),
            (1_600_000, 256),
            (1_600_000, 4096),
        ):
            seconds = a * 1e-3 * n**0.5 * (b / 1024) ** 0.8
            stages = {s: 0.0 for s in STAGES}
            stages.update(sample=0.5 * seconds, forward=0.2 * seconds, backward=0.3 * seconds)
            rows.append(
                {
                    "pipeline": pipeline,
                    "num_nodes": n,
                    "batch_size": b,
                    "seconds_per_batch": seconds,
                    "seconds_per_batch_std": 0.0,
                    "projected_epoch_seconds": seconds * math.ceil(0.08 * n / b),
                    "stage_seconds_per_batch": stages,
                    "timed_batches": 4,
                }
            )
    return {
        "benchmark": "scaling",
        "machine": {"cpu": "test"},
        "settings": {"quick": quick},
        "sweeps": {
            "size": {"batch_size": 1024, "num_nodes": [100_000, 400_000, 1_600_000]},
            "batch": {"num_nodes": 1_600_000, "batch_size": [256, 1024, 4096]},
        },
        "rows": rows,
    }


def as_file(legacy):
    """A fake_result as bench/scaling.py writes it: a zg-result/1 document (JSON text)."""
    detail = {
        k: v for k, v in legacy.items() if k not in ("benchmark", "machine", "settings", "rows")
    }
    doc = results.make(
        legacy.get("benchmark", "scaling"),
        settings=legacy.get("settings", {}),
        rows=legacy.get("rows", []),
        detail=detail,
        machine={"cpu": "test", "cores": 2},
        command=[],
        source={"commit": None, "modified": None},
    )
    return json.dumps(doc)


def test_load_absent_full_and_quick(tmp_path):
    assert ex.load_scaling_results(tmp_path / "none.json") is None
    path = tmp_path / "scaling.json"
    path.write_text(as_file(fake_result()))
    data = ex.load_scaling_results(path)
    assert data["path"] == str(path) and data["quick"] is False and len(data["rows"]) == 10
    path.write_text(as_file(fake_result(quick=True)))
    assert ex.load_scaling_results(path)["quick"] is True


def test_load_refuses_other_files(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        ex.load_scaling_results(path)
    path.write_text(json.dumps({"benchmark": "scaling"}))  # not zg-result/1
    with pytest.raises(ValueError, match="missing keys"):
        ex.load_scaling_results(path)
    path.write_text(as_file({"benchmark": "engine"}))
    with pytest.raises(ValueError, match="not a bench/scaling.py result"):
        ex.load_scaling_results(path)
    broken = fake_result()
    del broken["rows"][3]["seconds_per_batch"]
    path.write_text(as_file(broken))
    with pytest.raises(ValueError, match="row 3"):
        ex.load_scaling_results(path)
    del broken["sweeps"]
    path.write_text(as_file(broken))
    with pytest.raises(ValueError, match="sweeps"):
        ex.load_scaling_results(path)
    with pytest.raises(TypeError, match="path"):
        ex.load_scaling_results(3)


def test_rows_use_the_kit_names_and_flatten_stages():
    rows = ex.cost_growth_rows(fake_result())
    assert {r["pipeline"] for r in rows} == {"DGL", "zg envelope"}
    first = rows[0]
    assert first["sample"] == pytest.approx(0.5 * first["seconds_per_batch"])
    assert all(s in first for s in STAGES)
    with pytest.raises(TypeError, match="result"):
        ex.cost_growth_rows({"rows": []})
    with pytest.raises(ValueError, match="no rows"):
        ex.cost_growth_rows({"rows": [], "sweeps": {}})


def test_summary_recovers_the_exponents_and_shares():
    summary = {s["pipeline"]: s for s in ex.cost_growth_summary(fake_result())}
    env, dgl = summary["zg envelope"], summary["DGL"]
    assert env["num_nodes"] == 1_600_000 and env["batch_size"] == 1024
    assert env["size_exponent"] == pytest.approx(0.5) and env["batch_exponent"] == pytest.approx(
        0.8
    )
    assert env["dgl_over_this"] == pytest.approx(2.0) and dgl["dgl_over_this"] == pytest.approx(1.0)
    assert env["top_stage"] == "sample" and env["top_share"] == pytest.approx(0.5)
    assert list(env["stage_shares"])[:3] == ["sample", "backward", "forward"]
    assert sum(env["stage_shares"].values()) == pytest.approx(1.0)


def test_log_log_slope_matches_numpy():
    rng = np.random.default_rng(0)
    xs = rng.uniform(1, 1000, 12)
    ys = rng.uniform(1, 1000, 12)
    expected = np.polyfit(np.log(xs), np.log(ys), 1)[0]
    assert ex.log_log_slope(xs, ys) == pytest.approx(expected)
    assert ex.log_log_slope([5, 5], [1, 2]) is None
    with pytest.raises(ValueError, match="positive"):
        ex.log_log_slope([1, 2], [0, 1])
    with pytest.raises(ValueError, match="same length"):
        ex.log_log_slope([1, 2], [1])
