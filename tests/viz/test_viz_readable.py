"""Figures every eye can read, on a light or a dark page: the palettes drawn in full (every
stage, every part of an epoch, many runs) pass the figure check's readability rules, and the
rules catch the figures they are for (tests/viz/conftest.py checks every figure drawn here)."""

import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fc():
    sys.path.insert(0, str(ROOT / "tools"))
    import figure_check

    return figure_check


def problems(fc, fig):
    return fc.readability_problems(fc.static_measure(fig))


def test_every_stage_in_one_figure_is_told_apart_by_every_eye(viz, fc):
    from zg.step import STAGES

    rows = [
        {
            "pipeline": p,
            "batch_size": 64,
            "step_seconds": 0.05,
            "stage_seconds": {s: 0.001 * (k + 1) for k, s in enumerate(STAGES)},
            "seeds_per_second": 6400.0,
        }
        for p in ("DGL", "zg dynamic", "zg envelope")
    ]
    fig = viz.stage_breakdown(rows)
    drawn = {t.name: t.marker.color for t in fig.data if t.name in STAGES}
    assert drawn == {s: viz.STAGE_COLORS[s] for s in STAGES}
    assert problems(fc, fig) == []


def test_an_epochs_parts_keep_the_stage_colours(viz, fc):
    from zg.grappa.account import PARTS

    rows = [
        {"label": label, "parts": {p: 0.001 * (k + 1) for k, p in enumerate(PARTS)}}
        for label in ("grappa", "feature fetching")
    ]
    fig = viz.epoch_account(rows)
    colours = {t.name: t.marker.color for t in fig.data}
    # one colour per stage, in notebook 04's stage figures and notebook 08's account alike
    for part, stage in (("sampling", "sample"), ("gather", "gather"), ("step", "step")):
        assert colours[part] == viz.STAGE_COLORS[stage]
    assert problems(fc, fig) == []


def test_many_runs_stay_apart_and_a_few_can_be_followed(viz, fc):
    runs = {f"run {i}": [0.5 + 0.01 * i * e for e in range(6)] for i in range(13)}
    fig = viz.curves(runs, title="thirteen runs")
    looks = {(t.line.color, t.line.dash, t.marker.symbol) for t in fig.data}
    assert len(looks) == 13  # each run its own colour, dash and marker
    assert problems(fc, fig) == []
    fig = viz.curves(runs, title="five of thirteen", highlight=["run 0", "run 4"])
    legend = [t.name for t in fig.data if t.showlegend is not False]
    assert sorted(legend) == ["other runs", "run 0", "run 4"]
    assert [t.legendgroup for t in fig.data[:11]] == ["other runs"] * 11  # grey, underneath
    with pytest.raises(ValueError, match="highlight"):
        viz.curves(runs, title="t", highlight=["no such run"])


def test_a_few_huge_values_turn_the_axis_logarithmic(viz, fc, every_figure_readable):
    # notebook 07's gradient error along training: most values near 1, a few above 100,000
    series = {
        "batch": [0.7, 0.8, 1.1, 1.4],
        "uniform": [1.4, 2.4, 106522.7, 163687.1],
        "mean": [0.9, 1.4, 2.5, 3.2],
    }
    fig = viz.curves(series, title="gradient error", yaxis_title="|G - g*| / |g*|")
    assert fig.layout.yaxis.type == "log" and fig.layout.yaxis.ticktext[:3] == ("0.1", "1", "10")
    assert problems(fc, fig) == []
    linear = viz.curves(series, title="gradient error", log_y=False)
    every_figure_readable.remove(linear)  # drawn to be caught
    found = problems(fc, linear)
    assert [p[2] for p in found] == ["scale"] and "crowds" in found[0][1]


def test_bytes_within_one_decade_still_get_labels(viz, fc):
    # notebook 08's accuracy against bytes sent: every run between 1 and 10 MiB drew no label
    rows = [
        {"run": "feature fetching", "bytes": 3.1 * 2**20, "accuracy": 0.7},
        {"run": "grappa", "bytes": 7.9 * 2**20, "accuracy": 0.75},
    ]
    fig = viz.accuracy_vs_bytes(rows)
    ticks = list(fig.layout.xaxis.tickvals)
    # the range drawn: the axis's own, or the data's (plotly pads it a little)
    low, high = fig.layout.xaxis.range or [math.log10(v) for v in (3.1 * 2**20, 7.9 * 2**20)]
    inside = [t for t in ticks if low - 1e-9 <= math.log10(t) <= high + 1e-9]
    assert len(inside) >= 2, fig.layout.xaxis.ticktext
    assert problems(fc, fig) == []


