"""zg.viz.common: zg imports without plotly, reports render offline, the shared curves figure and
the explore controls."""

import ast
import sys
from pathlib import Path

import processes
import pytest


def axis_title(axis):
    return axis.title.text


@pytest.mark.slow
def test_import_zg_needs_no_plotly():
    code = (
        "import sys, zg, zg.experiments; "
        "assert 'zg.viz' not in sys.modules, 'import zg imported zg.viz'; "
        "assert 'plotly' not in sys.modules, 'import zg imported plotly'"
    )
    processes.run([sys.executable, "-c", code], check=True)


def test_setup_notebook_renders_offline(viz):
    import plotly.graph_objects as go
    import plotly.io as pio

    assert viz.setup_notebook() == "plotly_mimetype+zg_offline"
    assert pio.renderers.default == "plotly_mimetype+zg_offline"
    bundle = pio.renderers[viz.RENDERER].to_mimebundle(go.Figure(go.Bar(x=[1], y=[2])).to_dict())
    html = bundle["text/html"]
    assert "Plotly.newPlot" in html and "plotly-graph-div" in html
    assert "cdn.plot.ly" not in html and "mathjax" not in html.lower() and "<script src" not in html
    assert "plotly.js v" not in html  # the library is embedded once, by setup
    assert "cdn" not in viz.offline_html(go.Figure()).lower()


def test_curves(viz):
    fig = viz.curves({"zg envelope": [1.0, 0.5], "other": [2, 1]}, title="Loss", yaxis_title="loss")
    assert fig.layout.title.text == "Loss" and axis_title(fig.layout.yaxis) == "loss"
    assert (
        list(fig.data[0].x) == [0, 1]
        and fig.data[0].line.color == viz.PIPELINE_COLORS["zg envelope"]
    )


def test_explore(viz, require):
    widgets = require("ipywidgets")
    calls = []

    def build(n, word):
        calls.append((n, word))
        return viz.curves({word: list(range(n))}, title=f"{n} {word}")

    slider = widgets.IntSlider(value=3, min=1, max=9)
    explorer = viz.explore(build, n=slider, word=widgets.Dropdown(options=["a", "b"], value="a"))
    assert calls == [(3, "a")]  # built once, up front
    bundle = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert (
        "plotly-graph-div" in bundle["text/html"]
        and "live when this notebook runs in JupyterLab" in bundle["text/html"]
    )
    assert "n=3" in bundle["text/html"]
    slider.value = 5  # moving a control rebuilds
    assert calls[-1] == (5, "a")

    def broken(n):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):  # an error fails the cell
        viz.explore(broken, n=widgets.IntSlider(value=1))
    with pytest.raises(TypeError, match="plotly Figure"):
        viz.explore(lambda n: None, n=widgets.IntSlider(value=1))
    with pytest.raises(TypeError, match="ipywidgets"):
        viz.explore(build, n=3)
    with pytest.raises(ValueError):
        viz.explore(build)


def test_a_control_says_to_rerun_its_cell_and_the_report_leaves_that_out(viz, require, tmp_path):
    """A control's cell shows, saved with the notebook, a line saying to re-run the cell (a
    reopened notebook has no widget models: JupyterLab draws an error where the slider was);
    the HTML report, whose static stand-in needs no kernel, leaves the line out."""
    widgets = require("ipywidgets")
    nbformat = require("nbformat")
    require("nbconvert")
    import IPython.display

    shown = []
    original = IPython.display.display
    IPython.display.display = lambda obj, **kw: shown.append((obj, kw))
    try:
        explorer = viz.explore(
            lambda n: viz.curves({"a": list(range(n))}, title="a"),
            n=widgets.IntSlider(value=3),
        )
        explorer._ipython_display_()
    finally:
        IPython.display.display = original
    (note, note_kw), (control, _) = shown
    assert "re-run this cell" in note["text/plain"] and "re-run this cell" in note["text/html"]
    assert note_kw["metadata"] == {viz.common.REOPEN_NOTE_KEY: True}
    assert "application/vnd.jupyter.widget-view+json" in control
    # the words JupyterLab's own error uses stay out of the note (tools/lab_live_check.py
    # looks for them)
    assert (
        "model not found" not in note["text/plain"] and "Error displaying" not in note["text/plain"]
    )

    from nbconvert import HTMLExporter

    root = Path(__file__).resolve().parents[2]
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("zg.viz.explore(...)")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data=note, metadata=note_kw["metadata"]),
        nbformat.v4.new_output("display_data", data={"text/html": "<p>STATIC STAND-IN</p>"}),
    ]
    nb.cells.append(cell)
    exporter = HTMLExporter(
        extra_template_basedirs=[str(root / "tools")],
        template_name="report_template",
        theme="light",
    )
    page, _ = exporter.from_notebook_node(nb)
    assert "STATIC STAND-IN" in page and "re-run this cell" not in page


