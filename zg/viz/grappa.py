"""zg.viz.grappa: the figures of the Grappa half (notebooks 00 and 05-09).

Where it sits: at the end of the flow, after :mod:`zg.experiments` has measured. Each builder
takes the rows a measurement returned (:func:`zg.experiments.partition_quality`,
:func:`zg.experiments.traffic_rows`, :func:`zg.experiments.shrink_sweep`, ...) and returns a
``plotly.graph_objects.Figure``; it computes nothing experimental. A partition method keeps its
colour (:data:`METHOD_COLORS`) in every figure.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .common import (
    _FALLBACK_COLORS,
    LIGHT_NEUTRAL,
    NEUTRAL,
    OKABE_ITO,
    PATTERNS,
    STAGE_COLORS,
    SYMBOLS,
    _check_mapping,
    _check_rows,
    _human,
    byte_ticks,
    layout,
    log_ticks,
    series_style,
)

__all__ = [
    "coverage_histogram",
    "bytes_by_kind",
    "coverage_distributions",
    "partition_sweep",
    "traffic_vs_batch",
    "partition_view",
    "bytes_per_epoch_by_run",
    "estimator_errors",
    "shrink_curve",
    "accuracy_vs_bytes",
    "rmat_scaling",
    "epoch_projection",
    "epoch_account",
    "variant_summary",
    "epoch_time_vs_workers",
    "accuracy_vs_depth",
    "estimator_bias_vs_workers",
    "grappa_map",
    "map_cell_label",
    "MAP_FACTORS",
    "METHOD_COLORS",
]

METHOD_COLORS = {"random": OKABE_ITO["orange"], "metis": OKABE_ITO["blue"]}


def _method_color(name: str, i: int) -> str:
    return METHOD_COLORS.get(
        str(name).split(" ")[0].lower(), _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
    )


def _coverage_traces(coverages: Mapping[str, Any], hops: int, fig: go.Figure, **where: Any) -> None:
    import numpy as np

    for i, (label, values) in enumerate(coverages.items()):
        values = np.asarray(values, dtype=float).ravel()
        if values.size == 0:
            raise ValueError(f"coverages[{label!r}] is empty")
        color = _method_color(label, i)
        fig.add_trace(
            go.Histogram(
                x=values,
                xbins=dict(start=0.0, end=1.0001, size=0.04),
                name=f"{label}: mean {values.mean():.2f}",
                marker_color=color,
                opacity=0.6,
                legendgroup=label,
            ),
            **where,
        )
        fig.add_vline(x=float(values.mean()), line_dash="dash", line_color=color, **where)


# ----------------------------------------------------------------------------- Grappa (tour)


def coverage_histogram(coverage: Any, *, hops: int, subtitle: str | None = None) -> go.Figure:
    """Histogram of per-node coverage in [0, 1] (from ``zg.grappa.coverage``)."""
    import numpy as np

    values = np.asarray(coverage, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("coverage is empty")
    fig = go.Figure(go.Histogram(x=values, nbinsx=25, marker_color=OKABE_ITO["blue"], name="nodes"))
    fig.add_vline(
        x=float(values.mean()),
        line_dash="dash",
        line_color=OKABE_ITO["vermillion"],
        annotation_text=f"mean {values.mean():.2f}",
    )
    fig.update_layout(xaxis_title=f"{hops}-hop coverage", yaxis_title="nodes")
    return layout(
        fig,
        title=f"How much of each node's {hops}-hop neighbourhood its worker sees",
        subtitle=subtitle,
        legend="none",
    )


def bytes_by_kind(
    by_kind: Mapping[str, Sequence[float]],
    *,
    title: str = "Bytes each worker sent",
    subtitle: str | None = None,
) -> go.Figure:
    """Stacked bars per worker of bytes sent by kind (``{kind: [bytes per worker]}``)."""
    by_kind = _check_mapping(by_kind, "by_kind")
    workers = max(len(v) for v in by_kind.values())
    fig = go.Figure()
    for i, (kind, values) in enumerate(by_kind.items()):
        total = sum(values)
        fig.add_trace(
            go.Bar(
                x=[f"worker {w}" for w in range(workers)],
                y=list(values),
                name=f"{kind}: {_human(total)}",
                marker_color=_FALLBACK_COLORS[i % len(_FALLBACK_COLORS)],
            )
        )
    stacks = [sum(v[w] for v in by_kind.values() if w < len(v)) for w in range(workers)]
    fig.update_layout(barmode="stack", xaxis_title="worker", yaxis_title="bytes")
    fig.update_yaxes(**byte_ticks(stacks))
    return layout(fig, title=title, subtitle=subtitle, legend_title="kind (total)")


# ----------------------------------------------------------------------------- notebooks 05-06
# (partitions and isolation; gradient-only training)


def coverage_distributions(
    coverages: Mapping[str, Any], *, hops: int, subtitle: str | None = None
) -> go.Figure:
    """Overlaid histograms of per-node ``hops``-hop coverage, one per partition
    (``{label: values in [0, 1]}``, e.g. from :func:`zg.experiments.partition_quality`), each
    with a dashed line at its mean."""
    coverages = _check_mapping(coverages, "coverages")
    fig = go.Figure()
    _coverage_traces(coverages, hops, fig)
    fig.update_layout(
        barmode="overlay",
        xaxis_title=f"{hops}-hop coverage (1 = nothing lost)",
        yaxis_title="nodes",
    )
    fig.update_xaxes(range=[0, 1.02])
    return layout(
        fig,
        title=f"How much of each node's {hops}-hop neighbourhood its worker sees",
        subtitle=subtitle,
        legend_title="partition",
    )


def partition_sweep(
    rows: Sequence[dict], *, hops: int = 2, subtitle: str | None = None
) -> go.Figure:
    """Two panels against the number of workers P, one line per method (rows from
    :func:`zg.experiments.sweep_partitions`): the fraction of edges cut (with the expectation
    (P - 1) / P of a uniformly random assignment, dotted) and the mean ``hops``-hop coverage."""
    key = f"coverage_{hops}"
    rows = _check_rows(rows, "rows", ["method", "num_parts", "edge_cut_fraction", key])
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=("edges cut (never seen by a worker)", f"mean {hops}-hop coverage"),
    )
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for i, method in enumerate(methods):
        part = sorted((r for r in rows if r["method"] == method), key=lambda r: r["num_parts"])
        xs = [r["num_parts"] for r in part]
        color = _method_color(method, i)
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[r["edge_cut_fraction"] for r in part],
                mode="lines+markers",
                name=method,
                line_color=color,
                legendgroup=method,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[r[key] for r in part],
                mode="lines+markers",
                name=method,
                line_color=color,
                legendgroup=method,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    ps = sorted({r["num_parts"] for r in rows})
    fig.add_trace(
        go.Scatter(
            x=ps,
            y=[(p - 1) / p for p in ps],
            mode="lines",
            name="(P - 1) / P",
            line=dict(dash="dot", color=NEUTRAL),
        ),
        row=1,
        col=1,
    )
    fig.update_xaxes(title_text="workers P", type="log", tickvals=ps, ticktext=[str(p) for p in ps])
    fig.update_yaxes(title_text="fraction of edges", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(title_text="coverage", range=[0, 1.02], row=1, col=2)
    return layout(
        fig,
        title="Random against METIS partitions as P grows",
        subtitle=subtitle,
        legend_title="partition",
    )


def traffic_vs_batch(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """Bytes one worker sends per epoch against the global batch size (rows from
    :func:`zg.experiments.traffic_rows`, one P): fetching features, one line per partition
    method, against exchanging gradients (Grappa; the same for every partition). Log axes."""
    rows = _check_rows(rows, "rows", ["method", "batch_size", "feature_bytes", "gradient_bytes"])
    fig = go.Figure()
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for i, method in enumerate(methods):
        part = sorted((r for r in rows if r["method"] == method), key=lambda r: r["batch_size"])
        fig.add_trace(
            go.Scatter(
                x=[r["batch_size"] for r in part],
                y=[r["feature_bytes"] for r in part],
                mode="lines+markers",
                name=f"feature fetching, {method} partition",
                line_color=_method_color(method, i),
            )
        )
    grad = sorted({(r["batch_size"], r["gradient_bytes"]) for r in rows})
    fig.add_trace(
        go.Scatter(
            x=[b for b, _ in grad],
            y=[v for _, v in grad],
            mode="lines+markers",
            name="gradients only (Grappa), any partition",
            line=dict(color=NEUTRAL, dash="dash"),
        )
    )
    sizes = [b for b, _ in grad]
    fig.update_xaxes(
        type="log",
        tickvals=sizes,
        ticktext=[str(b) for b in sizes],
        title_text="global batch size (seeds per iteration)",
    )
    fig.update_yaxes(
        type="log",
        title_text="bytes per worker per epoch",
        **byte_ticks([v for t in fig.data for v in t.y], log=True),
    )
    return layout(
        fig, title="Per epoch: fetching features against exchanging gradients", subtitle=subtitle
    )


def partition_view(
    coverages: Mapping[str, Any], traffic: Sequence[dict], *, hops: int, subtitle: str | None = None
) -> go.Figure:
    """One P at a glance (the notebook's slider redraws it): coverage histograms per partition
    (left) and bytes per worker per epoch (right): feature fetching on each partition and
    Grappa's gradients (rows from :func:`zg.experiments.traffic_rows`, one batch size)."""
    coverages = _check_mapping(coverages, "coverages")
    traffic = _check_rows(traffic, "traffic", ["method", "feature_bytes", "gradient_bytes"])
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        column_widths=[0.6, 0.4],
        subplot_titles=(f"{hops}-hop coverage per node", "bytes per worker per epoch"),
    )
    _coverage_traces(coverages, hops, fig, row=1, col=1)
    labels = [f"fetch features<br>({r['method']})" for r in traffic] + [
        "gradients only<br>(Grappa)"
    ]
    values = [r["feature_bytes"] for r in traffic] + [traffic[0]["gradient_bytes"]]
    colors = [_method_color(r["method"], i) for i, r in enumerate(traffic)] + [NEUTRAL]
    fig.add_trace(
        go.Bar(
            x=labels,
            y=values,
            marker_color=colors,
            showlegend=False,
            text=[_human(v) for v in values],
            textposition="outside",
        ),
        row=1,
        col=2,
    )
    fig.update_layout(barmode="overlay")
    fig.update_xaxes(range=[0, 1.02], title_text="coverage", row=1, col=1)
    fig.update_yaxes(title_text="nodes", row=1, col=1)
    fig.update_yaxes(
        title_text="bytes", range=[0, 1.2 * max(values)], row=1, col=2, **byte_ticks(values)
    )
    return layout(
        fig, title="One partition size at a glance", subtitle=subtitle, legend_title="partition"
    )


