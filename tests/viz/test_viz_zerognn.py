"""zg.viz.zerognn: every ZeroGNN figure builder returns the figure it promises."""

import pytest
import torch


def axis_title(axis):
    return axis.title.text


def full_title(fig):
    """The title and the subtitle as drawn, their lines joined by spaces."""
    title = fig.layout.title
    return " ".join(t for t in (title.text, title.subtitle.text) if t).replace("<br>", " ")


def test_host_syncs(viz):
    fig = viz.host_syncs({"DGL": None, "zg dynamic": 9, "zg envelope": 0}, subtitle="machine X")
    (bar,) = fig.data
    assert list(bar.x) == ["DGL", "zg dynamic", "zg envelope"] and list(bar.y) == [0, 9, 0]
    assert list(bar.text) == ["not visible", "9", "0"]
    assert "Host syncs" in full_title(fig) and "machine X" in full_title(fig)
    assert axis_title(fig.layout.yaxis) == "host syncs per iteration"
    with pytest.raises(ValueError):
        viz.host_syncs({})


def test_step_times(viz):
    fig = viz.step_times(
        {"zg envelope (static)": 0.002, "zg envelope (compiled)": 0.0015}, subtitle="machine X"
    )
    (bar,) = fig.data
    assert list(bar.x) == ["zg envelope (static)", "zg envelope (compiled)"]
    assert list(bar.y) == pytest.approx([2.0, 1.5]) and list(bar.text) == ["2 ms", "1.5 ms"]
    assert len(set(bar.marker.color)) == 2  # each run its own colour
    assert "Time per iteration" in full_title(fig) and "machine X" in full_title(fig)
    assert axis_title(fig.layout.yaxis) == "ms per iteration"
    with pytest.raises(ValueError):
        viz.step_times({})


def test_hop_metadata(viz):
    rows = [
        {"hop": 1, "fanout": 5, "frontier": 10, "sampled_edges": 40, "distinct_nodes": 35},
        {"hop": 2, "fanout": 3, "frontier": 35, "sampled_edges": 90, "distinct_nodes": 80},
    ]
    fig = viz.hop_metadata(rows)
    assert [t.name.split(" ")[0] for t in fig.data] == ["frontier", "sampled", "distinct"]
    assert list(fig.data[2].y) == [35, 80] and list(fig.data[0].x) == [
        "hop 1 (fanout 5)",
        "hop 2 (fanout 3)",
    ]
    assert axis_title(fig.layout.xaxis) == "hop (from the seeds outward)"
    with pytest.raises(ValueError, match="distinct_nodes"):
        viz.hop_metadata([{"hop": 1, "frontier": 1, "sampled_edges": 1}])


def test_sync_ops(viz):
    fig = viz.sync_ops({"zg dynamic": {"index": 6, "_unique2": 3}, "zg envelope": {}})
    assert len(fig.data) == 2 and list(fig.data[0].x) == ["_unique2", "index"]
    assert list(fig.data[0].y) == [3, 6] and list(fig.data[1].y) == [0, 0]
    assert fig.data[0].name == "zg dynamic (9 in total)" and fig.layout.barmode == "group"
    assert axis_title(fig.layout.yaxis) == "host syncs"


def test_stage_timeline(viz):
    events = {
        "zg dynamic": [
            {"stage": "sample", "start": 0.0, "end": 0.001, "host_syncs": 0},
            {"stage": "compact", "start": 0.001, "end": 0.003, "host_syncs": 3},
        ],
        "DGL": [{"stage": "sample", "start": 0.0, "end": 0.002, "host_syncs": None}],
    }
    fig = viz.stage_timeline(events)
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend == ["sample", "compact"]  # in pipeline order
    bars = [t for t in fig.data if t.showlegend is False]
    assert len(bars) == 3
    synced = [t for t in bars if t.marker.line.color == viz.common.NEUTRAL]
    assert (
        len(synced) == 1
        and synced[0].x[0] == pytest.approx(2.0)
        and synced[0].base[0] == pytest.approx(1.0)
    )
    assert list(fig.layout.yaxis.categoryarray) == ["zg dynamic", "DGL"]
    assert axis_title(fig.layout.xaxis) == "time since the iteration started (ms)"


