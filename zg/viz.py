"""zg.viz: the plotly figures of the notebooks and reports, and the notebook display setup.

Where it sits: at the very end of the flow. :mod:`zg.lab` (and the rest of the package)
measures; a builder here turns those measurements into a ``plotly.graph_objects.Figure`` and
computes nothing experimental. ``import zg`` does not import this module: the core runs
without plotly; ``import zg.viz`` needs plotly (and ipywidgets for :func:`explore`).

    import zg.viz
    zg.viz.setup_notebook()                         # once, at the top of every notebook
    zg.viz.host_syncs({"zg dynamic": 9, "zg envelope": 0}).show()

Names and colours are the kit's everywhere: the stages ``sample -> compact -> gather ->
forward -> loss -> backward -> step`` (:data:`zg.step.STAGES`, coloured by :data:`STAGE_COLORS`) and the pipelines "DGL", "zg dynamic",
"zg envelope" (:data:`PIPELINE_COLORS`).

Offline by construction: :func:`setup_notebook` renders every figure both as plotly's own
mimetype (JupyterLab draws it with the bundled jupyterlab-plotly extension) and as HTML that
calls a plotly.js embedded once per notebook, inline. So an HTML report made with
``make report`` draws its figures with no network: no CDN for plotly.js or MathJax.
"""

from __future__ import annotations

import html
from typing import Any, Callable, List, Mapping, Optional, Sequence

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer
from plotly.subplots import make_subplots


from .step import STAGES

__all__ = ["setup_notebook", "explore", "RENDERER", "STAGE_COLORS", "PIPELINE_COLORS",
           "host_syncs", "hop_metadata", "sync_ops", "stage_timeline", "count_distributions",
           "memory_per_hop", "overflow_vs_margin", "execution_trace", "curves",
           "stage_breakdown", "batch_scaling", "gpu_results", "coverage_histogram",
           "bytes_by_kind", "offline_html"]

RENDERER = "zg_offline"
_STAGE_PALETTE = {"sample": "#4C78A8", "compact": "#72B7B2", "gather": "#54A24B",
                  "forward": "#EECA3B", "loss": "#B279A2", "backward": "#F58518", "step": "#E45756"}
STAGE_COLORS = {stage: _STAGE_PALETTE[stage] for stage in STAGES}     # in the order of the chain
PIPELINE_COLORS = {"DGL": "#8C564B", "zg dynamic": "#E45756", "zg envelope": "#4C78A8"}
_FALLBACK_COLORS = ["#4C78A8", "#F58518", "#54A24B", "#E45756", "#72B7B2", "#EECA3B",
                    "#B279A2", "#FF9DA6", "#9D755D", "#BAB0AC"]
MIB = 2**20


# ----------------------------------------------------------------------------- display setup


def offline_html(fig: go.Figure, height: Optional[int] = None) -> str:
    """HTML for ``fig`` that draws with an already loaded plotly.js: no plotly.js, no MathJax."""
    return pio.to_html(fig, include_plotlyjs=False, include_mathjax=False, full_html=False,
                       default_width="100%", default_height=height or 480, validate=False,
                       config={"displaylogo": False, "responsive": True})


class _OfflineHtmlRenderer(MimetypeRenderer):
    """text/html that calls ``Plotly.newPlot`` on the plotly.js :func:`setup_notebook` embedded.

    plotly's own "notebook" renderer would do, except that it adds a MathJax script from a CDN
    to every figure; this one adds nothing that needs the network.
    """

    def to_mimebundle(self, fig_dict):
        return {"text/html": offline_html(go.Figure(fig_dict))}


def setup_notebook(template: str = "plotly_white") -> str:
    """Make figures render live in JupyterLab and offline in HTML reports; call it once, first.

    * registers the renderer :data:`RENDERER` and makes ``"plotly_mimetype+zg_offline"`` the
      default: JupyterLab shows the plotly mimetype (interactive, through jupyterlab-plotly);
      nbconvert, which has no renderer for that mimetype, keeps the HTML;
    * embeds plotly.js inline in this cell's output (once per notebook; about 4.7 MB), which the
      HTML of every later figure draws with, so a report needs no network;
    * sets the default plotly template.

    Outside IPython it only sets the renderer and template. Returns the renderer string.
    """
    from plotly import __version__ as plotly_version
    from plotly.offline import get_plotlyjs

    pio.renderers[RENDERER] = _OfflineHtmlRenderer()
    pio.renderers.default = f"plotly_mimetype+{RENDERER}"
    pio.templates.default = template
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # pragma: no cover - IPython comes with plotly's notebook support
        return pio.renderers.default
    if get_ipython() is None:
        return pio.renderers.default
    bundle = ("<script type=\"text/javascript\">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
              f"<script type=\"text/javascript\">{get_plotlyjs()}</script>\n"
              f"<div class=\"zg-plotly-note\" style=\"font-size:smaller;color:#666\">plotly.js "
              f"embedded inline (plotly.py {html.escape(plotly_version)}): the figures below draw "
              f"without any network.</div>")
    display({"text/html": bundle, "text/plain": "plotly.js embedded for offline figures"}, raw=True)
    return pio.renderers.default


