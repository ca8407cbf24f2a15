#!/usr/bin/env python
"""Open every HTML report in headless Chromium and check that it really rendered, offline.

    python tools/report_check.py                 # every reports/*.html (what `make report-check` runs)
    python tools/report_check.py reports/02_envelopes.html --chromium /usr/bin/chromium

For each report:

1. Static checks (tools/build_report.py's): plotly.js is embedded inline; nothing is loaded
   from the network (no <script src="https://...">, cdn.plot.ly or otherwise).
2. A copy of the page gets one extra script as the first thing in <head>, before plotly.js
   and every figure run: it records uncaught errors (``window.onerror``), unhandled promise
   rejections (Plotly.newPlot returns a promise) and ``console.error`` calls, and writes
   them, with a "loaded" flag and every resource the page requested that is not a local file
   or inline data (Resource Timing), into a hidden ``<pre id="zg-report-check">`` in the DOM.
3. Debian's ``chromium`` opens that copy headless with a fresh profile and no network
   features (``--headless --no-sandbox --disable-gpu ... --virtual-time-budget=10000
   --dump-dom``; http(s) goes to a proxy that is not there, so nothing leaves the machine)
   and prints the DOM after the page has run; with
   ``--enable-logging=stderr --v=0`` it also prints console messages, which are scanned for
   "Uncaught" (a second, independent witness of JS errors).
4. The dumped DOM is parsed: every ``div.plotly-graph-div`` must contain an
   ``svg.main-svg`` (plotly draws one when a figure rendered), there must be at least
   ``--min-figures`` of them, the marker must say the page loaded, and it must list no error
   and no request to the network.

Before the reports, a self-test renders two tiny pages with the same plotly.js: one good, one
with a JS error, a figure that never draws and an image from the network. The check must pass
the first and fail the second for the right reasons, else this checker (or this Chromium)
cannot be trusted and the run fails. ``--no-self-test`` skips it.

Exit status 0 when every report passed, 1 when one failed, 2 when the checker itself could not
run (no Chromium, failed self-test).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from html.parser import HTMLParser
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from build_report import static_problems

MARKER_ID = "zg-report-check"
COLLECTOR = """<script type="text/javascript">
(function () {
  var errors = [], loaded = false, requests = [];
  // Every resource the page asked for that is not a local file or inline data: a request to
  // the network (Resource Timing lists fetches, scripts, styles, images and fonts alike).
  function remote() {
    var seen = {};
    requests = [];
    (performance.getEntriesByType ? performance.getEntriesByType('resource') : []).forEach(function (e) {
      if (!/^(file|data|blob|about):/i.test(e.name) && !seen[e.name]) { seen[e.name] = 1; requests.push(e.name.slice(0, 300)); }
    });
  }
  function flush() {
    if (!document.body) { return; }
    var el = document.getElementById('%(marker)s');
    if (!el) {
      el = document.createElement('pre');
      el.id = '%(marker)s';
      el.style.display = 'none';
      document.body.appendChild(el);
    }
    remote();
    el.setAttribute('data-loaded', loaded ? '1' : '0');
    el.setAttribute('data-requests', JSON.stringify(requests));
    el.textContent = JSON.stringify(errors);
  }
  function note(text) { errors.push(String(text).slice(0, 500)); flush(); }
  window.addEventListener('error', function (e) {
    if (e && e.message) { note('uncaught: ' + e.message + ' (' + (e.filename || '?') + ':' + (e.lineno || '?') + ')'); }
    else if (e && e.target && e.target !== window) { note('failed to load: ' + (e.target.src || e.target.href || e.target.tagName)); }
  }, true);
  window.addEventListener('unhandledrejection', function (e) {
    note('unhandled promise rejection: ' + (e && e.reason && (e.reason.stack || e.reason.message) || e.reason));
  });
  var consoleError = console.error;
  console.error = function () {
    note('console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
    return consoleError.apply(console, arguments);
  };
  if (performance.setResourceTimingBufferSize) { performance.setResourceTimingBufferSize(100000); }
  if (window.PerformanceObserver) {
    try { new PerformanceObserver(flush).observe({type: 'resource', buffered: true}); } catch (e) {}
  }
  document.addEventListener('DOMContentLoaded', flush);
  window.addEventListener('load', function () { loaded = true; flush(); });
})();
</script>
""" % {"marker": MARKER_ID}

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    # Whatever a page might fetch over http(s) goes to a proxy that is not there: nothing
    # leaves the machine, and the request still shows in the page's Resource Timing.
    "--proxy-server=127.0.0.1:9",
    "--enable-logging=stderr",
    "--v=0",
]


def find_chromium(explicit: str | None = None) -> str | None:
    for name in ([explicit] if explicit else []) + [
        "chromium",
        "chromium-browser",
        "google-chrome",
    ]:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def instrument(text: str, script: str = COLLECTOR) -> str:
    """The page with ``script`` (default: the error collector) as the first element of <head>."""
    match = re.search(r"<head\b[^>]*>", text, re.IGNORECASE)
    if match is None:
        raise ValueError("the page has no <head> to put the check's script in")
    return text[: match.end()] + "\n" + script + text[match.end() :]


_VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


class _DomSummary(HTMLParser):
    """Counts plotly figure divs, the ones holding an svg.main-svg, and reads the marker."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack = []  # (tag, is_figure_div) of open elements
        self.figures = 0
        self.rendered = 0
        self._open_figures = []  # [rendered?] per figure div currently open
        self.marker = None  # {"loaded": str, "text": str} once found
        self._in_marker = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if (
            tag == "svg"
            and "main-svg" in classes
            and self._open_figures
            and not self._open_figures[-1]
        ):
            self._open_figures[-1] = True
            self.rendered += 1
        if tag in _VOID:
            return  # never closed, so never pushed
        is_figure = tag == "div" and "plotly-graph-div" in classes
        if is_figure:
            self.figures += 1
            self._open_figures.append(False)
        if attrs.get("id") == MARKER_ID:
            self.marker = {
                "loaded": attrs.get("data-loaded", "0"),
                "requests": attrs.get("data-requests", "[]"),
                "text": "",
            }
            self._in_marker = True
        self.stack.append((tag, is_figure))

    def handle_startendtag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if (
            tag == "svg"
            and "main-svg" in classes
            and self._open_figures
            and not self._open_figures[-1]
        ):
            self._open_figures[-1] = True
            self.rendered += 1

    def handle_endtag(self, tag):
        # Pop to the matching open tag (tolerates unclosed elements).
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                for _, was_figure in self.stack[i:]:
                    if was_figure:
                        self._open_figures.pop()
                del self.stack[i:]
                break
        if tag == "pre":
            self._in_marker = False

    def handle_data(self, data):
        if self._in_marker and self.marker is not None:
            self.marker["text"] += data


def run_chromium(
    page: Path, chromium: str, budget_ms: int, timeout: float, extra_flags: Sequence[str] = ()
) -> subprocess.CompletedProcess:
    """Headless Chromium (fresh profile, :data:`CHROMIUM_FLAGS`) on ``page``: stdout is the DOM
    once the page has run for ``budget_ms`` of virtual time, stderr its log.

    Raises ``subprocess.TimeoutExpired`` after ``timeout`` s of wall clock, the browser and
    every process it started killed (it leads its own process group)."""
    with tempfile.TemporaryDirectory(prefix="zg-chromium-") as profile:
        cmd = [
            chromium,
            *CHROMIUM_FLAGS,
            *extra_flags,
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={budget_ms}",
            "--dump-dom",
            page.resolve().as_uri(),
        ]
        proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise
        finally:
            if proc.poll() is None:  # interrupted (Ctrl-C): the browser goes too
                _kill_group(proc)
                proc.wait()
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def render(page: Path, chromium: str, budget_ms: int, timeout: float) -> dict:
    """Open ``page`` (already instrumented) in headless Chromium; return what happened."""
    try:
        proc = run_chromium(page, chromium, budget_ms, timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "problems": [f"chromium did not finish within {timeout:.0f} s"]}
    dom = _DomSummary()
    dom.feed(proc.stdout)
    dom.close()
    problems = []
    if proc.returncode != 0:
        problems.append(
            f"chromium exited with status {proc.returncode}: {proc.stderr.strip()[-500:]}"
        )
    console_errors = [line.strip() for line in proc.stderr.splitlines() if "Uncaught" in line]
    problems += [f"console: {line[:300]}" for line in console_errors]
    if dom.marker is None:
        problems.append(
            "the error collector never wrote its marker (the page did not run, or the "
            "DOM dump is empty)"
        )
    else:
        if dom.marker["loaded"] != "1":
            problems.append("the page never fired its load event within the time budget")
        try:
            errors = json.loads(dom.marker["text"] or "[]")
        except ValueError:
            errors = [f"unreadable marker: {dom.marker['text'][:200]}"]
        problems += [f"js: {e}" for e in errors]
        try:
            requests = json.loads(dom.marker["requests"] or "[]")
        except ValueError:
            requests = [f"unreadable request list: {dom.marker['requests'][:200]}"]
        problems += [f"network: requested {url}" for url in requests]
    missing = dom.figures - dom.rendered
    if missing:
        problems.append(
            f"{missing} of {dom.figures} plotly figures have no svg.main-svg (did not render)"
        )
    return {
        "ok": not problems,
        "problems": problems,
        "figures": dom.figures,
        "rendered": dom.rendered,
    }


def check_report(
    path: Path, chromium: str, budget_ms: int, timeout: float, min_figures: int
) -> dict:
    text = path.read_text(encoding="utf-8", errors="replace")
    problems = static_problems(text)
    with tempfile.TemporaryDirectory(prefix="zg-report-check-") as tmp:
        page = Path(tmp) / path.name
        page.write_text(instrument(text), encoding="utf-8")
        result = render(page, chromium, budget_ms, timeout)
    result["problems"] = problems + result["problems"]
    if result.get("figures", 0) < min_figures:
        result["problems"].append(
            f"only {result.get('figures', 0)} plotly figures; expected at least {min_figures}"
        )
    result["ok"] = not result["problems"]
    return result


def self_test(chromium: str, budget_ms: int, timeout: float) -> list:
    """Problems with the checker itself: it must pass a good page and fail a broken one."""
    import plotly.graph_objects as go
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    fig = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    figure_html = pio.to_html(fig, include_plotlyjs=False, include_mathjax=False, full_html=False)
    head = f"<html><head><meta charset='utf-8'><script>{get_plotlyjs()}</script></head><body>"
    good = head + figure_html + "</body></html>"
    # Broken: a script that throws, and a figure div whose newPlot never runs.
    bad = (
        head + figure_html + "<script>notDefinedAnywhere();</script>"
        "<img src='http://zg-report-check.invalid/x.png' alt=''>"
        "<div class='plotly-graph-div' id='never'></div></body></html>"
    )
    out = []
    with tempfile.TemporaryDirectory(prefix="zg-report-selftest-") as tmp:
        for name, text, should_pass in (("good", good, True), ("broken", bad, False)):
            page = Path(tmp) / f"{name}.html"
            page.write_text(instrument(text), encoding="utf-8")
            result = render(page, chromium, budget_ms, timeout)
            if result["ok"] != should_pass:
                out.append(
                    f"self-test: the {name} page {'failed' if should_pass else 'passed'}: {result['problems']}"
                )
            elif not should_pass:
                joined = " ".join(result["problems"])
                if "notDefinedAnywhere" not in joined:
                    out.append(f"self-test: the JS error was not detected: {result['problems']}")
                if "no svg.main-svg" not in joined:
                    out.append(
                        f"self-test: the figure that never drew was not detected: {result['problems']}"
                    )
                if not any(p.startswith("network:") for p in result["problems"]):
                    out.append(
                        f"self-test: the request to the network was not detected: {result['problems']}"
                    )
                if not any(p.startswith("console:") for p in result["problems"]):
                    out.append(
                        "self-test: chromium's console log did not report the uncaught error"
                    )
            elif result["figures"] != 1 or result["rendered"] != 1:
                out.append(f"self-test: expected 1 rendered figure on the good page, got {result}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "reports", nargs="*", type=Path, help="HTML files or folders of them (default: reports/)"
    )
    ap.add_argument(
        "--chromium", default=None, help="the browser binary (default: chromium on PATH)"
    )
    ap.add_argument("--budget-ms", type=int, default=10000, help="Chromium's --virtual-time-budget")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per page, wall clock")
    ap.add_argument("--min-figures", type=int, default=1, help="figures every report must have")
    ap.add_argument("--no-self-test", action="store_true")
    args = ap.parse_args(argv)
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print(
            "report-check: no chromium found; install Debian's package (apt-get install -y chromium)",
            file=sys.stderr,
        )
        return 2
    if not args.no_self_test:
        problems = self_test(chromium, args.budget_ms, args.timeout)
        if problems:
            print(
                "report-check: the checker failed its self-test; results would not be trustworthy:",
                file=sys.stderr,
            )
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            return 2
        print(
            "report-check: self-test passed (a good page passes; a JS error, an undrawn figure and a "
            "network request are caught)"
        )
    targets = args.reports or [Path("reports")]
    pages = []
    for target in targets:
        pages += sorted(target.glob("*.html")) if target.is_dir() else [target]
    if not pages:
        print(
            f"report-check: no HTML reports in {', '.join(map(str, targets))}; run `make report` first",
            file=sys.stderr,
        )
        return 1
    failed = 0
    for page in pages:
        result = check_report(page, chromium, args.budget_ms, args.timeout, args.min_figures)
        status = "ok" if result["ok"] else "FAILED"
        print(
            f"report-check: {page}: {status} ({result.get('rendered', 0)}/{result.get('figures', 0)} "
            f"figures rendered, {len([p for p in result['problems'] if p.startswith(('js:', 'console:'))])} JS errors)"
        )
        for p in result["problems"]:
            print(f"    {p}")
        failed += not result["ok"]
    print(f"report-check: {len(pages) - failed} of {len(pages)} report(s) passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
