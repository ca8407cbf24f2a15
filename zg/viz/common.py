"""zg.viz.common: what every figure shares: the notebook display setup, colours and helpers.

Where it sits: under :mod:`zg.viz.zerognn` and :mod:`zg.viz.grappa`. :func:`setup_notebook`
makes figures render live in JupyterLab and offline in HTML reports; :func:`explore` puts
ipywidgets controls over a figure; the palettes (:data:`STAGE_COLORS`,
:data:`PIPELINE_COLORS`) give a stage or a pipeline the same colour in every figure;
:func:`curves` draws the lines both halves plot (loss or accuracy per epoch, ...).

:func:`layout` is what every figure builder ends with: it lays a figure out for the narrowest
place it is read, JupyterLab's output area (:data:`FIGURE_WIDTH`, 968 px): the title and
subtitle broken into lines that fit, the top margin they need, the legend at the right or in
rows below the plot without scrolling, long axis titles broken, margins for tick labels, and a
fixed height, so that JupyterLab and an HTML report draw the same figure. :func:`describe`
names a graph in one short line for a subtitle; :func:`byte_ticks` labels a bytes axis in
KiB / MiB like the kit's labels. The palette module: :data:`OKABE_ITO` (colours every eye tells
apart), :func:`series_style` (a colour, dash and marker per series), the "zg" plotly template
(a transparent page that follows JupyterLab's light and dark themes), and how a colour reads
(:func:`simulate`: deuteranopia and protanopia after Machado et al. 2009, :func:`delta_e`: CIE76,
:func:`contrast`: WCAG 2), with which tools/figure_check.py checks every drawn figure.

Offline by construction: :func:`setup_notebook` renders every figure both as plotly's own
mimetype (JupyterLab draws it with the bundled jupyterlab-plotly extension) and as HTML that
calls a plotly.js embedded once per notebook, inline. So an HTML report made with
``make report`` draws its figures with no network: no CDN for plotly.js or MathJax.
"""

from __future__ import annotations

import html
import math
import re
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
    "layout",
    "describe",
    "wrap",
    "text_width",
    "byte_ticks",
    "FIGURE_WIDTH",
    "FIGURE_HEIGHT",
    "FONT_FAMILY",
    "OKABE_ITO",
    "NEUTRAL",
    "LIGHT_NEUTRAL",
    "SYMBOLS",
    "PATTERNS",
    "TEMPLATE_NAME",
    "series_style",
    "crowded",
    "log_ticks",
    "simulate",
    "delta_e",
    "contrast",
    "luminance",
    "alpha",
    "parse_colour",
    "MACHADO",
    "DISTINCT",
    "LIGHT_PAGE",
    "DARK_PAGE",
]

# ----------------------------------------------------------------------------- how a colour reads
# Plain Python, no dependency. A colour is parsed as plotly writes it (#RRGGBB, #RGB, rgb(),
# rgba(), a few CSS names), and
# * simulate() is what a person with deuteranopia or protanopia sees: the matrices of Machado,
#   Oliveira and Fernandes, "A Physiologically-based Model for Simulation of Color Vision
#   Deficiency", IEEE TVCG 15(6), 2009, at severity 1.0 (the values the authors publish at
#   https://www.inf.ufrgs.br/~oliveira/pubs_files/CVD_Simulation/CVD_Simulation.html), applied
#   to linear sRGB (as colorspacious does) and clipped to the gamut;
# * delta_e() is the CIE76 colour difference (Euclidean distance in CIELAB, D65 white): about
#   2.3 is a just-noticeable difference; two series need far more (DISTINCT);
# * contrast() is WCAG 2's contrast ratio of two colours' relative luminances.
# tools/figure_check.py checks every drawn figure with them.

# Machado et al. 2009, severity 1.0, on linear RGB.
MACHADO = {
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
}
# Two series told apart by colour alone need at least this CIE76 difference, with normal vision
# and under each simulated deficiency. 10 is about four times a just-noticeable difference: the
# step between neighbouring hues of a qualitative palette made for it (Okabe-Ito's closest pair
# under deuteranopia is about 12 apart); the red/green pair this replaces was 1.7.
DISTINCT = 10.0
LIGHT_PAGE = "#ffffff"  # JupyterLab's light theme, the HTML report
DARK_PAGE = "#111111"  # JupyterLab's dark theme (its --jp-layout-color0 is #111111)