class Explorer:
    """An ipywidgets control panel over a figure, with a static stand-in for HTML reports.

    In JupyterLab it is the live widget: moving a control calls ``build`` again and redraws.
    A static HTML report has no kernel behind its widgets, so this object also offers a
    ``text/html`` rendering: the figure at the initial values (built and checked when the
    cell ran) with a line saying the controls are live in JupyterLab.
    """

    def __init__(self, build: Callable[..., go.Figure], controls: Mapping[str, Any]):
        import ipywidgets

        if not callable(build):
            raise TypeError(f"build must be callable, got {type(build).__name__}")
        if not controls:
            raise ValueError("explore needs at least one control (an ipywidgets widget)")
        for name, widget in controls.items():
            if not isinstance(widget, ipywidgets.ValueWidget):
                raise TypeError(f"control {name!r} must be an ipywidgets value widget "
                                f"(IntSlider, Dropdown, ...), got {type(widget).__name__}")
        self.build = build
        self.controls = dict(controls)
        self.initial = {name: w.value for name, w in self.controls.items()}
        # Built here, outside the widget callback, so an error fails the cell (interactive
        # would only print it) and nbval sees it.
        self.figure = build(**self.initial)
        if not isinstance(self.figure, go.Figure):
            raise TypeError(f"build must return a plotly Figure, got {type(self.figure).__name__}")
        self.widget = ipywidgets.interactive(self._draw, **self.controls)

    def _draw(self, **values):
        fig = self.figure if values == self.initial else self.build(**values)
        fig.show()

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        settings = ", ".join(f"{k}={v!r}" for k, v in self.initial.items())
        bundle["text/html"] = (
            f"<div class=\"zg-explore-static\"><p style=\"font-size:smaller;color:#666\">"
            f"Interactive controls ({html.escape(', '.join(self.controls))}) are live when this "
            f"notebook runs in JupyterLab; this static report shows the figure at "
            f"{html.escape(settings)}.</p>{offline_html(self.figure)}</div>")
        bundle.setdefault("text/plain", f"Explorer({settings})")
        return bundle


def explore(build: Callable[..., go.Figure], **controls: Any) -> Explorer:
    """``build(**values)`` under ipywidgets ``controls``, redrawn whenever a control moves.

    Each control is an ipywidgets value widget (``IntSlider``, ``FloatSlider``, ``Dropdown``,
    ``SelectionSlider``, ...) named after ``build``'s argument it drives; give sliders
    ``continuous_update=False`` when ``build`` measures something. Display the result (make
    it a cell's last expression). See :class:`Explorer` for how it looks in a static report.
    """
    return Explorer(build, controls)


# ----------------------------------------------------------------------------- helpers


def _title(text: str, subtitle: Optional[str]) -> dict:
    if subtitle:
        text = f"{text}<br><sup>{html.escape(subtitle)}</sup>"
    return {"text": text, "x": 0.01, "xanchor": "left"}


def _color(name: str, i: int) -> str:
    for key, color in PIPELINE_COLORS.items():
        if name == key or name.startswith(key + " "):
            return color
    return _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]


def _check_mapping(value: Any, name: str) -> Mapping:
    if not isinstance(value, Mapping) or not value:
        raise ValueError(f"{name} must be a non-empty dict, got {value!r}")
    return value


def _check_rows(rows: Any, name: str, keys: Sequence[str]) -> List[dict]:
    rows = list(rows) if rows is not None else []
    if not rows:
        raise ValueError(f"{name} is empty: nothing to plot")
    for key in keys:
        if any(key not in r for r in rows):
            raise ValueError(f"every row of {name} needs a {key!r} entry")
    return rows


# ----------------------------------------------------------------------------- notebook 00, 01


def host_syncs(counts: Mapping[str, Optional[float]], *, title: str = "Host syncs per iteration",
               subtitle: Optional[str] = None) -> go.Figure:
    """Bars: host syncs per iteration of each pipeline (None: not measurable, shown as a note)."""
    counts = _check_mapping(counts, "counts")
    names = list(counts)
    values = [counts[n] for n in names]
    fig = go.Figure(go.Bar(
        x=names, y=[0 if v is None else v for v in values], name="host syncs",
        marker_color=[_color(n, i) for i, n in enumerate(names)],
        text=["not visible" if v is None else f"{v:g}" for v in values], textposition="outside"))
    fig.update_layout(title=_title(title, subtitle), showlegend=False,
                      xaxis_title="pipeline", yaxis_title="host syncs per iteration")
    return fig


def hop_metadata(rows: Sequence[dict], *, subtitle: Optional[str] = None) -> go.Figure:
    """Grouped bars per hop: the frontier, the sampled edges and the distinct nodes found
    (rows from :func:`zg.lab.hop_metadata`). Each hop's distinct count is the size the host
    must read before it can allocate the next hop."""
    rows = _check_rows(rows, "rows", ["hop", "frontier", "sampled_edges", "distinct_nodes"])
    hops = [f"hop {r['hop']} (fanout {r.get('fanout', '?')})" for r in rows]
    fig = go.Figure()
    for key, label, color in (("frontier", "frontier (nodes expanded)", "#BAB0AC"),
                              ("sampled_edges", "sampled edges", "#72B7B2"),
                              ("distinct_nodes", "distinct nodes (metadata: read on the host)", "#E45756")):
        fig.add_trace(go.Bar(x=hops, y=[r[key] for r in rows], name=label, marker_color=color,
                             text=[f"{r[key]:,}" for r in rows], textposition="outside"))
    fig.update_layout(title=_title("What one sampling iteration produces, hop by hop", subtitle),
                      barmode="group", xaxis_title="hop (from the seeds outward)",
                      yaxis_title="count", legend_title_text="")
    return fig


def sync_ops(per_op: Mapping[str, Mapping[str, int]], *, subtitle: Optional[str] = None) -> go.Figure:
    """Grouped bars: host syncs by op for each sampler (``{sampler: {op: count}}``)."""
    per_op = _check_mapping(per_op, "per_op")
    ops = sorted({op for counts in per_op.values() for op in counts}) or ["(none)"]
    fig = go.Figure()
    for i, (name, counts) in enumerate(per_op.items()):
        total = sum(counts.values())
        fig.add_trace(go.Bar(x=ops, y=[counts.get(op, 0) for op in ops],
                             name=f"{name} ({total} in total)", marker_color=_color(name, i)))
    fig.update_layout(title=_title("Where the host waits: syncs by op in one sampling call", subtitle),
                      barmode="group", xaxis_title="op (aten)", yaxis_title="host syncs",
                      legend_title_text="sampler")
    return fig


