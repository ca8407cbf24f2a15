"""zg.viz.zerognn: the figures of the ZeroGNN half (notebooks 00-04, and 09's host syncs).

Where it sits: at the end of the flow, after :mod:`zg.experiments` has measured. Each builder
takes the rows a measurement returned (:func:`zg.experiments.measure_hop_metadata`,
:func:`zg.experiments.time_stages`, :func:`zg.experiments.overflow_curve`, ...) and returns a
``plotly.graph_objects.Figure``; it computes nothing experimental. Stages and pipelines keep
their colours from :mod:`zg.viz.common`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .._checks import int_arg
from .common import (
    _FALLBACK_COLORS,
    FIGURE_WIDTH,
    LIGHT_NEUTRAL,
    NEUTRAL,
    OKABE_ITO,
    STAGE_COLORS,
    _check_mapping,
    _check_rows,
    _color,
    layout,
    log_ticks,
    wrap,
)

__all__ = [
    "host_syncs",
    "step_times",
    "hop_metadata",
    "sync_ops",
    "stage_timeline",
    "count_distributions",
    "memory_per_hop",
    "overflow_vs_margin",
    "execution_trace",
    "stage_breakdown",
    "floor_split",
    "batch_scaling",
    "gpu_results",
    "cost_growth",
    "gpu_timeline",
    "MIB",
]

MIB = 2**20


# ----------------------------------------------------------------------------- notebook 00, 01


def host_syncs(
    counts: Mapping[str, float | None],
    *,
    title: str = "Host syncs per iteration",
    subtitle: str | None = None,
) -> go.Figure:
    """Bars: host syncs per iteration of each pipeline (None: not measurable, shown as a note)."""
    counts = _check_mapping(counts, "counts")
    names = list(counts)
    values = [counts[n] for n in names]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=[0 if v is None else v for v in values],
            name="host syncs",
            marker_color=[_color(n, i) for i, n in enumerate(names)],
            text=["not visible" if v is None else f"{v:g}" for v in values],
            textposition="outside",
        )
    )
    fig.update_layout(xaxis_title="pipeline", yaxis_title="host syncs per iteration")
    fig.update_yaxes(range=[0, 1.2 * max([v or 0 for v in values] + [1])])  # room for the labels
    return layout(fig, title=title, subtitle=subtitle, legend="none")


def hop_metadata(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """Grouped bars per hop: the frontier, the sampled edges and the distinct nodes found
    (rows from :func:`zg.experiments.measure_hop_metadata`). Each hop's distinct count is the size the host
    must read before it can allocate the next hop."""
    rows = _check_rows(rows, "rows", ["hop", "frontier", "sampled_edges", "distinct_nodes"])
    hops = [f"hop {r['hop']} (fanout {r.get('fanout', '?')})" for r in rows]
    fig = go.Figure()
    for key, label, color in (
        ("frontier", "frontier (nodes expanded)", LIGHT_NEUTRAL),
        ("sampled_edges", "sampled edges", OKABE_ITO["sky blue"]),
        ("distinct_nodes", "distinct nodes (metadata: read on the host)", OKABE_ITO["vermillion"]),
    ):
        fig.add_trace(
            go.Bar(
                x=hops,
                y=[r[key] for r in rows],
                name=label,
                marker_color=color,
                text=[f"{r[key]:,}" for r in rows],
                textposition="outside",
            )
        )
    fig.update_layout(
        barmode="group", xaxis_title="hop (from the seeds outward)", yaxis_title="count"
    )
    highest = max(r[k] for r in rows for k in ("frontier", "sampled_edges", "distinct_nodes"))
    fig.update_yaxes(range=[0, 1.15 * max(highest, 1)])  # room for the labels above the bars
    return layout(fig, title="What one sampling iteration produces, hop by hop", subtitle=subtitle)


def sync_ops(per_op: Mapping[str, Mapping[str, int]], *, subtitle: str | None = None) -> go.Figure:
    """Grouped bars: host syncs by op for each sampler (``{sampler: {op: count}}``)."""
    per_op = _check_mapping(per_op, "per_op")
    ops = sorted({op for counts in per_op.values() for op in counts}) or ["(none)"]
    fig = go.Figure()
    for i, (name, counts) in enumerate(per_op.items()):
        total = sum(counts.values())
        fig.add_trace(
            go.Bar(
                x=ops,
                y=[counts.get(op, 0) for op in ops],
                name=f"{name} ({total} in total)",
                marker_color=_color(name, i),
            )
        )
    fig.update_layout(barmode="group", xaxis_title="op (aten)", yaxis_title="host syncs")
    return layout(
        fig,
        title="Where the host waits: syncs by op in one sampling call",
        subtitle=subtitle,
        legend_title="sampler",
    )


def stage_timeline(
    timelines: Mapping[str, Sequence[dict]], *, subtitle: str | None = None
) -> go.Figure:
    """One iteration of each pipeline on a time axis, one row per pipeline, coloured by stage
    (``{pipeline: events}`` from :func:`zg.experiments.time_stages`). Stretches with host syncs are
    outlined in grey and labelled with their count."""
    timelines = _check_mapping(timelines, "timelines")
    fig = go.Figure()
    present = {e["stage"] for events in timelines.values() for e in events}
    for stage in [s for s in STAGE_COLORS if s in present] + sorted(present - set(STAGE_COLORS)):
        # Legend entries in pipeline order, drawn by empty traces; the bars carry no legend.
        fig.add_trace(
            go.Bar(
                y=[next(iter(timelines))],
                x=[0],
                base=[0],
                orientation="h",
                name=stage,
                legendgroup=stage,
                marker_color=STAGE_COLORS.get(stage, NEUTRAL),
                hoverinfo="skip",
            )
        )
    for name, events in timelines.items():
        events = _check_rows(events, f"timelines[{name!r}]", ["stage", "start", "end"])
        for e in events:
            ms = 1e3 * (e["end"] - e["start"])
            syncs = e.get("host_syncs")
            note = "syncs not visible (C++)" if syncs is None else f"{syncs} host syncs"
            fig.add_trace(
                go.Bar(
                    y=[name],
                    x=[ms],
                    base=[1e3 * e["start"]],
                    orientation="h",
                    name=e["stage"],
                    legendgroup=e["stage"],
                    showlegend=False,
                    marker=dict(
                        color=STAGE_COLORS.get(e["stage"], NEUTRAL),
                        line=dict(color=NEUTRAL if syncs else "rgba(0,0,0,0)", width=2),
                    ),
                    text=[f"{syncs}" if syncs else ""],
                    textposition="inside",
                    hovertemplate=f"{html.escape(name)}<br>{e['stage']}: %{{x:.2f}} ms<br>{note}<extra></extra>",
                )
            )
    fig.update_layout(
        barmode="overlay",
        xaxis_title="time since the iteration started (ms)",
        yaxis=dict(
            type="category",
            categoryorder="array",
            categoryarray=list(timelines),
            autorange="reversed",
            title_text="",
        ),
    )
    return layout(
        fig,
        title="One training iteration, stage by stage (outlined: host syncs)",
        subtitle=subtitle,
        legend_title="stage",
        height=180 + 70 * len(timelines),
    )


# ----------------------------------------------------------------------------- notebook 02


def count_distributions(
    counts: Any,
    sizes: Mapping[str, Sequence[int]],
    *,
    fanouts: Sequence[int] | None = None,
    subtitle: str | None = None,
) -> go.Figure:
    """Per block, a histogram of the true source-node counts of many batches (``counts`` int
    [K, L], input layer first) with a vertical line at each envelope's size for that block
    (``sizes``: ``{"profiled": [...], "worst case": [...]}``). A size more than twice the
    largest count would squash the histogram; it is written in the panel instead of drawn."""
    import numpy as np

    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[0] == 0:
        raise ValueError(f"counts must be [K, L] with K >= 1, got shape {counts.shape}")
    sizes = _check_mapping(sizes, "sizes")
    for label, values in sizes.items():
        if len(values) != counts.shape[1]:
            raise ValueError(
                f"sizes[{label!r}] has {len(values)} entries for {counts.shape[1]} blocks"
            )
    num_blocks = counts.shape[1]
    titles = [
        f"block {i}" + (f" (fanout {fanouts[i]})" if fanouts else "") for i in range(num_blocks)
    ]
    fig = make_subplots(rows=1, cols=num_blocks, subplot_titles=titles)
    dash = ["dash", "dot", "dashdot", "longdash"]
    for i in range(num_blocks):
        column = counts[:, i]
        fig.add_trace(
            go.Histogram(
                x=column,
                name="true counts (oracle)",
                marker_color=LIGHT_NEUTRAL,
                showlegend=i == 0,
                legendgroup="counts",
                nbinsx=20,
            ),
            row=1,
            col=i + 1,
        )
        far = []
        shown = [int(column.max())]
        for j, (label, values) in enumerate(sizes.items()):
            color = _FALLBACK_COLORS[j % len(_FALLBACK_COLORS)]
            if values[i] > 2 * column.max():
                far.append(f"{label}: {values[i]:,}")
            else:
                shown.append(int(values[i]))
                fig.add_vline(
                    x=values[i], line_dash=dash[j % len(dash)], line_color=color, row=1, col=i + 1
                )
            if i == 0:  # an empty trace per envelope, so the legend names its line
                fig.add_trace(
                    go.Scatter(
                        x=[None],
                        y=[None],
                        mode="lines",
                        name=f"{label} envelope",
                        line=dict(dash=dash[j % len(dash)], color=color),
                    ),
                    row=1,
                    col=1,
                )
        low, high = float(column.min()), float(max(shown))
        pad = 0.05 * max(high - low, 1.0)
        title = "source nodes per batch"
        if far:
            title += "<br>off this scale: " + ", ".join(far)
        fig.update_xaxes(range=[low - pad, high + pad], title_text=title, row=1, col=i + 1)
    fig.update_yaxes(title_text="batches", row=1, col=1)
    fig.update_layout(bargap=0.05)
    return layout(fig, title="True counts per block against the envelope sizes", subtitle=subtitle)


def memory_per_hop(
    memory: Mapping[str, Any],
    *,
    policies: Sequence[str] = ("worst_case", "envelope", "oracle_max", "oracle_mean"),
    subtitle: str | None = None,
) -> go.Figure:
    """Grouped bars: MiB per block under each sizing policy (``memory`` from
    :meth:`zg.Envelope.memory_model`), with each policy's total in the legend."""
    memory = _check_mapping(memory, "memory")
    labels = {
        "worst_case": "worst case",
        "envelope": "profiled envelope",
        "oracle_max": "oracle (largest batch)",
        "oracle_mean": "oracle (mean batch)",
    }
    colors = {
        "worst_case": OKABE_ITO["vermillion"],
        "envelope": OKABE_ITO["blue"],
        "oracle_max": OKABE_ITO["sky blue"],
        "oracle_mean": OKABE_ITO["bluish green"],
    }
    fig = go.Figure()
    for policy in policies:
        if policy not in memory:
            continue
        blocks = memory[policy]
        total = sum(b["total"] for b in blocks)
        fig.add_trace(
            go.Bar(
                x=[f"block {i}" for i in range(len(blocks))],
                y=[b["total"] / MIB for b in blocks],
                name=f"{labels.get(policy, policy)}: {total / MIB:.1f} MiB",
                marker_color=colors.get(policy),
            )
        )
    if not fig.data:
        raise ValueError(f"memory holds none of the policies {list(policies)}")
    fig.update_layout(barmode="group", xaxis_title="block (input layer first)", yaxis_title="MiB")
    return layout(
        fig,
        title="Buffer memory per block under each sizing policy",
        subtitle=subtitle,
        legend_title="policy (total)",
    )