def bytes_per_epoch_by_run(
    rows: Sequence[dict],
    *,
    kinds: Sequence[str] = ("gradients", "scalars", "features", "parameters"),
    subtitle: str | None = None,
) -> go.Figure:
    """Stacked bars, one per run: bytes one worker sent per epoch by kind (rows from
    :func:`zg.experiments.trainer_rows`, keys ``<kind>_per_epoch``); each bar's total on top."""
    rows = _check_rows(rows, "rows", ["run"] + [f"{k}_per_epoch" for k in kinds])
    runs = [r["run"] for r in rows]
    fig = go.Figure()
    for i, kind in enumerate(kinds):
        values = [r[f"{kind}_per_epoch"] for r in rows]
        fig.add_trace(
            go.Bar(
                x=runs,
                y=values,
                name=kind,
                marker_color=_FALLBACK_COLORS[i % len(_FALLBACK_COLORS)],
                hovertemplate=f"{kind}: %{{y:,.0f}} B<extra></extra>",
            )
        )
    totals = [sum(r[f"{k}_per_epoch"] for k in kinds) for r in rows]
    fig.add_trace(
        go.Scatter(
            x=runs,
            y=totals,
            mode="text",
            text=[_human(t) for t in totals],
            textposition="top center",
            showlegend=False,
            hoverinfo="skip",
        )
    )
    fig.update_layout(
        barmode="stack",
        xaxis_title="run",
        yaxis_title="bytes per worker per epoch",
        yaxis_range=[0, 1.15 * max(max(totals), 1)],
    )
    fig.update_yaxes(**byte_ticks(totals))
    return layout(
        fig,
        title="Bytes one worker sent per epoch, by kind",
        subtitle=subtitle,
        legend_title="kind",
    )