def stage_timeline(timelines: Mapping[str, Sequence[dict]], *,
                   subtitle: Optional[str] = None) -> go.Figure:
    """One iteration of each pipeline on a time axis, one row per pipeline, coloured by stage
    (``{pipeline: events}`` from :func:`zg.lab.stage_timeline`). Stretches with host syncs are
    outlined in black and labelled with their count."""
    timelines = _check_mapping(timelines, "timelines")
    fig = go.Figure()
    present = {e["stage"] for events in timelines.values() for e in events}
    for stage in [s for s in STAGE_COLORS if s in present] + sorted(present - set(STAGE_COLORS)):
        # Legend entries in pipeline order, drawn by empty traces; the bars carry no legend.
        fig.add_trace(go.Bar(y=[next(iter(timelines))], x=[0], base=[0], orientation="h", name=stage,
                             legendgroup=stage, marker_color=STAGE_COLORS.get(stage, "#999"),
                             hoverinfo="skip"))
    for name, events in timelines.items():
        events = _check_rows(events, f"timelines[{name!r}]", ["stage", "start", "end"])
        for e in events:
            ms = 1e3 * (e["end"] - e["start"])
            syncs = e.get("host_syncs")
            note = "syncs not visible (C++)" if syncs is None else f"{syncs} host syncs"
            fig.add_trace(go.Bar(
                y=[name], x=[ms], base=[1e3 * e["start"]], orientation="h", name=e["stage"],
                legendgroup=e["stage"], showlegend=False,
                marker=dict(color=STAGE_COLORS.get(e["stage"], "#999"),
                            line=dict(color="black" if syncs else "rgba(0,0,0,0)", width=2)),
                text=[f"{syncs}" if syncs else ""], textposition="inside",
                hovertemplate=f"{html.escape(name)}<br>{e['stage']}: %{{x:.2f}} ms<br>{note}<extra></extra>"))
    fig.update_layout(title=_title("One training iteration, stage by stage (outlined: host syncs)", subtitle),
                      barmode="overlay", xaxis_title="time since the iteration started (ms)",
                      yaxis=dict(type="category", categoryorder="array", categoryarray=list(timelines),
                                 autorange="reversed", title_text=""),
                      legend_title_text="stage",
                      height=160 + 70 * len(timelines))
    return fig


# ----------------------------------------------------------------------------- notebook 02


def count_distributions(counts: Any, sizes: Mapping[str, Sequence[int]], *,
                        fanouts: Optional[Sequence[int]] = None,
                        subtitle: Optional[str] = None) -> go.Figure:
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
            raise ValueError(f"sizes[{label!r}] has {len(values)} entries for {counts.shape[1]} blocks")
    num_blocks = counts.shape[1]
    titles = [f"block {i}" + (f" (fanout {fanouts[i]})" if fanouts else "") for i in range(num_blocks)]
    fig = make_subplots(rows=1, cols=num_blocks, subplot_titles=titles)
    dash = ["dash", "dot", "dashdot", "longdash"]
    for i in range(num_blocks):
        column = counts[:, i]
        fig.add_trace(go.Histogram(x=column, name="true counts (oracle)", marker_color="#BAB0AC",
                                   showlegend=i == 0, legendgroup="counts", nbinsx=20),
                      row=1, col=i + 1)
        far = []
        shown = [int(column.max())]
        for j, (label, values) in enumerate(sizes.items()):
            color = _FALLBACK_COLORS[j % len(_FALLBACK_COLORS)]
            if values[i] > 2 * column.max():
                far.append(f"{label}: {values[i]:,}")
            else:
                shown.append(int(values[i]))
                fig.add_vline(x=values[i], line_dash=dash[j % len(dash)], line_color=color, row=1, col=i + 1)
            if i == 0:   # an empty trace per envelope, so the legend names its line
                fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", name=f"{label} envelope",
                                         line=dict(dash=dash[j % len(dash)], color=color)), row=1, col=1)
        low, high = float(column.min()), float(max(shown))
        pad = 0.05 * max(high - low, 1.0)
        title = "source nodes per batch"
        if far:
            title += "<br><sup>off this scale: " + ", ".join(far) + "</sup>"
        fig.update_xaxes(range=[low - pad, high + pad], title_text=title, row=1, col=i + 1)
    fig.update_yaxes(title_text="batches", row=1, col=1)
    fig.update_layout(title=_title("True counts per block against the envelope sizes", subtitle),
                      bargap=0.05)
    return fig


def memory_per_hop(memory: Mapping[str, Any], *, policies: Sequence[str] = ("worst_case", "envelope", "oracle_max", "oracle_mean"),
                   subtitle: Optional[str] = None) -> go.Figure:
    """Grouped bars: MiB per block under each sizing policy (``memory`` from
    :meth:`zg.Envelope.memory_model`), with each policy's total in the legend."""
    memory = _check_mapping(memory, "memory")
    labels = {"worst_case": "worst case", "envelope": "profiled envelope",
              "oracle_max": "oracle (largest batch)", "oracle_mean": "oracle (mean batch)"}
    colors = {"worst_case": "#E45756", "envelope": "#4C78A8", "oracle_max": "#72B7B2",
              "oracle_mean": "#54A24B"}
    fig = go.Figure()
    for policy in policies:
        if policy not in memory:
            continue
        blocks = memory[policy]
        total = sum(b["total"] for b in blocks)
        fig.add_trace(go.Bar(x=[f"block {i}" for i in range(len(blocks))],
                             y=[b["total"] / MIB for b in blocks],
                             name=f"{labels.get(policy, policy)}: {total / MIB:.1f} MiB",
                             marker_color=colors.get(policy)))
    if not fig.data:
        raise ValueError(f"memory holds none of the policies {list(policies)}")
    fig.update_layout(title=_title("Buffer memory per block under each sizing policy", subtitle),
                      barmode="group", xaxis_title="block (input layer first)", yaxis_title="MiB",
                      legend_title_text="policy (total)")
    return fig