# ----------------------------------------------------------------------------- the shared layout


def test_layout_fits_title_and_subtitle_to_the_width(viz):
    from zg.viz.common import MODEBAR_WIDTH, SUBTITLE_SIZE, TITLE_SIZE, text_width

    long = "machine with a long description, " * 8  # about 270 characters
    fig = viz.curves({"a": [1, 2], "b": [2, 1]}, title="A title", subtitle=long)
    lines = fig.layout.title.subtitle.text.split("<br>")
    assert len(lines) > 1 and " ".join(lines) == " ".join(long.split())
    assert all(text_width(line, SUBTITLE_SIZE) <= viz.FIGURE_WIDTH - 40 for line in lines)
    assert text_width(fig.layout.title.text, TITLE_SIZE) <= viz.FIGURE_WIDTH - 40
    # a long title breaks before it reaches the mode bar (top right, on hover)
    title = "A title that says a lot about what the figure shows, and then some more words"
    lines = viz.curves({"a": [1]}, title=title).layout.title.text.split("<br>")
    assert len(lines) == 2 and " ".join(lines) == title
    assert text_width(lines[0], TITLE_SIZE) <= viz.FIGURE_WIDTH - 40 - MODEBAR_WIDTH
    short = viz.curves({"a": [1, 2], "b": [2, 1]}, title="A title", subtitle="short")
    # the top margin grows with the lines; the height is set, so JupyterLab draws it as tall
    assert fig.layout.margin.t > short.layout.margin.t
    assert fig.layout.height >= viz.FIGURE_HEIGHT and short.layout.height == viz.FIGURE_HEIGHT
    with pytest.raises(ValueError, match="subtitle is .* lines"):
        viz.curves({"a": [1]}, title="t", subtitle=long * 3)
    with pytest.raises(ValueError, match="legend must be one of"):
        viz.layout(fig, title="t", legend="left")
    # the subtitle is text, not markup
    assert (
        "&lt;b&gt;" in viz.curves({"a": [1]}, title="t", subtitle="<b>").layout.title.subtitle.text
    )


def test_layout_places_the_legend_without_scrolling(viz):
    few = viz.curves({"zg dynamic": [1, 2], "zg envelope": [2, 1]}, title="t")
    assert few.layout.legend.orientation == "v" and few.layout.legend.x > 1  # outside, right
    many = {f"series number {i}": [i, i + 1] for i in range(14)}
    fig = viz.curves(many, title="t")
    legend = fig.layout.legend
    assert legend.orientation == "h" and legend.yref == "container" and legend.y == 0
    assert fig.layout.height > few.layout.height  # the rows below add to the height
    # a right legend with many short entries: the plot area grows until they all fit
    tall = viz.layout(
        viz.curves({str(i): [i] for i in range(10)}, title="t"), title="t", legend="right"
    )
    plot = tall.layout.height - tall.layout.margin.t - tall.layout.margin.b
    assert plot >= 21 * 10
    single = viz.curves({"only": [1, 2]}, title="t")
    assert single.layout.showlegend is False


