"""zg.viz.common: zg imports without plotly, reports render offline, the shared curves figure and
the explore controls."""

import sys

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
