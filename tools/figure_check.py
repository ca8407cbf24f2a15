#!/usr/bin/env python
"""Check what every plotly figure of every HTML report DRAWS, in headless Chromium, at two sizes.

    python tools/figure_check.py                         # every reports/*.html, both sizes
    python tools/figure_check.py reports/07_coverage_correction.html --size jupyterlab
    python tools/figure_check.py --json /tmp/figures.json --chromium /usr/bin/chromium

tools/report_check.py asks whether a figure drew; this asks whether a person can read it. Each
figure is measured where people look at it:

* ``jupyterlab``: JupyterLab's notebook output area, 968 px wide (the file browser open). The
  figure is as tall as its own ``layout.height``; where it sets none, as tall as JupyterLab's
  plotly renderer makes it (jupyterlab-plotly sets ``height`` to 360 px when a figure has none).
* ``report``: the HTML report as drawn, in a window ``--report-width`` px wide (default 1280):
  the figure fills the report's output area, 480 px tall unless it sets its own height.

How: a copy of the page gets one script first in ``<head>`` (report_check.py's ``instrument``).
After the page has loaded and every figure has drawn, it measures each figure at the report's
size, then resizes each one to JupyterLab's (its container and ``Plotly.relayout``) and measures
again. A measurement is every piece of text plotly drew, as the four corners of its box on the
screen (``getBBox`` through ``getScreenCTM``, so rotated labels keep their true shape): title
lines (a ``<sup>`` subtitle is its own line), axis titles, tick labels (both levels of a
multicategory axis), annotations (subplot titles are annotations), legend entries and the
legend's box and scrollbar, update-menu buttons, slider labels and rail, colorbar labels, data
labels (bar text); and, per axis, its type, title, tick settings and the categories the data
gives it. The script writes all of it as JSON into a hidden ``<pre id="zg-figure-check">``;
Chromium prints the DOM (report_check.py's ``run_chromium``: ``--dump-dom``) and the rules
below run here, in Python, on those numbers:

* **categories**: a multicategory axis given more than 2 levels fails (plotly draws the first
  2 and stacks the rest into one bar); the drawn tick labels must tell apart every category of
  the data (a category axis where plotly skipped labels for lack of room fails, unless its
  categories are numbers, which a reader can interpolate);
* **edges**: no text runs past the figure's edge (more than 1 px), and no data label is cut by
  its plot area (``cliponaxis``);
* **overprints**: no two texts overlap by more than 2 px in both directions, among the pairs
  that a normal figure keeps apart: the title and subtitle against axis titles, tick labels,
  annotations, legend, menus, sliders and colorbars; axis titles against all of those; tick
  labels against each other; annotations against each other and the rest; menus against the
  rest (a dropdown over a subplot title);
* **legends**: a legend with a scrollbar (plotly draws one when the entries do not fit) fails,
  naming the entries it hides; so does a legend inside a plot area that covers bars, markers
  or lines of the data;
* **plot area**: tick labels that take more than 60 % of the plot area beside them (long
  rotated category labels leaving the bars a strip) fail;
* **units**: an axis in bytes or MiB (its title or tick suffix) whose tick labels carry SI
  suffixes (``2M``, ``1.5G``: powers of 1000), and data labels in binary units (MiB) on an axis
  whose ticks are SI, fail.

Before the reports, a self-test renders one tiny page with the same plotly.js: a good figure
(subplots, subplot titles, a legend, a dropdown, a subtitle, a MiB axis) that must pass, a
figure with three category levels that must fail for that reason only, and a figure whose
``<sup>`` subtitle runs past the right edge that must fail for that reason only; else this
checker (or this Chromium) cannot be trusted and the run stops. ``--no-self-test`` skips it.

Exit status 0 when every figure passed, 1 when a rule failed (each violation is printed naming
the report, the size, the figure's index and title, and the element), 2 when the checker could
not run (no Chromium, a failed self-test, a page whose measurement never finished).
"""

from __future__ import annotations

import argparse
import html
import json
import math
import re
import shutil
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # this checkout's zg, before an installed one
from report_check import find_chromium, instrument, run_chromium

# Machado et al. 2009 simulation, CIE76 differences, WCAG contrast
from zg.viz.common import DARK_PAGE, DISTINCT, LIGHT_PAGE, alpha, contrast, delta_e

MARKER_ID = "zg-figure-check"
SIZES = ("report", "jupyterlab")
JUPYTERLAB_WIDTH = 968  # JupyterLab's output area with the file browser open
JUPYTERLAB_DEFAULT_HEIGHT = 360  # what jupyterlab-plotly gives a figure that sets no height
REPORT_WINDOW = (1280, 1000)  # the browser window a report is read in
EDGE_TOLERANCE = 1.0  # px a text may run past an edge (anti-aliasing, rounding)
OVERLAP_TOLERANCE = 2.0  # px two boxes may overlap in both directions (glyph boxes have air)

# ----------------------------------------------------------------------------- in the browser

