"""The figure check (tools/figure_check.py, `make report-check`): what a figure DRAWS, read in
headless Chromium, judged by rules that run in Python on the measurements.

The rules are tested here on measurements written by hand (boxes as the browser reports them);
the browser part on the checker's own self-test page (a good figure, three category levels, an
overflowing subtitle, a red/green pair, an axis without tick labels, a white card) and on a page
given to the command line."""

import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import figure_check as fc  # noqa: E402


def box(left, top, right, bottom):
    """A text box as the browser reports it: corners top-left, top-right, bottom-right,
    bottom-left in the text's own frame (here unrotated)."""
    return [[left, top], [right, top], [right, bottom], [left, bottom]]


def rotated(cx, cy, width, height, degrees):
    """A width x height box centred on (cx, cy), turned by ``degrees`` (corners in its frame)."""
    a = math.radians(degrees)
    out = []
    for dx, dy in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
        x, y = dx * width / 2, dy * height / 2
        out.append([cx + x * math.cos(a) - y * math.sin(a), cy + x * math.sin(a) + y * math.cos(a)])
    return out


def text(kind, poly, label="", owner=None, **extra):
    return {"kind": kind, "text": label, "poly": poly, "owner": owner or f"{kind}-{label}", **extra}


def figure(items=(), axes=(), legends=(), traces=(), width=968, height=360):
    return {
        "index": 1,
        "drawn": True,
        "title": "t",
        "width": width,
        "height": height,
        "items": list(items),
        "axes": list(axes),
        "legends": list(legends),
        "traces": list(traces),
    }


def axis(id_, type_="linear", **extra):
    base = {
        "id": id_,
        "type": type_,
        "title": "",
        "tickmode": "auto",
        "ticksuffix": "",
        "tickprefix": "",
        "visible": True,
        "showticklabels": True,
        "offset": 80,
        "length": 200,
        "autorange": True,
        "anchor": "y" if id_.startswith("x") else "x",
        "side": "",
        "levels": 1,
        "tuples": [],
        "tuples_all": 0,
        "tuples_drawable": 0,
    }
    base.update(extra)
    return base


def rules(fig):
    return [rule for _, _, rule in fc.figure_problems(fig)]


# ----------------------------------------------------------------------------- geometry


def test_overrun_measures_each_edge():
    assert fc.overrun(box(10, 10, 50, 20), 100, 100) == {
        "left": 0.0,
        "top": 0.0,
        "right": 0.0,
        "bottom": 0.0,
    }
    over = fc.overrun(box(-5, -2, 130, 104), 100, 100)
    assert over == {"left": 5, "top": 2, "right": 30, "bottom": 4}


def test_overlap_depth_of_boxes_and_of_turned_boxes():
    assert fc.overlap_depth(box(0, 0, 10, 10), box(20, 0, 30, 10)) == 0.0
    assert fc.overlap_depth(box(0, 0, 10, 10), box(10, 0, 20, 10)) == 0.0  # touching
    assert fc.overlap_depth(box(0, 0, 10, 10), box(7, 2, 20, 30)) == pytest.approx(3)
    # Two labels turned by 45 degrees side by side: their upright bounding boxes overlap, the
    # labels do not (what a rotated category axis looks like).
    a, b = rotated(50, 50, 60, 10, 45), rotated(70, 50, 60, 10, 45)
    la, ta, ra, ba = fc.bounds(a)
    lb, tb, rb, bb = fc.bounds(b)
    assert min(ra, rb) - max(la, lb) > 20 and min(ba, bb) - max(ta, tb) > 20
    assert fc.overlap_depth(a, b) == 0.0
    assert fc.overlap_depth(rotated(50, 50, 60, 10, 45), rotated(53, 50, 60, 10, 45)) > 1


def test_ink_trims_a_box_in_its_own_frame():
    trimmed = [c for corner in fc.ink(box(0, 0, 40, 20)) for c in corner]
    assert trimmed == pytest.approx([0, 3.2, 40, 3.2, 40, 18, 0, 18])
    # A y-axis title turned by -90 degrees: its "top" is on the left of the screen.
    upright = rotated(100, 100, 80, 20, -90)
    trimmed = fc.ink(upright)
    left, top, right, bottom = fc.bounds(upright)
    t_left, t_top, t_right, t_bottom = fc.bounds(trimmed)
    assert (t_top, t_bottom) == pytest.approx((top, bottom))
    assert t_left == pytest.approx(left + fc.INK_TOP * 20)
    assert t_right == pytest.approx(right - fc.INK_BOTTOM * 20)


