"""zg.lab: the notebooks' experiments return correct measurements (no plotting, no plotly)."""

import json
import os

import pytest
import torch

import zg
from zg import lab, models
from zg.engine import Engine
from zg.envelope import Envelope
from zg.pipeline import STAGES, DynamicPipeline, EnvelopePipeline
from zg.sampling import DynamicSampler

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=2000, avg_degree=8, num_classes=4, feat_dim=16, seed=0)


@pytest.fixture(scope="module")
def seeds(graph):
    return graph.train_idx[:64]


def engine(g, envelope="worst_case", **kw):
    torch.manual_seed(0)
    return Engine(g, models.SAGE(g.feat_dim, 16, g.num_classes, len(FANOUTS)), FANOUTS, 64,
                  envelope=envelope, seed=1, **kw)


# ----------------------------------------------------------------------------- scale, machine


def test_scale_reads_ZG_SCALE(monkeypatch):
    monkeypatch.delenv("ZG_SCALE", raising=False)
    assert lab.scale() == "small"
    monkeypatch.setenv("ZG_SCALE", "")
    assert lab.scale() == "small"
    monkeypatch.setenv("ZG_SCALE", " Full ")
    assert lab.scale() == "full"
    assert lab.by_scale(1, 2) == 2
    assert lab.by_scale(1, 2, "small") == 1
    monkeypatch.setenv("ZG_SCALE", "huge")
    with pytest.raises(ValueError, match="ZG_SCALE"):
        lab.scale()
    with pytest.raises(TypeError):
        lab.scale(3)


def test_machine_names_this_machine():
    info = lab.machine()
    for key in ("date", "platform", "cpu", "cores", "torch", "cuda", "memory_gib"):
        assert key in info
    assert info["torch"] == torch.__version__
    assert (info["cuda"] is None) == (not torch.cuda.is_available())
    assert info["environment"].get("OMP_WAIT_POLICY") == os.environ.get("OMP_WAIT_POLICY")
    assert all(k.startswith(("MALLOC_", "OMP_", "MKL_", "LD_PRELOAD")) for k in info["environment"])
    label = lab.machine_label(info)
    assert f"{info['cores']} cores" in label and info["torch"] in label
    foreign = dict(info, cuda="NVIDIA H200", date="2026-01-01T00:00:00+00:00")
    assert "GPU NVIDIA H200" in lab.machine_label(foreign) and "2026-01-01" in lab.machine_label(foreign)
    with pytest.raises(TypeError):
        lab.machine_label("not a dict")


def test_markdown_table():
    text = lab.markdown_table([{"a": 1234567, "b": 0.123456, "c": None}, {"a": 2, "b": 12345.6, "c": "x"}])
    lines = text.splitlines()
    assert lines[0] == "| a | b | c |" and lines[1] == "|---|---|---|"
    assert lines[2] == "| 1,234,567 | 0.123 | None |"
    assert lines[3] == "| 2 | 12,346 | x |"
    assert lab.markdown_table([{"a": 1, "b": 2}], columns=["b"]).splitlines()[2] == "| 2 |"
    with pytest.raises(ValueError):
        lab.markdown_table([])


# ----------------------------------------------------------------------------- notebook 01


def test_hop_metadata_matches_the_dynamic_sampler(graph, seeds):
    rows = lab.hop_metadata(graph, [5, 4, 3], seeds, seed=2, epoch=1, batch=3)
    mb = DynamicSampler(graph, [5, 4, 3], seed=2).sample(seeds, 1, 3)
    assert [r["hop"] for r in rows] == [1, 2, 3]
    assert [r["fanout"] for r in rows] == [3, 4, 5]                       # seeds outward
    assert [r["distinct_nodes"] for r in rows] == mb.counts.flip(0).tolist()
    assert rows[0]["frontier"] == seeds.numel()
    for this_hop, next_hop in zip(rows, rows[1:]):
        assert next_hop["frontier"] == this_hop["distinct_nodes"]
    for r in rows:
        assert r["slots"] == r["frontier"] * r["fanout"]
        assert 0 < r["sampled_edges"] <= r["slots"]
        assert r["new_nodes"] == r["distinct_nodes"] - r["frontier"] >= 0