MEASURE_JS = r"""<script type="text/javascript">
(function () {
  var OPTIONS = %(options)s;
  function write(result) {
    if (!document.body) { return; }
    var el = document.getElementById(OPTIONS.marker);
    if (!el) {
      el = document.createElement('pre');
      el.id = OPTIONS.marker;
      el.style.display = 'none';
      document.body.appendChild(el);
    }
    el.textContent = JSON.stringify(result);
  }
  function sleep(ms) { return new Promise(function (r) { setTimeout(r, ms); }); }
  function plain(s) {
    return String(s == null ? '' : s).replace(/<br\s*\/?>/gi, ' ').replace(/<[^>]*>/g, '')
      .replace(/&nbsp;/g, ' ').replace(/\s+/g, ' ').trim();
  }
  function round(v) { return Math.round(v * 10) / 10; }
  function textOf(el) { return (el.textContent || '').replace(/\u200b/g, '').replace(/\s+/g, ' ').trim(); }
  // The four corners of el's box on the screen, relative to the figure's top left corner.
  function corners(el, origin) {
    var b, m;
    try { b = el.getBBox(); m = el.getScreenCTM(); } catch (e) { return null; }
    if (!b || !m || (b.width <= 0 && b.height <= 0)) { return null; }
    return [[b.x, b.y], [b.x + b.width, b.y], [b.x + b.width, b.y + b.height], [b.x, b.y + b.height]]
      .map(function (p) {
        var q = new DOMPoint(p[0], p[1]).matrixTransform(m);
        return [round(q.x - origin.left), round(q.y - origin.top)];
      });
  }
  function each(root, selector, fn) { Array.prototype.forEach.call(root.querySelectorAll(selector), fn); }
  function distinct(values, limit) {
    var seen = {}, out = [];
    values.forEach(function (v) { if (!(v in seen)) { seen[v] = 1; out.push(v); } });
    return {count: out.length, values: out.slice(0, limit)};
  }
  function isArrayLike(a) { return Array.isArray(a) || (ArrayBuffer.isView && ArrayBuffer.isView(a)); }

  // The data a legend box covers, where the legend sits inside a plot area: per trace, the
  // bars and markers under it and the points of its lines (sampled every 4 px) under it.
  function covered(gd, fl, box, origin) {
    var l = Math.min(box[0][0], box[2][0]), r = Math.max(box[0][0], box[2][0]);
    var t = Math.min(box[0][1], box[2][1]), b = Math.max(box[0][1], box[2][1]);
    var inside = Object.keys(fl._plots || {}).some(function (k) {
      var p = fl._plots[k], xa = p.xaxis, ya = p.yaxis;
      return xa && ya && l < xa._offset + xa._length && r > xa._offset && t < ya._offset + ya._length && b > ya._offset;
    });
    if (!inside) { return []; }
    function under(x, y) { return x > l + 1 && x < r - 1 && y > t + 1 && y < b - 1; }
    var out = [];
    each(gd, '.cartesianlayer g.trace', function (g) {
      var cd = g.__data__, tr = cd && cd[0] && cd[0].trace;
      if (!tr) { return; }
      var marks = 0, points = 0;
      each(g, 'g.point > path, path.point', function (m) {
        var p = corners(m, origin);
        if (!p) { return; }
        var xs = p.map(function (c) { return c[0]; }), ys = p.map(function (c) { return c[1]; });
        var ml = Math.max(Math.min.apply(null, xs), l), mr = Math.min(Math.max.apply(null, xs), r);
        var mt = Math.max(Math.min.apply(null, ys), t), mb = Math.min(Math.max.apply(null, ys), b);
        if (mr - ml > 1 && mb - mt > 1) { marks += 1; }
      });
      each(g, 'path.js-line', function (line) {
        var length = 0, m = line.getScreenCTM();
        try { length = line.getTotalLength(); } catch (e) { return; }
        if (!m) { return; }
        for (var s = 0; s <= length; s += 4) {
          var q = new DOMPoint(line.getPointAtLength(s).x, line.getPointAtLength(s).y).matrixTransform(m);
          if (under(q.x - origin.left, q.y - origin.top)) { points += 1; }
        }
      });
      if (marks || points) { out.push({trace: tr.index, name: plain(tr.name), marks: marks, line_points: points}); }
    });
    return out;
  }

  function measure(gd, index) {
    var fl = gd._fullLayout;
    var svg = gd.querySelector('svg.main-svg');
    var heading = String((fl && fl.title && fl.title.text) || '').split(/<br\s*\/?>/i)[0];
    var fig = {index: index, id: gd.id, drawn: !!(fl && svg), title: plain(heading)};
    if (!fig.drawn) { return fig; }
    var origin = svg.getBoundingClientRect();
    fig.width = round(origin.width); fig.height = round(origin.height);
    var items = [];
    function add(kind, el, extra) {
      var poly = corners(el, origin);
      if (!poly) { return null; }
      var item = {kind: kind, text: textOf(el).slice(0, 160), poly: poly, el: el};
      for (var k in extra) { item[k] = extra[k]; }
      if (!item.text && !extra.box) { return null; }
      items.push(item);
      return item;
    }
    // The title: each line on its own (a <sup> subtitle after a <br> is a line of its own).
    each(gd, '.g-gtitle text', function (t, n) {
      var sub = /subtitle/.test(t.getAttribute('class') || '');
      var lines = t.querySelectorAll('tspan.line');
      if (!lines.length) { add('title', t, {part: sub ? 'subtitle' : 'title', owner: 'title'}); return; }
      Array.prototype.forEach.call(lines, function (line, i) {
        var sup = !!line.querySelector('tspan[style*="70%%"]') || /font-size:\s*70%%/.test(line.getAttribute('style') || '');
        add('title', line, {part: (sub || i > 0) ? 'subtitle' : 'title', line: i + 1, sup: sup, owner: 'title'});
      });
    });
    each(gd, 'g[class^="g-"]', function (g) {
      var m = /^g-([xy]\d*)title$/.exec(g.getAttribute('class') || '');
      if (!m) { return; }
      each(g, 'text', function (t) { add('axistitle', t, {axis: m[1], owner: 'axistitle-' + m[1]}); });
    });
    var tickCount = 0;
    each(gd, 'g[class*="axislayer"] > g', function (g) {
      var m = /^([xy]\d*)tick(2?)$/.exec(g.getAttribute('class') || '');
      if (!m) { return; }
      var t = g.querySelector('text');
      if (!t) { return; }
      add('tick', t, {axis: m[1], level: m[2] ? 2 : 1, raw: t.getAttribute('data-unformatted'),
                      owner: 'tick-' + (tickCount++)});
    });
    each(gd, 'g.annotation', function (g) {
      var i = g.getAttribute('data-index');
      var spec = (fl.annotations || [])[Number(i)] || {};
      each(g, 'text.annotation-text', function (t) {
        add('annotation', t, {index: Number(i), owner: 'annotation-' + i, xref: spec.xref || '', yref: spec.yref || '',
                              bgcolor: spec.bgcolor || ''});
      });
    });
    var legends = [];
    each(gd, 'g.infolayer > g', function (g) {
      var cls = g.getAttribute('class') || '';
      if (!/^legend\d*$/.test(cls)) { return; }
      var bg = g.querySelector(':scope > rect.bg');
      var bar = g.querySelector('rect.scrollbar');
      var box = bg ? corners(bg, origin) : null;
      var info = {id: cls, box: box, scrollbar: bar ? [Number(bar.getAttribute('width')) || 0, Number(bar.getAttribute('height')) || 0] : [0, 0],
                  entries: 0, hidden: []};
      each(g, 'g.traces text.legendtext', function (t) {
        info.entries += 1;
        var p = corners(t, origin), text = textOf(t);
        var inside = p && box && p.every(function (c) {
          return c[1] >= box[0][1] - 1 && c[1] <= box[2][1] + 1 && c[0] >= box[0][0] - 1 && c[0] <= box[2][0] + 1;
        });
        if (p && (inside || !box)) { items.push({kind: 'legendentry', text: text.slice(0, 160), poly: p, legend: cls, owner: cls, el: t}); }
        else { info.hidden.push(text.slice(0, 80)); }
      });
      each(g, 'text.legendtitletext', function (t) { add('legendentry', t, {legend: cls, owner: cls, title: true}); });
      if (bg) { add('legend', bg, {legend: cls, owner: cls, box: true, text: ''}); }
      info.covers = box ? covered(gd, fl, box, origin) : [];
      legends.push(info);
    });
    each(gd, 'g.updatemenu-container', function (c, n) {
      each(c, 'g.updatemenu-header, g.updatemenu-button', function (b) {
        var t = b.querySelector('text');
        add('menu', b, {menu: n, text: t ? textOf(t).slice(0, 160) : '', owner: 'menu-' + n, box: true});
      });
    });
    each(gd, 'g.slider-group', function (s, n) {
      each(s, 'text.slider-label', function (t, k) { add('slider', t, {slider: n, owner: 'slider-' + n + '-' + k}); });
      each(s, 'rect.slider-rail-rect', function (r) { add('slider', r, {slider: n, rail: true, owner: 'slider-' + n + '-rail', box: true, text: ''}); });
    });
    each(gd, 'g.colorbar', function (c, n) {
      each(c, 'text', function (t, k) { add('colorbar', t, {colorbar: n, owner: 'colorbar-' + n + '-' + k}); });
    });
    var traces = [];
    function scalar(v) { return (typeof v === 'string' || typeof v === 'number') ? v : null; }
    function numbers(a) {
      if (!isArrayLike(a)) { return []; }
      var out = [];
      for (var k = 0; k < a.length && out.length < 5000; k++) {
        var v = a[k];
        if (typeof v === 'number' && isFinite(v)) { out.push(v); }
      }
      return out;
    }
    (gd._fullData || []).forEach(function (tr) {
      var line = tr.line || {}, marker = tr.marker || {}, pattern = marker.pattern || {};
      var input = tr._input || {};
      traces.push({index: tr.index, type: tr.type, name: plain(tr.name), visible: tr.visible === true,
                   orientation: tr.orientation || 'v', xaxis: tr.xaxis || null, yaxis: tr.yaxis || null,
                   cliponaxis: tr.cliponaxis !== false,
                   // how the trace is drawn: what tells it apart from the others
                   mode: tr.mode || '', legendgroup: tr.legendgroup || '', showlegend: tr.showlegend !== false,
                   line_color: scalar(line.color), line_dash: scalar(line.dash) || (tr.mode ? 'solid' : ''),
                   line_width: typeof line.width === 'number' ? line.width : null,
                   marker_color: scalar(marker.color), marker_symbol: scalar(marker.symbol),
                   pattern: scalar(pattern.shape) || '', fillcolor: scalar(tr.fillcolor),
                   x: numbers(isArrayLike(input.x) ? input.x : tr.x), y: numbers(isArrayLike(input.y) ? input.y : tr.y)});
    });
    each(gd, 'g.trace', function (g) {
      var cd = g.__data__, tr = cd && cd[0] && cd[0].trace;
      if (!tr) { return; }
      each(g, 'text.bartext, g.textpoint > text', function (t, k) {
        add('datalabel', t, {trace: tr.index, owner: 'data-' + tr.index + '-' + k});
      });
    });
    // Axes: what plotly made of each, and the categories the data gives it.
    var axes = {};
    Object.keys(fl).forEach(function (k) {
      if (!/^[xy]axis\d*$/.test(k) || !fl[k] || !fl[k]._id) { return; }
      var ax = fl[k];
      // plotly fills an unset axis title with a placeholder it draws only in editable mode
      var title = plain(ax.title && ax.title.text), placeholder = (fl._dfltTitle || {})[ax._id.charAt(0)];
      if (placeholder && title === plain(placeholder)) { title = ''; }
      axes[ax._id] = {id: ax._id, type: ax.type, title: title, tickmode: ax.tickmode || '',
                      ticksuffix: plain(ax.ticksuffix), tickprefix: plain(ax.tickprefix), visible: ax.visible !== false,
                      showticklabels: ax.showticklabels !== false, offset: round(ax._offset || 0), length: round(ax._length || 0),
                      autorange: ax.autorange !== false, anchor: ax.anchor || '', side: ax.side || '',
                      dtick: ax.dtick == null ? '' : String(ax.dtick), minorloglabels: ax.minorloglabels || '',
                      tickvals: isArrayLike(ax.tickvals) ? ax.tickvals.length : null,
                      range: (ax.range || []).map(function (v) { return ax.r2l ? ax.r2l(v) : v; }),
                      matches: ax.matches || '',
                      levels: 1, tuples: [], tuples_all: 0, tuples_drawable: 0};
    });
    var collected = {};
    (gd._fullData || []).forEach(function (tr) {
      if (tr.visible !== true) { return; }
      ['x', 'y'].forEach(function (letter) {
        var id = tr[letter + 'axis'], ax = axes[id];
        if (!ax || (ax.type !== 'category' && ax.type !== 'multicategory')) { return; }
        var input = tr._input || {}, arr = input[letter];
        if (!isArrayLike(arr)) { arr = tr[letter]; }
        if (!isArrayLike(arr) || !arr.length) { return; }
        var rows;
        if (isArrayLike(arr[0]) && typeof arr[0] !== 'string') {
          ax.levels = Math.max(ax.levels, arr.length);
          rows = [];
          for (var j = 0; j < arr[0].length; j++) {
            rows.push(Array.prototype.map.call(arr, function (level) { return level[j] == null ? '' : String(level[j]); }));
          }
        } else {
          rows = Array.prototype.map.call(arr, function (v) { return [v == null ? '' : String(v)]; });
        }
        collected[id] = (collected[id] || []).concat(rows);
      });
    });
    Object.keys(collected).forEach(function (id) {
      var ax = axes[id], rows = collected[id];
      var all = distinct(rows.map(function (r) { return JSON.stringify(r); }), 400);
      var two = distinct(rows.map(function (r) { return JSON.stringify(r.slice(0, 2)); }), 0);
      ax.tuples = all.values.map(function (s) { return JSON.parse(s); });
      ax.tuples_all = all.count; ax.tuples_drawable = two.count;
    });
    // What the figure sits on, and the colour each text is drawn in.
    fig.background = {paper: fl.paper_bgcolor || '', plot: fl.plot_bgcolor || '',
                      font: (fl.font && fl.font.color) || ''};
    items.forEach(function (item) { if (item.el) { item.fill = getComputedStyle(item.el).fill || ''; delete item.el; } });
    fig.items = items; fig.legends = legends; fig.traces = traces;
    fig.axes = Object.keys(axes).map(function (k) { return axes[k]; });
    return fig;
  }

  function notReady(gd) { return !gd._fullLayout || (gd._promises && gd._promises.length > 0); }

  async function run() {
    var result = {done: false, sizes: {}};
    write(result);
    try {
      if (!window.Plotly) { throw new Error('plotly.js is not on the page'); }
      var gds = Array.prototype.slice.call(document.querySelectorAll('div.plotly-graph-div'));
      for (var t = 0; t < 100 && gds.some(notReady); t++) { await sleep(100); }
      if (document.fonts && document.fonts.ready) { await document.fonts.ready; }
      await sleep(200);
      var own = gds.map(function (gd) { var l = gd.layout || {}; return {width: l.width, height: l.height}; });
      for (var s = 0; s < OPTIONS.sizes.length; s++) {
        var size = OPTIONS.sizes[s], figs = [];
        for (var i = 0; i < gds.length; i++) {
          var gd = gds[i];
          if (size === 'jupyterlab' && gd._fullLayout) {
            var w = own[i].width || OPTIONS.jupyterlab[0], h = own[i].height || OPTIONS.jupyterlab[1];
            var box = gd.parentElement;
            if (box) { box.style.width = w + 'px'; box.style.height = h + 'px'; }
            gd.style.width = w + 'px'; gd.style.height = h + 'px';
            await Plotly.relayout(gd, {width: w, height: h});
            await sleep(20);
          }
          var fig = measure(gd, i + 1);
          fig.own_width = own[i].width || null; fig.own_height = own[i].height || null;
          figs.push(fig);
        }
        result.sizes[size] = figs;
      }
      result.done = true;
    } catch (e) {
      result.error = String((e && (e.stack || e.message)) || e).slice(0, 2000);
    }
    write(result);
  }
  window.addEventListener('load', function () { setTimeout(run, 50); });
})();
</script>
"""