def overflow_vs_margin(curves: Any, *, subtitle: Optional[str] = None) -> go.Figure:
    """Two panels against the profiling margin, one line per quantile (``curves``: one dict from
    :func:`zg.lab.overflow_curve`, or a list of them): the share of held-out batches that
    overflow (left) and the envelope's memory over the oracle's mean batch (right; the worst
    case's ratio, usually far above, is named in the panel title)."""
    if isinstance(curves, Mapping):
        curves = [curves]
    curves = list(curves or [])
    if not curves:
        raise ValueError("curves is empty: nothing to plot")
    first = curves[0]
    worst = first["worst_case_bytes"] / first["oracle_mean_bytes"]
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, subplot_titles=(
        "held-out batches that overflow",
        f"memory / oracle mean (worst case: {worst:.2f}x)"))
    for i, curve in enumerate(curves):
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        margins = [100 * m for m in curve["margins"]]
        label = f"quantile {curve['quantile']:.3g}"
        fig.add_trace(go.Scatter(x=margins, y=[100 * p for p in curve["overflow_probability"]],
                                 mode="lines+markers", name=label, line_color=color, legendgroup=label),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=margins, y=[b / curve["oracle_mean_bytes"] for b in curve["envelope_bytes"]],
                                 mode="lines+markers", name=label, line_color=color, legendgroup=label,
                                 showlegend=False), row=1, col=2)
    fig.update_xaxes(title_text="margin added to the quantile (%)")
    fig.update_yaxes(title_text="overflowing batches (%)", rangemode="tozero", row=1, col=1)
    fig.update_yaxes(title_text="envelope memory / oracle mean", row=1, col=2)
    fig.update_layout(title=_title("Overflow probability against margin, and what the margin costs",
                                   subtitle), legend_title_text="profiled at")
    return fig


# ----------------------------------------------------------------------------- notebook 03


def execution_trace(runs: Mapping[str, Sequence[dict]], *, subtitle: Optional[str] = None) -> go.Figure:
    """Which batch each executed step ran, in execution order, for each run
    (``{run: rows}`` from :func:`zg.lab.execution_trace`). Skipped steps (an earlier batch
    overflowed; the optimizer step was skipped on the device) are hollow markers."""
    runs = _check_mapping(runs, "runs")
    fig = go.Figure()
    for i, (name, rows) in enumerate(runs.items()):
        rows = _check_rows(rows, f"runs[{name!r}]", ["order", "batch", "applied", "epoch"])
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        for applied, symbol, label in ((True, "circle", "applied"), (False, "circle-open", "skipped, re-run later")):
            part = [r for r in rows if r["applied"] == applied]
            if not part:
                continue
            fig.add_trace(go.Scatter(
                x=[r["order"] for r in part], y=[r["batch"] for r in part], mode="markers",
                name=f"{name}: {label} ({len(part)})",
                marker=dict(symbol=symbol, color=color, size=8 if applied else 11, line=dict(width=2, color=color)),
                customdata=[[r["epoch"]] for r in part],
                hovertemplate="step %{x}<br>epoch %{customdata[0]}, batch %{y}<extra></extra>"))
    fig.update_layout(title=_title("Executed steps: overflow, skip on the device, rewind, resume", subtitle),
                      xaxis_title="executed step (replay number)", yaxis_title="batch index in its epoch",
                      legend_title_text="")
    return fig


def curves(series: Mapping[str, Sequence[float]], *, title: str, xaxis_title: str = "epoch",
           yaxis_title: str = "value", x: Optional[Sequence[float]] = None,
           subtitle: Optional[str] = None) -> go.Figure:
    """Lines, one per named series (loss or accuracy per epoch, ...)."""
    series = _check_mapping(series, "series")
    fig = go.Figure()
    for i, (name, values) in enumerate(series.items()):
        values = list(values)
        xs = list(x) if x is not None else list(range(len(values)))
        fig.add_trace(go.Scatter(x=xs, y=values, mode="lines+markers", name=name,
                                 line_color=_color(name, i)))
    fig.update_layout(title=_title(title, subtitle), xaxis_title=xaxis_title, yaxis_title=yaxis_title,
                      legend_title_text="")
    return fig


# ----------------------------------------------------------------------------- notebook 04


def stage_breakdown(rows: Sequence[dict], *, subtitle: Optional[str] = None) -> go.Figure:
    """Stacked bars of milliseconds per iteration by stage, for every (batch size, pipeline)
    (rows from :func:`zg.lab.profile_pipelines`); the whole-step time is marked on top."""
    rows = _check_rows(rows, "rows", ["pipeline", "batch_size", "stage_seconds", "step_seconds"])
    x = [[f"batch {r['batch_size']}" for r in rows], [r["pipeline"] for r in rows]]
    fig = go.Figure()
    for stage, color in STAGE_COLORS.items():
        values = [1e3 * r["stage_seconds"].get(stage, 0.0) for r in rows]
        if any(v > 0 for v in values):
            fig.add_trace(go.Bar(x=x, y=values, name=stage, marker_color=color))
    fig.add_trace(go.Scatter(x=x, y=[1e3 * r["step_seconds"] for r in rows], mode="markers",
                             name="whole step (timed separately)",
                             marker=dict(symbol="line-ew-open", size=28, color="black", line_width=3)))
    fig.update_layout(title=_title("Where an iteration's time goes, by stage", subtitle),
                      barmode="stack", yaxis_title="ms per iteration", legend_title_text="stage")
    return fig