_NAMES = {
    "black": (0, 0, 0),
    "white": (255, 255, 255),
    "grey": (128, 128, 128),
    "gray": (128, 128, 128),
    "red": (255, 0, 0),
    "green": (0, 128, 0),
    "blue": (0, 0, 255),
    "orange": (255, 165, 0),
    "yellow": (255, 255, 0),
    "purple": (128, 0, 128),
    "transparent": (0, 0, 0),
}
_FUNC = re.compile(r"^rgba?\(\s*([^)]*)\)$")


def _rgba(color: str) -> tuple[float, float, float, float]:
    text = str(color).strip().lower()
    if text.startswith("#"):
        hexes = text[1:]
        if len(hexes) in (3, 4):
            hexes = "".join(c * 2 for c in hexes)
        if len(hexes) not in (6, 8) or not re.fullmatch(r"[0-9a-f]+", hexes):
            raise ValueError(f"not a colour: {color!r}")
        parts = [int(hexes[i : i + 2], 16) for i in range(0, len(hexes), 2)]
        a = parts[3] / 255 if len(parts) == 4 else 1.0
        return float(parts[0]), float(parts[1]), float(parts[2]), a
    match = _FUNC.match(text)
    if match:
        values = [v.strip() for v in match.group(1).replace("/", ",").split(",") if v.strip()]
        if len(values) not in (3, 4):
            raise ValueError(f"not a colour: {color!r}")
        rgb = [float(v[:-1]) * 2.55 if v.endswith("%") else float(v) for v in values[:3]]
        a = 1.0
        if len(values) == 4:
            a = float(values[3][:-1]) / 100 if values[3].endswith("%") else float(values[3])
        return rgb[0], rgb[1], rgb[2], a
    if text in _NAMES:
        return (*map(float, _NAMES[text]), 0.0 if text == "transparent" else 1.0)
    raise ValueError(f"not a colour: {color!r}")


def parse_colour(color: str) -> tuple[float, float, float]:
    """``color`` as (r, g, b), each 0-255 (its alpha dropped)."""
    return _rgba(color)[:3]


def alpha(color: str) -> float:
    """The opacity of ``color``: 0 transparent, 1 opaque."""
    return _rgba(color)[3]


def _linear(c: float) -> float:
    c = c / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _gamma(c: float) -> float:
    c = min(max(c, 0.0), 1.0)
    return 255 * (12.92 * c if c <= 0.0031308 else 1.055 * c ** (1 / 2.4) - 0.055)


def simulate(color: str | Sequence[float], deficiency: str) -> tuple[float, float, float]:
    """What ``color`` looks like with ``deficiency`` ("deuteranopia" or "protanopia"; "normal"
    gives it back), as (r, g, b) 0-255."""
    rgb = parse_colour(color) if isinstance(color, str) else tuple(float(c) for c in color)
    if deficiency == "normal":
        return rgb
    if deficiency not in MACHADO:
        raise ValueError(
            f"deficiency must be one of {sorted(MACHADO)} or 'normal', got {deficiency!r}"
        )
    lin = [_linear(c) for c in rgb]
    return tuple(_gamma(sum(m * v for m, v in zip(row, lin))) for row in MACHADO[deficiency])


def to_lab(color: str | Sequence[float]) -> tuple[float, float, float]:
    """CIELAB (D65) of an sRGB colour."""
    rgb = parse_colour(color) if isinstance(color, str) else tuple(float(c) for c in color)
    r, g, b = (_linear(c) for c in rgb)
    x = (0.4124564 * r + 0.3575761 * g + 0.1804375 * b) / 0.95047
    y = 0.2126729 * r + 0.7151522 * g + 0.0721750 * b
    z = (0.0193339 * r + 0.1191920 * g + 0.9503041 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > (6 / 29) ** 3 else t / (3 * (6 / 29) ** 2) + 4 / 29

    fx, fy, fz = f(x), f(y), f(z)
    return 116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)


def delta_e(a: str, b: str, deficiency: str = "normal") -> float:
    """CIE76 difference of ``a`` and ``b`` as seen with ``deficiency`` (default: normal vision)."""
    la, lb = to_lab(simulate(a, deficiency)), to_lab(simulate(b, deficiency))
    return sum((p - q) ** 2 for p, q in zip(la, lb)) ** 0.5


def luminance(color: str) -> float:
    """WCAG 2's relative luminance of ``color`` (0 black, 1 white)."""
    r, g, b = (_linear(c) for c in parse_colour(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: str, b: str) -> float:
    """WCAG 2's contrast ratio of ``a`` on ``b`` (1 to 21)."""
    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)