def measure_script(sizes, jupyterlab=(JUPYTERLAB_WIDTH, JUPYTERLAB_DEFAULT_HEIGHT)) -> str:
    """The script that measures every figure of a page at ``sizes`` (report first)."""
    options = {
        "marker": MARKER_ID,
        "sizes": [s for s in SIZES if s in sizes],
        "jupyterlab": list(jupyterlab),
    }
    return MEASURE_JS % {"options": json.dumps(options)}


_MARKER = re.compile(
    r'<pre\b[^>]*\bid="' + MARKER_ID + r'"[^>]*>(.*?)</pre>', re.DOTALL | re.IGNORECASE
)


def read_marker(dom: str) -> dict | None:
    """The measurements the script left in the dumped DOM, or None when it wrote none."""
    match = _MARKER.search(dom)
    if match is None:
        return None
    try:
        return json.loads(html.unescape(match.group(1)))
    except ValueError:
        return {"done": False, "error": f"unreadable measurements: {match.group(1)[:200]}"}


# ----------------------------------------------------------------------------- geometry


def bounds(poly) -> tuple:
    """(left, top, right, bottom) of a polygon given as [[x, y], ...]."""
    xs = [p[0] for p in poly]
    ys = [p[1] for p in poly]
    return min(xs), min(ys), max(xs), max(ys)


def overrun(poly, width: float, height: float) -> dict:
    """How far (px) a box runs past each edge of a ``width`` x ``height`` figure (0 when inside)."""
    left, top, right, bottom = bounds(poly)
    return {
        "left": max(0.0, -left),
        "top": max(0.0, -top),
        "right": max(0.0, right - width),
        "bottom": max(0.0, bottom - height),
    }


# A text's box (getBBox) runs from the font's ascent to its descent: above the capitals and
# digits there is air (about 16 % of the box in Liberation Sans / Arial), and below the baseline
# only descenders (g, p, y) reach. Two texts overprint when their ink meets, so the box is
# trimmed by these fractions of its height, in the text's own frame (a rotated label too).
INK_TOP, INK_BOTTOM = 0.16, 0.10


def ink(poly, top: float = INK_TOP, bottom: float = INK_BOTTOM) -> list:
    """The part of a text box (corners top-left, top-right, bottom-right, bottom-left in the
    text's frame) that its glyphs cover: the top edge moved down by ``top`` of the box's
    height and the bottom edge up by ``bottom``."""
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = poly
    dx, dy = x3 - x0, y3 - y0  # down the text's frame (left side); the right side is parallel
    return [
        [x0 + top * dx, y0 + top * dy],
        [x1 + top * dx, y1 + top * dy],
        [x2 - bottom * dx, y2 - bottom * dy],
        [x3 - bottom * dx, y3 - bottom * dy],
    ]


def overlap_depth(a, b) -> float:
    """How deep two convex polygons overlap: the smallest overlap of their projections on the
    normals of their edges (separating axis theorem); 0 when they do not overlap. For two
    axis-aligned boxes it is the smaller of the overlaps in x and in y."""
    depth = math.inf
    for poly in (a, b):
        n = len(poly)
        for i in range(n):
            x0, y0 = poly[i]
            x1, y1 = poly[(i + 1) % n]
            nx, ny = y0 - y1, x1 - x0
            norm = math.hypot(nx, ny)
            if norm == 0:
                continue
            nx, ny = nx / norm, ny / norm
            pa = [x * nx + y * ny for x, y in a]
            pb = [x * nx + y * ny for x, y in b]
            overlap = min(max(pa), max(pb)) - max(min(pa), min(pb))
            if overlap <= 0:
                return 0.0
            depth = min(depth, overlap)
    return 0.0 if depth is math.inf else depth


# ----------------------------------------------------------------------------- units

_BINARY_UNIT = re.compile(r"\b[KMGTP]iB\b")
_DECIMAL_UNIT = re.compile(r"\b[kKMGTP]B\b")
_BYTES = re.compile(r"\bbytes?\b", re.IGNORECASE)
# plotly's SI-style tick labels: 2M, 1.5G, 500k, 2B (its "B" is a billion), with the minus it draws
_SI_TICK = re.compile(r"^[-\u2212]?\d+(?:\.\d+)?\s?([kMGTPEB])$")


def byte_unit(text: str) -> str | None:
    """'binary' (KiB, MiB, ...), 'decimal' (kB, MB, ...), 'bytes', or None: what unit of
    memory ``text`` names."""
    if _BINARY_UNIT.search(text):
        return "binary"
    if _DECIMAL_UNIT.search(text):
        return "decimal"
    if _BYTES.search(text):
        return "bytes"
    return None


def si_suffix(tick: str, unit_words: str = "") -> str | None:
    """The SI suffix of a tick label ("2M" -> "M"), ignoring a trailing unit such as " MiB"
    that the axis's ticksuffix adds; None for a plain number."""
    text = tick.strip()
    if unit_words and text.endswith(unit_words):
        text = text[: -len(unit_words)].strip()
    match = _SI_TICK.match(text)
    return match.group(1) if match else None


def _numeric(text: str) -> bool:
    try:
        float(str(text).replace("\u2212", "-"))
    except ValueError:
        return False
    return True


# ----------------------------------------------------------------------------- the rules


@dataclass
class Violation:
    report: str
    size: str
    figure: int
    title: str
    element: str
    what: str
    rule: str
    width: float = 0.0
    height: float = 0.0

    def line(self) -> str:
        title = self.title if len(self.title) <= 90 else self.title[:87] + "..."
        return (
            f"{self.report} [{self.size} {self.width:.0f}x{self.height:.0f}] figure {self.figure} "
            f'"{title}": {self.element}: {self.what}'
        )


def _quote(text: str, limit: int = 60) -> str:
    text = text if len(text) <= limit else text[: limit - 3] + "..."
    return f"'{text}'"


def describe(item: dict) -> str:
    """A reader's name for a measured piece of text."""
    kind = item["kind"]
    text = item.get("text", "")
    if kind == "title":
        if item.get("part") == "subtitle":
            return "subtitle" + (" (<sup>)" if item.get("sup") else "") + f" {_quote(text)}"
        return f"title {_quote(text)}"
    if kind == "axistitle":
        return f"{item['axis']}-axis title {_quote(text)}"
    if kind == "tick":
        level = " (outer level)" if item.get("level") == 2 else ""
        return f"{item['axis']}-axis tick label{level} {_quote(text)}"
    if kind == "annotation":
        return f"annotation {item.get('index', 0) + 1} {_quote(text)}"
    if kind == "legendentry":
        return ("legend title " if item.get("title") else "legend entry ") + _quote(text)
    if kind == "legend":
        return "the legend"
    if kind == "menu":
        return f"menu button {_quote(text)}"
    if kind == "slider":
        return "the slider" if item.get("rail") else f"slider label {_quote(text)}"
    if kind == "colorbar":
        return f"colorbar label {_quote(text)}"
    if kind == "datalabel":
        return f"data label {_quote(text)} (trace {item.get('trace', 0) + 1})"
    return f"{kind} {_quote(text)}"


def _group(item: dict) -> str:
    """Items reported together when many of them break the same rule (tick labels of one axis)."""
    kind = item["kind"]
    if kind == "tick":
        return f"{item['axis']}-axis tick labels" + (
            " (outer level)" if item.get("level") == 2 else ""
        )
    if kind == "legendentry":
        return "legend entries"
    if kind == "slider":
        return "slider labels"
    if kind == "colorbar":
        return "colorbar labels"
    if kind == "datalabel":
        return f"data labels of trace {item.get('trace', 0) + 1}"
    return describe(item)


