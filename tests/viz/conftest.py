"""Every figure a zg.viz builder draws in these tests is checked as drawn for every eye and every
theme (tools/figure_check.py's readability rules on the figure object): no two series told apart
by a colour pair that deuteranopia or protanopia merges, every axis with a readable scale, a
page that follows JupyterLab's dark theme."""

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def every_figure_readable(monkeypatch):
    """Record the figures :func:`zg.viz.common.layout` lays out during the test (every builder
    ends with it) and check each when the test ends."""
    try:
        import plotly  # noqa: F401

        import zg.viz
    except ImportError:
        yield
        return
    sys.path.insert(0, str(ROOT / "tools"))
    import figure_check as fc

    drawn = []
    real = zg.viz.common.layout

    def recording(fig, **kwargs):
        out = real(fig, **kwargs)
        drawn.append(out)
        return out

    for module in (zg.viz.common, zg.viz.grappa, zg.viz.zerognn):
        monkeypatch.setattr(module, "layout", recording)
    yield drawn
    found = []
    for fig in drawn:
        for element, what, rule in fc.readability_problems(fc.static_measure(fig)):
            found.append(f'"{fig.layout.title.text}": {element}: {what} ({rule})')
    assert not found, "figures not every reader can read:\n" + "\n".join(found)