RENDERER = "zg_offline"
# Okabe & Ito, "Color Universal Design" (2008): eight colours that stay apart with every common
# colour vision deficiency. Black is left out: it vanishes on JupyterLab's dark theme, where
# NEUTRAL (a mid grey that reads on white and on #111111) takes its place.
OKABE_ITO = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "bluish green": "#009E73",
    "vermillion": "#D55E00",
    "sky blue": "#56B4E9",
    "reddish purple": "#CC79A7",
    "yellow": "#F0E442",
}
NEUTRAL = "#777777"  # lines, markers and text that are no series: 4.5:1 on white, 4.2:1 on #111
LIGHT_NEUTRAL = "#BBBBBB"  # bars that are the rest ("other", compute, the floor)
_STAGE_PALETTE = {
    "sample": OKABE_ITO["blue"],
    "compact": OKABE_ITO["sky blue"],
    "gather": OKABE_ITO["bluish green"],
    "forward": OKABE_ITO["yellow"],
    "loss": OKABE_ITO["reddish purple"],
    "backward": OKABE_ITO["orange"],
    "step": OKABE_ITO["vermillion"],
}
STAGE_COLORS = {stage: _STAGE_PALETTE[stage] for stage in STAGES}  # in the order of the chain
PIPELINE_COLORS = {
    "DGL": NEUTRAL,
    "zg dynamic": OKABE_ITO["orange"],
    "zg envelope": OKABE_ITO["blue"],
}
# Series with no colour of their own (yellow is left out: a yellow line is lost on white).
_FALLBACK_COLORS = [
    OKABE_ITO["blue"],
    OKABE_ITO["orange"],
    OKABE_ITO["bluish green"],
    OKABE_ITO["vermillion"],
    OKABE_ITO["sky blue"],
    OKABE_ITO["reddish purple"],
    NEUTRAL,
]
# Marker symbols, one per series, so that lines stay apart in grey print and to every eye.
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "triangle-down", "star", "cross")
# Bars that share a colour are told apart by a fill pattern.
PATTERNS = ("", "/", "x", ".", "\\", "+", "-", "|")

# The kit's plotly template: plotly_white with a transparent page and plot, and text, axes and
# grid in greys that read on JupyterLab's light theme (white) and dark theme (#111111) alike,
# so a figure is no white card on a dark page. Registered as "zg"; layout() sets it on every
# figure, setup_notebook() makes it the default.
TEMPLATE_NAME = "zg"
TEXT_COLOR = NEUTRAL
GRID_COLOR = "rgba(128, 128, 128, 0.25)"


def _template() -> go.layout.Template:
    base = go.layout.Template(pio.templates["plotly_white"])
    axis = dict(
        gridcolor=GRID_COLOR,
        linecolor=NEUTRAL,
        zerolinecolor="rgba(128, 128, 128, 0.5)",
        tickcolor=NEUTRAL,
        title=dict(font=dict(color=TEXT_COLOR)),
        tickfont=dict(color=TEXT_COLOR),
    )
    base.layout.update(
        paper_bgcolor="rgba(0,0,0,0)",
        plot_bgcolor="rgba(0,0,0,0)",
        font=dict(color=TEXT_COLOR),
        title=dict(font=dict(color=TEXT_COLOR)),
        legend=dict(bgcolor="rgba(0,0,0,0)", font=dict(color=TEXT_COLOR)),
        colorway=list(_FALLBACK_COLORS),
        xaxis=axis,
        yaxis=axis,
    )
    return base


pio.templates[TEMPLATE_NAME] = _template()


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


def setup_notebook(template: str = TEMPLATE_NAME) -> str:
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
        f'<div class="zg-plotly-note" style="font-size:smaller;color:#777">plotly.js '
        f"embedded inline (plotly.py {html.escape(plotly_version)}): the figures below draw "
        f"without any network.</div>"
    )
    display({"text/html": bundle, "text/plain": "plotly.js embedded for offline figures"}, raw=True)
    return pio.renderers.default