# Which kinds of text must never overprint which: a normal figure keeps these apart. Data labels
# against data labels, and legend boxes or annotations against the data, are left alone.
_OVERPRINT_PAIRS = {
    frozenset(pair)
    for pair in [
        ("title", "axistitle"),
        ("title", "tick"),
        ("title", "annotation"),
        ("title", "legend"),
        ("title", "menu"),
        ("title", "slider"),
        ("title", "colorbar"),
        ("title", "datalabel"),
        ("axistitle", "axistitle"),
        ("axistitle", "tick"),
        ("axistitle", "annotation"),
        ("axistitle", "legend"),
        ("axistitle", "menu"),
        ("axistitle", "slider"),
        ("axistitle", "colorbar"),
        ("tick", "tick"),
        ("tick", "annotation"),
        ("tick", "legend"),
        ("tick", "menu"),
        ("tick", "slider"),
        ("tick", "colorbar"),
        ("annotation", "annotation"),
        ("annotation", "legend"),
        ("annotation", "menu"),
        ("annotation", "slider"),
        ("annotation", "colorbar"),
        ("legend", "legend"),
        ("legend", "menu"),
        ("legend", "slider"),
        ("legend", "colorbar"),
        ("menu", "menu"),
        ("menu", "slider"),
        ("menu", "colorbar"),
        ("menu", "datalabel"),
        ("slider", "slider"),
        ("legend", "datalabel"),
    ]
}
# Text whose edge is checked (legend and menu boxes, the slider rail: their texts are checked).
_EDGE_KINDS = {
    "title",
    "axistitle",
    "tick",
    "annotation",
    "legendentry",
    "menu",
    "slider",
    "colorbar",
    "datalabel",
}


def _edge_problems(fig: dict) -> list:
    out = defaultdict(list)  # group -> [(worst px, side, item)]
    for item in fig.get("items", []):
        if item["kind"] not in _EDGE_KINDS or item.get("rail"):
            continue
        over = overrun(item["poly"], fig["width"], fig["height"])
        side, px = max(over.items(), key=lambda kv: kv[1])
        if px > EDGE_TOLERANCE:
            out[_group(item)].append((px, side, item))
    problems = []
    for group, hits in out.items():
        hits.sort(key=lambda h: -h[0])
        px, side, item = hits[0]
        sides = sorted({h[1] for h in hits})
        if len(hits) == 1:
            problems.append(
                (describe(item), f"runs {px:.0f} px past the {side} edge of the figure", "edge")
            )
        else:
            problems.append(
                (
                    group,
                    f"{len(hits)} run past the {' and '.join(sides)} edge of the figure "
                    f"(by up to {px:.0f} px: {_quote(item['text'])})",
                    "edge",
                )
            )
    return problems


def _clipped_data_labels(fig: dict) -> list:
    """Data labels outside their plot area where plotly clips them (``cliponaxis``)."""
    axes = {a["id"]: a for a in fig.get("axes", [])}
    traces = {t["index"]: t for t in fig.get("traces", [])}
    out = defaultdict(list)
    for item in fig.get("items", []):
        if item["kind"] != "datalabel":
            continue
        trace = traces.get(item.get("trace"))
        if not trace or not trace["cliponaxis"]:
            continue
        xa, ya = axes.get(trace["xaxis"]), axes.get(trace["yaxis"])
        if not xa or not ya:
            continue
        left, top, right, bottom = bounds(item["poly"])
        cut = max(
            xa["offset"] - left,
            right - (xa["offset"] + xa["length"]),
            ya["offset"] - top,
            bottom - (ya["offset"] + ya["length"]),
        )
        if cut > EDGE_TOLERANCE:
            out[item["trace"]].append((cut, item))
    problems = []
    for trace_index, hits in out.items():
        hits.sort(key=lambda h: -h[0])
        cut, item = hits[0]
        name = traces[trace_index]["name"]
        what = (
            f"{len(hits)} cut off by the plot area (by up to {cut:.0f} px: {_quote(item['text'])})"
            if len(hits) > 1
            else f"cut off {cut:.0f} px by the plot area"
        )
        element = (
            _group(item) + (f" ({_quote(name)})" if name else "")
            if len(hits) > 1
            else describe(item)
        )
        problems.append((element, what, "edge"))
    return problems


def _overprint_problems(fig: dict) -> list:
    kinds = {k for pair in _OVERPRINT_PAIRS for k in pair}
    items = [i for i in fig.get("items", []) if i["kind"] in kinds]
    # Boxes (the legend, a menu button, the slider's rail) cover all of themselves; text its ink.
    shapes = [i["poly"] if i.get("box") else ink(i["poly"]) for i in items]
    hits = defaultdict(list)  # (group a, group b) -> [(depth, item a, item b)]
    for i, a in enumerate(items):
        ba = bounds(shapes[i])
        for j in range(i + 1, len(items)):
            b = items[j]
            if a["owner"] == b["owner"]:
                continue
            if frozenset((a["kind"], b["kind"])) not in _OVERPRINT_PAIRS:
                continue
            bb = bounds(shapes[j])
            if ba[2] <= bb[0] or bb[2] <= ba[0] or ba[3] <= bb[1] or bb[3] <= ba[1]:
                continue
            depth = overlap_depth(shapes[i], shapes[j])
            if depth > OVERLAP_TOLERANCE:
                ga, gb = _group(a), _group(b)
                key = (ga, gb) if (ga, gb) <= (gb, ga) else (gb, ga)
                first, second = (a, b) if key[0] == ga else (b, a)
                hits[key].append((depth, first, second))
    problems = []
    for (ga, gb), found in hits.items():
        found.sort(key=lambda h: -h[0])
        depth, a, b = found[0]
        if len(found) == 1:
            problems.append(
                (describe(a), f"overprints {describe(b)} ({depth:.0f} px deep)", "overlap")
            )
        elif ga == gb:
            problems.append(
                (
                    ga,
                    f"overprint each other ({len(found)} pairs, e.g. {_quote(a['text'], 40)} and "
                    f"{_quote(b['text'], 40)}, {depth:.0f} px deep)",
                    "overlap",
                )
            )
        else:
            problems.append(
                (
                    ga,
                    f"{len(found)} overprint {gb} (e.g. {_quote(a['text'], 40)} and "
                    f"{_quote(b['text'], 40)}, {depth:.0f} px deep)",
                    "overlap",
                )
            )
    return problems


def _legend_problems(fig: dict) -> list:
    problems = []
    for legend in fig.get("legends", []):
        width, height = legend.get("scrollbar", [0, 0])
        if width > 0 and height > 0 or legend.get("hidden"):
            hidden = legend.get("hidden", [])
            shown = legend["entries"] - len(hidden)
            what = f"does not fit: it scrolls, showing {shown} of {legend['entries']} entries" + (
                f" (hidden: {', '.join(_quote(h, 30) for h in hidden[:6])})" if hidden else ""
            )
            name = "the legend" if legend["id"] == "legend" else f"legend {legend['id']}"
            problems.append((name, what, "legend"))
        covers = legend.get("covers") or []
        if covers:
            parts = []
            for c in covers[:4]:
                bits = [f"{c['marks']} bars or markers"] if c.get("marks") else []
                if c.get("line_points"):
                    bits.append(f"about {4 * c['line_points']} px of its line")
                parts.append(f"{' and '.join(bits)} of {_quote(c.get('name') or 'trace')}")
            name = "the legend" if legend["id"] == "legend" else f"legend {legend['id']}"
            problems.append(
                (name, f"sits inside the plot and covers data: {'; '.join(parts)}", "legend")
            )
    return problems


def category_problems(axis: dict, ticks: list) -> list:
    """Whether the drawn tick labels of ``axis`` tell apart every category its data gives.

    ``axis``: the measured axis (type, levels, tuples: the distinct categories of the data as
    lists of their levels, tuples_all / tuples_drawable: how many distinct categories the
    data has with all its levels and with plotly's two); ``ticks``: its drawn tick labels."""
    if axis["type"] not in ("category", "multicategory") or not axis.get("tuples_all"):
        return []
    name = f"{axis['id']}-axis"
    problems = []
    if axis["type"] == "multicategory" and axis.get("levels", 1) > 2:
        problems.append(
            (
                name,
                f"is given {axis['levels']} category levels; plotly draws only the first 2, so "
                f"the data's {axis['tuples_all']} categories are drawn as "
                f"{axis['tuples_drawable']} (the levels after the second are stacked into one "
                "bar or point)",
                "categories",
            )
        )
        return problems
    if not axis.get("visible", True) or not axis.get("showticklabels", True):
        return problems
    if axis.get("tickmode") == "array" or not axis.get("autorange", True):
        return problems  # labels chosen by hand, or a zoomed range: not every category is due
    drawn = {(t.get("raw") if t.get("raw") is not None else t["text"]) for t in ticks}
    drawn_plain = {re.sub(r"<[^>]*>|\s+", "", d) for d in drawn}
    if axis["type"] == "multicategory":
        inner = [t for t in ticks if t.get("level", 1) == 1]
        if len(inner) < axis["tuples_drawable"]:
            problems.append(
                (
                    name,
                    f"draws {len(inner)} tick labels for {axis['tuples_drawable']} categories",
                    "categories",
                )
            )
        return problems
    cats = [t[0] for t in axis.get("tuples", [])]
    missing = [c for c in cats if re.sub(r"<[^>]*>|\s+", "", c) not in drawn_plain]
    if missing and not all(_numeric(c) for c in cats):
        problems.append(
            (
                name,
                f"{len(missing)} of {axis['tuples_all']} categories have no tick label (plotly "
                f"skipped them for lack of room): {', '.join(_quote(m, 30) for m in missing[:6])}"
                + (", ..." if len(missing) > 6 else ""),
                "categories",
            )
        )
    return problems