def test_audit_samplers_counts_the_waits(graph, seeds):
    audits = lab.audit_samplers(graph, FANOUTS, seeds)
    assert audits["same_sample"]
    assert audits["envelope"]["host_syncs"] == 0 and audits["envelope"]["dynamic_shape_ops"] == 0
    assert audits["envelope"]["per_op"] == {}
    assert audits["dynamic"]["host_syncs"] == 3 * len(FANOUTS)          # mask, unique, filter per hop
    assert audits["dynamic"]["per_op"] == {"index": 2 * len(FANOUTS), "_unique2": len(FANOUTS)}
    assert "SyncAudit" in audits["dynamic"]["report"]
    # A too-small envelope truncates the sample: then it is not the same sample.
    tiny = Envelope([seeds.numel()] * len(FANOUTS))
    assert not lab.audit_samplers(graph, FANOUTS, seeds, envelope=tiny)["same_sample"]


@pytest.mark.parametrize("cls", [DynamicPipeline, EnvelopePipeline])
def test_stage_timeline_of_zg_pipelines(graph, seeds, cls):
    torch.manual_seed(0)
    pipe = cls(graph, models.SAGE(graph.feat_dim, 16, graph.num_classes, len(FANOUTS)), FANOUTS, 64)
    events = lab.stage_timeline(pipe, seeds, repeats=1)
    stages = [e["stage"] for e in events]
    assert set(stages) <= set(STAGES)
    assert stages.count("compact") == len(FANOUTS)                      # one report per hop
    assert stages[-5:] == ["gather", "forward", "loss", "backward", "step"]
    for e in events:
        assert 0 <= e["start"] <= e["end"]
        assert isinstance(e["host_syncs"], int)
    for earlier, later in zip(events, events[1:]):
        assert later["start"] >= earlier["start"] - 1e-4
    syncs = sum(e["host_syncs"] for e in events)
    compact_syncs = sum(e["host_syncs"] for e in events if e["stage"] == "compact")
    if cls is DynamicPipeline:
        assert syncs == compact_syncs == 3 * len(FANOUTS)
    else:
        assert syncs == 0


def test_stage_timeline_of_dgl(graph, seeds, dgl):
    from zg.baselines.dgl import DGLModel, DGLPipeline

    pipe = DGLPipeline(graph, DGLModel("sage", graph.feat_dim, 16, graph.num_classes, len(FANOUTS)),
                       FANOUTS, 32, nodes=seeds)
    events = lab.stage_timeline(pipe, seeds, batch=1, repeats=1)
    assert [e["stage"] for e in events] == ["sample", "gather", "forward", "loss", "backward", "step"]
    assert events[0]["host_syncs"] is None                              # C++: not visible to SyncAudit
    with pytest.raises(ValueError, match="past the end"):
        lab.stage_timeline(pipe, seeds, batch=99, repeats=1)


def test_stage_timeline_rejects_bad_arguments(graph, seeds):
    with pytest.raises(TypeError):
        lab.stage_timeline(object(), seeds)
    pipe = DynamicPipeline(graph, models.SAGE(graph.feat_dim, 8, graph.num_classes, 2), FANOUTS, 64)
    with pytest.raises(ValueError, match="repeats"):
        lab.stage_timeline(pipe, seeds, repeats=0)


# ----------------------------------------------------------------------------- notebook 02