def batch_scaling(rows: Sequence[dict], *, metric: str = "seeds_per_second",
                  subtitle: Optional[str] = None) -> go.Figure:
    """Lines: ``metric`` (seeds per second, or step_seconds) against batch size, per pipeline."""
    rows = _check_rows(rows, "rows", ["pipeline", "batch_size", metric])
    labels = {"seeds_per_second": "training seeds per second", "step_seconds": "seconds per iteration"}
    fig = go.Figure()
    names = list(dict.fromkeys(r["pipeline"] for r in rows))
    for i, name in enumerate(names):
        part = sorted((r for r in rows if r["pipeline"] == name), key=lambda r: r["batch_size"])
        fig.add_trace(go.Scatter(x=[r["batch_size"] for r in part], y=[r[metric] for r in part],
                                 mode="lines+markers", name=name, line_color=_color(name, i)))
    fig.update_xaxes(type="log", title_text="batch size (seeds per iteration)")
    fig.update_layout(title=_title("Scaling with batch size", subtitle),
                      yaxis_title=labels.get(metric, metric), legend_title_text="pipeline")
    return fig


def gpu_results(rows: Sequence[dict], *, label: str) -> go.Figure:
    """Committed GPU measurements (rows from :func:`zg.lab.gpu_result_rows`): ms per
    iteration per variant (left) and GPU execution fraction (right), per graph and batch.
    ``label`` must say where and when they were measured: they are not from this machine."""
    rows = _check_rows(rows, "rows", ["graph", "batch_size", "variant", "ms_per_iteration"])
    if not label:
        raise ValueError("label must say which machine measured these results")
    x_keys = list(dict.fromkeys((r["graph"], r["batch_size"]) for r in rows))
    x = [[g for g, _ in x_keys], [f"batch {b}" for _, b in x_keys]]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("ms per iteration", "GPU execution fraction"))
    variants = list(dict.fromkeys(r["variant"] for r in rows))
    for i, variant in enumerate(variants):
        by_key = {(r["graph"], r["batch_size"]): r for r in rows if r["variant"] == variant}
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        fig.add_trace(go.Bar(x=x, y=[by_key[k]["ms_per_iteration"] if k in by_key else None for k in x_keys],
                             name=variant, marker_color=color, legendgroup=variant), row=1, col=1)
        fractions = [by_key[k].get("gpu_execution_fraction") if k in by_key else None for k in x_keys]
        fig.add_trace(go.Bar(x=x, y=fractions, name=variant, marker_color=color, legendgroup=variant,
                             showlegend=False), row=1, col=2)
    fig.update_yaxes(title_text="ms per iteration", row=1, col=1)
    fig.update_yaxes(title_text="busy fraction", range=[0, 1.05], row=1, col=2)
    fig.update_layout(title=_title("Committed GPU measurements (not measured on this machine)", label),
                      barmode="group", legend_title_text="variant")
    return fig


# ----------------------------------------------------------------------------- Grappa (tour)


def coverage_histogram(coverage: Any, *, hops: int, subtitle: Optional[str] = None) -> go.Figure:
    """Histogram of per-node coverage in [0, 1] (from ``zg.grappa.coverage``)."""
    import numpy as np

    values = np.asarray(coverage, dtype=float).ravel()
    if values.size == 0:
        raise ValueError("coverage is empty")
    fig = go.Figure(go.Histogram(x=values, nbinsx=25, marker_color="#4C78A8", name="nodes"))
    fig.add_vline(x=float(values.mean()), line_dash="dash", line_color="#E45756",
                  annotation_text=f"mean {values.mean():.2f}")
    fig.update_layout(title=_title(f"How much of each node's {hops}-hop neighbourhood its worker sees",
                                   subtitle),
                      xaxis_title=f"{hops}-hop coverage", yaxis_title="nodes", showlegend=False)
    return fig


def bytes_by_kind(by_kind: Mapping[str, Sequence[float]], *, title: str = "Bytes each worker sent",
                  subtitle: Optional[str] = None) -> go.Figure:
    """Stacked bars per worker of bytes sent by kind (``{kind: [bytes per worker]}``)."""
    by_kind = _check_mapping(by_kind, "by_kind")
    workers = max(len(v) for v in by_kind.values())
    fig = go.Figure()
    for i, (kind, values) in enumerate(by_kind.items()):
        total = sum(values)
        fig.add_trace(go.Bar(x=[f"worker {w}" for w in range(workers)], y=list(values),
                             name=f"{kind}: {_human(total)}", marker_color=_FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]))
    fig.update_layout(title=_title(title, subtitle), barmode="stack", xaxis_title="worker",
                      yaxis_title="bytes", legend_title_text="kind (total)")
    return fig


# ----------------------------------------------------------------------------- notebooks 05-06
# (partitions and isolation; gradient-only training)

__all__ += ["coverage_distributions", "partition_sweep", "traffic_vs_batch", "partition_view",
            "bytes_per_epoch_by_run"]

METHOD_COLORS = {"random": "#E45756", "metis": "#4C78A8"}


def _method_color(name: str, i: int) -> str:
    return METHOD_COLORS.get(str(name).split(" ")[0].lower(), _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)])


def _coverage_traces(coverages: Mapping[str, Any], hops: int, fig: go.Figure, **where: Any) -> None:
    import numpy as np

    for i, (label, values) in enumerate(coverages.items()):
        values = np.asarray(values, dtype=float).ravel()
        if values.size == 0:
            raise ValueError(f"coverages[{label!r}] is empty")
        color = _method_color(label, i)
        fig.add_trace(go.Histogram(x=values, xbins=dict(start=0.0, end=1.0001, size=0.04),
                                   name=f"{label}: mean {values.mean():.2f}", marker_color=color,
                                   opacity=0.6, legendgroup=label), **where)
        fig.add_vline(x=float(values.mean()), line_dash="dash", line_color=color, **where)