def test_count_distributions(viz):
    counts = torch.tensor([[100, 20], [110, 22], [105, 21]])
    fig = viz.count_distributions(
        counts, {"profiled": [115, 23], "worst case": [1000, 24]}, fanouts=[5, 2]
    )
    hists = [t for t in fig.data if t.type == "histogram"]
    assert len(hists) == 2 and list(hists[0].x) == [100, 110, 105]
    assert [t.name for t in fig.data if t.type == "scatter"] == [
        "profiled envelope",
        "worst case envelope",
    ]
    # 1000 is far off block 0's data: named in the axis title, not drawn.
    assert "worst case: 1,000" in fig.layout.xaxis.title.text
    assert "off this scale" not in fig.layout.xaxis2.title.text
    assert len(fig.layout.shapes) == 3
    with pytest.raises(ValueError, match="entries"):
        viz.count_distributions(counts, {"profiled": [1]})


def test_memory_per_hop(viz):
    block = {"index": 1, "features": 2, "activations": 3, "total": 2**20}
    memory = {
        "worst_case": [block, block],
        "envelope": [block],
        "oracle_mean": [block],
        "totals": {},
    }
    fig = viz.memory_per_hop(memory)
    assert [t.name.split(":")[0] for t in fig.data] == [
        "worst case",
        "profiled envelope",
        "oracle (mean batch)",
    ]
    assert fig.data[0].name.endswith("2.0 MiB") and list(fig.data[0].y) == [1.0, 1.0]
    assert axis_title(fig.layout.yaxis) == "MiB"
    with pytest.raises(ValueError):
        viz.memory_per_hop({"totals": {}})


def test_overflow_vs_margin(viz):
    curve = {
        "margins": [0.0, 0.1],
        "quantile": 0.9,
        "overflow_probability": [0.25, 0.0],
        "envelope_bytes": [100, 110],
        "oracle_mean_bytes": 100,
        "worst_case_bytes": 400,
    }
    fig = viz.overflow_vs_margin([curve, dict(curve, quantile=0.5)])
    assert len(fig.data) == 4
    assert list(fig.data[0].y) == [25.0, 0.0] and list(fig.data[1].y) == [1.0, 1.1]
    assert list(fig.data[0].x) == [0.0, 10.0]
    assert "4.00x" in fig.layout.annotations[1].text  # the worst case, named
    assert viz.overflow_vs_margin(curve).data[0].name == "quantile 0.9"
    with pytest.raises(ValueError):
        viz.overflow_vs_margin([])


def test_execution_trace(viz):
    rows = [
        {"order": 0, "epoch": 0, "batch": 0, "applied": False},
        {"order": 1, "epoch": 0, "batch": 1, "applied": False},
        {"order": 2, "epoch": 0, "batch": 0, "applied": True},
    ]
    fig = viz.execution_trace({"tiny": rows})
    assert [t.name for t in fig.data] == ["tiny: applied (1)", "tiny: skipped, re-run later (2)"]
    assert fig.data[1].marker.symbol == "circle-open" and list(fig.data[1].x) == [0, 1]
    assert axis_title(fig.layout.yaxis) == "batch index in its epoch"