REOPEN_NOTE = (
    "Controls: if the control below is not drawn or does not respond (a reopened notebook keeps "
    "no live controls), re-run this cell to restore it."
)
REOPEN_NOTE_HTML = (
    f'<p class="zg-reopen-note" style="font-size:smaller;color:#777">{REOPEN_NOTE}</p>'
)
REOPEN_NOTE_KEY = "zg_reopen_note"  # the note's output metadata: the HTML report skips it


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

    def _ipython_display_(self):
        """The controls, under a line saying what to do when they come back dead.

        ipywidgets draw from models that live in the kernel; a notebook saved and reopened has
        none (JupyterLab saves no widget state unless told to), so the control's output shows
        an error instead of a slider. The line above it is a plain output, saved with the
        notebook, that says to re-run the cell. An HTML report leaves it out
        (tools/report_template: the output's metadata names it :data:`REOPEN_NOTE`)."""
        from IPython.display import display

        display(
            {"text/html": REOPEN_NOTE_HTML, "text/plain": REOPEN_NOTE},
            raw=True,
            metadata={REOPEN_NOTE_KEY: True},
        )
        display(self._repr_mimebundle_(), raw=True)

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        settings = ", ".join(f"{k}={v!r}" for k, v in self.initial.items())
        bundle["text/html"] = (
            f'<div class="zg-explore-static"><p style="font-size:smaller;color:#777">'
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


# ----------------------------------------------------------------------------- layout

# Every figure is laid out for the narrowest place it is read: JupyterLab's output area with the
# file browser open, about 968 px wide. JupyterLab draws a figure as tall as its layout.height,
# or 360 px where it sets none; an HTML report draws it wider, at the same height. So every
# figure sets its height, and its text is measured against FIGURE_WIDTH before plotly sees it.
FIGURE_WIDTH = 968  # px
FIGURE_HEIGHT = 400  # px: the height of a figure whose content asks for no more
# Arial's metrics everywhere (Liberation Sans on Linux has the same widths), so that the
# estimate of a text's width below holds on every machine; plotly's default family starts
# with Open Sans and Verdana, which most machines lack or draw a fifth wider.
FONT_FAMILY = 'Arial, "Liberation Sans", Helvetica, sans-serif'
FONT_SIZE = 12  # tick labels, legend entries, annotations
TITLE_SIZE = 17
SUBTITLE_SIZE = 12
AXIS_TITLE_SIZE = 14
MAX_TITLE_LINES = 2
MAX_SUBTITLE_LINES = 3
MODEBAR_WIDTH = 290  # px: plotly's tool buttons, top right, while the pointer is on the figure
LEGENDS = ("auto", "right", "below", "none")

# Character widths of Arial in em (the rest: 0.56, about a digit or a lower-case letter).
_NARROW = dict.fromkeys("ijl.,:;'!|Iíì ", 0.28) | dict.fromkeys("ft()[]-/rJ·²", 0.34)
_WIDE = dict.fromkeys("mwMW%@", 0.9) | dict.fromkeys("ABCDEGHKNOQRSUVXYZ&", 0.72)
_TAG = re.compile(r"<[^>]*>")
_LINE_PX = {TITLE_SIZE: 22, SUBTITLE_SIZE: 16}  # plotly's line height: 1.3 x the font size


def text_width(text: str, size: float = FONT_SIZE) -> float:
    """About how many px ``text`` takes at ``size`` px in :data:`FONT_FAMILY`, erring wide (by
    5 %): plotly's tags (``<b>``, ``<sup>``) are dropped, entities read as one character, and
    of several ``<br>`` lines the widest counts."""
    lines = re.split(r"<br\s*/?>", str(text), flags=re.IGNORECASE)
    widest = 0.0
    for line in lines:
        plain = html.unescape(_TAG.sub("", line))
        em = sum(_NARROW.get(c, _WIDE.get(c, 0.56)) for c in plain)
        widest = max(widest, em)
    return 1.05 * size * widest


def wrap(text: str, width: float, size: float = FONT_SIZE) -> list[str]:
    """``text`` broken at spaces into lines of at most ``width`` px at ``size`` px (a line
    break already in it, ``<br>``, stays one); a word wider than ``width`` keeps a line of
    its own."""
    if width <= 0:
        raise ValueError(f"width must be > 0 px, got {width}")
    lines: list[str] = []
    for part in re.split(r"<br\s*/?>", str(text), flags=re.IGNORECASE):
        line = ""
        for word in part.split():
            candidate = f"{line} {word}" if line else word
            if line and text_width(candidate, size) > width:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return lines


_GRAPH_REPR = re.compile(
    r"Graph\(name='(?P<name>[^']*)', num_nodes=(?P<nodes>[\d,]+), num_edges=(?P<edges>[\d,]+)"
)


def describe(graph: Any) -> str:
    """A graph in one short line, for a subtitle: ``"cora · 2,708 nodes · 10,556 edges"``.

    ``graph``: a :class:`zg.Graph`, its ``repr`` (which result files store, e.g.
    ``bench/results/grappa_diagnosis.json``), or a dict with ``name``, ``num_nodes`` and
    ``num_edges`` (a ``Graph.summary()``, a result file's ``graph`` entry; ``name`` optional).
    """
    if isinstance(graph, str):
        match = _GRAPH_REPR.search(graph)
        if match is None:
            raise ValueError(
                f"graph must be a zg.Graph, its repr or a dict with num_nodes and num_edges; "
                f"got the string {graph[:80]!r}"
            )
        name = match["name"]
        nodes = int(match["nodes"].replace(",", ""))
        edges = int(match["edges"].replace(",", ""))
    elif isinstance(graph, Mapping):
        missing = [k for k in ("num_nodes", "num_edges") if k not in graph]
        if missing:
            raise ValueError(f"graph (a dict) needs {missing}; it has {sorted(graph)}")
        name, nodes, edges = graph.get("name"), graph["num_nodes"], graph["num_edges"]
    elif all(hasattr(graph, k) for k in ("num_nodes", "num_edges")):
        name, nodes, edges = getattr(graph, "name", None), graph.num_nodes, graph.num_edges
    else:
        raise TypeError(
            "graph must be a zg.Graph, its repr or a dict with num_nodes and num_edges, "
            f"got {type(graph).__name__}"
        )
    parts = [str(name)] if name else []
    return " · ".join(parts + [f"{int(nodes):,} nodes", f"{int(edges):,} edges"])


def _legend_entries(fig: go.Figure) -> list[str]:
    """The names plotly puts in ``fig``'s legend: traces that are drawn and not kept out of it
    (one legend-able trace shows no legend unless it asks for one)."""
    candidates = [
        t
        for t in fig.data
        if t.showlegend is not False
        and t.visible is not False
        and t.type not in ("heatmap", "histogram2d", "contour", "table")
    ]
    if fig.layout.showlegend is False:
        return []
    if len(candidates) == 1 and candidates[0].showlegend is not True and not fig.layout.showlegend:
        return []
    return [str(t.name or "") for t in candidates]


def _legend_rows(entries: Sequence[str], title: str, width: float) -> int:
    """Rows a horizontal legend of ``entries`` needs within ``width`` px (plotly gives each
    entry its symbol, 40 px, and its text)."""
    rows, used = 1, 0.0
    items = ([title] if title else []) + list(entries)
    for i, entry in enumerate(items):
        need = text_width(entry) + (10 if title and i == 0 else 46)
        if used and used + need > width:
            rows, used = rows + 1, 0.0
        used += need
    return rows


def _axes(fig: go.Figure) -> list[tuple[str, Any]]:
    names = [k for k in fig.layout.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", k)]
    return [(n, fig.layout[n]) for n in sorted(names)] or [
        ("xaxis", fig.layout.xaxis),
        ("yaxis", fig.layout.yaxis),
    ]


def layout(
    fig: go.Figure,
    *,
    title: str,
    subtitle: str | None = None,
    legend: str = "auto",
    legend_title: str = "",
    legend_entries: Sequence[str] | None = None,
    height: int | None = None,
    menu: bool = False,
) -> go.Figure:
    """Lay ``fig`` out to be read at :data:`FIGURE_WIDTH` px: what every figure builder ends with.

    * the title and subtitle (the subtitle is ``title.subtitle``) break into lines that fit
      the width; a title of more than :data:`MAX_TITLE_LINES` or a subtitle of more than
      :data:`MAX_SUBTITLE_LINES` lines is refused (say less, e.g. :func:`describe` a graph
      instead of printing it); the top margin grows with the lines, with the subplot titles
      beneath them and, with ``menu``, a row for the figure's dropdown (placed there);
    * ``legend``: "right" (a column outside the plot; the figure grows until every entry fits
      without scrolling), "below" (rows under the x axis; the figure grows by the rows),
      "none", or "auto": right when the entries are few and short, below otherwise.
      ``legend_entries`` names the entries when they change (a dropdown showing other
      traces): the most the legend will hold;
    * every axis title longer than its axis breaks into lines; every axis pushes the margins
      its tick labels need (``automargin``);
    * ``height``: at least this many px (default :data:`FIGURE_HEIGHT`), so JupyterLab and
      an HTML report draw the figure equally tall.

    Returns ``fig``, changed in place.
    """
    if legend not in LEGENDS:
        raise ValueError(f"legend must be one of {LEGENDS}, got {legend!r}")
    if not title:
        raise ValueError("title must be a non-empty string")
    room = FIGURE_WIDTH - 40  # the title starts 10 px in; a scrollbar may take some more
    # The title's first line shares the top edge with plotly's mode bar (on hover, right).
    title_lines = wrap(title, room - MODEBAR_WIDTH, TITLE_SIZE)
    if len(title_lines) > MAX_TITLE_LINES:
        raise ValueError(
            f"title is {len(title_lines)} lines at {FIGURE_WIDTH} px, at most {MAX_TITLE_LINES}: "
            f"{title!r}"
        )
    sub_lines = wrap(html.escape(subtitle, quote=False), room, SUBTITLE_SIZE) if subtitle else []
    if len(sub_lines) > MAX_SUBTITLE_LINES:
        raise ValueError(
            f"subtitle is {len(sub_lines)} lines at {FIGURE_WIDTH} px, at most "
            f"{MAX_SUBTITLE_LINES}; say less (zg.viz.describe(graph) names a graph in one "
            f"short line): {subtitle!r}"
        )
    panel_titles = any(
        a.yref == "paper" and a.yanchor == "bottom" and a.y is not None and a.y >= 0.999
        for a in fig.layout.annotations
    )
    top = 12 + _LINE_PX[TITLE_SIZE] * len(title_lines) + _LINE_PX[SUBTITLE_SIZE] * len(sub_lines)
    menu_top = top + 6
    top += 12 + (34 if menu else 0) + (26 if panel_titles else 0)

    entries = list(legend_entries) if legend_entries is not None else _legend_entries(fig)
    longest = max((text_width(e) for e in entries), default=0.0)
    if legend == "auto":
        legend = (
            "none"
            if not entries
            else "right"
            if len(entries) <= 10 and longest + text_width(legend_title) <= 200
            else "below"
        )
    bottom = 60  # x tick labels and the axis title
    plot_height = 240  # px: the least a plot area gets; a legend below adds to the height
    legend_layout: dict[str, Any]
    right = 20
    if legend == "right":
        plot_height = max(plot_height, 21 * len(entries) + (24 if legend_title else 0) + 10)
        legend_layout = dict(
            orientation="v", x=1.02, xanchor="left", y=1.0, yanchor="top", yref="paper"
        )
        right = int(max(longest, text_width(legend_title)) + 60)
    elif legend == "below":
        rows = _legend_rows(entries, legend_title, FIGURE_WIDTH - 100)  # from the plot's left
        bottom += 21 * rows + 12
        legend_layout = dict(
            orientation="h", x=0.0, xanchor="left", y=0.0, yanchor="bottom", yref="container"
        )
    else:
        legend_layout = {}
    height = max(int(height or FIGURE_HEIGHT), top + plot_height + bottom)
    plot_height = height - top - bottom
    if legend_layout:
        legend_layout["title"] = {"text": legend_title}
        fig.update_layout(legend=legend_layout, showlegend=True)
    else:
        fig.update_layout(showlegend=False)

    # Axis titles that are longer than their axis break into lines.
    plot_width = FIGURE_WIDTH - 80 - right
    for name, axis in _axes(fig):
        text = axis.title.text
        if not text:
            continue
        domain = list(axis.domain) if axis.domain is not None else [0.0, 1.0]
        length = (domain[1] - domain[0]) * (plot_width if name[0] == "x" else plot_height)
        if text_width(text, AXIS_TITLE_SIZE) > 0.9 * length:
            axis.title.text = "<br>".join(wrap(text, 0.9 * length, AXIS_TITLE_SIZE))
    fig.update_xaxes(automargin=True)
    fig.update_yaxes(automargin=True)

    if menu:
        # Updatemenus know only paper coordinates: the row under the subtitle, as a fraction of
        # the plot area's height above its top.
        above = height - bottom - menu_top
        for m in fig.layout.updatemenus:
            m.update(x=0.0, xanchor="left", y=above / plot_height, yanchor="top")
    fig.update_layout(
        title=dict(
            text="<br>".join(title_lines),
            subtitle=dict(text="<br>".join(sub_lines), font=dict(size=SUBTITLE_SIZE)),
            font=dict(size=TITLE_SIZE),
            x=0.0,
            xanchor="left",
            xref="container",
            y=1.0,
            yanchor="top",
            yref="container",
            # plotly anchors a title of several lines by its last line: the first goes
            # above the top edge unless the pad makes room for it
            pad=dict(l=10, t=10 + 17 * (len(title_lines) - 1)),
        ),
        font_family=FONT_FAMILY,
        template=pio.templates[TEMPLATE_NAME],
        height=height,
        margin=dict(t=top, b=bottom, l=60, r=right),
    )
    return fig


# ----------------------------------------------------------------------------- helpers


def _color(name: str, i: int) -> str:
    for key, color in PIPELINE_COLORS.items():
        if name == key or name.startswith(key + " "):
            return color
    return _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]


def _dash(i: int) -> str:
    """The i-th line's dash: solid through the palette once, then dashed, then dotted, so
    that more lines than colours stay apart."""
    return ("solid", "dash", "dot", "dashdot")[(i // len(_FALLBACK_COLORS)) % 4]


def _symbol(i: int) -> str:
    """The i-th series' marker symbol: each series its own, so that no two are told apart by
    colour alone."""
    return SYMBOLS[i % len(SYMBOLS)]


def series_style(i: int) -> dict:
    """The i-th series' look for ``go.Scatter(**series_style(i))``: a colour of the palette, a
    dash and a marker symbol (see :func:`_dash`, :func:`_symbol`)."""
    color = _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)]
    return dict(line=dict(color=color, dash=_dash(i)), marker=dict(color=color, symbol=_symbol(i)))


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


_BINARY_UNITS = (("B", 1), ("KiB", 2**10), ("MiB", 2**20), ("GiB", 2**30), ("TiB", 2**40))


def byte_ticks(values: Sequence[float], *, log: bool = False) -> dict:
    """Ticks in binary units for an axis of bytes that spans ``values``, so that the axis reads
    like the kit's labels (``1.5 MiB``, :func:`_human`) and not in plotly's SI (``2M`` =
    2,000,000): ``fig.update_yaxes(**byte_ticks(values))``. Linear: about five round steps of
    one unit; ``log``: 1, 10 and 100 of each unit, or 1-2-5 (or 1 1.5 2 3 5 7) where those
    leave fewer than two labels on the data; where even those do, the axis runs from the tick
    below the data to the tick above."""
    finite = [float(v) for v in values if v is not None and float(v) == float(v)]
    if not finite:
        raise ValueError("values is empty: no byte range to put ticks on")
    high = max(max(finite), 1.0)
    if log:
        low = min([v for v in finite if v > 0] or [1.0])
        ladders = (
            (1, 10, 100),
            (1, 2, 5, 10, 20, 50, 100, 200, 500),
            tuple(k * m for m in (1, 10, 100) for k in (1, 1.5, 2, 3, 5, 7)),
        )
        for steps in ladders:
            ticks = [k * size for _, size in _BINARY_UNITS for k in steps]
            below = max([t for t in ticks if t <= low] or [ticks[0]])
            above = min([t for t in ticks if t >= high] or [ticks[-1]])
            vals = [t for t in ticks if below <= t <= above]
            if sum(low <= t <= high for t in vals) >= 2:
                break
        text = []
        for t in vals:
            unit, size = max((u for u in _BINARY_UNITS if u[1] <= t), key=lambda u: u[1])
            text.append(f"{t / size:g} {unit}")
        out = {"tickmode": "array", "tickvals": vals, "ticktext": text}
        if sum(low <= t <= high for t in vals) < 2:
            # the data sit between two ticks: the axis runs from the one to the other, so
            # that both are drawn
            out["range"] = [math.log10(vals[0]), math.log10(vals[-1])]
        return out
    unit, size = max((u for u in _BINARY_UNITS if u[1] <= high), key=lambda u: u[1])
    span = high / size
    raw = span / 4
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    count = int(span / step) + 2
    vals = [i * step * size for i in range(count)]
    text = [f"{i * step:g} {unit}" if i else "0" for i in range(count)]
    return {"tickmode": "array", "tickvals": vals, "ticktext": text}


# ----------------------------------------------------------------------------- figures of both halves


def crowded(values: Sequence[float | None], share: float = 2 / 3, band: float = 0.05) -> bool:
    """Whether a linear axis up to the largest of ``values`` would crowd more than ``share`` of
    them into a strip ``band`` of its height tall, from the least value up (a few large values
    hiding the rest), so that the axis should be logarithmic. Only for positive values (a log
    axis needs them)."""
    finite = [float(v) for v in values if v is not None and float(v) == float(v)]
    if len(finite) < 3 or min(finite) <= 0:
        return False
    low, high = min(finite), max(finite)
    if high <= low:
        return False
    # the axis would run from 0 (or the least value) to the largest; the strip starts at the
    # least value
    span = high - min(0.0, low)
    return sum(v <= low + band * span for v in finite) > share * len(finite)


def _tick_text(value: float) -> str:
    """A log axis's tick label: ``0.02``, ``500``, ``20k``, ``1M`` (plotly's own style)."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def log_ticks(values: Sequence[float | None] = (), *, fixed: bool = False) -> dict:
    """Tick settings for a log axis over ``values``:
    ``fig.update_xaxes(type="log", **log_ticks(values))``. Labels at the decades (1, 10, 100)
    when the values span three decades or more, else at 1, 2 and 5 of each decade (finer, 1 1.5
    2 3 5 7, within one decade), written out (``20``, ``0.05``, ``200k``): never plotly's
    "2 3 ... 9 1 2" of small digits between the decades. At least two labels fall on the data;
    where they cannot, the axis runs from the tick below the data to the tick above.

    ``fixed``: the axis keeps the range of all ``values`` (padded a little) whatever traces are
    shown, for a figure whose menu shows other traces (hidden traces do not count in plotly's
    autorange, which would leave the labels outside the range drawn)."""
    finite = [float(v) for v in values if v is not None and float(v) == float(v) and float(v) > 0]
    if not finite:
        return dict(dtick=1)
    low, high = min(finite), max(finite)
    decades = math.log10(high / low)
    ladders = [(1,)] if decades >= 3 else []
    ladders += [(1, 2, 5), (1, 1.5, 2, 3, 5, 7)]
    first, last = math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1
    for steps in ladders:
        ticks = [round(k * 10.0**e, 12) for e in range(first, last + 1) for k in steps]
        below = max([t for t in ticks if t <= low] or [ticks[0]])
        above = min([t for t in ticks if t >= high] or [ticks[-1]])
        vals = [t for t in ticks if below <= t <= above]
        if sum(low <= t <= high for t in vals) >= 2:
            break
    out: dict = {"tickmode": "array", "tickvals": vals, "ticktext": [_tick_text(v) for v in vals]}
    if sum(low <= t <= high for t in vals) < 2:
        out["range"] = [math.log10(vals[0]), math.log10(vals[-1])]
    elif fixed:
        pad = 0.05 * max(decades, 0.1)
        out["range"] = [math.log10(low) - pad, math.log10(high) + pad]
    return out


def curves(
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    xaxis_title: str = "epoch",
    yaxis_title: str = "value",
    x: Sequence[float] | None = None,
    subtitle: str | None = None,
    highlight: Sequence[str] | None = None,
    log_y: bool | None = None,
) -> go.Figure:
    """Lines, one per named series (loss or accuracy per epoch, ...), each with its own colour,
    dash and marker symbol.

    ``highlight``: the names of the series to follow; the others are drawn thin in grey under
    them, as one legend entry ("other runs"; a point's hover still names its run), so that a
    figure of many runs stays readable. ``log_y``: a logarithmic y axis (labelled at its
    decades); by default one when a linear axis would crowd most points at its bottom (a few
    huge values, :func:`crowded`)."""
    series = _check_mapping(series, "series")
    if highlight is not None:
        unknown = [h for h in highlight if h not in series]
        if unknown:
            raise ValueError(f"highlight names series that are not there: {unknown}")
    fig = go.Figure()
    others = 0
    shown = 0
    for name, values in series.items():
        values = list(values)
        xs = list(x) if x is not None else list(range(len(values)))
        if highlight is not None and name not in highlight:
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=values,
                    mode="lines",
                    name="other runs",
                    legendgroup="other runs",
                    showlegend=others == 0,
                    line=dict(color=LIGHT_NEUTRAL, width=1),
                    hovertemplate=f"{html.escape(str(name))}<br>%{{x}}: %{{y}}<extra></extra>",
                )
            )
            others += 1
            continue
        style = series_style(shown)
        style["line"]["color"] = style["marker"]["color"] = _color(name, shown)
        fig.add_trace(go.Scatter(x=xs, y=values, mode="lines+markers", name=name, **style))
        shown += 1
    # the grey runs under the highlighted ones
    fig.data = tuple(sorted(fig.data, key=lambda t: t.legendgroup != "other runs"))
    fig.update_layout(xaxis_title=xaxis_title, yaxis_title=yaxis_title)
    if log_y is None:
        log_y = crowded([v for values in series.values() for v in values])
    if log_y:
        fig.update_yaxes(type="log", **log_ticks([v for vs in series.values() for v in vs]))
    return layout(fig, title=title, subtitle=subtitle)