# ----------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    "label, unit",
    [
        ("MiB per epoch", "binary"),
        ("2.3 GiB", "binary"),
        ("bytes per worker", "bytes"),
        ("size (MB)", "decimal"),
        ("ms per epoch", None),
        ("Bytes sent", "bytes"),
    ],
)
def test_byte_unit(label, unit):
    assert fc.byte_unit(label) == unit


def test_si_suffix_reads_plotlys_tick_labels():
    assert fc.si_suffix("2M") == "M"
    assert fc.si_suffix("1.5G") == "G"
    assert fc.si_suffix("500k") == "k"
    assert fc.si_suffix("\u22122M") == "M"  # plotly's minus sign
    assert fc.si_suffix("2k MiB", "MiB") == "k"
    assert fc.si_suffix("2 MiB", "MiB") is None
    assert fc.si_suffix("2000") is None and fc.si_suffix("0.5") is None
    assert fc.si_suffix("batch 1024") is None


def test_an_axis_in_bytes_with_si_ticks_fails_and_plain_ticks_pass():
    bytes_axis = axis("y", title="bytes per worker per epoch")
    found = fc.unit_problems(bytes_axis, ["0", "2M", "4M"], [])
    assert [r for *_, r in found] == ["units"] and "SI prefixes" in found[0][1]
    assert fc.unit_problems(bytes_axis, ["0", "2000000", "4000000"], []) == []
    mib_axis = axis("y", title="MiB")
    assert fc.unit_problems(mib_axis, ["0", "2", "4"], ["1.5 MiB"]) == []
    assert fc.unit_problems(mib_axis, ["0", "2k", "4k"], []) != []
    suffixed = axis("y", ticksuffix=" MiB")
    assert fc.unit_problems(suffixed, ["2 MiB", "4 MiB"], []) == []


def test_binary_labels_on_an_si_axis_fail():
    plain = axis("y2", title="sent per worker")
    found = fc.unit_problems(plain, ["1M", "2M"], ["1.8 MiB", "2.4 MiB"])
    assert len(found) == 1 and "binary units ('1.8 MiB')" in found[0][1]
    both = fc.unit_problems(axis("y", title="bytes"), ["1M", "2M"], ["1.8 MiB"])
    assert len(both) == 1 and "'1.8 MiB'" in both[0][1]
    mixed = fc.unit_problems(axis("y", title="size (MB)"), ["1", "2"], ["1.8 MiB"])
    assert len(mixed) == 1 and "binary" in mixed[0][1]


# ----------------------------------------------------------------------------- categories


def test_three_category_levels_fail():
    ax = axis("x", "multicategory", levels=3, tuples_all=24, tuples_drawable=4)
    found = fc.category_problems(ax, [])
    assert len(found) == 1
    element, what, rule = found[0]
    assert (element, rule) == ("x-axis", "categories")
    assert "3 category levels" in what and "24 categories are drawn as 4" in what


def test_two_levels_pass_when_every_pair_has_a_label():
    ax = axis("x", "multicategory", levels=2, tuples_all=4, tuples_drawable=4)
    ticks = [text("tick", box(0, 0, 1, 1), c, axis="x", level=1, raw=c) for c in "abab"]
    ticks += [text("tick", box(0, 0, 1, 1), c, axis="x", level=2, raw=c) for c in "pq"]
    assert fc.category_problems(ax, ticks) == []
    assert fc.category_problems(ax, ticks[:3] + ticks[4:]) != []