def test_stage_breakdown_and_batch_scaling(viz):
    rows = [
        {
            "pipeline": p,
            "batch_size": b,
            "step_seconds": 0.01 * b / 64,
            "stage_seconds": {"sample": 0.002, "forward": 0.004},
            "seeds_per_second": 6400.0 * (1 + i),
        }
        for b in (64, 256)
        for i, p in enumerate(("DGL", "zg envelope"))
    ]
    fig = viz.stage_breakdown(rows)
    # one panel per batch size, one horizontal bar per pipeline: names read level
    assert [a.text for a in fig.layout.annotations] == ["batch 64", "batch 256"]
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend == ["sample", "forward", "whole step (timed separately)"]
    assert fig.layout.barmode == "stack" and axis_title(fig.layout.xaxis2) == "ms per iteration"
    for row in (1, 2):
        sample, forward, step = fig.select_traces(row=row, col=1)
        assert sample.orientation == "h" and list(sample.y) == ["DGL", "zg envelope"]
        assert list(sample.x) == [2.0, 2.0] and list(forward.x) == [4.0, 4.0]
        assert list(step.x) == pytest.approx([10.0 * (1 if row == 1 else 4)] * 2)
    scaling = viz.batch_scaling(rows)
    assert [t.name for t in scaling.data] == ["DGL", "zg envelope"]
    assert list(scaling.data[1].x) == [64, 256] and scaling.layout.xaxis.type == "log"
    assert axis_title(scaling.layout.yaxis) == "training seeds per second"
    assert (
        axis_title(viz.batch_scaling(rows, metric="step_seconds").layout.yaxis)
        == "seconds per iteration"
    )


def test_gpu_results_figure(viz):
    rows = [
        {
            "graph": "cora",
            "batch_size": 256,
            "variant": v,
            "ms_per_iteration": ms,
            "gpu_execution_fraction": f,
        }
        for v, ms, f in (("dynamic", 4.0, 0.3), ("envelope_captured", 1.0, 0.95))
    ]
    fig = viz.gpu_results(rows, label="NVIDIA H200, measured 2026-01-01")
    assert "not measured on this machine" in full_title(fig) and "H200" in full_title(fig)
    assert len(fig.data) == 4 and list(fig.data[3].y) == [0.95]
    with pytest.raises(ValueError, match="label"):
        viz.gpu_results(rows, label="")


def _growth_rows():
    """Two pipelines on a size sweep (batch 1024) and a batch sweep (on 400 nodes)."""
    from zg.step import STAGES

    rows = []
    for name, factor in (("DGL", 1.0), ("zg envelope", 2.0)):
        for n, b in ((100, 1024), (400, 1024), (400, 256), (400, 4096)):
            seconds = factor * n / 100 * b / 1024
            row = {
                "pipeline": name,
                "num_nodes": n,
                "batch_size": b,
                "seconds_per_batch": seconds,
                "seconds_per_batch_std": 0.1 * seconds,
                "projected_epoch_seconds": 10 * seconds,
            }
            row.update({s: seconds / len(STAGES) for s in STAGES})
            row["loss"] = 0.0  # a stage that took nothing is not drawn
            rows.append(row)
    return rows


def test_cost_growth(viz):
    from zg.step import STAGES

    rows = _growth_rows()
    fig = viz.cost_growth(rows, size_batch=1024, batch_graph=400, subtitle="machine X")
    per_pipeline = 2 * (1 + len(STAGES))  # two panels, total + every stage
    assert len(fig.data) == 2 * per_pipeline
    totals = [t for t in fig.data if t.name in ("DGL", "zg envelope")]
    assert len(totals) == 4
    size_dgl = next(t for t in totals if t.name == "DGL" and t.xaxis == "x")
    assert list(size_dgl.x) == [100, 400] and list(size_dgl.y) == [1.0, 4.0]
    batch_env = next(t for t in totals if t.name == "zg envelope" and t.xaxis == "x2")
    assert list(batch_env.x) == [256, 1024, 4096]
    assert list(batch_env.y) == [2.0, 8.0, 32.0]
    assert list(size_dgl.error_y.array) == [0.1, 0.4]
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis2.type == "log" and fig.layout.yaxis2.type == "log"
    assert "machine X" in full_title(fig)
    # The dropdown: every total at first; one pipeline with its stages per other button.
    buttons = fig.layout.updatemenus[0].buttons
    assert [b.label for b in buttons] == ["all pipelines", "DGL, by stage", "zg envelope, by stage"]
    shown = buttons[0].args[0]["visible"]
    assert [t.name for t, v in zip(fig.data, shown) if v] == [
        "DGL",
        "DGL",
        "zg envelope",
        "zg envelope",
    ]
    assert [bool(t.visible is not False) for t in fig.data] == shown
    dgl_only = buttons[1].args[0]["visible"]
    assert all(t.name.startswith("DGL") for t, v in zip(fig.data, dgl_only) if v)
    assert sum(dgl_only) == per_pipeline
    loss = next(t for t in fig.data if t.name == "DGL: loss")
    assert all(v is None for v in loss.y)  # zero: off the log axis, not at 0
    epoch = viz.cost_growth(
        rows, size_batch=1024, batch_graph=400, metric="projected_epoch_seconds"
    )
    sample = next(t for t in epoch.data if t.name == "DGL: sample" and t.xaxis == "x")
    assert list(sample.y) == pytest.approx([10 / len(STAGES), 40 / len(STAGES)])
    assert epoch.data[0].error_y.array is None
    assert "projected" in epoch.layout.yaxis.title.text