@pytest.mark.parametrize(
    "values, labels",
    [
        ([1e3, 1e7], ["1k", "10k", "100k", "1M", "10M"]),
        ([256, 4096], ["200", "500", "1k", "2k", "5k"]),
        ([0.021, 0.048], ["0.02", "0.03", "0.05"]),
        ([0.031, 0.038], ["0.03", "0.05"]),
    ],
)
def test_log_ticks_label_decades_or_one_two_five_on_the_data(viz, values, labels):
    ticks = viz.common.log_ticks(values)
    assert ticks["ticktext"] == labels
    low, high = ticks.get("range") or [math.log10(v) for v in values]
    drawn = [t for t in ticks["tickvals"] if low - 1e-9 <= math.log10(t) <= high + 1e-9]
    assert len(drawn) >= 2  # a scale to read a value by


def test_the_rules_catch_what_they_are_for(viz, fc):
    """The readability rules on figure objects fail a red/green pair drawn alike, an axis
    without tick labels, a log axis left to plotly, and plotly's white card."""
    import plotly.graph_objects as go
    import plotly.io as pio

    template = pio.templates[viz.common.TEMPLATE_NAME]
    pair = go.Figure(
        [
            go.Scatter(x=[1, 2, 3], y=[1, 2, 3], name="gather", line_color="#54A24B"),
            go.Scatter(x=[1, 2, 3], y=[3, 2, 1], name="step", line_color="#E45756"),
        ],
        layout=dict(template=template),
    )
    found = problems(fc, pair)
    assert [p[2] for p in found] == ["colour-vision"] and "deuteranopia" in found[0][1]
    pair.data[1].line.dash = "dash"
    assert problems(fc, pair) == []

    hidden = go.Figure(go.Scatter(x=[1, 2, 3], y=[1, 2, 3]), layout=dict(template=template))
    hidden.update_xaxes(showticklabels=False)
    assert [p[2] for p in problems(fc, hidden)] == ["scale"]

    log = go.Figure(go.Scatter(x=[10, 200, 3000], y=[1, 2, 3]), layout=dict(template=template))
    log.update_xaxes(type="log")
    assert "leaves its ticks to plotly" in problems(fc, log)[0][1]
    log.update_xaxes(**viz.common.log_ticks([10, 3000]))
    assert problems(fc, log) == []

    card = go.Figure(
        go.Scatter(x=[1, 2, 3], y=[1, 2, 3]), layout=dict(template=pio.templates["plotly_white"])
    )
    assert {p[0] for p in problems(fc, card)} == {"the paper background", "the plot background"}


def test_the_kit_template_reads_on_light_and_dark(viz):
    import plotly.io as pio

    from zg.viz import common as colour

    layout = pio.templates[viz.common.TEMPLATE_NAME].layout
    assert colour.alpha(layout.paper_bgcolor) == 0 and colour.alpha(layout.plot_bgcolor) == 0
    for page in (colour.LIGHT_PAGE, colour.DARK_PAGE):
        assert colour.contrast(layout.font.color, page) >= 4.0
    # every palette colour pair stays apart with deuteranopia and protanopia
    palette = list(viz.STAGE_COLORS.values())
    for i, a in enumerate(palette):
        for b in palette[i + 1 :]:
            for vision in ("normal", "deuteranopia", "protanopia"):
                assert colour.delta_e(a, b, vision) >= colour.DISTINCT, (a, b, vision)


def test_tick_values_outside_the_range_drawn_are_caught(viz, fc):
    """A figure object whose tick values miss the range plotly draws (hidden traces do not
    count in its autorange) has no scale; fixed ranges keep every view labelled."""
    import plotly.graph_objects as go
    import plotly.io as pio

    template = pio.templates[viz.common.TEMPLATE_NAME]
    fig = go.Figure(
        [
            go.Scatter(x=[1, 2, 3], y=[0.021, 0.03, 0.048], name="total"),
            go.Scatter(x=[1, 2, 3], y=[1e-4, 1e-3, 1e-2], name="a stage", visible=False),
        ],
        layout=dict(template=template),
    )
    everything = [0.021, 0.03, 0.048, 1e-4, 1e-3, 1e-2]
    fig.update_yaxes(type="log", **viz.common.log_ticks(everything))
    found = problems(fc, fig)
    assert [p[0] for p in found] == ["y-axis"] and "0 of its tick values" in found[0][1]
    fig.update_yaxes(type="log", **viz.common.log_ticks(everything, fixed=True))
    assert problems(fc, fig) == []
