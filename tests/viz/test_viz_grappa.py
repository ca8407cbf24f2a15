"""zg.viz.grappa: every Grappa figure builder returns the figure it promises."""

import pytest
import torch


def axis_title(axis):
    return axis.title.text


def full_title(fig):
    """The title and the subtitle as drawn, their lines joined by spaces."""
    title = fig.layout.title
    return " ".join(t for t in (title.text, title.subtitle.text) if t).replace("<br>", " ")


def test_grappa_figures(viz):
    fig = viz.coverage_histogram(torch.tensor([0.2, 0.4, 1.0]), hops=2)
    assert fig.data[0].type == "histogram" and axis_title(fig.layout.xaxis) == "2-hop coverage"
    assert "mean 0.53" in fig.layout.annotations[0].text
    fig = viz.bytes_by_kind({"gradients": [2048, 2048], "features": [0, 0]})
    assert [t.name for t in fig.data] == ["gradients: 4.0 KiB", "features: 0 B"]
    assert list(fig.data[0].x) == ["worker 0", "worker 1"] and fig.layout.barmode == "stack"


def test_coverage_distributions(viz):
    fig = viz.coverage_distributions(
        {"random partition": [0.1, 0.2, 0.3], "metis partition": [0.9, 1.0]},
        hops=2,
        subtitle="here",
    )
    assert [t.type for t in fig.data] == ["histogram", "histogram"]
    assert "mean 0.20" in fig.data[0].name and "mean 0.95" in fig.data[1].name
    assert fig.data[0].marker.color != fig.data[1].marker.color
    assert len(fig.layout.shapes) == 2 and "2-hop" in full_title(fig) and "here" in full_title(fig)
    with pytest.raises(ValueError):
        viz.coverage_distributions({}, hops=2)
    with pytest.raises(ValueError, match="empty"):
        viz.coverage_distributions({"a": []}, hops=2)


def test_partition_sweep_figure(viz):
    rows = [
        {"method": m, "num_parts": p, "edge_cut_fraction": c, "coverage_2": v}
        for m, p, c, v in [
            ("random", 2, 0.5, 0.3),
            ("random", 4, 0.75, 0.1),
            ("metis", 2, 0.05, 0.9),
            ("metis", 4, 0.09, 0.85),
        ]
    ]
    fig = viz.partition_sweep(rows, hops=2)
    names = [t.name for t in fig.data]
    assert names == ["random", "random", "metis", "metis", "(P - 1) / P"]
    assert list(fig.data[0].y) == [0.5, 0.75] and list(fig.data[3].y) == [0.9, 0.85]
    assert list(fig.data[-1].y) == [0.5, 0.75]
    with pytest.raises(ValueError, match="coverage_3"):
        viz.partition_sweep(rows, hops=3)


def traffic(method, batch, feature, gradient):
    return {
        "method": method,
        "batch_size": batch,
        "feature_bytes": feature,
        "gradient_bytes": gradient,
    }


def test_traffic_vs_batch(viz):
    rows = [
        traffic("random", 16, 100, 400),
        traffic("random", 64, 90, 100),
        traffic("metis", 16, 30, 400),
        traffic("metis", 64, 25, 100),
    ]
    fig = viz.traffic_vs_batch(rows)
    assert len(fig.data) == 3
    assert list(fig.data[0].y) == [100, 90] and list(fig.data[1].y) == [30, 25]
    assert list(fig.data[2].x) == [16, 64] and list(fig.data[2].y) == [400, 100]
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis.type == "log"


def test_partition_view(viz):
    fig = viz.partition_view(
        {"random partition": [0.2, 0.4], "metis partition": [0.9]},
        [traffic("random", 32, 300, 200), traffic("metis", 32, 80, 200)],
        hops=2,
    )
    histograms = [t for t in fig.data if t.type == "histogram"]
    (bars,) = [t for t in fig.data if t.type == "bar"]
    assert len(histograms) == 2
    assert list(bars.y) == [300, 80, 200] and "Grappa" in bars.x[-1]
    with pytest.raises(ValueError):
        viz.partition_view({"a": [0.5]}, [], hops=2)


def test_bytes_per_epoch_by_run(viz):
    rows = [
        {
            "run": "isolated",
            "gradients_per_epoch": 10.0,
            "scalars_per_epoch": 0.0,
            "features_per_epoch": 0.0,
            "parameters_per_epoch": 0.0,
        },
        {
            "run": "feature_fetch",
            "gradients_per_epoch": 10.0,
            "scalars_per_epoch": 0.0,
            "features_per_epoch": 5.0,
            "parameters_per_epoch": 0.0,
        },
    ]
    fig = viz.bytes_per_epoch_by_run(rows)
    bars = [t for t in fig.data if t.type == "bar"]
    assert [t.name for t in bars] == ["gradients", "scalars", "features", "parameters"]
    assert list(bars[2].y) == [0.0, 5.0] and fig.layout.barmode == "stack"
    (totals,) = [t for t in fig.data if t.type == "scatter"]
    assert list(totals.y) == [10.0, 15.0]
    with pytest.raises(ValueError, match="scalars_per_epoch"):
        viz.bytes_per_epoch_by_run([{"run": "x", "gradients_per_epoch": 1}])