# ----------------------------------------------------------------------------- notebooks 07-08
# (coverage correction; repartitioning and scale)


def estimator_errors(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """Each estimator's error against the exact full-graph gradient, one bar per estimator:
    squared bias below, variance on top, so a bar's height is its relative MSE (rows from
    :func:`zg.experiments.error_rows`), written above it.

    One panel per weighting (columns) and, when every row has a ``partition`` entry, one row
    of panels per partition; the estimators are the x axis of every panel (one category
    level), in the order of the rows. The panels of one partition share their y axis, so the
    estimators, and the two weightings, compare by height; partitions whose errors differ
    tenfold keep a readable scale each."""
    rows = _check_rows(rows, "rows", ["weighting", "estimator", "bias_squared", "variance"])
    by_partition = all("partition" in r for r in rows)
    partitions = list(dict.fromkeys(r["partition"] for r in rows)) if by_partition else [None]
    weightings = list(dict.fromkeys(r["weighting"] for r in rows))
    estimators = list(dict.fromkeys(r["estimator"] for r in rows))
    cells: dict[tuple, dict] = {}
    for r in rows:
        key = (r["partition"] if by_partition else None, r["weighting"], r["estimator"])
        if key in cells:
            raise ValueError(
                f"rows hold {key} twice: one row per (partition, weighting, estimator)"
            )
        cells[key] = r
    fig = make_subplots(
        rows=len(partitions),
        cols=len(weightings),
        shared_yaxes=True,
        horizontal_spacing=0.04,
        vertical_spacing=0.22 if len(partitions) > 1 else 0.0,
        subplot_titles=[
            f"{w} weighting" if p is None else f"{p} partition, {w} weighting"
            for p in partitions
            for w in weightings
        ],
    )
    for i, partition in enumerate(partitions, start=1):
        highest = 0.0
        for j, weighting in enumerate(weightings, start=1):
            here = [
                cells[(partition, weighting, e)]
                for e in estimators
                if (partition, weighting, e) in cells
            ]
            names = [r["estimator"] for r in here]
            totals = [r["bias_squared"] + r["variance"] for r in here]
            highest = max([highest, *totals])
            for key, label, color in (
                ("bias_squared", "bias²", OKABE_ITO["vermillion"]),
                ("variance", "variance", OKABE_ITO["blue"]),
            ):
                fig.add_trace(
                    go.Bar(
                        x=names,
                        y=[r[key] for r in here],
                        name=label,
                        marker_color=color,
                        legendgroup=label,
                        showlegend=i == 1 and j == 1,
                        hovertemplate=f"%{{x}}: {label} %{{y:.4f}}<extra></extra>",
                    ),
                    row=i,
                    col=j,
                )
            fig.add_trace(
                go.Scatter(
                    x=names,
                    y=totals,
                    mode="text",
                    text=[f"{t:.2g}" for t in totals],
                    textposition="top center",
                    showlegend=False,
                    hoverinfo="skip",
                ),
                row=i,
                col=j,
            )
        fig.update_yaxes(
            title_text="relative MSE", range=[0, 1.25 * (highest or 1.0)], row=i, col=1
        )
    fig.update_layout(barmode="stack")
    return layout(
        fig,
        title="Each estimator's error against the exact full-graph gradient: bias² + variance",
        subtitle=subtitle,
        legend_title="relative to |g*|²",
        height=170 + 190 * len(partitions),
    )


def shrink_curve(
    sweep: Mapping[str, Any],
    *,
    chosen: Mapping[str, float] | None = None,
    subtitle: str | None = None,
) -> go.Figure:
    """The shrink estimator's squared bias, variance and relative MSE against lambda (from
    :func:`zg.experiments.shrink_sweep`); the data-driven lambdas of the draws as ticks on the
    axis and, if given, ``chosen`` = ``{"lambda", "relative_mse"}`` recomputed from scratch."""
    sweep = _check_mapping(sweep, "sweep")
    for key in ("lambdas", "bias", "variance", "relative_mse"):
        if key not in sweep:
            raise ValueError(f"sweep needs a {key!r} entry (from zg.experiments.shrink_sweep)")
    lam = list(sweep["lambdas"])
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=lam,
            y=[b * b for b in sweep["bias"]],
            mode="lines",
            name="bias²",
            line_color=OKABE_ITO["vermillion"],
        )
    )
    fig.add_trace(
        go.Scatter(
            x=lam,
            y=list(sweep["variance"]),
            mode="lines",
            name="variance",
            line_color=OKABE_ITO["blue"],
        )
    )
    fig.add_trace(
        go.Scatter(
            x=lam,
            y=list(sweep["relative_mse"]),
            mode="lines",
            name="relative MSE",
            line=dict(color=NEUTRAL, width=3),
        )
    )
    auto = list(sweep.get("auto_lambda") or [])
    if auto:
        fig.add_trace(
            go.Scatter(
                x=auto,
                y=[0.0] * len(auto),
                mode="markers",
                name="auto λ of each draw",
                marker=dict(symbol="triangle-up", size=11, color=OKABE_ITO["orange"]),
            )
        )
    if chosen is not None:
        fig.add_trace(
            go.Scatter(
                x=[chosen["lambda"]],
                y=[chosen["relative_mse"]],
                mode="markers",
                name=f"λ = {chosen['lambda']:.2f}, recomputed",
                marker=dict(
                    symbol="circle-open", size=16, color=OKABE_ITO["bluish green"], line_width=3
                ),
            )
        )
    fig.update_layout(
        xaxis_title="λ (shrinkage toward uniform weights)", yaxis_title="relative to |g*|²"
    )
    return layout(fig, title="Shrinkage: from batch (λ = 0) to uniform (λ = 1)", subtitle=subtitle)