def unit_problems(axis: dict, ticks: list, data_labels: list) -> list:
    """Whether the units of an axis's title, its tick labels and the data labels on it agree.

    ``ticks``: the axis's drawn tick texts; ``data_labels``: texts of data labels (bar text)
    whose values are measured along this axis."""
    name = f"{axis['id']}-axis"
    said = " ".join([axis.get("title", ""), axis.get("ticksuffix", ""), axis.get("tickprefix", "")])
    unit = byte_unit(said)
    suffix_words = axis.get("ticksuffix", "").strip()
    si = [t for t in ticks if si_suffix(t, suffix_words)]
    problems = []
    label_units = {byte_unit(t) for t in data_labels} - {None}
    binary_labels = [t for t in data_labels if byte_unit(t) == "binary"]
    if unit in ("binary", "bytes") and si:
        where = "MiB-style binary units" if unit == "binary" else "bytes"
        besides = (
            f", while the labels on its data are in binary units ({_quote(binary_labels[0], 30)})"
            if binary_labels
            else ""
        )
        problems.append(
            (
                name,
                f"is in {where} ({_quote(axis.get('title') or suffix_words, 40)}) but its tick labels "
                f"use SI prefixes ({', '.join(_quote(t, 12) for t in si[:3])}: powers of 1000)"
                f"{besides}; label the ticks in one unit with the data",
                "units",
            )
        )
    if si and "binary" in label_units and unit not in ("binary", "bytes"):
        example = next(t for t in data_labels if byte_unit(t) == "binary")
        problems.append(
            (
                name,
                f"ticks in SI ({', '.join(_quote(t, 12) for t in si[:3])}) under data labels "
                f"in binary units ({_quote(example, 30)})",
                "units",
            )
        )
    if unit in ("binary", "decimal") and label_units and unit not in label_units | {"bytes"}:
        other = ({"binary", "decimal"} & label_units) - {unit}
        if other:
            example = next(t for t in data_labels if byte_unit(t) in other)
            problems.append(
                (
                    name,
                    f"the title says {unit} units ({_quote(axis.get('title', ''), 40)}) but the "
                    f"data labels on it are {other.pop()} ({_quote(example, 30)})",
                    "units",
                )
            )
    return problems


PLOT_AREA_SHARE = 0.6  # tick labels may take up to this share of the plot area beside them


def plot_area_problems(axis: dict, ticks: list, axes: dict) -> list:
    """Whether the tick labels of ``axis`` leave its plot area room: rotated category labels
    that take more than :data:`PLOT_AREA_SHARE` of the plot's height (an x axis) or long
    labels that take that much of its width (a y axis) squeeze the data into a strip."""
    other = axes.get(axis.get("anchor", ""))
    if not ticks or other is None or other["length"] <= 0:
        return []
    vertical = axis["id"][0] == "x"  # an x axis's labels take height from the plot area
    lo, hi = [], []
    for tick in ticks:
        left, top, right, bottom = bounds(tick["poly"])
        lo.append(top if vertical else left)
        hi.append(bottom if vertical else right)
    band = max(hi) - min(lo)
    if band <= PLOT_AREA_SHARE * other["length"]:
        return []
    what = "tall" if vertical else "wide"
    return [
        (
            f"{axis['id']}-axis tick labels",
            f"take {band:.0f} px, leaving the plot area {other['length']:.0f} px {what}: the data "
            "is squeezed into a strip (shorter labels, or a horizontal layout)",
            "plot-area",
        )
    ]


# ----------------------------------------------------------------------------- every eye, every theme

VISIONS = ("normal", "deuteranopia", "protanopia")
TEXT_CONTRAST = 4.0  # a text's contrast on white and on #111111 (one grey can reach 4.35 on both)
# More than two thirds of a linear axis's points in a strip 5 % of its range tall, from its lowest
# point up: most of the data drawn as a flat line, the range spent on a few large values.
CROWDED_SHARE, CROWDED_BAND = 2 / 3, 0.05
_SERIES_TYPES = {"scatter", "scattergl", "bar", "histogram", "box", "violin"}
_TEXT_KINDS = {"title", "axistitle", "tick", "legendentry", "colorbar", "annotation"}


def _colour_of(trace: dict) -> str | None:
    """The colour a reader tells ``trace`` by: its line's where it draws a line, else its
    markers' (or bars'); None where it has none of one colour (a colour per point)."""
    mode = trace.get("mode") or ""
    if trace.get("type") in ("scatter", "scattergl") and "lines" in mode:
        return trace.get("line_color") or trace.get("marker_color")
    if trace.get("type") in ("scatter", "scattergl") and "markers" not in mode:
        return None  # text only
    return trace.get("marker_color") or trace.get("line_color")


def _look(trace: dict) -> tuple:
    """Everything but colour that tells one drawn series from another."""
    kind = "bar" if trace.get("type") in ("bar", "histogram") else trace.get("type")
    mode = trace.get("mode") or ""
    lines, markers = "lines" in mode, "markers" in mode
    return (
        kind,
        mode,
        trace.get("line_dash") if lines or kind in ("box", "violin") else "",
        trace.get("marker_symbol") or "circle" if markers else "",
        trace.get("pattern") or "",
    )


def colour_problems(fig: dict) -> list:
    """Series told apart by colour alone where a reader with deuteranopia or protanopia (or
    anyone) cannot: two visible series of one figure (a series: a name or a legend group) drawn
    alike (type, mode, dash, marker symbol, fill pattern) whose colours differ by less than
    :data:`DISTINCT` (CIE76) with normal vision or either simulated deficiency."""
    series = {}
    for trace in fig.get("traces", []):
        if not trace.get("visible", True) or trace.get("type") not in _SERIES_TYPES:
            continue
        key = trace.get("legendgroup") or trace.get("name")
        colour = _colour_of(trace)
        if not key or not colour:
            continue
        try:
            if alpha(colour) == 0:
                continue
        except ValueError:
            continue
        series.setdefault((key, _look(trace), colour), trace)
    items = list(series.items())
    worst = {}
    for i, ((ka, look_a, ca), _) in enumerate(items):
        for (kb, look_b, cb), _ in items[i + 1 :]:
            if ka == kb or look_a != look_b:
                continue
            gaps = {v: delta_e(ca, cb, v) for v in VISIONS}
            vision = min(gaps, key=gaps.get)
            if gaps[vision] < DISTINCT:
                pair = tuple(sorted((ka, kb)))
                worst[pair] = (gaps[vision], vision, ca, cb, gaps["normal"])
    problems = []
    for (a, b), (gap, vision, ca, cb, normal) in sorted(worst.items(), key=lambda kv: kv[1][0]):
        seen = "to every eye" if vision == "normal" else f"with {vision}"
        problems.append(
            (
                f"series {_quote(a, 30)} and {_quote(b, 30)}",
                f"are told apart by colour alone ({ca} and {cb}: CIE76 difference {normal:.1f} "
                f"with normal vision, {gap:.1f} {seen}, under {DISTINCT:g}); give one a dash, "
                "a marker symbol or a pattern, or colours of the kit's palette",
                "colour-vision",
            )
        )
    return problems


def _tick_labels(fig: dict, axis_id: str) -> list:
    return [
        i
        for i in fig.get("items", [])
        if i["kind"] == "tick" and i["axis"] == axis_id and i.get("level", 1) == 1
    ]


def scale_problems(fig: dict) -> list:
    """Axes without a readable scale: tick labels hidden or none drawn, a log axis labelled
    between its decades in plotly's small digits ("2 3 ... 9 1 2"), a linear axis whose range
    crowds most points into its lowest band (a few huge values hiding the rest)."""
    problems = []
    traces = [t for t in fig.get("traces", []) if t.get("visible", True)]
    for axis in fig.get("axes", []):
        aid, letter = axis["id"], axis["id"][0]
        mine = [t for t in traces if (t.get(f"{letter}axis") or letter) == aid]
        if not axis.get("visible", True) or not mine:
            continue
        name = f"{aid}-axis" + (f" {_quote(axis['title'], 40)}" if axis.get("title") else "")
        if not axis.get("showticklabels", True):
            if not axis.get("matches"):  # a shared axis shows its labels on its partner
                problems.append((name, "has no tick labels (showticklabels is off)", "scale"))
            continue
        if axis.get("tickmode") == "array" and axis.get("tickvals") == 0:
            problems.append((name, "has no tick labels (an empty tickvals)", "scale"))
            continue
        with_data = [t for t in mine if t.get(letter)]
        if "items" in fig and with_data and axis["type"] in ("linear", "log", "date"):
            drawn = _tick_labels(fig, aid)
            if len(drawn) < 2:
                problems.append(
                    (
                        name,
                        f"draws {len(drawn)} tick label{'s' if len(drawn) != 1 else ''}: no scale "
                        "to read a value by (the ticks fall outside the range drawn)",
                        "scale",
                    )
                )
                continue
        count = axis.get("ticks_in_range")  # a figure object: its tick values in its range
        if fig.get("static") and count is not None and count < 2:
            problems.append(
                (
                    name,
                    f"has {count} of its tick values in the range it draws: no scale to read a "
                    "value by",
                    "scale",
                )
            )
            continue
        if axis["type"] == "log":
            dtick = str(axis.get("dtick", ""))
            if fig.get("static") and not dtick and axis.get("tickvals") is None:
                problems.append(
                    (
                        name,
                        "is a log axis that leaves its ticks to plotly, which labels close "
                        'decades "2 3 ... 9 1 2"; state them (zg.viz.common.log_ticks)',
                        "scale",
                    )
                )
            minor = axis.get("minorloglabels") or "small digits"
            if dtick == "D1" or (dtick == "D2" and minor == "small digits"):
                problems.append(
                    (
                        name,
                        f"labels the values between its decades in small digits (dtick {dtick}: "
                        '"2 3 ... 9 1 2"); label decades only (dtick 1) or 1-2-5 written out '
                        "(zg.viz.common.log_ticks)",
                        "scale",
                    )
                )
        if axis["type"] == "linear" and len(axis.get("range") or []) == 2:
            low, high = sorted(float(v) for v in axis["range"])
            values = [
                v
                for t in mine
                if t.get("type") in ("scatter", "scattergl")
                and ("markers" in (t.get("mode") or "") or "lines" in (t.get("mode") or ""))
                for v in t.get(letter, [])
            ]
            inside = [v for v in values if low <= v <= high]
            if len(values) >= 5 and high > low and inside:
                # a strip as tall as 5 % of the axis, from the lowest point up (plotly pads
                # the range below the data)
                edge = min(inside) + CROWDED_BAND * (high - low)
                crowd = sum(v <= edge for v in inside)
                if crowd > CROWDED_SHARE * len(values):
                    problems.append(
                        (
                            name,
                            f"runs linear to {high:,.4g} and crowds {crowd} of its {len(values)} "
                            f"points into the lowest {CROWDED_BAND:.0%}: a log axis, or a range "
                            "that shows the data",
                            "scale",
                        )
                    )
    return problems