def coverage_distributions(coverages: Mapping[str, Any], *, hops: int,
                           subtitle: Optional[str] = None) -> go.Figure:
    """Overlaid histograms of per-node ``hops``-hop coverage, one per partition
    (``{label: values in [0, 1]}``, e.g. from :func:`zg.grappa.lab.partition_quality`), each
    with a dashed line at its mean."""
    coverages = _check_mapping(coverages, "coverages")
    fig = go.Figure()
    _coverage_traces(coverages, hops, fig)
    fig.update_layout(title=_title(f"How much of each node's {hops}-hop neighbourhood its worker sees",
                                   subtitle),
                      barmode="overlay", xaxis_title=f"{hops}-hop coverage (1 = nothing lost)",
                      yaxis_title="nodes", legend_title_text="partition")
    fig.update_xaxes(range=[0, 1.02])
    return fig


def partition_sweep(rows: Sequence[dict], *, hops: int = 2, subtitle: Optional[str] = None) -> go.Figure:
    """Two panels against the number of workers P, one line per method (rows from
    :func:`zg.grappa.lab.partition_sweep`): the fraction of edges cut (with the expectation
    (P - 1) / P of a uniformly random assignment, dotted) and the mean ``hops``-hop coverage."""
    key = f"coverage_{hops}"
    rows = _check_rows(rows, "rows", ["method", "num_parts", "edge_cut_fraction", key])
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12,
                        subplot_titles=("edges cut (never seen by a worker)", f"mean {hops}-hop coverage"))
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for i, method in enumerate(methods):
        part = sorted((r for r in rows if r["method"] == method), key=lambda r: r["num_parts"])
        xs = [r["num_parts"] for r in part]
        color = _method_color(method, i)
        fig.add_trace(go.Scatter(x=xs, y=[r["edge_cut_fraction"] for r in part], mode="lines+markers",
                                 name=method, line_color=color, legendgroup=method), row=1, col=1)
        fig.add_trace(go.Scatter(x=xs, y=[r[key] for r in part], mode="lines+markers", name=method,
                                 line_color=color, legendgroup=method, showlegend=False), row=1, col=2)
    ps = sorted({r["num_parts"] for r in rows})
    fig.add_trace(go.Scatter(x=ps, y=[(p - 1) / p for p in ps], mode="lines", name="(P - 1) / P",
                             line=dict(dash="dot", color="#999")), row=1, col=1)
    fig.update_xaxes(title_text="workers P", type="log", tickvals=ps, ticktext=[str(p) for p in ps])
    fig.update_yaxes(title_text="fraction of edges", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(title_text="coverage", range=[0, 1.02], row=1, col=2)
    fig.update_layout(title=_title("Random against METIS partitions as P grows", subtitle),
                      legend_title_text="partition")
    return fig


def traffic_vs_batch(rows: Sequence[dict], *, subtitle: Optional[str] = None) -> go.Figure:
    """Bytes one worker sends per epoch against the global batch size (rows from
    :func:`zg.grappa.lab.traffic_rows`, one P): fetching features, one line per partition
    method, against exchanging gradients (Grappa; the same for every partition). Log axes."""
    rows = _check_rows(rows, "rows", ["method", "batch_size", "feature_bytes", "gradient_bytes"])
    fig = go.Figure()
    methods = list(dict.fromkeys(r["method"] for r in rows))
    for i, method in enumerate(methods):
        part = sorted((r for r in rows if r["method"] == method), key=lambda r: r["batch_size"])
        fig.add_trace(go.Scatter(x=[r["batch_size"] for r in part], y=[r["feature_bytes"] for r in part],
                                 mode="lines+markers", name=f"feature fetching, {method} partition",
                                 line_color=_method_color(method, i)))
    grad = sorted({(r["batch_size"], r["gradient_bytes"]) for r in rows})
    fig.add_trace(go.Scatter(x=[b for b, _ in grad], y=[v for _, v in grad], mode="lines+markers",
                             name="gradients only (Grappa), any partition",
                             line=dict(color="black", dash="dash")))
    sizes = [b for b, _ in grad]
    fig.update_xaxes(type="log", tickvals=sizes, ticktext=[str(b) for b in sizes],
                     title_text="global batch size (seeds per iteration)")
    fig.update_yaxes(type="log", title_text="bytes per worker per epoch")
    fig.update_layout(title=_title("Per epoch: fetching features against exchanging gradients", subtitle),
                      legend_title_text="")
    return fig


def partition_view(coverages: Mapping[str, Any], traffic: Sequence[dict], *, hops: int,
                   subtitle: Optional[str] = None) -> go.Figure:
    """One P at a glance (the notebook's slider redraws it): coverage histograms per partition
    (left) and bytes per worker per epoch (right): feature fetching on each partition and
    Grappa's gradients (rows from :func:`zg.grappa.lab.traffic_rows`, one batch size)."""
    coverages = _check_mapping(coverages, "coverages")
    traffic = _check_rows(traffic, "traffic", ["method", "feature_bytes", "gradient_bytes"])
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.12, column_widths=[0.6, 0.4],
                        subplot_titles=(f"{hops}-hop coverage per node", "bytes per worker per epoch"))
    _coverage_traces(coverages, hops, fig, row=1, col=1)
    labels = [f"fetch features<br>({r['method']})" for r in traffic] + ["gradients only<br>(Grappa)"]
    values = [r["feature_bytes"] for r in traffic] + [traffic[0]["gradient_bytes"]]
    colors = [_method_color(r["method"], i) for i, r in enumerate(traffic)] + ["#333333"]
    fig.add_trace(go.Bar(x=labels, y=values, marker_color=colors, showlegend=False,
                         text=[_human(v) for v in values], textposition="outside"), row=1, col=2)
    fig.update_layout(barmode="overlay", title=_title("One partition size at a glance", subtitle),
                      legend_title_text="partition")
    fig.update_xaxes(range=[0, 1.02], title_text="coverage", row=1, col=1)
    fig.update_yaxes(title_text="nodes", row=1, col=1)
    fig.update_yaxes(title_text="bytes", range=[0, 1.2 * max(values)], row=1, col=2)
    return fig