def test_skipped_category_labels_fail_unless_the_categories_are_numbers():
    cats = [["alpha"], ["beta"], ["gamma"], ["delta"]]
    ax = axis("x", "category", tuples=cats, tuples_all=4, tuples_drawable=4)
    drawn = [text("tick", box(0, 0, 1, 1), c, axis="x", level=1, raw=c) for c in ("alpha", "gamma")]
    found = fc.category_problems(ax, drawn)
    assert len(found) == 1 and "2 of 4 categories have no tick label" in found[0][1]
    assert "'beta'" in found[0][1] and "'delta'" in found[0][1]
    every = drawn + [text("tick", box(0, 0, 1, 1), c, axis="x", raw=c) for c in ("beta", "delta")]
    assert fc.category_problems(ax, every) == []
    numbers = axis("x", "category", tuples=[["1"], ["2"], ["3"]], tuples_all=3, tuples_drawable=3)
    assert fc.category_problems(numbers, [text("tick", box(0, 0, 1, 1), "1", raw="1")]) == []
    by_hand = dict(ax, tickmode="array")
    assert fc.category_problems(by_hand, drawn) == []


# ----------------------------------------------------------------------------- the rules on one figure


def test_a_clean_figure_passes():
    fig = figure(
        [
            text("title", box(40, 30, 300, 50), "Title", owner="title", part="title"),
            text("title", box(40, 52, 320, 64), "subtitle", owner="title", part="subtitle"),
            text("axistitle", box(400, 330, 460, 346), "epoch", axis="x"),
            text("axistitle", rotated(30, 180, 100, 16, -90), "loss", axis="y"),
            # x and y tick labels at the origin: their boxes touch at the corner, the ink not
            text("tick", box(75, 302, 85, 316), "0", owner="t1", axis="x", level=1),
            text("tick", box(66, 291, 78, 305), "0", owner="t2", axis="y", level=1),
            text("legendentry", box(800, 100, 900, 114), "run", owner="legend"),
            text("legend", box(780, 90, 910, 120), "", owner="legend", box=True),
        ],
        axes=[axis("x", offset=80, length=680), axis("y", offset=100, length=200)],
        legends=[
            {
                "id": "legend",
                "box": box(780, 90, 910, 120),
                "scrollbar": [0, 0],
                "entries": 1,
                "hidden": [],
            }
        ],
    )
    assert fc.figure_problems(fig) == []


def test_a_subtitle_past_the_right_edge_is_named():
    fig = figure(
        [
            text(
                "title",
                box(40, 52, 1300, 64),
                "Graph(name='cora', ...)",
                owner="title",
                part="subtitle",
                sup=True,
            )
        ]
    )
    [(element, what, rule)] = fc.figure_problems(fig)
    assert rule == "edge" and element.startswith("subtitle (<sup>)")
    assert "runs 332 px past the right edge" in what


def test_many_tick_labels_past_an_edge_are_reported_once():
    items = [
        text(
            "tick",
            box(100 + 30 * i, 340, 120 + 30 * i, 380 + i),
            f"label {i}",
            owner=f"t{i}",
            axis="x",
            level=1,
        )
        for i in range(5)
    ]
    [(element, what, rule)] = fc.figure_problems(figure(items))
    assert element == "x-axis tick labels" and rule == "edge"
    assert what.startswith("5 run past the bottom edge") and "24 px" in what


def test_a_y_axis_title_over_the_title_is_an_overprint():
    fig = figure(
        [
            text("title", box(10, 30, 300, 50), "An epoch's account", owner="title", part="title"),
            text("axistitle", rotated(30, 180, 320, 16, -90), "ms per epoch (mean)", axis="y"),
        ]
    )
    [(element, what, rule)] = fc.figure_problems(fig)
    assert rule == "overlap" and "title 'An epoch's account'" in element
    assert "overprints y-axis title 'ms per epoch (mean)'" in what


def test_a_menu_over_a_subplot_title_is_an_overprint_but_title_lines_are_not():
    fig = figure(
        [
            text("annotation", box(500, 80, 720, 98), "against batch size", index=1),
            text("menu", box(690, 70, 850, 103), "all pipelines", box=True, menu=0),
            text("title", box(10, 30, 300, 50), "Title", owner="title", part="title"),
            text("title", box(10, 45, 300, 60), "sub", owner="title", part="subtitle"),
        ]
    )
    [(element, what, rule)] = fc.figure_problems(fig)
    assert rule == "overlap" and element == "annotation 2 'against batch size'"
    assert "menu button 'all pipelines'" in what