def theme_problems(fig: dict) -> list:
    """Whether the figure follows JupyterLab's dark theme as well as its light one: a
    transparent page and plot (no white card on a dark page), and every text in a colour that
    reads on white and on #111111 (WCAG contrast at least :data:`TEXT_CONTRAST`)."""
    problems = []
    background = fig.get("background")
    if not background:
        return problems
    pages = []
    for part in ("paper", "plot"):
        colour = background.get(part) or ""
        try:
            opaque = bool(colour) and alpha(colour) > 0
        except ValueError:
            opaque = True
        if opaque:
            problems.append(
                (
                    f"the {part} background",
                    f"is {colour}, not transparent: a card of its own colour on JupyterLab's "
                    "other theme (the kit's template, zg.viz.common.TEMPLATE_NAME, is transparent)",
                    "theme",
                )
            )
            if part == "paper":
                pages = [colour]
    pages = pages or [LIGHT_PAGE, DARK_PAGE]
    if "items" not in fig and background.get("font"):
        try:
            worst = min(contrast(background["font"], page) for page in pages)
        except ValueError:
            worst = TEXT_CONTRAST
        if worst < TEXT_CONTRAST:
            problems.append(
                (
                    "the text",
                    f"is {background['font']}: contrast {worst:.1f}:1 on "
                    + " or ".join(pages)
                    + f", under {TEXT_CONTRAST:g}:1",
                    "theme",
                )
            )
    faint = defaultdict(list)
    for item in fig.get("items", []):
        fill = item.get("fill") or ""
        if item["kind"] not in _TEXT_KINDS or not fill or fill == "none":
            continue
        if item["kind"] == "annotation" and item.get("bgcolor"):
            try:
                if alpha(item["bgcolor"]) > 0:
                    continue  # on a box of its own
            except ValueError:
                continue
        try:
            worst = min(contrast(fill, page) for page in pages)
        except ValueError:
            continue
        if worst < TEXT_CONTRAST:
            faint[(_group(item), fill)].append((worst, item))
    for (group, fill), hits in faint.items():
        worst, item = min(hits, key=lambda h: h[0])
        problems.append(
            (
                group,
                f"drawn in {fill}: contrast {worst:.1f}:1 on "
                + (" or ".join(pages) if len(pages) > 1 else pages[0])
                + f", under {TEXT_CONTRAST:g}:1 (e.g. {_quote(item['text'], 30)})",
                "theme",
            )
        )
    return problems


READABILITY_RULES = ("colour-vision", "scale", "theme")


def readability_counts(found: list) -> str:
    """The readability rules' counts in one line (each figure or axis once, at any size)."""
    figures = defaultdict(set)
    for v in found:
        if v.rule in READABILITY_RULES:
            key = (v.report, v.figure) if v.rule != "scale" else (v.report, v.figure, v.element)
            figures[v.rule].add(key)
    return (
        f"{len(figures['colour-vision'])} figure(s) with series told apart by colour alone "
        f"(red/green to deuteranopia or protanopia, CIE76 under {DISTINCT:g}); "
        f"{len(figures['scale'])} axis/axes without a readable scale; "
        f"{len(figures['theme'])} figure(s) that do not follow JupyterLab's dark theme"
    )


def _numbers(values) -> list:
    out = []
    for v in values if values is not None else ():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def static_measure(figure) -> dict:
    """What :func:`figure_problems` reads of a figure, taken from a plotly figure object
    instead of the browser: its traces as drawn (a colour left unset is the colorway's, as
    plotly.js gives it), its axes (an unset range is the data's) and its backgrounds; no text
    positions (those rules need the browser). For tests that check every figure a builder
    draws without a browser (tests/viz)."""
    import plotly.io as pio

    lay = figure.layout
    template = lay.template if lay.template is not None else pio.templates[pio.templates.default]
    tl = template.layout

    def setting(name, default=None):
        value = lay[name]
        if value is None and tl is not None:
            value = tl[name]
        return default if value is None else value

    colorway = list(setting("colorway", None) or pio.templates["plotly"].layout.colorway)
    traces = []
    for i, t in enumerate(figure.data):
        default = colorway[i % len(colorway)]
        kind = t.type
        xs = [] if getattr(t, "x", None) is None else list(t.x)
        ys = [] if getattr(t, "y", None) is None else list(t.y)
        mode = ""
        if kind in ("scatter", "scattergl"):
            mode = t.mode or ("lines+markers" if max(len(xs), len(ys)) < 20 else "lines")
        line = getattr(t, "line", None)
        marker = getattr(t, "marker", None)
        line_color = line.color if line is not None and isinstance(line.color, str) else None
        marker_color = None
        if marker is not None and isinstance(marker.color, str):
            marker_color = marker.color
        elif marker is None or marker.color is None:
            marker_color = default
        pattern = ""
        if marker is not None and getattr(marker, "pattern", None) is not None:
            pattern = marker.pattern.shape if isinstance(marker.pattern.shape, str) else ""
        traces.append(
            {
                "index": i,
                "type": kind,
                "name": str(t.name or ""),
                "visible": t.visible in (None, True),
                "orientation": getattr(t, "orientation", None) or "v",
                "xaxis": getattr(t, "xaxis", None) or "x",
                "yaxis": getattr(t, "yaxis", None) or "y",
                "cliponaxis": True,
                "mode": mode,
                "legendgroup": str(getattr(t, "legendgroup", None) or ""),
                "showlegend": t.showlegend is not False,
                "line_color": line_color or (default if kind in ("scatter", "scattergl") else None),
                "line_dash": (line.dash if line is not None and line.dash else "solid"),
                "marker_color": marker_color,
                "marker_symbol": (
                    marker.symbol
                    if marker is not None and isinstance(getattr(marker, "symbol", None), str)
                    else None
                ),
                "pattern": pattern,
                "x": _numbers(xs),
                "y": _numbers(ys),
                "strings": {
                    "x": any(isinstance(v, str) for v in xs),
                    "y": any(isinstance(v, str) for v in ys),
                },
            }
        )
    names = {k for k in lay.to_plotly_json() if re.fullmatch(r"[xy]axis\d*", k)}
    names |= {"xaxis", "yaxis"}
    axes = []
    for name in sorted(names):
        ax = lay[name]
        aid = name[0] + name[5:]
        letter = aid[0]
        mine = [t for t in traces if t[f"{letter}axis"] == aid]
        kind = ax.type if ax.type not in (None, "-") else None
        if kind is None:
            kind = "category" if any(t["strings"][letter] for t in mine) else "linear"
        # plotly's autorange counts the traces shown, not the hidden ones
        values = [v for t in mine if t["visible"] for v in t[letter]]
        if ax.range is not None and None not in tuple(ax.range):
            rng = list(ax.range)
        elif values and kind == "linear":
            bars = any(t["type"] in ("bar", "histogram") for t in mine)
            rng = [min(values + ([0.0] if bars else [])), max(values + ([0.0] if bars else []))]
        elif kind == "log" and [v for v in values if v > 0]:
            positive = [v for v in values if v > 0]
            rng = [math.log10(min(positive)), math.log10(max(positive))]
        else:
            rng = []
        tickvals = ax.tickvals
        ticks_in_range = None
        if tickvals is not None and len(rng) == 2 and kind in ("linear", "log"):
            where = [
                math.log10(v) if kind == "log" else v
                for v in _numbers(tickvals)
                if kind != "log" or v > 0
            ]
            lo, hi = sorted(float(r) for r in rng)
            ticks_in_range = sum(lo - 1e-9 <= v <= hi + 1e-9 for v in where)
        axes.append(
            {
                "id": aid,
                "type": kind,
                "title": str(ax.title.text or "") if ax.title is not None else "",
                "tickmode": ax.tickmode or ("array" if tickvals is not None else "auto"),
                "tickvals": None if tickvals is None else len(tickvals),
                "dtick": "" if ax.dtick is None else str(ax.dtick),
                "minorloglabels": ax.minorloglabels or "",
                "visible": ax.visible is not False,
                "showticklabels": ax.showticklabels is not False,
                "matches": ax.matches or "",
                "range": rng,
                "anchor": ax.anchor or "",
                "ticks_in_range": ticks_in_range,
            }
        )
    font = lay.font.color if lay.font is not None and lay.font.color else None
    if font is None and tl is not None and tl.font is not None:
        font = tl.font.color
    return {
        "index": 1,
        "drawn": True,
        "static": True,
        "title": str(lay.title.text or "") if lay.title is not None else "",
        "traces": traces,
        "axes": axes,
        "background": {
            "paper": setting("paper_bgcolor", "white"),
            "plot": setting("plot_bgcolor", "white"),
            "font": font or "#444",
        },
    }


def readability_problems(fig: dict) -> list:
    """The rules of every eye and every theme (:data:`READABILITY_RULES`) on one figure."""
    return colour_problems(fig) + scale_problems(fig) + theme_problems(fig)