def bytes_per_epoch_by_run(rows: Sequence[dict], *, kinds: Sequence[str] = ("gradients", "scalars", "features", "parameters"),
                           subtitle: Optional[str] = None) -> go.Figure:
    """Stacked bars, one per run: bytes one worker sent per epoch by kind (rows from
    :func:`zg.grappa.lab.trainer_rows`, keys ``<kind>_per_epoch``); each bar's total on top."""
    rows = _check_rows(rows, "rows", ["run"] + [f"{k}_per_epoch" for k in kinds])
    runs = [r["run"] for r in rows]
    fig = go.Figure()
    for i, kind in enumerate(kinds):
        values = [r[f"{kind}_per_epoch"] for r in rows]
        fig.add_trace(go.Bar(x=runs, y=values, name=kind, marker_color=_FALLBACK_COLORS[i % len(_FALLBACK_COLORS)],
                             hovertemplate=f"{kind}: %{{y:,.0f}} B<extra></extra>"))
    totals = [sum(r[f"{k}_per_epoch"] for k in kinds) for r in rows]
    fig.add_trace(go.Scatter(x=runs, y=totals, mode="text", text=[_human(t) for t in totals],
                             textposition="top center", showlegend=False, hoverinfo="skip"))
    fig.update_layout(title=_title("Bytes one worker sent per epoch, by kind", subtitle), barmode="stack",
                      xaxis_title="run", yaxis_title="bytes per worker per epoch", legend_title_text="kind",
                      yaxis_range=[0, 1.15 * max(max(totals), 1)])
    return fig


# ----------------------------------------------------------------------------- notebooks 07-08
# (coverage correction; repartitioning and scale)

__all__ += ["estimator_errors", "shrink_curve", "accuracy_vs_bytes", "rmat_scaling", "epoch_projection"]


def estimator_errors(rows: Sequence[dict], *, subtitle: Optional[str] = None) -> go.Figure:
    """Stacked bars per (weighting, estimator): squared bias below, variance on top, so each
    bar's height is the relative MSE against the exact gradient (rows from
    :func:`zg.grappa.lab.error_rows`; a ``partition`` entry, if present, adds an x level)."""
    rows = _check_rows(rows, "rows", ["weighting", "estimator", "bias_squared", "variance"])
    levels = [[r["partition"] for r in rows]] if all("partition" in r for r in rows) else []
    x = levels + [[r["weighting"] for r in rows], [r["estimator"] for r in rows]]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[r["bias_squared"] for r in rows], name="bias²", marker_color="#E45756",
                         hovertemplate="bias² %{y:.4f}<extra></extra>"))
    fig.add_trace(go.Bar(x=x, y=[r["variance"] for r in rows], name="variance", marker_color="#4C78A8",
                         hovertemplate="variance %{y:.4f}<extra></extra>"))
    fig.update_layout(title=_title("Each estimator's error against the exact full-graph gradient", subtitle),
                      barmode="stack", yaxis_title="relative MSE = bias² + variance (÷ |g*|²)",
                      legend_title_text="")
    return fig


def shrink_curve(sweep: Mapping[str, Any], *, chosen: Optional[Mapping[str, float]] = None,
                 subtitle: Optional[str] = None) -> go.Figure:
    """The shrink estimator's squared bias, variance and relative MSE against lambda (from
    :func:`zg.grappa.lab.shrink_sweep`); the data-driven lambdas of the draws as ticks on the
    axis and, if given, ``chosen`` = ``{"lambda", "relative_mse"}`` recomputed from scratch."""
    sweep = _check_mapping(sweep, "sweep")
    for key in ("lambdas", "bias", "variance", "relative_mse"):
        if key not in sweep:
            raise ValueError(f"sweep needs a {key!r} entry (from zg.grappa.lab.shrink_sweep)")
    lam = list(sweep["lambdas"])
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=lam, y=[b * b for b in sweep["bias"]], mode="lines", name="bias²",
                             line_color="#E45756"))
    fig.add_trace(go.Scatter(x=lam, y=list(sweep["variance"]), mode="lines", name="variance",
                             line_color="#4C78A8"))
    fig.add_trace(go.Scatter(x=lam, y=list(sweep["relative_mse"]), mode="lines", name="relative MSE",
                             line=dict(color="black", width=3)))
    auto = list(sweep.get("auto_lambda") or [])
    if auto:
        fig.add_trace(go.Scatter(x=auto, y=[0.0] * len(auto), mode="markers", name="auto λ of each draw",
                                 marker=dict(symbol="triangle-up", size=11, color="#F58518")))
    if chosen is not None:
        fig.add_trace(go.Scatter(x=[chosen["lambda"]], y=[chosen["relative_mse"]], mode="markers",
                                 name=f"λ = {chosen['lambda']:.2f}, recomputed",
                                 marker=dict(symbol="circle-open", size=16, color="#54A24B", line_width=3)))
    fig.update_layout(title=_title("Shrinkage: from batch (λ = 0) to uniform (λ = 1)", subtitle),
                      xaxis_title="λ (shrinkage toward uniform weights)",
                      yaxis_title="relative to |g*|²", legend_title_text="")
    return fig