def test_a_scrolling_legend_names_the_entries_it_hides():
    legend = {
        "id": "legend",
        "box": box(800, 100, 960, 300),
        "scrollbar": [6, 120],
        "entries": 8,
        "hidden": ["compact", "sample"],
    }
    [(element, what, rule)] = fc.figure_problems(figure(legends=[legend]))
    assert (element, rule) == ("the legend", "legend")
    assert "showing 6 of 8 entries" in what and "'compact'" in what
    fitting = dict(legend, scrollbar=[0, 0], hidden=[])
    assert fc.figure_problems(figure(legends=[fitting])) == []


def test_a_legend_over_the_data_fails():
    legend = {
        "id": "legend",
        "box": box(100, 100, 200, 140),
        "scrollbar": [0, 0],
        "entries": 2,
        "hidden": [],
        "covers": [{"trace": 0, "name": "DGL", "marks": 3, "line_points": 5}],
    }
    [(element, what, rule)] = fc.figure_problems(figure(legends=[legend]))
    assert (element, rule) == ("the legend", "legend")
    assert "covers data: 3 bars or markers and about 20 px of its line of 'DGL'" in what


def test_tick_labels_that_squeeze_the_plot_area_fail():
    ticks = [
        text(
            "tick",
            box(100 + 40 * i, 240, 112 + 40 * i, 340),
            f"zg dynamic {i}",
            owner=f"t{i}",
            axis="x",
            level=1,
        )
        for i in range(3)
    ]
    axes = [axis("x", anchor="y", length=700), axis("y", anchor="x", offset=90, length=140)]
    [(element, what, rule)] = fc.figure_problems(figure(ticks, axes=axes))
    assert (element, rule) == ("x-axis tick labels", "plot-area")
    assert "take 100 px, leaving the plot area 140 px tall" in what
    roomy = [axis("x", anchor="y", length=700), axis("y", anchor="x", offset=90, length=200)]
    assert fc.figure_problems(figure(ticks, axes=roomy)) == []


def test_data_labels_cut_by_the_plot_area_fail_where_plotly_clips_them():
    traces = [
        {
            "index": 0,
            "type": "bar",
            "name": "sent",
            "visible": True,
            "orientation": "v",
            "xaxis": "x",
            "yaxis": "y",
            "cliponaxis": True,
        }
    ]
    axes = [axis("x", offset=80, length=600), axis("y", offset=100, length=200)]
    label = text("datalabel", box(300, 92, 340, 106), "7.5 MiB", trace=0)
    [(element, what, rule)] = fc.figure_problems(figure([label], axes=axes, traces=traces))
    assert rule == "edge" and "cut off 8 px by the plot area" in what
    unclipped = [dict(traces[0], cliponaxis=False)]
    assert fc.figure_problems(figure([label], axes=axes, traces=unclipped)) == []


def test_an_undrawn_figure_fails():
    assert rules({"index": 1, "drawn": False}) == ["drawn"]


def test_violations_name_report_size_figure_and_element():
    measured = {
        "done": True,
        "sizes": {
            "jupyterlab": [
                dict(
                    figure(
                        [
                            text(
                                "title",
                                box(40, 52, 1300, 64),
                                "long",
                                owner="title",
                                part="subtitle",
                            )
                        ]
                    ),
                    index=3,
                    title="Accuracy per epoch",
                )
            ]
        },
    }
    [v] = fc.violations(measured, "reports/07.html")
    assert (v.report, v.size, v.figure, v.rule) == ("reports/07.html", "jupyterlab", 3, "edge")
    line = v.line()
    assert line.startswith(
        'reports/07.html [jupyterlab 968x360] figure 3 "Accuracy per epoch": subtitle'
    )
    md = fc.markdown([v], ["reports/07.html"], 1, fc.SIZES)
    assert "## reports/07.html" in md and '### figure 3: "Accuracy per epoch"' in md
    assert "1 of 1 at the jupyterlab size" in md


# ----------------------------------------------------------------------------- page plumbing


def test_the_measuring_script_measures_the_report_before_resizing():
    script = fc.measure_script(["jupyterlab", "report"])
    assert '"sizes": ["report", "jupyterlab"]' in script
    assert f'"jupyterlab": [{fc.JUPYTERLAB_WIDTH}, {fc.JUPYTERLAB_DEFAULT_HEIGHT}]' in script
    assert "%" not in script.replace("70%", "")  # every %% of the template was substituted