def accuracy_vs_bytes(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """One marker per training run: bytes one worker sent over the whole run (log scale)
    against test accuracy. Rows: ``{"run", "bytes", "accuracy"}`` and optionally
    ``"counted_bytes"`` (bytes counted but not sent, e.g. repartitioning moves), drawn as a
    second, hollow marker joined to the first."""
    rows = _check_rows(rows, "rows", ["run", "bytes", "accuracy"])
    fig = go.Figure()
    for i, r in enumerate(rows):
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        sent = max(float(r["bytes"]), 1.0)
        fig.add_trace(
            go.Scatter(
                x=[sent],
                y=[r["accuracy"]],
                mode="markers",
                name=r["run"],
                marker=dict(size=13, color=color, symbol=SYMBOLS[i % len(SYMBOLS)]),
                legendgroup=r["run"],
                hovertemplate=f"{html.escape(r['run'])}<br>{_human(sent)} sent<br>"
                "accuracy %{y:.3f}<extra></extra>",
            )
        )
        extra = float(r.get("counted_bytes") or 0)
        if extra > 0:
            fig.add_trace(
                go.Scatter(
                    x=[sent, sent + extra],
                    y=[r["accuracy"]] * 2,
                    mode="lines+markers",
                    line=dict(color=color, dash="dot"),
                    legendgroup=r["run"],
                    showlegend=False,
                    marker=dict(symbol=["circle", "circle-open"], size=[1, 13], color=color),
                    hovertemplate=f"+ {_human(extra)} repartitioning (counted, not sent)"
                    "<extra></extra>",
                )
            )
    fig.update_xaxes(
        type="log",
        title_text="bytes one worker sent in the whole run (log)",
        **byte_ticks([v for t in fig.data for v in t.x], log=True),
    )
    fig.update_layout(yaxis_title="test accuracy")
    return layout(fig, title="Accuracy against bytes sent", subtitle=subtitle, legend_title="run")


def rmat_scaling(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """Left: bytes one worker sends per iteration against graph size, feature fetching vs
    Grappa's gradients (log-log). Right: edge-cut fraction and mean coverage against size.
    Rows from :func:`zg.experiments.scaling_rows`."""
    rows = _check_rows(
        rows,
        "rows",
        [
            "nodes",
            "feature_bytes_per_iteration",
            "gradient_bytes_per_iteration",
            "edge_cut_fraction",
            "mean_coverage",
        ],
    )
    rows = sorted(rows, key=lambda r: r["nodes"])
    n = [r["nodes"] for r in rows]
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("bytes per worker per iteration", "what isolation loses")
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=[r["feature_bytes_per_iteration"] for r in rows],
            mode="lines+markers",
            name="feature fetching: features",
            line_color=OKABE_ITO["reddish purple"],
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=[r["gradient_bytes_per_iteration"] for r in rows],
            mode="lines+markers",
            name="gradients (both designs)",
            line_color=OKABE_ITO["blue"],
        ),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=[r["edge_cut_fraction"] for r in rows],
            mode="lines+markers",
            name="edge-cut fraction",
            line_color=OKABE_ITO["vermillion"],
        ),
        row=1,
        col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=n,
            y=[r["mean_coverage"] for r in rows],
            mode="lines+markers",
            name="mean coverage (training nodes)",
            line_color=OKABE_ITO["bluish green"],
        ),
        row=1,
        col=2,
    )
    fig.update_xaxes(type="log", title_text="nodes", **log_ticks([r["nodes"] for r in rows]))
    sent = [
        r[k] for r in rows for k in ("feature_bytes_per_iteration", "gradient_bytes_per_iteration")
    ]
    fig.update_yaxes(type="log", title_text="bytes", row=1, col=1, **byte_ticks(sent, log=True))
    fig.update_yaxes(range=[0, 1.05], title_text="fraction", row=1, col=2)
    return layout(fig, title="R-MAT graphs of growing size", subtitle=subtitle)