def figure_problems(fig: dict) -> list:
    """Every rule on one measured figure: a list of (element, what, rule)."""
    if not fig.get("drawn"):
        return [("the figure", "did not draw (no svg.main-svg)", "drawn")]
    problems = []
    items = fig.get("items", [])
    traces = {t["index"]: t for t in fig.get("traces", [])}
    for axis in fig.get("axes", []):
        ticks = [i for i in items if i["kind"] == "tick" and i["axis"] == axis["id"]]
        problems += category_problems(axis, ticks)
        level1 = [t["text"] for t in ticks if t.get("level", 1) == 1]
        letter = axis["id"][0]
        labels = []
        for item in items:
            if item["kind"] == "annotation" and item.get(f"{letter}ref") == axis["id"]:
                labels.append(item["text"])  # a label placed in data coordinates of this axis
            trace = traces.get(item.get("trace")) if item["kind"] == "datalabel" else None
            if trace is None:
                continue
            value_letter = "x" if trace["orientation"] == "h" else "y"
            if letter == value_letter and trace.get(f"{letter}axis") == axis["id"]:
                labels.append(item["text"])
        problems += unit_problems(axis, level1, labels)
        problems += plot_area_problems(axis, ticks, {a["id"]: a for a in fig.get("axes", [])})
    problems += colour_problems(fig)
    problems += scale_problems(fig)
    problems += theme_problems(fig)
    problems += _edge_problems(fig)
    problems += _clipped_data_labels(fig)
    problems += _overprint_problems(fig)
    problems += _legend_problems(fig)
    return problems


def violations(measured: dict, report: str) -> list:
    """The violations of every figure of a page's measurements (from :func:`read_marker`)."""
    out = []
    for size in SIZES:
        for fig in measured.get("sizes", {}).get(size, []):
            for element, what, rule in figure_problems(fig):
                out.append(
                    Violation(
                        report=report,
                        size=size,
                        figure=fig["index"],
                        title=fig.get("title", ""),
                        element=element,
                        what=what,
                        rule=rule,
                        width=fig.get("width", 0.0),
                        height=fig.get("height", 0.0),
                    )
                )
    return out


# ----------------------------------------------------------------------------- running it


def measure_page(
    path: Path,
    chromium: str,
    sizes,
    budget_ms: int = 20000,
    timeout: float = 240.0,
    report_width: int = REPORT_WINDOW[0],
) -> dict:
    """Open a copy of ``path`` with the measuring script in headless Chromium; return the
    measurements, or ``{"problem": "..."}`` when there are none."""
    text = path.read_text(encoding="utf-8", errors="replace")
    with tempfile.TemporaryDirectory(prefix="zg-figure-check-") as tmp:
        page = Path(tmp) / path.name
        page.write_text(instrument(text, measure_script(sizes)), encoding="utf-8")
        try:
            proc = run_chromium(
                page,
                chromium,
                budget_ms,
                timeout,
                extra_flags=[f"--window-size={report_width},{REPORT_WINDOW[1]}"],
            )
        except subprocess.TimeoutExpired:
            return {"problem": f"chromium did not finish within {timeout:.0f} s"}
    measured = read_marker(proc.stdout)
    if measured is None:
        tail = proc.stderr.strip()[-300:]
        return {
            "problem": f"the measuring script wrote nothing (chromium exit {proc.returncode}): {tail}"
        }
    if measured.get("error"):
        return {"problem": f"the measuring script failed: {measured['error']}"}
    if not measured.get("done"):
        return {
            "problem": "the measuring script did not finish within the time budget (raise --budget-ms)"
        }
    return measured


_NEWPLOT = re.compile(r"Plotly\.newPlot\(\s*\"([^\"]+)\"\s*,\s*")


def figure_specs(text: str) -> list:
    """(div id, data, layout, config) of every ``Plotly.newPlot`` call of a page, in order."""
    decoder = json.JSONDecoder()
    specs = []
    for match in _NEWPLOT.finditer(text):
        parts, pos = [], match.end()
        try:
            for _ in range(3):
                value, pos = decoder.raw_decode(text, pos)
                parts.append(value)
                while pos < len(text) and text[pos] in " \t\r\n,":
                    pos += 1
                if text[pos : pos + 1] == ")":
                    break
        except ValueError:
            continue
        while len(parts) < 3:
            parts.append({})
        specs.append((match.group(1), *parts[:3]))
    return specs


def screenshot(
    spec: tuple, width: int, height: int, out: Path, chromium: str, timeout: float = 120.0
) -> bool:
    """Draw one figure (a :func:`figure_specs` entry) alone at ``width`` x ``height`` px into
    the PNG ``out``, as a person would see it; False when Chromium wrote nothing."""
    from plotly.offline import get_plotlyjs

    _, data, layout, config = spec
    layout = dict(layout, width=width, height=height)
    page_text = (
        "<html><head><meta charset='utf-8'><style>body{margin:0}</style>"
        f"<script>{get_plotlyjs()}</script></head><body>"
        f"<div id='figure' style='width:{width}px;height:{height}px'></div><script>"
        f"Plotly.newPlot('figure', {json.dumps(data)}, {json.dumps(layout)}, "
        f"{json.dumps(config)});</script></body></html>"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="zg-figure-shot-") as tmp:
        page = Path(tmp) / "figure.html"
        page.write_text(page_text, encoding="utf-8")
        try:
            run_chromium(
                page,
                chromium,
                5000,
                timeout,
                extra_flags=[f"--window-size={width},{height}", f"--screenshot={out.resolve()}"],
            )
        except subprocess.TimeoutExpired:
            return False
    return out.exists()


def shoot(found: list, folder: Path, chromium: str, timeout: float) -> None:
    """A PNG of every failing figure at every size it failed: <report>-figure<N>-<size>.png."""
    folder.mkdir(parents=True, exist_ok=True)
    specs = {}
    for key in sorted({(v.report, v.figure, v.size, v.width, v.height) for v in found}):
        report, figure, size, width, height = key
        if report not in specs:
            specs[report] = figure_specs(Path(report).read_text(encoding="utf-8", errors="replace"))
        if figure > len(specs[report]):
            continue
        out = folder / f"{Path(report).stem}-figure{figure}-{size}.png"
        if screenshot(
            specs[report][figure - 1], round(width), round(height), out, chromium, timeout
        ):
            print(f"figure-check: drew {out}")


def self_test_page() -> str:
    """A page with the same plotly.js as the reports and six figures, in the kit's template
    (zg.viz.common): good, three category levels, an overflowing subtitle, two lines told
    apart only by red and green, an axis without tick labels, a white card (plotly_white)."""
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.offline import get_plotlyjs
    from plotly.subplots import make_subplots

    from zg.viz.common import TEMPLATE_NAME

    template = pio.templates[TEMPLATE_NAME]
    good = make_subplots(rows=1, cols=2, subplot_titles=["bytes per epoch", "time per epoch"])
    for i, (name, scale) in enumerate((("random", 1.0), ("METIS", 0.6), ("grappa", 0.2))):
        good.add_trace(
            go.Bar(
                x=["P=2", "P=4", "P=8"],
                y=[3.0 * scale, 5.0 * scale, 7.0 * scale],
                name=name,
                text=[f"{3.0 * scale:.1f} MiB", f"{5.0 * scale:.1f} MiB", f"{7.0 * scale:.1f} MiB"],
                textposition="inside",
            ),
            1,
            1,
        )
        good.add_trace(
            go.Scatter(
                x=[1, 2, 3],
                y=[scale, 2 * scale, 3 * scale],
                name=f"{name} time",
                marker_symbol=("circle", "square", "diamond")[i],
            ),
            1,
            2,
        )
    good.update_layout(
        title="Feature fetching against gradients<br><sup>3 partitionings, Cora</sup>",
        updatemenus=[
            dict(
                buttons=[dict(label=k, method="restyle", args=[{}]) for k in ("log", "linear")],
                x=1.0,
                xanchor="right",
                y=1.18,
                yanchor="bottom",
            )
        ],
        margin=dict(t=110),
    )
    good.update_yaxes(title_text="MiB per epoch", row=1, col=1)
    good.update_yaxes(title_text="seconds", row=1, col=2)
    good.update_xaxes(title_text="workers", row=1, col=1)
    good.update_xaxes(title_text="epoch", row=1, col=2)
    levels = go.Figure(
        go.Bar(
            x=[
                ["random"] * 4 + ["METIS"] * 4,
                ["inverse", "inverse", "coverage", "coverage"] * 2,
                ["naive", "shrink"] * 4,
            ],
            y=[1, 2, 3, 4, 5, 6, 7, 8],
        )
    )
    levels.update_layout(title="Three category levels")
    long_subtitle = (
        "Graph(name='cora', num_nodes=2708, num_edges=10556, feat_dim=1433, num_classes=7, "
        "train=140, val=500, test=1000, features=Tensor(shape=(2708, 1433), dtype=float32)), "
        "partitioned into 4 chunks by METIS with seed 0, fanouts [10, 5], batch size 256"
    )
    subtitle = go.Figure(go.Scatter(x=[1, 2, 3], y=[2, 1, 3], name="loss"))
    subtitle.update_layout(title=f"An overflowing subtitle<br><sup>{long_subtitle}</sup>")
    # the stage palette's old gather and step: 96.8 apart to most eyes, 1.7 with deuteranopia
    red_green = go.Figure(
        [
            go.Scatter(x=[1, 2, 3], y=[1, 2, 3], name="gather", line_color="#54A24B"),
            go.Scatter(x=[1, 2, 3], y=[3, 2, 1], name="step", line_color="#E45756"),
        ]
    )
    red_green.update_layout(title="Told apart by red and green alone")
    no_ticks = go.Figure(go.Scatter(x=[1, 2, 3], y=[2, 1, 3], name="loss"))
    no_ticks.update_layout(title="An axis without tick labels")
    no_ticks.update_xaxes(showticklabels=False, title_text="epoch")
    for fig in (good, levels, subtitle, red_green, no_ticks):
        fig.update_layout(template=template)
    card = go.Figure(go.Scatter(x=[1, 2, 3], y=[2, 1, 3], name="loss"))
    card.update_layout(title="A white card", template=pio.templates["plotly_white"])
    parts = [
        pio.to_html(f, include_plotlyjs=False, include_mathjax=False, full_html=False)
        for f in (good, levels, subtitle, red_green, no_ticks, card)
    ]
    return (
        f"<html><head><meta charset='utf-8'><script>{get_plotlyjs()}</script></head><body>"
        + "".join(f"<div style='height:480px; width:100%'>{p}</div>" for p in parts)
        + "</body></html>"
    )