def test_read_marker_reads_the_escaped_json_of_the_dumped_dom():
    payload = {"done": True, "sizes": {"report": [{"title": "a < b & c"}]}}
    escaped = json.dumps(payload).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    dom = (
        f'<html><body><pre id="{fc.MARKER_ID}" style="display: none;">{escaped}</pre></body></html>'
    )
    assert fc.read_marker(dom) == payload
    assert fc.read_marker("<html><body></body></html>") is None
    broken = fc.read_marker(f'<pre id="{fc.MARKER_ID}">{{not json</pre>')
    assert broken["done"] is False and "unreadable" in broken["error"]


def test_figure_specs_reads_every_newplot_call():
    page = (
        '<div id="a"></div><script> Plotly.newPlot( "a", [{"x": [1], "y": [2]}], {"title": {"text": "one"}},'
        ' {"responsive": true} ) </script><script>Plotly.newPlot("b", [], {"height": 300})</script>'
    )
    specs = fc.figure_specs(page)
    assert [s[0] for s in specs] == ["a", "b"]
    assert specs[0][2]["title"]["text"] == "one" and specs[0][3] == {"responsive": True}
    assert specs[1][2] == {"height": 300} and specs[1][3] == {}


def test_the_command_line_refuses_bad_arguments(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        fc.main(["--size", "huge"])
    assert exit_.value.code == 2 and "invalid choice: 'huge'" in capsys.readouterr().err
    assert fc.main(["--chromium", str(tmp_path / "no-such-browser"), str(tmp_path)]) == 2
    assert f"--chromium {tmp_path / 'no-such-browser'}: no such browser" in capsys.readouterr().err
    missing = tmp_path / "missing.html"
    if fc.find_chromium() is not None:
        assert fc.main([str(missing)]) == 2
        assert f"no such file or folder: {missing}" in capsys.readouterr().err
        assert fc.main([str(tmp_path)]) == 2
        assert "no HTML reports in" in capsys.readouterr().err


# ----------------------------------------------------------------------------- in Chromium


# ----------------------------------------------------------------------------- every eye, every theme


def trace(index, name, color, **extra):
    base = {
        "index": index,
        "type": "scatter",
        "name": name,
        "visible": True,
        "orientation": "v",
        "xaxis": "x",
        "yaxis": "y",
        "cliponaxis": True,
        "mode": "lines+markers",
        "legendgroup": "",
        "showlegend": True,
        "line_color": color,
        "line_dash": "solid",
        "marker_color": color,
        "marker_symbol": "circle",
        "pattern": "",
        "x": [1, 2, 3],
        "y": [1, 2, 3],
    }
    base.update(extra)
    return base


def test_colour_science_matches_the_published_numbers():
    from zg.viz import common as colour

    # the old stage palette's gather and step: far apart to most eyes, merged by deuteranopia
    assert colour.delta_e("#54A24B", "#E45756") == pytest.approx(96.8, abs=0.1)
    assert colour.delta_e("#54A24B", "#E45756", "deuteranopia") == pytest.approx(1.7, abs=0.1)
    assert colour.simulate("#ffffff", "protanopia") == pytest.approx((255, 255, 255), abs=1)
    assert colour.contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert colour.alpha("rgba(0,0,0,0)") == 0 and colour.alpha("#ffffff") == 1
    with pytest.raises(ValueError):
        colour.parse_colour("not a colour")


def test_a_red_green_pair_drawn_alike_fails_and_a_dash_tells_them_apart():
    red_green = [trace(0, "gather", "#54A24B"), trace(1, "step", "#E45756")]
    found = fc.colour_problems(figure(traces=red_green))
    assert len(found) == 1 and found[0][2] == "colour-vision"
    assert "'gather' and 'step'" in found[0][0] and "deuteranopia" in found[0][1]
    dashed = [trace(0, "gather", "#54A24B"), trace(1, "step", "#E45756", line_dash="dash")]
    assert fc.colour_problems(figure(traces=dashed)) == []
    symbols = [trace(0, "gather", "#54A24B"), trace(1, "step", "#E45756", marker_symbol="square")]
    assert fc.colour_problems(figure(traces=symbols)) == []


def test_bars_told_apart_by_colour_need_colours_every_eye_tells_apart():
    from zg.viz.common import STAGE_COLORS

    bars = [
        trace(i, stage, colour, type="bar", mode="", line_dash="", marker_symbol=None)
        for i, (stage, colour) in enumerate(STAGE_COLORS.items())
    ]
    assert fc.colour_problems(figure(traces=bars)) == []  # the kit's stage palette
    old = [
        trace(0, "gather", "#54A24B", type="bar", mode=""),
        trace(1, "step", "#E45756", type="bar", mode=""),
    ]
    assert rules(figure(traces=old)) == ["colour-vision"]
    old[1]["pattern"] = "/"
    assert fc.colour_problems(figure(traces=old)) == []


def test_one_series_in_several_traces_is_not_a_pair():
    same = [
        trace(0, "random", "#0072B2", legendgroup="random"),
        trace(1, "", "#0072B2", legendgroup="random", showlegend=False),
        trace(2, "random", "#0072B2", xaxis="x2", yaxis="y2"),
    ]
    assert fc.colour_problems(figure(traces=same)) == []
    two = [trace(0, "random", "#0072B2"), trace(1, "metis", "#0072B2")]
    assert "to every eye" in fc.colour_problems(figure(traces=two))[0][1]


def tick(axis_id, label, i=0):
    return text(
        "tick",
        box(100 + 60 * i, 300, 120 + 60 * i, 312),
        label,
        owner=f"t{axis_id}{i}",
        axis=axis_id,
    )


def scale_figure(axes, traces, unlabelled=()):
    """A figure whose axes draw two tick labels each (but those named in ``unlabelled``)."""
    items = [
        tick(a["id"], label, i)
        for a in axes
        if a["id"] not in unlabelled
        for i, label in enumerate(("1", "10"))
    ]
    return figure(items=items, axes=axes, traces=traces)


def test_an_axis_without_tick_labels_fails():
    hidden = scale_figure([axis("x", showticklabels=False), axis("y")], [trace(0, "a", "#0072B2")])
    found = fc.scale_problems(hidden)
    assert [p[0] for p in found] == ["x-axis"] and "showticklabels" in found[0][1]
    shared = scale_figure(
        [axis("x", showticklabels=False, matches="x2")], [trace(0, "a", "#0072B2")]
    )
    assert fc.scale_problems(shared) == []
    empty = figure(
        axes=[axis("x", tickmode="array", tickvals=0)], traces=[trace(0, "a", "#0072B2")]
    )
    assert "empty tickvals" in fc.scale_problems(empty)[0][1]


def test_an_axis_with_no_tick_label_drawn_fails():
    labels = [tick("y", "0.5", 0), tick("y", "1", 1)]
    drawn = figure(
        items=labels,
        axes=[axis("x", "log"), axis("y")],
        traces=[trace(0, "a", "#0072B2")],
    )
    found = fc.scale_problems(drawn)
    assert [p[0] for p in found] == ["x-axis"] and "draws 0 tick labels" in found[0][1]
    drawn["items"] += [tick("x", "1 MiB", 0), tick("x", "10 MiB", 1)]
    assert fc.scale_problems(drawn) == []


@pytest.mark.parametrize(
    "dtick, minor, fails",
    [("D1", "", True), ("D2", "small digits", True), ("D2", "complete", False), ("1", "", False)],
)
def test_log_axes_labelled_between_decades_in_small_digits_fail(dtick, minor, fails):
    fig = scale_figure(
        [axis("x", "log", dtick=dtick, minorloglabels=minor)], [trace(0, "a", "#0072B2")]
    )
    found = fc.scale_problems(fig)
    assert bool(found) == fails
    if fails:
        assert "2 3 ... 9 1 2" in found[0][1]


def test_a_linear_axis_that_crowds_the_points_at_its_bottom_fails():
    values = [0.7, 0.8, 0.9, 1.1, 1.4, 2.4, 3.2, 1.0, 106522.7, 163687.1]
    crowded = scale_figure(
        [axis("x"), axis("y", range=[0, 170000])],
        [trace(0, "error", "#0072B2", x=list(range(10)), y=values)],
    )
    found = fc.scale_problems(crowded)
    assert [p[0] for p in found] == ["y-axis"] and "crowds 8 of its 10 points" in found[0][1]
    # plotly pads an autorange below the data: the strip starts at the lowest point
    padded = scale_figure(
        [axis("x"), axis("y", range=[-11903.1, 175591.0])],
        [trace(0, "error", "#0072B2", x=list(range(10)), y=values)],
    )
    assert [p[0] for p in fc.scale_problems(padded)] == ["y-axis"]
    spread = scale_figure(
        [axis("x"), axis("y", range=[0, 10])],
        [trace(0, "error", "#0072B2", x=list(range(5)), y=[1, 3, 5, 7, 9])],
    )
    assert fc.scale_problems(spread) == []


def test_a_white_card_and_faint_text_fail_the_dark_theme():
    card = figure(traces=[trace(0, "a", "#0072B2")])
    card["background"] = {"paper": "white", "plot": "#E5ECF6", "font": "#2a3f5f"}
    card["items"] = [text("title", box(10, 10, 200, 30), "Title", fill="rgb(42, 63, 95)")]
    found = fc.theme_problems(card)
    assert [p[0] for p in found] == ["the paper background", "the plot background"]
    clear = figure(traces=[trace(0, "a", "#0072B2")])
    clear["background"] = {"paper": "rgba(0, 0, 0, 0)", "plot": "rgba(0, 0, 0, 0)", "font": "#777"}
    clear["items"] = [text("title", box(10, 10, 200, 30), "Title", fill="rgb(119, 119, 119)")]
    assert fc.theme_problems(clear) == []
    clear["items"][0]["fill"] = "rgb(42, 63, 95)"  # plotly's dark blue-grey: lost on #111111
    found = fc.theme_problems(clear)
    assert len(found) == 1 and "contrast 1.8:1" in found[0][1]


def test_readability_counts_name_each_rule():
    found = [
        fc.Violation("r", "jupyterlab", 1, "t", "series", "...", "colour-vision"),
        fc.Violation("r", "report", 1, "t", "series", "...", "colour-vision"),
        fc.Violation("r", "jupyterlab", 2, "t", "x-axis", "...", "scale"),
        fc.Violation("r", "jupyterlab", 2, "t", "y-axis", "...", "scale"),
    ]
    line = fc.readability_counts(found)
    assert line.startswith("1 figure(s) with series told apart by colour alone")
    assert "2 axis/axes without a readable scale; 0 figure(s) that do not follow" in line


def _chromium():
    chromium = fc.find_chromium()
    if chromium is None:
        pytest.skip(
            "no chromium on PATH: the figure check needs Debian's package (apt-get install -y chromium)"
        )
    return chromium


@pytest.mark.slow
def test_the_self_test_passes_a_good_figure_and_catches_the_broken_ones():
    """The checker's own self-test: a good figure passes at both sizes; three category levels,
    a subtitle past the right edge, a red/green pair, an axis without tick labels and a white
    card fail, each for its reason only."""
    assert fc.self_test(_chromium()) == []


@pytest.mark.slow
def test_the_command_line_fails_naming_the_figure_and_the_element(tmp_path, capsys):
    chromium = _chromium()
    page = tmp_path / "page.html"
    page.write_text(fc.self_test_page(), encoding="utf-8")
    out = tmp_path / "found.json"
    code = fc.main([str(page), "--size", "jupyterlab", "--no-self-test", "--json", str(out)])
    printed = capsys.readouterr().out
    assert code == 1, printed
    found = json.loads(out.read_text())
    assert found["sizes"] == ["jupyterlab"] and found["figures"] == 6
    by_figure = {(v["figure"], v["rule"]) for v in found["violations"]}
    assert by_figure == {
        (2, "categories"),
        (3, "edge"),
        (4, "colour-vision"),
        (5, "scale"),
        (6, "theme"),
    }
    assert (
        "1 figure(s) with series told apart by colour alone (red/green to deuteranopia or "
        "protanopia, CIE76 under 10); 1 axis/axes without a readable scale; 1 figure(s) that do "
        "not follow JupyterLab's dark theme" in printed
    )
    assert 'figure 2 "Three category levels": x-axis: is given 3 category levels' in printed
    assert 'figure 3 "An overflowing subtitle": subtitle (<sup>)' in printed
    assert "[jupyterlab 968x360]" in printed
    shots = tmp_path / "shots"
    assert fc.screenshot(fc.figure_specs(page.read_text())[0], 968, 360, shots / "a.png", chromium)
    assert (shots / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