def accuracy_vs_bytes(rows: Sequence[dict], *, subtitle: Optional[str] = None) -> go.Figure:
    """One marker per training run: bytes one worker sent over the whole run (log scale)
    against test accuracy. Rows: ``{"run", "bytes", "accuracy"}`` and optionally
    ``"counted_bytes"`` (bytes counted but not sent, e.g. repartitioning moves), drawn as a
    second, hollow marker joined to the first."""
    rows = _check_rows(rows, "rows", ["run", "bytes", "accuracy"])
    fig = go.Figure()
    for i, r in enumerate(rows):
        color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
        sent = max(float(r["bytes"]), 1.0)
        fig.add_trace(go.Scatter(x=[sent], y=[r["accuracy"]], mode="markers", name=r["run"],
                                 marker=dict(size=13, color=color), legendgroup=r["run"],
                                 hovertemplate=f"{html.escape(r['run'])}<br>{_human(sent)} sent<br>"
                                               "accuracy %{y:.3f}<extra></extra>"))
        extra = float(r.get("counted_bytes") or 0)
        if extra > 0:
            fig.add_trace(go.Scatter(x=[sent, sent + extra], y=[r["accuracy"]] * 2, mode="lines+markers",
                                     line=dict(color=color, dash="dot"), legendgroup=r["run"], showlegend=False,
                                     marker=dict(symbol=["circle", "circle-open"], size=[1, 13], color=color),
                                     hovertemplate=f"+ {_human(extra)} repartitioning (counted, not sent)"
                                                   "<extra></extra>"))
    fig.update_xaxes(type="log", title_text="bytes one worker sent in the whole run (log)")
    fig.update_layout(title=_title("Accuracy against bytes sent", subtitle), yaxis_title="test accuracy",
                      legend_title_text="run")
    return fig


def rmat_scaling(rows: Sequence[dict], *, subtitle: Optional[str] = None) -> go.Figure:
    """Left: bytes one worker sends per iteration against graph size, feature fetching vs
    Grappa's gradients (log-log). Right: edge-cut fraction and mean coverage against size.
    Rows from :func:`zg.grappa.lab.scaling_rows`."""
    rows = _check_rows(rows, "rows", ["nodes", "feature_bytes_per_iteration", "gradient_bytes_per_iteration",
                                      "edge_cut_fraction", "mean_coverage"])
    rows = sorted(rows, key=lambda r: r["nodes"])
    n = [r["nodes"] for r in rows]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("bytes per worker per iteration",
                                                        "what isolation loses"))
    fig.add_trace(go.Scatter(x=n, y=[r["feature_bytes_per_iteration"] for r in rows], mode="lines+markers",
                             name="feature fetching: features", line_color="#8C564B"), row=1, col=1)
    fig.add_trace(go.Scatter(x=n, y=[r["gradient_bytes_per_iteration"] for r in rows], mode="lines+markers",
                             name="gradients (both designs)", line_color="#4C78A8"), row=1, col=1)
    fig.add_trace(go.Scatter(x=n, y=[r["edge_cut_fraction"] for r in rows], mode="lines+markers",
                             name="edge-cut fraction", line_color="#E45756"), row=1, col=2)
    fig.add_trace(go.Scatter(x=n, y=[r["mean_coverage"] for r in rows], mode="lines+markers",
                             name="mean coverage (training nodes)", line_color="#54A24B"), row=1, col=2)
    fig.update_xaxes(type="log", title_text="nodes")
    fig.update_yaxes(type="log", title_text="bytes", row=1, col=1)
    fig.update_yaxes(range=[0, 1.05], title_text="fraction", row=1, col=2)
    fig.update_layout(title=_title("R-MAT graphs of growing size", subtitle), legend_title_text="")
    return fig


def epoch_projection(rows: Sequence[dict], *, title: str, subtitle: Optional[str] = None) -> go.Figure:
    """Stacked bars per (link, design): compute seconds (measured per iteration on this machine,
    times the iterations) and link seconds (the link model). Rows from
    :func:`zg.grappa.lab.epoch_projection`. ``title`` must say it is a projection."""
    rows = _check_rows(rows, "rows", ["design", "link", "compute_seconds", "link_seconds"])
    if "projection" not in str(title).lower():
        raise ValueError("title must say that this figure is a projection (link model), not a measurement")
    x = [[r["link"] for r in rows], [r["design"] for r in rows]]
    hours = 1 / 3600
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=[r["compute_seconds"] * hours for r in rows], marker_color="#BAB0AC",
                         name="compute (measured per iteration here, × iterations)"))
    fig.add_trace(go.Bar(x=x, y=[r["link_seconds"] * hours for r in rows], marker_color="#F58518",
                         name="network (link model)"))
    fig.update_layout(title=_title(title, subtitle), barmode="stack", yaxis_title="hours per epoch",
                      legend_title_text="")
    return fig


# ----------------------------------------------------------------------------- notebook 09


def variant_summary(rows: Sequence[dict], *, metrics: Optional[Mapping[str, str]] = None,
                    subtitle: Optional[str] = None) -> go.Figure:
    """Side-by-side bars, one panel per metric, one bar per ``variant`` (rows from
    :func:`zg.lab.together`). ``metrics`` maps a row key to its panel title (default: seconds
    per epoch, bytes per epoch per worker, final test accuracy)."""
    metrics = dict(metrics or {"seconds_per_epoch": "seconds per epoch (median)",
                               "bytes_per_epoch_per_worker": "bytes sent per epoch per worker",
                               "test_acc": "final test accuracy"})
    rows = _check_rows(rows, "rows", ["variant", *metrics])
    names = [r["variant"] for r in rows]
    fig = make_subplots(rows=1, cols=len(metrics), subplot_titles=list(metrics.values()))
    for col, key in enumerate(metrics, start=1):
        values = [float(r[key]) for r in rows]
        text = [_human(v) if key.startswith("bytes") else f"{v:.3g}" for v in values]
        fig.add_trace(go.Bar(x=names, y=values, text=text, textposition="outside", showlegend=False,
                             marker_color=[_FALLBACK_COLORS[i % len(_FALLBACK_COLORS)] for i in range(len(names))]),
                      row=1, col=col)
    fig.update_layout(title=_title("Side by side", subtitle), margin={"t": 110})
    return fig


__all__ += ["variant_summary"]



def _human(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count}"  # pragma: no cover