def epoch_projection(rows: Sequence[dict], *, title: str, subtitle: str | None = None) -> go.Figure:
    """Stacked bars per (link, design): compute seconds (measured per iteration on this machine,
    times the iterations) and link seconds (the link model). Rows from
    :func:`zg.experiments.project_epochs`. ``title`` must say it is a projection."""
    rows = _check_rows(rows, "rows", ["design", "link", "compute_seconds", "link_seconds"])
    if "projection" not in str(title).lower():
        raise ValueError(
            "title must say that this figure is a projection (link model), not a measurement"
        )
    x = [[r["link"] for r in rows], [r["design"] for r in rows]]
    hours = 1 / 3600
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=x,
            y=[r["compute_seconds"] * hours for r in rows],
            marker_color=LIGHT_NEUTRAL,
            name="compute (measured per iteration here, × iterations)",
        )
    )
    fig.add_trace(
        go.Bar(
            x=x,
            y=[r["link_seconds"] * hours for r in rows],
            marker_color=OKABE_ITO["orange"],
            name="network (link model)",
        )
    )
    fig.update_layout(barmode="stack", yaxis_title="hours per epoch")
    return layout(fig, title=title, subtitle=subtitle)


# An epoch's parts (zg.grappa.account.PARTS) in the stage colours of the chain they time, so
# that "gather" is one colour in notebook 04's stage figures and notebook 08's account; the
# parts that are no stage are told apart by a fill pattern.
PART_STYLES = {
    "sampling": (STAGE_COLORS["sample"], ""),
    "gather": (STAGE_COLORS["gather"], ""),
    "forward": (STAGE_COLORS["forward"], ""),
    "backward": (STAGE_COLORS["backward"], ""),
    "step": (STAGE_COLORS["step"], ""),
    "exchange": (OKABE_ITO["reddish purple"], "/"),
    "evaluation": (LIGHT_NEUTRAL, "x"),
    "repartitioning": (LIGHT_NEUTRAL, "."),
    "checkpointing": (LIGHT_NEUTRAL, "/"),
    "other": (LIGHT_NEUTRAL, ""),
}