def test_cost_growth_bad_input(viz):
    rows = _growth_rows()
    with pytest.raises(ValueError, match="metric"):
        viz.cost_growth(rows, size_batch=1024, batch_graph=400, metric="seconds")
    with pytest.raises(ValueError, match="size_batch"):
        viz.cost_growth(rows, size_batch=512, batch_graph=400)
    with pytest.raises(ValueError, match="batch_graph"):
        viz.cost_growth(rows, size_batch=1024, batch_graph=7)
    with pytest.raises(ValueError, match="sample"):
        viz.cost_growth(
            [{k: v for k, v in rows[0].items() if k != "sample"}], size_batch=1024, batch_graph=100
        )
    with pytest.raises(ValueError, match="empty"):
        viz.cost_growth([], size_batch=1024, batch_graph=400)


def test_gpu_timeline(viz):
    rows = [
        {
            "graph": "cora",
            "batch_size": 256,
            "variant": "dynamic",
            "ms_per_iteration": 10.0,
            "gpu_execution_fraction": 0.25,
        },
        {
            "graph": "cora",
            "batch_size": 256,
            "variant": "captured",
            "ms_per_iteration": 4.0,
            "gpu_execution_fraction": 1.0,
        },
    ]
    fig = viz.gpu_timeline(rows, label="GPU X, 2026-01-01", iterations=3)
    busy, idle = fig.data
    assert busy.name == "GPU busy" and idle.name.startswith("GPU idle")
    # dynamic: 3 iterations of 10 ms, busy 2.5 ms then 7.5 ms idle in each
    assert list(busy.base[:3]) == [0.0, 10.0, 20.0] and list(busy.x[:3]) == [2.5, 2.5, 2.5]
    assert list(idle.base[:3]) == [2.5, 12.5, 22.5] and list(idle.x[:3]) == [7.5, 7.5, 7.5]
    assert list(idle.x[3:]) == [0.0, 0.0, 0.0] and list(busy.base[3:]) == [0.0, 4.0, 8.0]
    assert busy.y[0] == "cora · batch 256 · dynamic" and "GPU X" in full_title(fig)
    with pytest.raises(ValueError, match="no GPU execution fraction"):
        viz.gpu_timeline([{**rows[0], "gpu_execution_fraction": None}], label="cpu run")
    with pytest.raises(ValueError, match="label"):
        viz.gpu_timeline(rows, label="")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        viz.gpu_timeline([{**rows[0], "gpu_execution_fraction": 1.5}], label="x")
    with pytest.raises(ValueError, match="iterations"):
        viz.gpu_timeline(rows, label="x", iterations=0)


def test_gpu_results_title_can_say_it_is_a_cpu_run(viz):
    rows = [
        {
            "graph": "cora",
            "batch_size": 256,
            "variant": "dynamic",
            "ms_per_iteration": 10.0,
            "gpu_execution_fraction": None,
        }
    ]
    assert "Committed GPU measurements" in viz.gpu_results(rows, label="GPU X").layout.title.text
    fig = viz.gpu_results(rows, label="CPU RUN", title="A CPU run of the check")
    assert fig.layout.title.text.startswith("A CPU run of the check") and "CPU RUN" in full_title(
        fig
    )