def overflow_vs_margin(curves: Any, *, subtitle: str | None = None) -> go.Figure:
    """Two panels against the profiling margin, one line per quantile (``curves``: one dict from
    :func:`zg.experiments.overflow_curve`, or a list of them): the share of held-out batches that
    overflow (left) and the envelope's memory over the oracle's mean batch (right; the worst
    case's ratio, usually far above, is named in the panel title)."""
    if isinstance(curves, Mapping):
        curves = [curves]
    curves = list(curves or [])
    if not curves:
        raise ValueError("curves is empty: nothing to plot")
    first = curves[0]
    worst = first["worst_case_bytes"] / first["oracle_mean_bytes"]
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=(
            "held-out batches that overflow",
            f"memory / oracle mean (worst case: {worst:.2f}x)",
        ),
    )
    for i, curve in enumerate(curves):
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        margins = [100 * m for m in curve["margins"]]
        label = f"quantile {curve['quantile']:.3g}"
        fig.add_trace(
            go.Scatter(
                x=margins,
                y=[100 * p for p in curve["overflow_probability"]],
                mode="lines+markers",
                name=label,
                line_color=color,
                legendgroup=label,
            ),
            row=1,
            col=1,
        )
        fig.add_trace(
            go.Scatter(
                x=margins,
                y=[b / curve["oracle_mean_bytes"] for b in curve["envelope_bytes"]],
                mode="lines+markers",
                name=label,
                line_color=color,
                legendgroup=label,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_xaxes(title_text="margin added to the quantile (%)")
    fig.update_yaxes(title_text="overflowing batches (%)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="envelope memory / oracle mean", row=1, col=2)
    return layout(
        fig,
        title="Overflow probability against margin, and what the margin costs",
        subtitle=subtitle,
        legend_title="profiled at",
    )


# ----------------------------------------------------------------------------- notebook 03


def execution_trace(
    runs: Mapping[str, Sequence[dict]], *, subtitle: str | None = None
) -> go.Figure:
    """Which batch each executed step ran, in execution order, for each run
    (``{run: rows}`` from :func:`zg.experiments.trace_steps`). Skipped steps (an earlier batch
    overflowed; the optimizer step was skipped on the device) are hollow markers."""
    runs = _check_mapping(runs, "runs")
    fig = go.Figure()
    for i, (name, rows) in enumerate(runs.items()):
        rows = _check_rows(rows, f"runs[{name!r}]", ["order", "batch", "applied", "epoch"])
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        for applied, symbol, label in (
            (True, "circle", "applied"),
            (False, "circle-open", "skipped, re-run later"),
        ):
            part = [r for r in rows if r["applied"] == applied]
            if not part:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[r["order"] for r in part],
                    y=[r["batch"] for r in part],
                    mode="markers",
                    name=f"{name}: {label} ({len(part)})",
                    marker=dict(
                        symbol=symbol,
                        color=color,
                        size=8 if applied else 11,
                        line=dict(width=2, color=color),
                    ),
                    customdata=[[r["epoch"]] for r in part],
                    hovertemplate="step %{x}<br>epoch %{customdata[0]}, batch %{y}<extra></extra>",
                )
            )
    fig.update_layout(
        xaxis_title="executed step (replay number)", yaxis_title="batch index in its epoch"
    )
    return layout(
        fig,
        title="Executed steps: overflow, skip on the device, rewind, resume",
        subtitle=subtitle,
    )


def step_times(
    seconds: Mapping[str, float],
    *,
    title: str = "Time per iteration",
    subtitle: str | None = None,
) -> go.Figure:
    """Bars: seconds per iteration of each run (drawn in ms, each bar labelled with its value)."""
    seconds = _check_mapping(seconds, "seconds")
    names = list(seconds)
    ms = [1e3 * float(seconds[n]) for n in names]
    fig = go.Figure(
        go.Bar(
            x=names,
            y=ms,
            name="time per iteration",
            marker_color=[_FALLBACK_COLORS[i % len(_FALLBACK_COLORS)] for i in range(len(names))],
            text=[f"{v:.3g} ms" for v in ms],
            textposition="outside",
        )
    )
    fig.update_layout(xaxis_title="run", yaxis_title="ms per iteration")
    fig.update_yaxes(range=[0, 1.2 * max(ms + [1e-3])])  # room for the labels
    return layout(fig, title=title, subtitle=subtitle, legend="none")


# ----------------------------------------------------------------------------- notebook 04


def stage_breakdown(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """Milliseconds per iteration by stage for every (batch size, pipeline) (rows from
    :func:`zg.experiments.profile_modes`): one panel per batch size, one horizontal bar per
    pipeline stacked by stage, the whole-step time (timed separately) marked on it.

    Horizontal, so that the pipeline names read level on the y axis however many pipelines
    there are, and each batch size keeps an axis of its own scale."""
    rows = _check_rows(rows, "rows", ["pipeline", "batch_size", "stage_seconds", "step_seconds"])
    batches = list(dict.fromkeys(r["batch_size"] for r in rows))
    pipelines = list(dict.fromkeys(r["pipeline"] for r in rows))
    fig = make_subplots(
        rows=len(batches),
        cols=1,
        vertical_spacing=0.3 / len(batches),
        subplot_titles=[f"batch {b}" for b in batches],
    )
    stages = [s for s in STAGE_COLORS if any(r["stage_seconds"].get(s, 0.0) > 0 for r in rows)]
    for i, batch in enumerate(batches, start=1):
        mine = [r for r in rows if r["batch_size"] == batch]
        names = [r["pipeline"] for r in mine]
        for stage in stages:
            fig.add_trace(
                go.Bar(
                    x=[1e3 * r["stage_seconds"].get(stage, 0.0) for r in mine],
                    y=names,
                    orientation="h",
                    name=stage,
                    legendgroup=stage,
                    showlegend=i == 1,
                    marker_color=STAGE_COLORS[stage],
                    hovertemplate=f"%{{y}}: {stage} %{{x:.2f}} ms<extra>batch {batch}</extra>",
                ),
                row=i,
                col=1,
            )
        fig.add_trace(
            go.Scatter(
                x=[1e3 * r["step_seconds"] for r in mine],
                y=names,
                mode="markers",
                name="whole step (timed separately)",
                legendgroup="whole step",
                showlegend=i == 1,
                marker=dict(symbol="line-ns-open", size=18, color=NEUTRAL, line_width=3),
                hovertemplate="%{y}: whole step %{x:.2f} ms<extra></extra>",
            ),
            row=i,
            col=1,
        )
        fig.update_yaxes(
            type="category",
            categoryorder="array",
            categoryarray=[p for p in pipelines if p in names][::-1],  # the first on top
            row=i,
            col=1,
        )
    fig.update_xaxes(rangemode="tozero")
    fig.update_xaxes(title_text="ms per iteration", row=len(batches), col=1)
    fig.update_layout(barmode="stack")
    return layout(
        fig,
        title="Where an iteration's time goes, by stage",
        subtitle=subtitle,
        legend="below",
        legend_title="stage",
        height=150 + len(batches) * (40 + 24 * len(pipelines)),
    )


FLOOR_COLOR = LIGHT_NEUTRAL  # the floor's share of a pipeline's bar


def floor_split(rows: Sequence[dict], *, subtitle: str | None = None) -> go.Figure:
    """Each pipeline's time per iteration as a multiple of the floor (rows of
    ``bench/results/floor.json``: :mod:`zg.experiments.floor`).

    The y axis is the multiple of the floor, the quantity the bench measures and the kit's
    targets judge: each seed's ratio is the median over interleaved rounds of the pipeline's time
    against the floor's on the same batches, and a bar is the mean over seeds of those ratios,
    with their sample std as its error bar. The bar's height and its label are that one number.
    The first bar is the floor itself (1 by definition), stacked by its parts (gather, forward,
    loss, backward, step, from its clocked pass, each as a share of the floor's time), with its
    unclocked time marked at 1. A pipeline's bar is the floor (grey, 1) plus its overhead above
    it (a pipeline faster than the floor has a negative overhead, drawn below zero). Hovering
    shows the milliseconds: the pipeline's mean time per iteration and the floor's. A skipped
    row (e.g. zg captured without a GPU) keeps its place, labelled with its reason, and draws
    no bar: it was not measured.
    """
    rows = _check_rows(rows, "rows", ["pipeline"])
    floors = [r for r in rows if r.get("key") == "floor"]
    if len(floors) != 1 or "parts" not in floors[0] or "seconds" not in floors[0]:
        raise ValueError("rows must hold one floor row (key 'floor') with 'seconds' and 'parts'")
    floor = floors[0]
    pipes = [r for r in rows if r is not floor]
    for r in pipes:
        if "skipped" not in r and not {"seconds", "ratio_to_floor"} <= set(r):
            raise ValueError(
                f"row {r['pipeline']!r} needs 'seconds' and 'ratio_to_floor' (or 'skipped')"
            )
    names = ["floor"] + [r["pipeline"] for r in pipes]
    floor_ms = 1e3 * floor["seconds"]["mean"]
    fig = go.Figure()
    for stage, part in floor["parts"].items():
        fig.add_trace(
            go.Bar(
                x=["floor"],
                y=[part["mean"] / floor["seconds"]["mean"]],
                name=f"floor: {stage}",
                marker_color=STAGE_COLORS.get(stage),
                legendgroup="floor parts",
                customdata=[1e3 * part["mean"]],
                hovertemplate=f"floor: {stage} %{{customdata:.1f}} ms "
                "(%{y:.0%} of the floor)<extra></extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=["floor"],
            y=[1.0],
            mode="markers",
            name="floor, timed unclocked",
            marker=dict(symbol="line-ew-open", size=40, color=NEUTRAL, line_width=3),
            hovertemplate=f"the floor, timed unclocked: {floor_ms:.1f} ms<extra></extra>",
        )
    )
    measured = [r for r in pipes if "skipped" not in r]
    if measured:
        fig.add_trace(
            go.Bar(
                x=[r["pipeline"] for r in measured],
                y=[1.0] * len(measured),
                name="floor (same batches)",
                marker_color=FLOOR_COLOR,
                hovertemplate=f"the floor: {floor_ms:.1f} ms<extra></extra>",
            )
        )
    labels = []  # (pipeline, height above which the label goes: over the bar and its error bar)
    for i, r in enumerate(measured):
        ratio = r["ratio_to_floor"]
        text = f"{ratio['mean']:.2f}x" + ("" if ratio["std"] is None else f" ± {ratio['std']:.2f}")
        fig.add_trace(
            go.Bar(
                x=[r["pipeline"]],
                y=[ratio["mean"] - 1.0],
                error_y=None if ratio["std"] is None else dict(array=[ratio["std"]]),
                name=f"{r['pipeline']}: overhead",
                # hatched: the overhead is no stage, whose colours the floor's parts wear
                marker=dict(
                    color=_color(r["pipeline"], i), pattern=dict(shape="/", fgcolor=NEUTRAL)
                ),
                text=[f"{text} the floor"],
                textposition="none",  # drawn by the label trace below, clear of the error bar
                customdata=[1e3 * r["seconds"]["mean"]],
                hovertemplate=f"%{{text}}: %{{customdata:.1f}} ms per iteration "
                f"(the floor {floor_ms:.1f} ms)<extra></extra>",
            )
        )
        top = max(ratio["mean"], 1.0) + (ratio["std"] or 0.0)
        labels.append((r["pipeline"], top, f"{text} the floor"))
    if labels:
        fig.add_trace(
            go.Scatter(
                x=[p for p, _, _ in labels],
                y=[y for _, y, _ in labels],
                text=[t for _, _, t in labels],
                mode="text",
                textposition="top center",
                showlegend=False,
                hoverinfo="skip",
            )
        )
    slot = 0.6 * FIGURE_WIDTH / len(names)  # px of the x axis one pipeline gets, about
    for r in pipes:
        if "skipped" in r:
            reason = "<br>".join(wrap(html.escape(r["skipped"]), slot, 10))
            fig.add_annotation(
                x=r["pipeline"],
                y=0,
                text=f"not measured here:<br>{reason}",
                showarrow=False,
                yanchor="bottom",
                font_size=10,
            )
    fig.update_xaxes(categoryorder="array", categoryarray=names)
    fig.update_layout(
        barmode="relative",
        yaxis_title="multiple of the floor",
    )
    return layout(
        fig,
        title="Each pipeline's iteration as a multiple of the floor",
        subtitle=subtitle,
        legend_title="part",
    )


def batch_scaling(
    rows: Sequence[dict], *, metric: str = "seeds_per_second", subtitle: str | None = None
) -> go.Figure:
    """Lines: ``metric`` (seeds per second, or step_seconds) against batch size, per pipeline.
    A pipeline keeps its colour on both kernel paths; a row whose ``kernel`` is "fused" (the
    compiled numba kernels) is drawn dashed, the torch kernels solid."""
    rows = _check_rows(rows, "rows", ["pipeline", "batch_size", metric])
    labels = {
        "seeds_per_second": "training seeds per second",
        "step_seconds": "seconds per iteration",
    }
    fig = go.Figure()
    names = list(dict.fromkeys(r["pipeline"] for r in rows))
    for i, name in enumerate(names):
        part = sorted((r for r in rows if r["pipeline"] == name), key=lambda r: r["batch_size"])
        fig.add_trace(
            go.Scatter(
                x=[r["batch_size"] for r in part],
                y=[r[metric] for r in part],
                mode="lines+markers",
                name=name,
                line_color=_color(name, i),
                line_dash="dash" if part[0].get("kernel") == "fused" else "solid",
            )
        )
    fig.update_xaxes(
        type="log", title_text="batch size (seeds per iteration)", **_axis_log_ticks(fig, "x")
    )
    fig.update_layout(yaxis_title=labels.get(metric, metric))
    return layout(fig, title="Scaling with batch size", subtitle=subtitle, legend_title="pipeline")


def _axis_log_ticks(fig: go.Figure, axis: str, *, fixed: bool = False) -> dict:
    """:func:`log_ticks` for the values the traces of ``fig`` put on ``axis`` ("x", "y2", ...),
    hidden traces too (``fixed``: one range for every view a menu shows)."""
    letter = axis[0]
    values = [
        v
        for t in fig.data
        if (getattr(t, f"{letter}axis", None) or letter) == axis
        for v in (getattr(t, letter, None) or ())
        if isinstance(v, (int, float))
    ]
    return log_ticks(values, fixed=fixed)


def gpu_results(
    rows: Sequence[dict],
    *,
    label: str,
    title: str = "Committed GPU measurements (not measured on this machine)",
) -> go.Figure:
    """Committed GPU measurements (rows from :func:`zg.experiments.gpu_result_rows`): ms per
    iteration per variant (left) and GPU execution fraction (right), per graph and batch.
    ``label`` must say where and when they were measured: they are not from this machine.
    ``title`` replaces the default one, e.g. to say that the rows are a CPU run of the check."""
    rows = _check_rows(rows, "rows", ["graph", "batch_size", "variant", "ms_per_iteration"])
    if not label:
        raise ValueError("label must say which machine measured these results")
    x_keys = list(dict.fromkeys((r["graph"], r["batch_size"]) for r in rows))
    x = [[g for g, _ in x_keys], [f"{b:,}" for _, b in x_keys]]  # short: they read level
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=("ms per iteration", "GPU execution fraction")
    )
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for i, variant in enumerate(variants):
        by_key = {(r["graph"], r["batch_size"]): r for r in rows if r["variant"] == variant}
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        fig.add_trace(
            go.Bar(
                x=x,
                y=[by_key[k]["ms_per_iteration"] if k in by_key else None for k in x_keys],
                name=variant,
                marker_color=color,
                legendgroup=variant,
            ),
            row=1,
            col=1,
        )
        fractions = [
            by_key[k].get("gpu_execution_fraction") if k in by_key else None for k in x_keys
        ]
        fig.add_trace(
            go.Bar(
                x=x,
                y=fractions,
                name=variant,
                marker_color=color,
                legendgroup=variant,
                showlegend=False,
            ),
            row=1,
            col=2,
        )
    fig.update_yaxes(title_text="ms per iteration", row=1, col=1)
    fig.update_yaxes(title_text="busy fraction", range=[0, 1.05], row=1, col=2)
    fig.update_xaxes(title_text="graph and batch size")
    fig.update_layout(barmode="group")
    return layout(fig, title=title, subtitle=label, legend="below", legend_title="variant")


def cost_growth(
    rows: Sequence[dict],
    *,
    size_batch: int,
    batch_graph: int,
    metric: str = "seconds_per_batch",
    subtitle: str | None = None,
) -> go.Figure:
    """Log-log lines: cost against graph size (left, at batch ``size_batch``) and against batch
    size (right, on the ``batch_graph``-node graph), per pipeline (rows from
    :func:`zg.experiments.cost_growth_rows`).

    A dropdown picks what is drawn: every pipeline's total together, or one pipeline's total
    with each of its stages (dashed, in the stage colours) underneath, so the stage that grows
    fastest is the one whose line climbs steepest. ``metric``: "seconds_per_batch" (with the
    standard deviation over the timed batches as error bars) or "projected_epoch_seconds"
    (seconds per batch times batches per epoch; the stages are scaled the same way).
    """
    rows = _check_rows(
        rows,
        "rows",
        ["pipeline", "num_nodes", "batch_size", "seconds_per_batch", "projected_epoch_seconds"]
        + list(STAGE_COLORS),
    )
    if metric not in ("seconds_per_batch", "projected_epoch_seconds"):
        raise ValueError(
            f"metric must be 'seconds_per_batch' or 'projected_epoch_seconds', got {metric!r}"
        )
    size_rows = [r for r in rows if r["batch_size"] == size_batch]
    batch_rows = [r for r in rows if r["num_nodes"] == batch_graph]
    if not size_rows:
        raise ValueError(
            f"no row has batch_size={size_batch} (size_batch): the size sweep is empty"
        )
    if not batch_rows:
        raise ValueError(
            f"no row has num_nodes={batch_graph} (batch_graph): the batch sweep is empty"
        )
    label = {
        "seconds_per_batch": "seconds per batch",
        "projected_epoch_seconds": "projected seconds per epoch",
    }[metric]
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.1,
        subplot_titles=(
            f"against graph size (batch {size_batch:,})",
            f"against batch size ({batch_graph:,} nodes)",
        ),
    )
    names = list(dict.fromkeys(r["pipeline"] for r in rows))
    owner: list = []  # per trace: (pipeline, is_total)

    def scale(r: dict) -> float:  # a stage's seconds per batch, in the metric's unit
        return (
            1.0
            if metric == "seconds_per_batch"
            else r["projected_epoch_seconds"] / r["seconds_per_batch"]
        )

    for i, name in enumerate(names):
        color = _color(name, i)
        for col, part, key in ((1, size_rows, "num_nodes"), (2, batch_rows, "batch_size")):
            mine = sorted((r for r in part if r["pipeline"] == name), key=lambda r: r[key])
            if not mine:
                continue
            error = None
            if metric == "seconds_per_batch":
                error = dict(
                    type="data",
                    array=[r.get("seconds_per_batch_std", 0.0) for r in mine],
                    visible=True,
                    thickness=1,
                )
            fig.add_trace(
                go.Scatter(
                    x=[r[key] for r in mine],
                    y=[r[metric] for r in mine],
                    mode="lines+markers",
                    name=name,
                    legendgroup=name,
                    showlegend=col == 1,
                    line=dict(color=color, width=3),
                    error_y=error,
                ),
                row=1,
                col=col,
            )
            owner.append((name, True))
            for stage, stage_color in STAGE_COLORS.items():
                values = [r[stage] * scale(r) for r in mine]
                fig.add_trace(
                    go.Scatter(
                        x=[r[key] for r in mine],
                        y=[v if v > 0 else None for v in values],
                        mode="lines+markers",
                        name=f"{name}: {stage}",
                        legendgroup=f"{name}: {stage}",
                        showlegend=col == 1,
                        line=dict(color=stage_color, dash="dash", width=1.5),
                        marker=dict(size=5),
                        visible=False,
                    ),
                    row=1,
                    col=col,
                )
                owner.append((name, False))
    buttons = [
        dict(
            label="all pipelines",
            method="update",
            args=[{"visible": [total for _, total in owner]}],
        )
    ]
    for name in names:
        buttons.append(
            dict(
                label=f"{name}, by stage",
                method="update",
                args=[{"visible": [who == name for who, _ in owner]}],
            )
        )
    fig.update_xaxes(
        type="log", title_text="nodes in the graph", row=1, col=1, **_axis_log_ticks(fig, "x")
    )
    fig.update_xaxes(
        type="log",
        title_text="batch size (seeds per iteration)",
        row=1,
        col=2,
        **_axis_log_ticks(fig, "x2"),
    )
    # one range for the totals and each pipeline's stages (the menu's views), labelled throughout
    fig.update_yaxes(
        type="log", title_text=label, row=1, col=1, **_axis_log_ticks(fig, "y", fixed=True)
    )
    fig.update_yaxes(type="log", row=1, col=2, **_axis_log_ticks(fig, "y2", fixed=True))
    fig.update_layout(updatemenus=[dict(buttons=buttons, direction="down", showactive=True)])
    # The legend of each button's view; the fullest one sizes the legend.
    legend = [(who, total, t.name) for (who, total), t in zip(owner, fig.data) if t.showlegend]
    views = [[n for _, total, n in legend if total]]
    views += [[n for who, _, n in legend if who == name] for name in names]
    return layout(
        fig,
        title=f"Cost growth: {label}, log-log",
        subtitle=subtitle,
        legend_entries=max(views, key=len),
        menu=True,
    )