# What each figure of the self-test page must fail for (and for nothing else): its rule, and
# text the element or the message names.
SELF_TEST_EXPECTED = {
    1: None,
    2: ("categories", "3 category levels"),
    3: ("edge", "subtitle"),
    4: ("colour-vision", "deuteranopia"),
    5: ("scale", "showticklabels is off"),
    6: ("theme", "not transparent"),
}


def self_test(chromium: str, sizes=SIZES, budget_ms: int = 20000, timeout: float = 240.0) -> list:
    """Problems with the checker itself: the good figure must pass and each broken one fail
    for its reason only (at every size in ``sizes``)."""
    out = []
    with tempfile.TemporaryDirectory(prefix="zg-figure-selftest-") as tmp:
        page = Path(tmp) / "self_test.html"
        page.write_text(self_test_page(), encoding="utf-8")
        measured = measure_page(page, chromium, sizes, budget_ms, timeout)
    if "problem" in measured:
        return [f"self-test: {measured['problem']}"]
    found = violations(measured, "self-test")
    for size in [s for s in SIZES if s in sizes]:
        figs = measured["sizes"].get(size, [])
        if len(figs) != len(SELF_TEST_EXPECTED):
            out.append(
                f"self-test: expected {len(SELF_TEST_EXPECTED)} figures at the {size} size, "
                f"measured {len(figs)}"
            )
            continue
        at = [v for v in found if v.size == size]
        for figure, expected in SELF_TEST_EXPECTED.items():
            got = [v for v in at if v.figure == figure]
            if expected is None:
                if got:
                    out.append(
                        f"self-test: the good figure failed at the {size} size: "
                        f"{[v.line() for v in got]}"
                    )
                continue
            rule, words = expected
            if not any(v.rule == rule and words in f"{v.element} {v.what}" for v in got):
                out.append(
                    f"self-test: figure {figure} was not caught by the {rule} rule at the "
                    f"{size} size: {[v.line() for v in got]}"
                )
            elif any(v.rule != rule for v in got):
                out.append(
                    f"self-test: figure {figure} failed for another reason too at the {size} "
                    f"size: {[v.line() for v in got if v.rule != rule]}"
                )
    return out


def markdown(found: list, pages: list, figures: int, sizes, unchecked=()) -> str:
    """The violations as a Markdown list, by report and figure (``--markdown``)."""
    failing = {s: {(v.report, v.figure) for v in found if v.size == s} for s in sizes}
    rules = defaultdict(int)
    for v in found:
        rules[v.rule] += 1
    lines = [
        "# What the figure check finds",
        "",
        f"`python tools/figure_check.py --size {'both' if len(sizes) > 1 else sizes[0]}` over "
        f"{len(pages)} report(s), {figures} figure(s). Sizes: `jupyterlab` is JupyterLab's output "
        f"area, {JUPYTERLAB_WIDTH} px wide and the figure's own height or "
        f"{JUPYTERLAB_DEFAULT_HEIGHT} px; `report` is the HTML report in a "
        f"{REPORT_WINDOW[0]} px window. Each line: [size WxH] (rule) element: what. "
        "Again, with a PNG of each failing figure at the size it failed: "
        "`python tools/figure_check.py reports --markdown FILE --screenshots DIR`.",
        "",
        "Figures failing: "
        + ", ".join(f"{len(failing[s])} of {figures} at the {s} size" for s in sizes)
        + ". Violations by rule: "
        + (", ".join(f"{rule} {n}" for rule, n in sorted(rules.items())) or "none")
        + ".",
        "",
        f"Readability: {readability_counts(found)}.",
        "",
    ]
    if unchecked:
        lines += [f"Not checked (the measurement failed): {', '.join(unchecked)}.", ""]
    by_report = defaultdict(lambda: defaultdict(list))
    for v in found:
        by_report[v.report][v.figure].append(v)
    for report in sorted(by_report):
        lines += [f"## {report}", ""]
        for figure in sorted(by_report[report]):
            got = by_report[report][figure]
            lines.append(f'### figure {figure}: "{got[0].title}"')
            lines.append("")
            for v in sorted(got, key=lambda v: (SIZES.index(v.size) * -1, v.rule, v.element)):
                lines.append(
                    f"- [{v.size} {v.width:.0f}x{v.height:.0f}] ({v.rule}) {v.element}: {v.what}"
                )
            lines.append("")
    return "\n".join(lines)


def _pages(targets) -> list:
    pages = []
    for target in targets:
        pages += sorted(target.glob("*.html")) if target.is_dir() else [target]
    return pages


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "reports", nargs="*", type=Path, help="HTML files or folders of them (default: reports/)"
    )
    ap.add_argument(
        "--size",
        choices=("jupyterlab", "report", "both"),
        default="both",
        help="where to measure: JupyterLab's output area, the report page, or both (default)",
    )
    ap.add_argument(
        "--chromium", default=None, help="the browser binary (default: chromium on PATH)"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write every violation here")
    ap.add_argument(
        "--markdown", type=Path, default=None, help="also write the violations as Markdown here"
    )
    ap.add_argument(
        "--screenshots",
        type=Path,
        default=None,
        help="also draw every failing figure alone, at the size it failed, into PNGs here",
    )
    ap.add_argument(
        "--report-width",
        type=int,
        default=REPORT_WINDOW[0],
        help=f"width of the window a report is read in, px (default {REPORT_WINDOW[0]})",
    )
    ap.add_argument("--budget-ms", type=int, default=20000, help="Chromium's --virtual-time-budget")
    ap.add_argument("--timeout", type=float, default=240.0, help="seconds per page, wall clock")
    ap.add_argument("--no-self-test", action="store_true")
    args = ap.parse_args(argv)
    # Where the results go is checked before any browser starts (a folder, a FIFO, a dangling
    # link, a missing folder: one line naming the flag, exit 2); written through zg's writer.
    from zg._checks import output_clash
    from zg._io import command_output_arg, write_text

    for flag in ("--json", "--markdown"):
        command_output_arg(ap, getattr(args, flag[2:]), flag)
    clash = output_clash([("--json", args.json), ("--markdown", args.markdown)])
    if clash is not None:
        ap.error(f"{clash[0]} and {clash[1]} name the same file {str(clash[2])!r}")
    if args.report_width < 400:
        ap.error(f"--report-width: {args.report_width} px is narrower than any report window")
    sizes = SIZES if args.size == "both" else (args.size,)
    if args.chromium and shutil.which(args.chromium) is None:
        print(
            f"figure-check: --chromium {args.chromium}: no such browser (not a file that runs, "
            "nor a name on PATH)",
            file=sys.stderr,
        )
        return 2
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print(
            "figure-check: no chromium found; install Debian's package (apt-get install -y chromium)",
            file=sys.stderr,
        )
        return 2
    targets = args.reports or [Path("reports")]
    missing = [str(t) for t in targets if not t.exists()]
    if missing:
        print(f"figure-check: no such file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    pages = _pages(targets)
    if not pages:
        print(
            f"figure-check: no HTML reports in {', '.join(map(str, targets))}; run `make report` first",
            file=sys.stderr,
        )
        return 2
    if not args.no_self_test:
        problems = self_test(chromium, sizes, args.budget_ms, args.timeout)
        if problems:
            print(
                "figure-check: the checker failed its self-test; results would not be trustworthy:",
                file=sys.stderr,
            )
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            return 2
        print(
            "figure-check: self-test passed (a good figure passes; three category levels, an "
            "overflowing subtitle, a red/green pair, an axis without tick labels and a white "
            "card are caught)"
        )
    found, unchecked, figures = [], [], 0
    for page in pages:
        measured = measure_page(
            page, chromium, sizes, args.budget_ms, args.timeout, args.report_width
        )
        if "problem" in measured:
            unchecked.append(str(page))
            print(f"figure-check: {page}: NOT CHECKED: {measured['problem']}")
            continue
        got = violations(measured, str(page))
        count = max(len(measured["sizes"].get(s, [])) for s in sizes)
        figures += count
        bad = {v.figure for v in got}
        print(
            f"figure-check: {page}: {'ok' if not got else 'FAILED'} ({count - len(bad)} of "
            f"{count} figures pass at {' and '.join(sizes)} size)"
        )
        for v in got:
            print(f"    {v.line()}")
        found += got
    if args.json:
        write_text(
            args.json,
            json.dumps(
                {
                    "sizes": list(sizes),
                    "reports": [str(p) for p in pages],
                    "unchecked": unchecked,
                    "figures": figures,
                    "violations": [asdict(v) for v in found],
                },
                indent=1,
            )
            + "\n",
            name="--json",
        )
    if args.markdown:
        write_text(
            args.markdown,
            markdown(found, [str(p) for p in pages], figures, sizes, unchecked) + "\n",
            name="--markdown",
        )
    if args.screenshots:
        shoot(found, args.screenshots, chromium, args.timeout)
    print(f"figure-check: {readability_counts(found)}")
    failing = {(v.report, v.figure) for v in found}
    print(
        f"figure-check: {figures - len(failing)} of {figures} figure(s) in {len(pages)} report(s) "
        f"pass; {len(found)} violation(s)"
        + (f"; {len(unchecked)} not checked" if unchecked else "")
    )
    if unchecked:
        return 2
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