def category_levels(x):
    """How many category levels plotly is given: a list of lists is one level per list."""
    return len(x) if x and isinstance(x[0], (list, tuple)) else 1


ESTIMATORS = ["mean", "node", "batch", "shrink", "uniform", "reference"]


def error_row(partition, weighting, estimator, k):
    return {
        "partition": partition,
        "weighting": weighting,
        "estimator": estimator,
        "bias_squared": 0.01 * (k + 1),
        "variance": 0.001 * (k + 1),
    }


def test_estimator_errors_draws_each_estimator(viz):
    """What plotly draws: one panel per (partition, weighting), in each one bar per estimator
    (bias² under variance) on a one-level category axis, so no estimator is stacked onto
    another; every estimator is a tick label of every panel."""
    partitions, weightings = ["random", "metis"], ["inverse", "coverage"]
    rows, k = [], 0
    for p in partitions:
        for w in weightings:
            for e in ESTIMATORS:
                rows.append(error_row(p, w, e, k))
                k += 1
    fig = viz.estimator_errors(rows, subtitle="s")
    assert fig.layout.barmode == "stack"
    titles = [a.text for a in fig.layout.annotations]
    assert titles == [f"{p} partition, {w} weighting" for p in partitions for w in weightings]
    bars = [t for t in fig.data if t.type == "bar"]
    assert all(category_levels(t.x) <= 2 for t in fig.data)  # plotly draws two levels at most
    assert all(category_levels(t.x) == 1 for t in bars)
    for i, p in enumerate(partitions, start=1):
        for j, w in enumerate(weightings, start=1):
            panel = list(fig.select_traces(selector={"type": "bar"}, row=i, col=j))
            assert [t.name for t in panel] == ["bias²", "variance"]
            for t in panel:
                # one bar per estimator: each estimator once on the axis, nothing else there
                assert list(t.x) == ESTIMATORS
                axis = fig.layout[t.xaxis.replace("x", "xaxis")]
                assert axis.type in (None, "category") and axis.visible is not False
            expected = [r for r in rows if (r["partition"], r["weighting"]) == (p, w)]
            assert list(panel[0].y) == [r["bias_squared"] for r in expected]
            assert list(panel[1].y) == [r["variance"] for r in expected]
            assert all(y > 0 for t in panel for y in t.y)  # every bar has a height to see
            (totals,) = fig.select_traces(selector={"type": "scatter"}, row=i, col=j)
            assert list(totals.text) == [
                f"{r['bias_squared'] + r['variance']:.2g}" for r in expected
            ]
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert legend == ["bias²", "variance"]  # each once, not once per panel
    # the panels of one partition share a y axis (comparable by height), and it fits the bars
    for i in (1, 2):
        left, right = (fig.get_subplot(i, j).yaxis for j in (1, 2))
        assert right.matches == left.plotly_name.replace("axis", "")
        assert left.range[1] > max(
            r["bias_squared"] + r["variance"] for r in rows[12 * (i - 1) : 12 * i]
        )
    assert "s" == fig.layout.title.subtitle.text
    # without a partition entry: one row of panels, one per weighting
    fig = viz.estimator_errors(
        [{k: v for k, v in r.items() if k != "partition"} for r in rows[:12]]
    )
    assert [a.text for a in fig.layout.annotations] == ["inverse weighting", "coverage weighting"]
    assert all(list(t.x) == ESTIMATORS for t in fig.data)
    with pytest.raises(ValueError, match="twice"):
        viz.estimator_errors(rows + rows[:1])
    with pytest.raises(ValueError, match="variance"):
        viz.estimator_errors([{"weighting": "inverse", "estimator": "mean", "bias_squared": 1.0}])