def part_style(part: str, i: int = 0) -> tuple[str, str]:
    """(colour, fill pattern) of an epoch's part: :data:`PART_STYLES`, or for a part it does
    not name the i-th palette colour with the i-th pattern."""
    if part in PART_STYLES:
        return PART_STYLES[part]
    if part in STAGE_COLORS:
        return STAGE_COLORS[part], ""
    return _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)], PATTERNS[(i + 1) % len(PATTERNS)]


def epoch_account(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """One stacked bar per setting: where an epoch's seconds go, by part (milliseconds).

    ``rows``: ``{"label": str, "parts": {part: seconds}}`` each, e.g. the ``parts`` means of
    ``bench/results/grappa_epoch.json`` or :func:`zg.grappa.account.account_summary` of a
    history; the parts keep the order of the first row (:data:`zg.grappa.account.PARTS`)."""
    rows = _check_rows(rows, "rows", ["label", "parts"])
    parts = list(_check_mapping(rows[0]["parts"], "rows[0]['parts']"))
    for r in rows:
        if list(r["parts"]) != parts:
            raise ValueError(
                f"every row needs the parts {parts}; {r['label']!r} has {list(r['parts'])}"
            )
    fig = go.Figure()
    x = [r["label"] for r in rows]
    for i, part in enumerate(parts):
        color, pattern = part_style(part, i)
        fig.add_trace(
            go.Bar(
                x=x,
                y=[1000 * r["parts"][part] for r in rows],
                name=part,
                marker=dict(color=color, pattern=dict(shape=pattern, fgcolor=NEUTRAL)),
            )
        )
    fig.update_layout(barmode="stack", yaxis_title="ms per epoch (mean over epochs and workers)")
    return layout(
        fig,
        title="An epoch's account: milliseconds per part",
        subtitle=subtitle,
        legend_title="part",
    )


# ----------------------------------------------------------------------------- notebook 09


def variant_summary(
    rows: Sequence[dict], *, metrics: Mapping[str, str] | None = None, subtitle: str | None = None
) -> go.Figure:
    """Side-by-side bars, one panel per metric, one bar per ``variant`` (rows from
    :func:`zg.experiments.train_together`). ``metrics`` maps a row key to its panel title (default: seconds
    per epoch, bytes per epoch per worker, final test accuracy)."""
    metrics = dict(
        metrics
        or {
            "seconds_per_epoch": "seconds per epoch (median)",
            "bytes_per_epoch_per_worker": "bytes sent per epoch per worker",
            "test_acc": "final test accuracy",
        }
    )
    rows = _check_rows(rows, "rows", ["variant", *metrics])
    names = [r["variant"] for r in rows]
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=list(metrics.values()))
    for col, key in enumerate(metrics, start=1):
        values = [float(r[key]) for r in rows]
        in_bytes = key.startswith("bytes")
        text = [_human(v) if in_bytes else f"{v:.3g}" for v in values]
        fig.add_trace(
            go.Bar(
                x=names,
                y=values,
                text=text,
                textposition="outside",
                showlegend=False,
                marker_color=[
                    _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)] for i in range(len(names))
                ],
            ),
            row=1,
            col=col,
        )
        top = 1.2 * max(max(values), 0.0) or 1.0  # room for the labels above the bars
        ticks = byte_ticks(values) if in_bytes else {}
        fig.update_yaxes(range=[min(0.0, 1.2 * min(values)), top], row=1, col=col, **ticks)
    return layout(fig, title="Side by side", subtitle=subtitle, legend="none")