def test_layout_breaks_long_axis_titles_and_sets_automargin(viz):
    fig = viz.curves(
        {"a": [1, 2]},
        title="t",
        yaxis_title="milliseconds per epoch (mean over epochs and workers and seeds and runs)",
    )
    assert "<br>" in fig.layout.yaxis.title.text
    assert fig.layout.xaxis.automargin is True and fig.layout.yaxis.automargin is True
    assert viz.curves({"a": [1]}, title="t", yaxis_title="loss").layout.yaxis.title.text == "loss"


def test_describe_names_a_graph_in_one_short_line(viz):
    import graphs

    line = "cora · 2,708 nodes · 10,556 edges"
    repr_ = (
        "Graph(name='cora', num_nodes=2,708, num_edges=10,556, feat_dim=1,433, num_classes=7, "
        "in-degree avg 3.90 max 168, train/val/test=140/500/1,000, device=cpu)"
    )
    assert viz.describe(repr_) == line
    assert viz.describe({"name": "cora", "num_nodes": 2708, "num_edges": 10556}) == line
    assert viz.describe({"num_nodes": 5, "num_edges": 4}) == "5 nodes · 4 edges"
    g = graphs.tiny()
    assert viz.describe(g) == viz.describe(repr(g)) == viz.describe(g.summary())
    assert viz.describe(g).endswith(f"{g.num_nodes:,} nodes · {g.num_edges:,} edges")
    with pytest.raises(ValueError, match="num_nodes"):
        viz.describe("a graph")
    with pytest.raises(ValueError, match="num_edges"):
        viz.describe({"num_nodes": 3})
    with pytest.raises(TypeError, match="graph must be"):
        viz.describe(3)


def test_byte_ticks_are_binary_units(viz):
    ticks = viz.byte_ticks([0, 3.5 * 2**20])
    assert ticks["ticktext"][:3] == ["0", "1 MiB", "2 MiB"]
    assert ticks["tickvals"][1] == 2**20 and ticks["tickvals"][-1] >= 3.5 * 2**20
    log = viz.byte_ticks([5_000, 3 * 2**30], log=True)
    assert "1 KiB" in log["ticktext"] and "1 GiB" in log["ticktext"]
    assert log["tickvals"][log["ticktext"].index("10 MiB")] == 10 * 2**20
    with pytest.raises(ValueError, match="empty"):
        viz.byte_ticks([])


def own_statements(function):
    """The nodes of ``function``'s body, not those of the functions defined inside it."""
    stack = list(function.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def test_every_figure_builder_ends_with_the_shared_layout():
    """Each public builder of zg.viz returns ``layout(...)`` (or another builder's figure), so
    no figure escapes the sizes, margins and legend placement of the shared helper."""
    import zg.viz

    root = Path(zg.viz.__file__).parent
    builders = set(zg.viz.zerognn.__all__) | set(zg.viz.grappa.__all__) | {"curves"}
    missing = []
    for module in ("common.py", "zerognn.py", "grappa.py"):
        tree = ast.parse((root / module).read_text())
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.name not in builders:
                continue
            if ast.unparse(node.returns) != "go.Figure":
                continue
            returns = [n.value for n in own_statements(node) if isinstance(n, ast.Return)]
            for value in returns:
                called = (
                    value.func.id
                    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
                    else None
                )
                if called != "layout" and called not in builders:
                    missing.append(f"{module}:{node.name}")
    assert not missing, f"builders that do not end with layout(...): {missing}"


def test_the_student_lab_saves_widget_state():
    """`make lab` (JUPYTER_CONFIG_PATH=tools/student_lab) has JupyterLab save the controls'
    state with the notebook, so a reopened notebook draws them instead of an error."""
    import json

    root = Path(__file__).resolve().parents[2]
    overrides = json.loads(
        (
            root / "tools" / "student_lab" / "labconfig" / "default_setting_overrides.json"
        ).read_text()
    )
    assert overrides["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True
