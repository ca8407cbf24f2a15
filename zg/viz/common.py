"""zg.viz.common: what every figure shares: the notebook display setup, colours and helpers.

Where it sits: under :mod:`zg.viz.zerognn` and :mod:`zg.viz.grappa`. :func:`setup_notebook`
makes figures render live in JupyterLab and offline in HTML reports; :func:`explore` puts
ipywidgets controls over a figure; the palettes (:data:`STAGE_COLORS`,
:data:`PIPELINE_COLORS`) give a stage or a pipeline the same colour in every figure;
:func:`curves` draws the lines both halves plot (loss or accuracy per epoch, ...).

Offline by construction: :func:`setup_notebook` renders every figure both as plotly's own
mimetype (JupyterLab draws it with the bundled jupyterlab-plotly extension) and as HTML that
calls a plotly.js embedded once per notebook, inline. So an HTML report made with
``make report`` draws its figures with no network: no CDN for plotly.js or MathJax.
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.base_renderers import MimetypeRenderer

from ..step import STAGES

__all__ = [
    "setup_notebook",
    "explore",
    "Explorer",
    "RENDERER",
    "STAGE_COLORS",
    "PIPELINE_COLORS",
    "offline_html",
    "curves",
]

RENDERER = "zg_offline"
_STAGE_PALETTE = {
    "sample": "#4C78A8",
    "compact": "#72B7B2",
    "gather": "#54A24B",
    "forward": "#EECA3B",
    "loss": "#B279A2",
    "backward": "#F58518",
    "step": "#E45756",
}
STAGE_COLORS = {stage: _STAGE_PALETTE[stage] for stage in STAGES}  # in the order of the chain
PIPELINE_COLORS = {"DGL": "#8C564B", "zg dynamic": "#E45756", "zg envelope": "#4C78A8"}
_FALLBACK_COLORS = [
    "#4C78A8",
    "#F58518",
    "#54A24B",
    "#E45756",
    "#72B7B2",
    "#EECA3B",
    "#B279A2",
    "#FF9DA6",
    "#9D755D",
    "#BAB0AC",
]


# ----------------------------------------------------------------------------- display setup


def offline_html(fig: go.Figure, height: int | None = None) -> str:
    """HTML for ``fig`` that draws with an already loaded plotly.js: no plotly.js, no MathJax."""
    return pio.to_html(
        fig,
        include_plotlyjs=False,
        include_mathjax=False,
        full_html=False,
        default_width="100%",
        default_height=height or 480,
        validate=False,
        config={"displaylogo": False, "responsive": True},
    )


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
    bundle = (
        "<script type=\"text/javascript\">window.PlotlyConfig = {MathJaxConfig: 'local'};</script>\n"
        f'<script type="text/javascript">{get_plotlyjs()}</script>\n'
        f'<div class="zg-plotly-note" style="font-size:smaller;color:#666">plotly.js '
        f"embedded inline (plotly.py {html.escape(plotly_version)}): the figures below draw "
        f"without any network.</div>"
    )
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
                raise TypeError(
                    f"control {name!r} must be an ipywidgets value widget "
                    f"(IntSlider, Dropdown, ...), got {type(widget).__name__}"
                )
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
            f'<div class="zg-explore-static"><p style="font-size:smaller;color:#666">'
            f"Interactive controls ({html.escape(', '.join(self.controls))}) are live when this "
            f"notebook runs in JupyterLab; this static report shows the figure at "
            f"{html.escape(settings)}.</p>{offline_html(self.figure)}</div>"
        )
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


def _title(text: str, subtitle: str | None) -> dict:
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


def _check_rows(rows: Any, name: str, keys: Sequence[str]) -> list[dict]:
    rows = list(rows) if rows is not None else []
    if not rows:
        raise ValueError(f"{name} is empty: nothing to plot")
    for key in keys:
        if any(key not in r for r in rows):
            raise ValueError(f"every row of {name} needs a {key!r} entry")
    return rows


def _human(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count}"  # pragma: no cover


# ----------------------------------------------------------------------------- figures of both halves


def curves(
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    xaxis_title: str = "epoch",
    yaxis_title: str = "value",
    x: Sequence[float] | None = None,
    subtitle: str | None = None,
) -> go.Figure:
    """Lines, one per named series (loss or accuracy per epoch, ...)."""
    series = _check_mapping(series, "series")
    fig = go.Figure()
    for i, (name, values) in enumerate(series.items()):
        values = list(values)
        xs = list(x) if x is not None else list(range(len(values)))
        fig.add_trace(
            go.Scatter(x=xs, y=values, mode="lines+markers", name=name, line_color=_color(name, i))
        )
    fig.update_layout(
        title=_title(title, subtitle),
        xaxis_title=xaxis_title,
        yaxis_title=yaxis_title,
        legend_title_text="",
    )
    return fig