# ----------------------------------------------------------------------------- issue-13 plots
# (epoch time against workers, accuracy against depth, estimator bias against P)


def _error_lines(rows: Sequence[dict], *, group: str, x: str, y: str, std: str | None) -> go.Figure:
    """One line per ``group`` value, ``y`` against ``x``, with ``std`` as error bars if given."""
    fig = go.Figure()
    groups = list(dict.fromkeys(r[group] for r in rows))
    for i, name in enumerate(groups):
        mine = sorted((r for r in rows if r[group] == name), key=lambda r: r[x])
        error = None
        if std is not None and any(r.get(std) is not None for r in mine):
            error = dict(type="data", array=[float(r.get(std) or 0.0) for r in mine], visible=True)
        fig.add_trace(
            go.Scatter(
                x=[r[x] for r in mine],
                y=[r[y] for r in mine],
                mode="lines+markers",
                name=str(name),
                error_y=error,
                **series_style(i),
            )
        )
    return fig


def epoch_time_vs_workers(
    rows: Sequence[dict],
    *,
    title: str = "Seconds per epoch against the number of workers",
    subtitle: str | None = None,
) -> go.Figure:
    """Seconds per epoch (mean, with ``seconds_std`` as error bars when present) against the
    number of workers P, one line per ``run`` (rows: ``run``, ``workers``, ``seconds_mean``)."""
    rows = _check_rows(rows, "rows", ["run", "workers", "seconds_mean"])
    fig = _error_lines(rows, group="run", x="workers", y="seconds_mean", std="seconds_std")
    fig.update_xaxes(title_text="workers P", type="category")
    fig.update_layout(yaxis_title="seconds per epoch")
    return layout(fig, title=title, subtitle=subtitle)


def accuracy_vs_depth(
    rows: Sequence[dict], *, metric: str = "accuracy", subtitle: str | None = None
) -> go.Figure:
    """Accuracy (mean over seeds, ``std`` as error bars) against the number of layers, one line
    per ``trainer`` (rows: ``trainer``, ``layers``, ``mean``, optional ``std`` and ``seeds``)."""
    rows = _check_rows(rows, "rows", ["trainer", "layers", "mean"])
    fig = _error_lines(rows, group="trainer", x="layers", y="mean", std="std")
    seeds = sorted({r.get("seeds") for r in rows if r.get("seeds") is not None})
    note = f"mean ± std over {seeds[0]} seed(s)" if len(seeds) == 1 else "mean ± std over seeds"
    fig.update_xaxes(title_text="layers (GNN depth)", dtick=1)
    fig.update_layout(yaxis_title=metric)
    return layout(fig, title=f"{metric.capitalize()} against depth ({note})", subtitle=subtitle)


