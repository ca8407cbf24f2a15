"""zg.experiments.throughput: one iteration stage by stage, the pipelines side by side, and the
committed GPU results (notebooks 01, 04)."""

import json

import pytest
import torch

import zg
from zg import experiments as ex
from zg import models
from zg.engine import Engine
from zg.experiments import results as results_format
from zg.step import STAGES

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=2000, avg_degree=8, num_classes=4, feat_dim=16, seed=0)


@pytest.fixture(scope="module")
def seeds(graph):
    return graph.train_idx[:64]


@pytest.mark.parametrize(
    "mode, kernel", [("dynamic", "auto"), ("eager", "torch"), ("static", "auto")]
)
def test_time_stages_of_zg_modes(graph, mode, kernel):
    torch.manual_seed(0)
    eng = Engine(
        graph,
        models.SAGE(graph.feat_dim, 16, graph.num_classes, len(FANOUTS)),
        FANOUTS,
        64,
        mode=mode,
        kernel=kernel,
    )
    events = ex.time_stages(eng, repeats=1)
    stages = [e["stage"] for e in events]
    assert set(stages) <= set(STAGES)
    assert stages.count("compact") == len(FANOUTS)  # one report per hop
    assert stages[-5:] == ["gather", "forward", "loss", "backward", "step"]
    for e in events:
        assert 0 <= e["start"] <= e["end"]
        assert isinstance(e["host_syncs"], int)
    for earlier, later in zip(events, events[1:]):
        assert later["start"] >= earlier["start"] - 1e-4
    syncs = sum(e["host_syncs"] for e in events)
    compact_syncs = sum(e["host_syncs"] for e in events if e["stage"] == "compact")
    if mode == "dynamic":
        assert syncs == compact_syncs == 3 * len(FANOUTS)
    else:
        assert syncs == 0


@pytest.mark.slow
def test_time_stages_of_dgl(graph, seeds, dgl):
    from zg.baselines.dgl import DGLModel

    eng = Engine(
        graph,
        DGLModel("sage", graph.feat_dim, 16, graph.num_classes, len(FANOUTS)),
        FANOUTS,
        32,
        mode="dgl",
        hooks=zg.StepHooks(nodes=seeds),
    )
    events = ex.time_stages(eng, batch=1, repeats=1)
    assert [e["stage"] for e in events] == [
        "sample",
        "gather",
        "forward",
        "loss",
        "backward",
        "step",
    ]
    assert events[0]["host_syncs"] is None  # C++: not visible to SyncAudit
    with pytest.raises(ValueError, match="past the end"):
        ex.time_stages(eng, batch=99, repeats=1)


def test_time_stages_rejects_bad_arguments(graph, seeds):
    with pytest.raises(TypeError, match="engine must be a zg.Engine"):
        ex.time_stages(object())
    eng = Engine(
        graph, models.SAGE(graph.feat_dim, 8, graph.num_classes, 2), FANOUTS, 64, mode="dynamic"
    )
    with pytest.raises(ValueError, match="repeats"):
        ex.time_stages(eng, repeats=0)


def test_profile_modes_without_dgl(graph):
    rows = ex.profile_modes(
        graph, FANOUTS, 64, hidden_dim=16, iterations=2, warmup=1, repeats=2, include_dgl=False
    )
    assert [r["pipeline"] for r in rows] == ["zg dynamic", "zg envelope"]
    assert [r["mode"] for r in rows] == ["dynamic", "static"]
    for r in rows:
        assert r["batch_size"] == 64 and r["step_seconds"] > 0 and r["repeats"] == 2
        assert r["seeds_per_second"] == pytest.approx(64 / r["step_seconds"])
        assert r["step_seconds_range"][0] <= r["step_seconds"] <= r["step_seconds_range"][1]
        assert set(r["stage_seconds"]) == set(STAGES)
    dynamic, envelope = rows
    assert (
        dynamic["host_syncs_per_iteration"] == 3 * len(FANOUTS)
        and dynamic["envelope_sizes"] is None
    )
    assert envelope["host_syncs_per_iteration"] == 0 and len(envelope["envelope_sizes"]) == len(
        FANOUTS
    )
    with pytest.raises(ValueError, match="repeats"):
        ex.profile_modes(graph, FANOUTS, 64, repeats=0)


def test_profile_modes_with_dgl(graph, dgl):
    rows = ex.profile_modes(graph, FANOUTS, 64, hidden_dim=16, iterations=2, warmup=1, repeats=1)
    assert [r["pipeline"] for r in rows] == ["DGL", "zg dynamic", "zg envelope"]
    assert rows[0]["host_syncs_per_iteration"] is None and rows[0]["step_seconds"] > 0
    assert rows[0]["stage_seconds"]["sample"] > 0 and rows[0]["stage_seconds"]["compact"] == 0


def gpu_doc(machine, rows, bench="gpu_check"):
    """A bench/gpu_check.py-shaped result file: a zg-result/1 document."""
    return results_format.make(
        bench,
        settings={},
        rows=rows,
        machine=machine,
        command=[],
        source={"commit": None, "modified": None},
    )


def test_load_gpu_results(tmp_path):
    assert ex.GPU_RESULTS.name == "gpu_check_cuda.json" and ex.GPU_RESULTS.parent.name == "results"
    assert ex.load_gpu_results(tmp_path / "missing.json") is None
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps(gpu_doc({"cuda": None, "cores": 2}, [])))
    with pytest.raises(ValueError, match="without a CUDA device"):
        ex.load_gpu_results(cpu)
    (tmp_path / "odd.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="must be a JSON object"):
        ex.load_gpu_results(tmp_path / "odd.json")
    (tmp_path / "other.json").write_text(
        json.dumps(gpu_doc({"cuda": "X", "cores": 2}, [], "engine"))
    )
    with pytest.raises(ValueError, match="not a bench/gpu_check.py result"):
        ex.load_gpu_results(tmp_path / "other.json")
    gpu = tmp_path / "gpu.json"
    gpu.write_text(
        json.dumps(
            gpu_doc(
                {"cuda": "NVIDIA H200", "cores": 16},
                [
                    {
                        "graph": "cora",
                        "batch_size": 256,
                        "variant": "envelope_captured",
                        "seconds_per_iteration": 0.002,
                        "gpu_execution_fraction": 0.97,
                        "host_syncs_per_iteration": 0,
                        "peak_bytes": 123,
                    }
                ],
            )
        )
    )
    results = ex.load_gpu_results(gpu)
    assert results["path"] == str(gpu)
    (row,) = ex.gpu_result_rows(results)
    assert row["ms_per_iteration"] == pytest.approx(2.0) and row["variant"] == "envelope_captured"
    assert row["gpu_execution_fraction"] == 0.97