def test_shrink_curve_marks_auto_and_chosen(viz):
    sweep = {
        "lambdas": [0.0, 0.5, 1.0],
        "bias": [0.2, 0.1, 0.3],
        "variance": [0.01, 0.02, 0.03],
        "relative_mse": [0.05, 0.03, 0.12],
        "auto_lambda": [0.4, 0.6],
    }
    fig = viz.shrink_curve(sweep, chosen={"lambda": 0.5, "relative_mse": 0.03})
    names = [t.name for t in fig.data]
    assert names[:3] == ["bias²", "variance", "relative MSE"]
    assert list(fig.data[0].y) == pytest.approx([0.04, 0.01, 0.09])
    assert list(fig.data[3].x) == [0.4, 0.6] and list(fig.data[4].y) == [0.03]
    assert len(viz.shrink_curve({**sweep, "auto_lambda": []}).data) == 3
    with pytest.raises(ValueError, match="relative_mse"):
        viz.shrink_curve({"lambdas": [0], "bias": [0], "variance": [0]})


def test_accuracy_vs_bytes(viz):
    rows = [
        {"run": "a", "bytes": 1e6, "accuracy": 0.7},
        {"run": "b", "bytes": 1e7, "accuracy": 0.75, "counted_bytes": 5e6},
    ]
    fig = viz.accuracy_vs_bytes(rows)
    assert fig.layout.xaxis.type == "log"
    assert (
        len(fig.data) == 3
        and list(fig.data[2].x) == [1e7, 1.5e7]
        and fig.data[2].line.dash == "dot"
    )
    with pytest.raises(ValueError, match="rows"):
        viz.accuracy_vs_bytes([])


def test_rmat_scaling_and_projection_figures(viz):
    rows = [
        {
            "nodes": n,
            "feature_bytes_per_iteration": 10 * n,
            "gradient_bytes_per_iteration": 500,
            "edge_cut_fraction": 0.5,
            "mean_coverage": 0.4,
        }
        for n in (2048, 1024)
    ]
    fig = viz.rmat_scaling(rows)
    assert len(fig.data) == 4 and list(fig.data[0].x) == [1024, 2048]  # sorted by size
    proj = [
        {"design": d, "link": "1GbE", "compute_seconds": 3600.0, "link_seconds": s}
        for d, s in (("grappa", 360.0), ("feature fetching", 7200.0))
    ]
    fig = viz.epoch_projection(proj, title="Epoch: projection (link model), not a measurement")
    assert fig.layout.barmode == "stack" and list(fig.data[1].y) == pytest.approx([0.1, 2.0])
    with pytest.raises(ValueError, match="projection"):
        viz.epoch_projection(proj, title="Epoch time")


def test_variant_summary_figure(require):
    require("plotly")
    import zg.viz

    rows = [
        {
            "variant": "a",
            "seconds_per_epoch": 0.5,
            "bytes_per_epoch_per_worker": 2048.0,
            "test_acc": 0.7,
        },
        {
            "variant": "b",
            "seconds_per_epoch": 0.25,
            "bytes_per_epoch_per_worker": 4096.0,
            "test_acc": 0.6,
        },
    ]
    fig = zg.viz.variant_summary(rows, subtitle="test machine")
    assert len(fig.data) == 3 and all(list(t.x) == ["a", "b"] for t in fig.data)
    assert list(fig.data[1].y) == [2048.0, 4096.0] and fig.data[1].text[0] == "2.0 KiB"
    assert "test machine" in full_title(fig)
    with pytest.raises(ValueError, match="seconds_per_epoch"):
        zg.viz.variant_summary([{"variant": "a"}])


def test_epoch_time_vs_workers(viz):
    rows = [
        {"run": "grappa", "workers": 2, "seconds_mean": 1.0, "seconds_std": 0.1},
        {"run": "grappa", "workers": 4, "seconds_mean": 0.6, "seconds_std": 0.05},
        {"run": "single", "workers": 1, "seconds_mean": 1.5},
    ]
    fig = viz.epoch_time_vs_workers(list(reversed(rows)), subtitle="bench X")
    assert [t.name for t in fig.data] == ["single", "grappa"]
    assert list(fig.data[1].x) == [2, 4] and list(fig.data[1].y) == [1.0, 0.6]  # sorted by P
    assert list(fig.data[1].error_y.array) == [0.1, 0.05] and fig.data[0].error_y.array is None
    assert "bench X" in full_title(fig) and axis_title(fig.layout.yaxis) == "seconds per epoch"
    with pytest.raises(ValueError, match="empty"):
        viz.epoch_time_vs_workers([])
    with pytest.raises(ValueError, match="seconds_mean"):
        viz.epoch_time_vs_workers([{"run": "a", "workers": 2}])