def estimator_bias_vs_workers(
    rows: Sequence[dict], *, value: str = "bias", subtitle: str | None = None
) -> go.Figure:
    """Each estimator's error against the exact gradient (``value``: ``bias`` by default, or
    ``relative_mse`` ...) against the number of workers P, one line per ``estimator`` (rows:
    ``estimator``, ``workers``, ``value``; a ``partition`` entry splits the lines)."""
    rows = _check_rows(rows, "rows", ["estimator", "workers", value])
    labelled = [
        {
            **r,
            "line": f"{r['estimator']} ({r['partition']})" if "partition" in r else r["estimator"],
        }
        for r in rows
    ]
    fig = _error_lines(labelled, group="line", x="workers", y=value, std=None)
    fig.update_xaxes(
        title_text="workers P", type="log", tickvals=sorted({r["workers"] for r in rows})
    )
    fig.update_layout(yaxis_title=f"{value.replace('_', ' ')} (relative to |g*|)")
    return layout(
        fig,
        title=f"Estimator {value.replace('_', ' ')} against the number of workers",
        subtitle=subtitle,
    )


# ----------------------------------------------------------------------------- notebooks 06-08: the map


MAP_FACTORS = ("method", "avg_degree", "homophily", "feature_snr", "workers", "num_layers")
_MAP_LABELS = {
    "method": "{}",
    "avg_degree": "deg {:g}",
    "homophily": "h {:g}",
    "feature_snr": "snr {:g}",
    "workers": "P={}",
    "num_layers": "L={}",
}


def map_cell_label(cell: Mapping[str, Any]) -> str:
    """A map cell's factors in one short line, e.g. ``random · deg 20 · h 0.8 · snr 0.5 · P=4 · L=2``
    (``metis+halo · ...`` when the cell records ``halo: true``)."""
    parts = [_MAP_LABELS[f].format(cell[f]) for f in MAP_FACTORS]
    if cell.get("halo"):
        parts[0] += "+halo"
    return " · ".join(parts)


def grappa_map(
    cells: Sequence[dict],
    *,
    trainers: Sequence[str] = ("grappa", "isolated", "psgd_pa", "feature_fetch"),
    subtitle: str | None = None,
) -> go.Figure:
    """Where Grappa holds: a heatmap of the test-accuracy gap to single-process training, one
    row per map cell, one column per trainer; the colour is the mean gap (accuracy points,
    diverging around 0: red = below single), the text ``mean ± std`` over the seeds.

    ``cells``: the ``cells_table`` rows of ``bench/results/grappa_map.json``: the factors
    (:data:`MAP_FACTORS`) and, per trainer, ``{"gap_mean", "gap_std", ...}`` in accuracy
    fractions (shown as points); ``None`` where the map's design did not run that trainer (an
    empty square, "not run"). Rows keep the order given.
    """
    trainers = list(trainers)
    if not trainers:
        raise ValueError("trainers is empty: nothing to plot")
    cells = _check_rows(cells, "cells", [*MAP_FACTORS, *trainers])
    for cell in cells:
        for t in trainers:
            if cell[t] is not None and (
                not isinstance(cell[t], Mapping)
                or "gap_mean" not in cell[t]
                or "gap_std" not in cell[t]
            ):
                raise ValueError(
                    f"cell[{t!r}] must be a dict with 'gap_mean' and 'gap_std' (a cells_table "
                    f"row of grappa_map.json), or None where the design did not run it"
                )
    labels = [map_cell_label(c) for c in cells]
    z = [
        [None if c[t] is None else 100 * float(c[t]["gap_mean"]) for t in trainers] for c in cells
    ]  # points
    text = [
        [
            "not run"
            if c[t] is None
            else f"{100 * float(c[t]['gap_mean']):+.1f} ± {100 * float(c[t]['gap_std']):.1f}"
            for t in trainers
        ]
        for c in cells
    ]
    measured = [abs(v) for row in z for v in row if v is not None]
    if not measured:
        raise ValueError("no cell has a measured gap for these trainers: nothing to plot")
    bound = max(1.0, max(measured))
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=trainers,
            y=labels,
            text=text,
            texttemplate="%{text}",
            colorscale="RdBu",
            zmid=0,
            zmin=-bound,
            zmax=bound,
            colorbar={"title": "gap (points)"},
            hovertemplate="%{y}<br>%{x}: %{text} points vs single<extra></extra>",
        )
    )
    fig.update_layout(
        yaxis={"autorange": "reversed", "type": "category"},
        xaxis_title="trainer",
    )
    return layout(
        fig,
        title="Test-accuracy gap to single-process training (points, mean ± std over seeds)",
        subtitle=subtitle,
        legend="none",
        height=28 * len(cells) + 180,
    )