def _floor_rows():
    def sp(mean, std=0.001):
        if std is None:  # one seed
            return {"mean": mean, "std": None, "n": 1, "values": [mean]}
        return {"mean": mean, "std": std, "n": 3, "values": [mean - std, mean, mean + std]}

    parts = {"gather": 0.001, "forward": 0.004, "loss": 0.0001, "backward": 0.003, "step": 0.0005}
    return [
        {
            "pipeline": "floor",
            "key": "floor",
            "seconds": sp(0.009),
            "parts": {k: sp(v) for k, v in parts.items()},
        },
        {
            "pipeline": "DGL",
            "key": "dgl",
            "seconds": sp(0.0085),
            "overhead_seconds": sp(-0.001),
            "ratio_to_floor": sp(0.89, 0.02),
        },
        {
            "pipeline": "zg envelope",
            "key": "zg_envelope",
            "seconds": sp(0.010),
            "overhead_seconds": sp(0.001),
            "ratio_to_floor": sp(1.11, None),
        },
        {"pipeline": "zg captured", "key": "zg_captured", "skipped": "CUDA only"},
    ]


def test_floor_split(viz):
    """Drawn: each pipeline's bar is the floor (1) plus its overhead, in multiples of the floor,
    and its top is the number written on it (the mean of the per-seed paired ratios), even where
    that differs from the ratio of mean seconds (here DGL: 8.5 / 9 ms = 0.94, drawn 0.89)."""
    fig = viz.floor_split(_floor_rows(), subtitle="machine X")
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names[:5] == [f"floor: {s}" for s in ("gather", "forward", "loss", "backward", "step")]
    assert names[5:] == [
        "floor, timed unclocked",
        "floor (same batches)",
        "DGL: overhead",
        "zg envelope: overhead",
    ]
    assert fig.layout.barmode == "relative"
    assert axis_title(fig.layout.yaxis) == "multiple of the floor"
    assert list(fig.data[1].y) == [pytest.approx(4.0 / 9.0)]  # forward: its share of the floor
    assert list(fig.data[5].y) == [pytest.approx(1.0)]
    assert (
        list(fig.data[6].x) == ["DGL", "zg envelope"]
        and list(fig.data[6].y) == [pytest.approx(1.0)] * 2
    )
    assert list(fig.data[7].y) == [pytest.approx(-0.11)]  # faster than the floor: below zero
    assert fig.data[7].text == ("0.89x ± 0.02 the floor",) and fig.data[8].text == (
        "1.11x the floor",
    )
    assert fig.data[7].error_y.array == (pytest.approx(0.02),)
    assert fig.data[8].error_y.array is None  # one seed: no spread drawn
    # as drawn, every pipeline's stacked bar ends at the number written on it
    (labels,) = [t for t in fig.data if t.type == "scatter" and t.mode == "text"]
    for name, text in zip(labels.x, labels.text):
        stacked = [t.y[list(t.x).index(name)] for t in fig.data if t.type == "bar" and name in t.x]
        ups, downs = sum(v for v in stacked if v > 0), sum(v for v in stacked if v < 0)
        top = ups + downs if downs else ups
        assert float(text.split("x")[0]) == pytest.approx(top, abs=0.005), (name, text, stacked)
    # the labels are drawn above each bar and its error bar, not across the error bar
    assert list(labels.text) == ["0.89x ± 0.02 the floor", "1.11x the floor"]
    assert labels.y[0] >= 1.0 + 0.02 and labels.y[1] >= 1.11
    # the skipped row keeps its place, says why, and draws no bar
    assert list(fig.layout.xaxis.categoryarray) == ["floor", "DGL", "zg envelope", "zg captured"]
    assert [a.text for a in fig.layout.annotations] == ["not measured here:<br>CUDA only"]
    assert not any("zg captured" in (t.x or ()) for t in fig.data)
    assert "machine X" in full_title(fig)
    with pytest.raises(ValueError, match="floor row"):
        viz.floor_split(_floor_rows()[1:])
    with pytest.raises(ValueError, match="ratio_to_floor"):
        viz.floor_split([_floor_rows()[0], {"pipeline": "DGL", "seconds": {}}])