def gpu_timeline(rows: Sequence[dict], *, label: str, iterations: int = 4) -> go.Figure:
    """A GPU timeline with its idle gaps, from measured execution fractions.

    Each row (from :func:`zg.experiments.gpu_result_rows`: ``variant``, ``ms_per_iteration``,
    ``gpu_execution_fraction``, optional ``graph`` and ``batch_size``) becomes one lane of
    ``iterations`` consecutive iterations; in each, the GPU-busy share (fraction x iteration
    time) is drawn solid and the rest, where the GPU waited, hatched. The profiler measures
    the total busy time of an iteration, not where each gap falls, so each iteration's gaps
    are drawn as one block at its end: the lengths are measured, the placement is not.

    ``label`` must say which machine measured the rows. Rows without a GPU execution fraction
    (a CPU run) are refused: a CPU run has no GPU timeline to draw.
    """
    rows = _check_rows(rows, "rows", ["variant", "ms_per_iteration", "gpu_execution_fraction"])
    if not label:
        raise ValueError("label must say which machine measured these results")
    iterations = int_arg(iterations, "iterations", low=1)
    missing = [r["variant"] for r in rows if r["gpu_execution_fraction"] is None]
    if missing:
        raise ValueError(
            f"rows {missing} have no GPU execution fraction (measured without a GPU?): "
            "there is no GPU timeline to draw"
        )
    for r in rows:
        f = float(r["gpu_execution_fraction"])
        if not 0.0 <= f <= 1.0:
            raise ValueError(
                f"gpu_execution_fraction must be in [0, 1], got {f} for {r['variant']!r}"
            )
    lanes = [
        " · ".join(
            str(x)
            for x in (
                r.get("graph"),
                f"batch {r['batch_size']}" if r.get("batch_size") else None,
                r["variant"],
            )
            if x
        )
        for r in rows
    ]
    fig = go.Figure()
    for kind, color, pattern in (
        ("GPU busy", OKABE_ITO["blue"], ""),
        ("GPU idle (waiting for the host)", OKABE_ITO["vermillion"], "/"),
    ):
        base, width, lane_of = [], [], []
        for lane, r in zip(lanes, rows):
            t = float(r["ms_per_iteration"])
            busy = t * float(r["gpu_execution_fraction"])
            for i in range(iterations):
                base.append(i * t + (0.0 if kind == "GPU busy" else busy))
                width.append(busy if kind == "GPU busy" else t - busy)
                lane_of.append(lane)
        fig.add_trace(
            go.Bar(
                base=base,
                x=width,
                y=lane_of,
                orientation="h",
                name=kind,
                marker_color=color,
                marker_pattern_shape=pattern,
                hovertemplate="%{x:.3f} ms<extra>" + html.escape(kind) + "</extra>",
            )
        )
    fig.update_layout(barmode="overlay", xaxis_title="ms since the first iteration began")
    return layout(
        fig,
        title=f"GPU timeline, {iterations} iterations per lane (gaps drawn at the end of each "
        "iteration: lengths measured, placement not)",
        subtitle=label,
        height=150 + 45 * len(rows),
    )