def test_sample_counts_are_the_exact_counts_of_an_epochs_batches(graph):
    counts = lab.sample_counts(graph, FANOUTS, 64, num_batches=5, seed=3)
    assert counts.shape == (5, len(FANOUTS)) and counts.dtype == torch.int64
    nodes = graph.train_idx
    order = torch.randperm(nodes.numel(), generator=torch.Generator().manual_seed(3))
    for b in (0, 4):
        batch_seeds = nodes[order[b * 64: (b + 1) * 64]]
        exact = DynamicSampler(graph, FANOUTS, seed=3).sample(batch_seeds, 0, b).counts
        assert counts[b].tolist() == exact.tolist()
    assert bool((counts <= torch.tensor(Envelope.worst_case(graph, FANOUTS, 64).sizes)).all())
    with pytest.raises(ValueError):
        lab.sample_counts(graph, FANOUTS, 64, num_batches=0)
    with pytest.raises(ValueError, match="fewer than batch_size"):
        lab.sample_counts(graph, FANOUTS, 64, nodes=torch.arange(10))


def test_overflow_curve(graph):
    profile = Envelope.profile(graph, FANOUTS, 64, num_batches=16, seed=0)
    # Judged on the very batches it was profiled on, the maximum never overflows.
    exact = lab.overflow_curve(graph, FANOUTS, 64, margins=[0.0], quantile=1.0, profile_batches=16,
                               held_out=profile.observed, seed=0)
    assert exact["overflow_probability"] == [0.0]
    assert exact["sizes"][0] == [max(int(profile.observed[:, i].max()), 64) for i in range(len(FANOUTS))]
    curve = lab.overflow_curve(graph, FANOUTS, 64, margins=[0.0, 0.05, 0.5], quantile=0.5,
                               profile_batches=16, held_out_batches=24, seed=0)
    p, memory = curve["overflow_probability"], curve["envelope_bytes"]
    assert curve["held_out_batches"] == 24 and len(p) == len(memory) == len(curve["sizes"]) == 3
    assert p[0] > 0 and all(a >= b for a, b in zip(p, p[1:]))             # the median overflows often
    assert all(a <= b for a, b in zip(memory, memory[1:]))
    assert curve["oracle_mean_bytes"] <= curve["oracle_max_bytes"] <= curve["worst_case_bytes"]
    assert curve["worst_case_sizes"] == Envelope.worst_case(graph, FANOUTS, 64).sizes
    with pytest.raises(ValueError, match="held_out"):
        lab.overflow_curve(graph, FANOUTS, 64, held_out=torch.zeros(3, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match="margins"):
        lab.overflow_curve(graph, FANOUTS, 64, margins=[])


# ----------------------------------------------------------------------------- notebook 03


def test_static_addresses_cover_the_step_and_stay_put(graph):
    eng = engine(graph)
    eng.train_epoch(max_batches=1)
    before = lab.static_addresses(eng)
    for key in ("engine.epoch_seeds", "engine.counter", "guard.overflowed", "optim.lr.0", "sampler.first", "graph.x"):
        assert key in before
    assert any(k.startswith("param.") for k in before) and any(k.startswith("grad.") for k in before)
    assert any(k.startswith("optim.") and k.endswith(".exp_avg") for k in before)
    eng.train_epoch(max_batches=3)
    assert lab.static_addresses(eng) == before


def test_parameter_comparisons():
    a = [torch.tensor([1.0, -0.0]), torch.zeros(2, 2)]
    b = [t.clone() for t in a]
    assert lab.bitwise_equal(a, b) and lab.max_abs_difference(a, b) == 0.0
    c = [torch.tensor([1.0, 0.0]), torch.zeros(2, 2)]                  # -0.0 == 0.0, but not bitwise
    assert torch.equal(a[0], c[0]) and not lab.bitwise_equal(a, c)
    d = [torch.tensor([1.5, -0.0]), torch.zeros(2, 2)]
    assert lab.max_abs_difference(a, d) == 0.5
    assert not lab.bitwise_equal(a, a[:1])
    with pytest.raises(ValueError):
        lab.max_abs_difference(a, a[:1])
    model = torch.nn.Linear(3, 2)
    copies = lab.parameters(model)
    assert lab.bitwise_equal(copies, list(model.parameters()))
    with torch.no_grad():
        model.weight.add_(1.0)
    assert not lab.bitwise_equal(copies, lab.parameters(model))


def test_execution_trace_shows_skipped_and_rerun_steps(graph):
    eng = engine(graph, Envelope([64] * len(FANOUTS)), trace=True, audit_iterations=0)
    stats = eng.train_epoch()
    rows = lab.execution_trace(eng)
    assert [r["order"] for r in rows] == list(range(len(rows))) and len(rows) == stats.replays
    skipped = [r for r in rows if not r["applied"]]
    applied = [(r["epoch"], r["batch"]) for r in rows if r["applied"]]
    assert skipped and stats.overflows >= 1
    assert applied == [(0, b) for b in range(len(eng.batches(0)))]    # each batch applied once, in order
    with pytest.raises(ValueError, match="trace=True"):
        lab.execution_trace(engine(graph))


# ----------------------------------------------------------------------------- notebook 04


def test_profile_pipelines_without_dgl(graph):
    rows = lab.profile_pipelines(graph, FANOUTS, 64, hidden_dim=16, iterations=2, warmup=1, repeats=2,
                                 include_dgl=False)
    assert [r["pipeline"] for r in rows] == ["zg dynamic", "zg envelope"]
    for r in rows:
        assert r["batch_size"] == 64 and r["step_seconds"] > 0 and r["repeats"] == 2
        assert r["seeds_per_second"] == pytest.approx(64 / r["step_seconds"])
        assert r["step_seconds_range"][0] <= r["step_seconds"] <= r["step_seconds_range"][1]
        assert set(r["stage_seconds"]) == set(STAGES)
    dynamic, envelope = rows
    assert dynamic["host_syncs_per_iteration"] == 3 * len(FANOUTS) and dynamic["envelope_sizes"] is None
    assert envelope["host_syncs_per_iteration"] == 0 and len(envelope["envelope_sizes"]) == len(FANOUTS)
    with pytest.raises(ValueError, match="repeats"):
        lab.profile_pipelines(graph, FANOUTS, 64, repeats=0)


def test_profile_pipelines_with_dgl(graph, dgl):
    rows = lab.profile_pipelines(graph, FANOUTS, 64, hidden_dim=16, iterations=2, warmup=1, repeats=1)
    assert [r["pipeline"] for r in rows] == ["DGL", "zg dynamic", "zg envelope"]
    assert rows[0]["host_syncs_per_iteration"] is None and rows[0]["step_seconds"] > 0
    assert rows[0]["stage_seconds"]["sample"] > 0 and rows[0]["stage_seconds"]["compact"] == 0


def test_gpu_results(tmp_path):
    assert lab.GPU_RESULTS.name == "gpu_check_cuda.json" and lab.GPU_RESULTS.parent.name == "results"
    assert lab.gpu_results(tmp_path / "missing.json") is None
    cpu = tmp_path / "cpu.json"
    cpu.write_text(json.dumps({"machine": {"cuda": None}, "rows": []}))
    with pytest.raises(ValueError, match="without a CUDA device"):
        lab.gpu_results(cpu)
    (tmp_path / "odd.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="machine"):
        lab.gpu_results(tmp_path / "odd.json")
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps({"machine": {"cuda": "NVIDIA H200"}, "rows": [
        {"graph": "cora", "batch_size": 256, "variant": "envelope_captured", "seconds_per_iteration": 0.002,
         "gpu_execution_fraction": 0.97, "host_syncs_per_iteration": 0, "peak_bytes": 123}]}))
    results = lab.gpu_results(gpu)
    assert results["path"] == str(gpu)
    (row,) = lab.gpu_result_rows(results)
    assert row["ms_per_iteration"] == pytest.approx(2.0) and row["variant"] == "envelope_captured"
    assert row["gpu_execution_fraction"] == 0.97