def test_accuracy_vs_depth(viz):
    rows = [
        {"trainer": t, "layers": L, "mean": m, "std": s, "seeds": 3}
        for t, L, m, s in [
            ("single", 2, 0.8, 0.01),
            ("single", 3, 0.79, 0.02),
            ("single", 4, 0.78, 0.0),
            ("grappa", 2, 0.75, 0.02),
            ("grappa", 3, 0.7, 0.03),
            ("grappa", 4, 0.6, 0.05),
        ]
    ]
    fig = viz.accuracy_vs_depth(rows)
    assert [t.name for t in fig.data] == ["single", "grappa"]
    assert list(fig.data[1].x) == [2, 3, 4] and list(fig.data[1].y) == [0.75, 0.7, 0.6]
    assert list(fig.data[1].error_y.array) == [0.02, 0.03, 0.05]
    assert "3 seed(s)" in full_title(fig) and axis_title(fig.layout.xaxis) == "layers (GNN depth)"
    with pytest.raises(ValueError, match="mean"):
        viz.accuracy_vs_depth([{"trainer": "a", "layers": 2}])


def test_estimator_bias_vs_workers(viz):
    rows = [
        {"estimator": e, "workers": P, "bias": b, "relative_mse": b * b, "partition": "metis"}
        for e, P, b in [("mean", 2, 0.2), ("mean", 4, 0.3), ("batch", 2, 0.1), ("batch", 4, 0.15)]
    ]
    fig = viz.estimator_bias_vs_workers(rows)
    assert [t.name for t in fig.data] == ["mean (metis)", "batch (metis)"]
    assert list(fig.data[0].y) == [0.2, 0.3] and fig.layout.xaxis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [2, 4]
    fig = viz.estimator_bias_vs_workers(rows, value="relative_mse")
    assert list(fig.data[1].y) == [0.010000000000000002, 0.0225] and "relative mse" in full_title(
        fig
    )
    with pytest.raises(ValueError, match="bias"):
        viz.estimator_bias_vs_workers([{"estimator": "mean", "workers": 2}])


def _map_cell(method, gaps):
    cell = {
        "method": method,
        "avg_degree": 20,
        "homophily": 0.8,
        "feature_snr": 0.5,
        "workers": 4,
        "num_layers": 2,
        "design": "core",
    }
    for trainer, (mean, std) in gaps.items():
        cell[trainer] = {"gap_mean": mean, "gap_std": std, "acc_mean": 0.8 + mean, "acc_std": std}
    return cell


def test_grappa_map_figure(viz):
    cells = [
        _map_cell("random", {"grappa": (-0.25, 0.02), "isolated": (-0.3, 0.01)}),
        _map_cell("metis", {"grappa": (0.01, 0.005), "isolated": (-0.02, 0.01)}),
    ]
    fig = viz.grappa_map(cells, trainers=["grappa", "isolated"], subtitle="csbm")
    heat = fig.data[0]
    assert heat.type == "heatmap" and list(heat.x) == ["grappa", "isolated"]
    assert list(heat.y) == [
        "random · deg 20 · h 0.8 · snr 0.5 · P=4 · L=2",
        "metis · deg 20 · h 0.8 · snr 0.5 · P=4 · L=2",
    ]
    # Points, not fractions; the colour scale is centred on "no gap" and symmetric.
    assert [list(r) for r in heat.z] == [[-25.0, -30.0], [1.0, -2.0]]
    assert heat.text[0][0] == "-25.0 ± 2.0" and heat.text[1][0] == "+1.0 ± 0.5"
    assert heat.zmid == 0 and heat.zmin == -30.0 and heat.zmax == 30.0
    assert "csbm" in full_title(fig) and "mean ± std" in full_title(fig)
    # A trainer the design did not run in a cell: an empty square that says so.
    cells[1]["isolated"] = None
    heat = viz.grappa_map(cells, trainers=["grappa", "isolated"]).data[0]
    assert heat.z[1][1] is None and heat.text[1][1] == "not run" and heat.zmax == 30.0
    # A cell trained with the halo says so in its label.
    cells[1]["halo"] = True
    assert viz.grappa_map(cells, trainers=["grappa"]).data[0].y[1].startswith("metis+halo · deg 20")


def test_grappa_map_rejects_bad_cells(viz):
    with pytest.raises(ValueError, match="empty"):
        viz.grappa_map([])
    with pytest.raises(ValueError, match="'psgd_pa'"):
        viz.grappa_map(
            [_map_cell("random", {"grappa": (0.0, 0.0)})], trainers=["grappa", "psgd_pa"]
        )
    bad = _map_cell("random", {"grappa": (0.0, 0.0)})
    bad["grappa"] = 0.1
    with pytest.raises(ValueError, match="gap_mean"):
        viz.grappa_map([bad], trainers=["grappa"])
    with pytest.raises(ValueError, match="trainers is empty"):
        viz.grappa_map([bad], trainers=[])
    bad["grappa"] = None
    with pytest.raises(ValueError, match="nothing to plot"):
        viz.grappa_map([bad], trainers=["grappa"])
