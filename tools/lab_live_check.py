#!/usr/bin/env python
"""Run notebooks in a live JupyterLab, driven through its UI in headless Chromium.

    python tools/lab_live_check.py notebooks/02_envelopes.ipynb            # one notebook
    python tools/lab_live_check.py --controls-only --first-screens notebooks/*.ipynb \\
        --json reports/lab_live_check.json                                  # `make lab-live-check`

What a student does, done by a browser: JupyterLab is started the way ``make lab`` starts it
(``make lab`` itself, with ``LAB_ARGS`` adding a free local port, a token, no browser, and a
private workspace and settings folder; kernels read ``ZG_SCALE=small``, the notebooks' CI size).
Chromium (Debian's ``/usr/bin/chromium``, driven by playwright's Python package; playwright
downloads no browser of its own) then, for each notebook:

1. opens it in JupyterLab's UI and runs every cell from the menu (*Run > Run All Cells*);
2. waits until the kernel is idle and no cell is queued or running;
3. checks that every code cell ran, that no cell has an error output (the notebook's model and,
   as a second witness, a traceback drawn in the page), that no widget failed to render, that
   every plotly figure is drawn (an ``svg.main-svg`` of non-zero size) and that every
   ``ipywidgets.interactive`` panel (``zg.viz.explore``) shows its figure;
4. moves every control through the UI: a slider by keyboard (End, or Home at its maximum), a
   dropdown by choosing another option, a toggle or checkbox by a click, and checks that the
   figure of that control (its panel's, else its cell's) is drawn again with other data: the
   plot's ``data`` (every array, uid left out) differs from before. The SVG is compared too and
   reported.

A failure names the notebook, the cell (index, id, first source line) and the control (its
label). JupyterLab's autosave is off, so the notebook files stay as they were. If JupyterLab
still saves one with outputs, the check fails and puts the file back; an output-free change is
someone's edit made meanwhile and is left alone. At the end, also after a failure or an
interrupt (SIGINT, SIGTERM), every kernel is shut down, the server is asked to stop, and its
process group and any process it started that is still running are killed. Checkpoint folders
and the gradebook that the run created are removed.

``--first-screens`` checks the first screens instead of (or before) notebooks:

* the student's, ``make lab``: no nbgrader tool in the page (no *Validate* button, no *Create
  Assignment*, no *Nbgrader* menu, formgrader, course or assignment list), nbgrader's server
  endpoints answer 404, and the server log has no "No nbgrader_config.py" line, no CRITICAL
  and no ERROR line;
* the instructor's, ``make lab-instructor``: the formgrader (*Nbgrader > Formgrader*) lists the
  labs with no warning banner (no "exchange directory ... does not exist"), nbgrader's tools are
  there (the positive control of the check above: a detector that finds nothing here is broken),
  and the server log has no CRITICAL and no ERROR line and no warning from nbgrader.

``--root DIR`` starts ``jupyter lab`` in DIR directly, with the same configuration the Makefile
gives it (the student's: ``JUPYTER_CONFIG_PATH=tools/student_lab``), instead of through make:
what the tests do on notebooks of their own. ``--instructor-root COURSE`` does the same for the
instructor's first screen (a course folder with an ``nbgrader_config.py``).

``--screenshots DIR`` saves a PNG of each screen. ``--json OUT`` writes every result.

Exit status 0 when every check passed, 1 when one failed, 2 when the check could not run (no
Chromium, no playwright, a JupyterLab that did not start, a detector that found nothing where
it must).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STUDENT_CONFIG = ROOT / "tools" / "student_lab"
NOTEBOOK_ROOT = ROOT / "notebooks"
LABS_ROOT = ROOT / "labs"
# What `make lab-instructor` may leave in labs/ when the formgrader opens; removed again when
# this check created it (with the checkpoints of the notebooks it opened).
INSTRUCTOR_LEFTOVERS = ("gradebook.db", ".nbgrader.log")
VIEWPORT = {"width": 1366, "height": 900}

# A code cell that makes a control: ipywidgets' widgets (`widgets.FloatSlider(`,
# `ipywidgets.Dropdown(`, `__import__("ipywidgets").Dropdown(`) or plotly's FigureWidget.
CONTROL_SOURCE = re.compile(
    r"""(?:\bwidgets|\bipywidgets["')]*)\.[A-Z]\w*\(|\binteract(?:ive)?\(|FigureWidget"""
)
# The user settings the check's JupyterLab runs with: no autosave (the notebooks stay as they
# are), no news or update check (nothing asks to reach the network).
USER_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "checkForUpdates": False,
        "fetchNews": "false",
    },
}
# nbgrader's tools as they show in JupyterLab: a detector of each, run on the student's screen
# (none may match) and on the instructor's (each must: else the detector is broken).
NBGRADER_MARKERS = {
    "the Validate button": r"\bValidate\b",
    "the Create Assignment panel": r"Create Assignment",
    "the Nbgrader menu": r"\bNbgrader\b",
}
NBGRADER_ENDPOINTS = ("formgrader", "assignments", "courses")

# ----------------------------------------------------------------------------- page scripts

# Tags every cell of the notebook at `path` with data-zg-cell=<index> and returns the kernel's
# status and, per cell, what the notebook's model says (execution count, errors, figures).
STATE_JS = """
(path) => {
  const app = window.jupyterapp;
  if (!app) { return {error: 'window.jupyterapp is missing (expose_app_in_browser is off)'}; }
  const panel = Array.from(app.shell.widgets('main')).find(w => w.context && w.context.path === path);
  if (!panel || !panel.content || !panel.content.widgets) { return {error: 'no notebook panel for ' + path}; }
  const cells = [];
  panel.content.widgets.forEach((w, i) => {
    w.node.setAttribute('data-zg-cell', String(i));
    const m = w.model;
    const source = m.sharedModel.getSource();
    const c = {index: i, id: m.id, type: m.type, first_line: source.split('\\n')[0].slice(0, 100)};
    if (m.type === 'code') {
      const outs = m.outputs.toJSON();
      c.count = m.executionCount;
      c.errors = outs.filter(o => o.output_type === 'error').map(o => (o.ename + ': ' + o.evalue).slice(0, 300));
      c.plotly = outs.filter(o => o.data && o.data['application/vnd.plotly.v1+json']).length;
      c.widgets = outs.filter(o => o.data && o.data['application/vnd.jupyter.widget-view+json']).length;
      c.prompt = (w.node.querySelector('.jp-InputPrompt') || {}).textContent || '';
    }
    cells.push(c);
  });
  return {status: panel.sessionContext.kernelDisplayStatus, cells: cells};
}
"""

# What the page draws in one cell (by data-zg-cell index): plots, controls, tracebacks, widgets
# that failed. Each plot and control is tagged (data-zg-plot / data-zg-control) so the driver
# can find it again.
CELL_DOM_JS = """
(index) => {
  const node = document.querySelector('[data-zg-cell="' + index + '"]');
  if (!node) { return null; }
  const CONTROL = '.widget-slider, .widget-hslider, .widget-vslider, .widget-dropdown, .widget-select, '
    + '.widget-toggle-button, .widget-toggle-buttons, .widget-checkbox, .widget-radio, '
    + '.widget-text, .widget-textarea, .widget-combobox, .widget-play, .widget-colorpicker, '
    + '.widget-datepicker, .widget-select-multiple, .widget-tagsinput';
  const plots = Array.from(node.querySelectorAll('.js-plotly-plot'));
  const out = {plots: [], controls: [], interacts: [], tracebacks: [], widget_errors: []};
  plots.forEach((gd, k) => {
    gd.setAttribute('data-zg-plot', index + '-' + k);
    const r = gd.getBoundingClientRect();
    const svg = gd.querySelector('svg.main-svg');
    const panel = gd.closest('.widget-interact');
    out.plots.push({key: index + '-' + k, drawn: !!(svg && gd._fullLayout && r.width > 0 && r.height > 0),
                    width: Math.round(r.width), height: Math.round(r.height),
                    panel: panel ? panel.getAttribute('data-zg-panel') : null});
  });
  Array.from(node.querySelectorAll('.widget-interact')).forEach((p, k) => {
    p.setAttribute('data-zg-panel', index + '-' + k);
    out.interacts.push({key: index + '-' + k, plots: p.querySelectorAll('.js-plotly-plot').length});
  });
  // Plots were tagged before the panels: tag their panel now.
  out.plots.forEach(p => {
    const gd = node.querySelector('[data-zg-plot="' + p.key + '"]');
    const panel = gd.closest('.widget-interact');
    p.panel = panel ? panel.getAttribute('data-zg-panel') : null;
  });
  const all = Array.from(node.querySelectorAll(CONTROL));
  all.filter(el => !all.some(o => o !== el && o.contains(el))).forEach((el, k) => {
    el.setAttribute('data-zg-control', index + '-' + k);
    const clean = t => (t || '').replace(/[\\u200b\\s]+/g, ' ').trim();
    const labels = Array.from(el.querySelectorAll('.widget-label, .widget-label-basic'))
      .map(l => clean(l.textContent)).filter(Boolean);
    const kinds = ['slider', 'hslider', 'vslider', 'dropdown', 'select-multiple', 'select', 'toggle-buttons',
                   'toggle-button', 'checkbox', 'radio', 'textarea', 'text', 'combobox', 'play',
                   'colorpicker', 'datepicker', 'tagsinput'];
    const kind = kinds.find(k => el.classList.contains('widget-' + k)) || 'unknown';
    const panel = el.closest('.widget-interact');
    out.controls.push({key: index + '-' + k, kind: kind === 'hslider' || kind === 'vslider' ? 'slider' : kind,
                       label: (labels[0] || clean(el.textContent)).slice(0, 60),
                       panel: panel ? panel.getAttribute('data-zg-panel') : null});
  });
  node.querySelectorAll('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]').forEach(o => {
    const t = o.textContent || '';
    if (t.includes('Traceback (most recent call last)')) { out.tracebacks.push(t.slice(0, 400)); }
  });
  const outputs = node.querySelector('.jp-Cell-outputWrapper');
  const text = (outputs && outputs.textContent) || '';
  for (const bad of ['Error displaying widget', 'Error rendering output', 'model not found']) {
    if (text.includes(bad)) { out.widget_errors.push(bad); }
  }
  return out;
}
"""

# The plots given by their data-zg-plot keys: each one's data (every array as a plain list, the
# trace uids left out), layout title and SVG (plotly's per-figure uid taken out).
FINGERPRINT_JS = """
(keys) => keys.map(key => {
  const gd = document.querySelector('[data-zg-plot="' + key + '"]');
  if (!gd) { return null; }
  const plain = (k, v) => (k === 'uid' ? undefined : (ArrayBuffer.isView(v) ? Array.from(v) : v));
  let data = '';
  try { data = JSON.stringify(gd.data || [], plain); } catch (e) { data = 'unserialisable: ' + e; }
  const uid = gd._fullLayout && gd._fullLayout._uid;
  let svg = Array.from(gd.querySelectorAll('svg.main-svg')).map(s => s.outerHTML).join('');
  if (uid) { svg = svg.split(uid).join(''); }
  const title = gd.layout && gd.layout.title ? JSON.stringify(gd.layout.title) : '';
  return {data: data, svg: svg, title: title};
})
"""

# Every text a person can see or hover in the page: the visible text, and every title,
# aria-label and toolbar item name (icon buttons and sidebar tabs carry their name there).
PAGE_TEXT_JS = """
() => {
  const bits = [document.body.innerText || ''];
  document.querySelectorAll('[title], [aria-label], [data-jp-item-name]').forEach(e => {
    for (const a of ['title', 'aria-label', 'data-jp-item-name']) {
      const v = e.getAttribute(a);
      if (v) { bits.push(v); }
    }
  });
  return bits.join('\\n');
}
"""


# ----------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab started the way the Makefile starts it, on a free local port with a token,
    and everything it started ended when the ``with`` block ends, however it ends.

    ``target``: ``"lab"`` (the student's, in notebooks/) or ``"lab-instructor"`` (in labs/).
    ``root``: start ``jupyter lab`` in this folder directly (the same configuration as the
    target) instead of through make.
    """

    def __init__(
        self,
        target: str,
        root: Path | None,
        scale: str,
        workdir: Path,
        startup: float,
        keep_log: Path | None = None,
    ):
        if target not in ("lab", "lab-instructor"):
            raise ValueError(f"target must be 'lab' or 'lab-instructor', got {target!r}")
        self.target, self.scale, self.startup = target, scale, startup
        self.direct = root is not None
        self.root = (
            Path(root).resolve() if root else (NOTEBOOK_ROOT if target == "lab" else LABS_ROOT)
        )
        self.port, self.token = free_port(), secrets.token_hex(16)
        self.workdir = workdir
        self.log_path = workdir / f"{target}-{self.port}.log"
        self.process: subprocess.Popen | None = None
        self.descendants: dict[int, float] = {}
        self.stopping_at = 0  # the log's length when the shutdown began
        self.keep_log = keep_log  # a folder to copy the server's log to at the end

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def lab_args(self) -> list[str]:
        settings = self.workdir / f"settings-{self.port}"
        for rel, values in USER_SETTINGS.items():
            path = settings / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))
        workspaces = self.workdir / f"workspaces-{self.port}"
        workspaces.mkdir(parents=True, exist_ok=True)
        return [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={workspaces}",
            "--LabApp.expose_app_in_browser=True",
        ]

    def command(self) -> tuple[list[str], Path, dict]:
        env = dict(os.environ, ZG_SCALE=self.scale)
        env.setdefault("DGLBACKEND", "pytorch")
        env.setdefault("PYTHONHASHSEED", "0")
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        args = self.lab_args()
        if not self.direct:
            # `make lab` itself; env is up to date (the make target that runs this depends on
            # it), so make is told not to remake it.
            cmd = ["make", "--no-print-directory", "-o", "env", "-o", ".venv/.zg-installed"]
            return cmd + [self.target, "LAB_ARGS=" + " ".join(args)], ROOT, env
        bindir = Path(sys.executable).parent
        jupyter = bindir / "jupyter"
        cmd = [str(jupyter) if jupyter.exists() else "jupyter", "lab", *args]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")
        if self.target == "lab":
            prior = os.environ.get("JUPYTER_CONFIG_PATH")
            env["JUPYTER_CONFIG_PATH"] = str(STUDENT_CONFIG) + (os.pathsep + prior if prior else "")
        else:
            env["PATH"] = str(bindir) + os.pathsep + env.get("PATH", "")
            exchange = self.root / "exchange"
            exchange.mkdir(exist_ok=True)
            exchange.chmod(0o777)
        return cmd, self.root, env

    def __enter__(self) -> LabServer:
        cmd, cwd, env = self.command()
        self.log_file = open(self.log_path, "w")
        self.process = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdout=self.log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.startup
        while time.monotonic() < deadline:
            self.note_descendants()
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"JupyterLab ({' '.join(cmd[:6])} ...) exited with {self.process.returncode} "
                    f"before answering; its log ends: {self.log_tail()}"
                )
            try:
                self.api("GET", "status")
                return self
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(
            f"JupyterLab did not answer on port {self.port} within {self.startup:.0f} s; "
            f"its log ends: {self.log_tail()}"
        )

    def __exit__(self, *exc) -> None:
        self.stop()

    def api(self, method: str, path: str, timeout: float = 10.0):
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            method=method,
            headers={"Authorization": f"token {self.token}"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def http_status(self, path: str) -> int:
        request = urllib.request.Request(
            f"{self.url}/{path}", headers={"Authorization": f"token {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status
        except urllib.error.HTTPError as e:
            return e.code

    def note_descendants(self) -> None:
        """Remember every process the server started (kernels live in their own sessions, so
        killing the server's process group would not reach them)."""
        try:
            import psutil
        except ImportError:  # the reference env has it; without it the group kill remains
            return
        try:
            for p in psutil.Process(self.process.pid).children(recursive=True):
                self.descendants.setdefault(p.pid, p.create_time())
        except psutil.Error:
            pass

    def shutdown_kernels(self) -> None:
        try:
            for kernel in self.api("GET", "kernels"):
                self.api("DELETE", f"kernels/{kernel['id']}", timeout=30)
        except (urllib.error.URLError, OSError, ValueError):
            pass

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n: int = 1500) -> str:
        return self.log_text()[-n:]

    def stop(self) -> None:
        if self.process is None:
            return
        self.note_descendants()
        self.stopping_at = len(self.log_text())
        if self.process.poll() is None:
            self.shutdown_kernels()
            try:
                self.api("POST", "shutdown", timeout=10)
            except (urllib.error.URLError, OSError, ValueError):
                pass
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                pass
        for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
            if self.process.poll() is not None:
                break
            try:
                os.killpg(self.process.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        # A process make or the server started that is still there (a kernel whose shutdown
        # failed): killed by its pid, when it is still the same process.
        try:
            import psutil
        except ImportError:
            psutil = None
        if psutil is not None:
            for pid, created in self.descendants.items():
                try:
                    p = psutil.Process(pid)
                    if abs(p.create_time() - created) < 0.01:
                        p.kill()
                except psutil.Error:
                    pass
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.process.wait()
        self.process = None
        self.log_file.close()
        if self.keep_log:
            self.keep_log.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.log_path, self.keep_log / self.log_path.name)

    def log_problems(self, *, nbgrader_config_line: bool) -> list[str]:
        """CRITICAL and ERROR lines, nbgrader's warnings (and its missing-config line) that the
        server logged before its shutdown began."""
        text = self.log_text()[: self.stopping_at or None]
        out = []
        for line in text.splitlines():
            if re.match(r"\[(C|E) \d", line):
                out.append(f"server log: {line.strip()[:300]}")
            elif nbgrader_config_line and "No nbgrader_config.py" in line:
                out.append(f"server log: {line.strip()[:300]}")
            elif (
                re.match(r"\[W \d", line)
                and re.search(r"nbgrader|formgrader|exchange", line, re.I)
                and not re.search(
                    r"\] \d{3} (GET|POST|PUT|PATCH|DELETE) /", line
                )  # the probes' 404s
            ):
                out.append(f"server log: {line.strip()[:300]}")
        return out


# ----------------------------------------------------------------------------- the browser


class Browser:
    """Debian's Chromium, headless, through playwright (which downloads no browser of its own).
    Requests that leave the machine are refused and recorded."""

    def __init__(self, chromium: str, screenshots: Path | None):
        from playwright.sync_api import sync_playwright

        self.screenshots = screenshots
        self._pw = sync_playwright().start()
        try:
            self.browser = self._pw.chromium.launch(
                executable_path=chromium,
                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
            )
        except Exception:
            self._pw.stop()
            raise

    def page(self, server: LabServer):
        page = self.browser.new_page(viewport=VIEWPORT)
        page.zg_errors, page.zg_remote = [], []
        page.on("pageerror", lambda e: page.zg_errors.append(str(e)[:300]))

        def route(r):
            host = r.request.url.split("/")[2] if "://" in r.request.url else ""
            if host.split(":")[0] in ("127.0.0.1", "localhost") or not r.request.url.startswith(
                "http"
            ):
                r.continue_()
            else:
                page.zg_remote.append(r.request.url[:200])
                r.abort()

        page.route("**/*", route)
        return page

    def shot(self, page, name: str) -> str | None:
        if not self.screenshots:
            return None
        self.screenshots.mkdir(parents=True, exist_ok=True)
        path = self.screenshots / f"{name}.png"
        page.screenshot(path=str(path))
        return str(path)

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self._pw.stop()


def open_lab(page, server: LabServer, path: str = "", timeout: float = 120.0) -> None:
    tree = f"/tree/{path}" if path else ""
    page.goto(f"{server.url}/lab{tree}?token={server.token}&reset", timeout=timeout * 1000)
    page.wait_for_selector("#jp-main-dock-panel", timeout=timeout * 1000)
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.started !== undefined", timeout=timeout * 1000
    )


def menu(page, top: str, item: str, timeout: float = 30.0) -> None:
    """Click a menu of JupyterLab's menu bar, then one of its items (both by their label)."""
    page.locator(
        "#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(top)}$")
    ).first.click(timeout=timeout * 1000)
    page.locator(
        ".lm-Menu .lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(item)}$")
    ).first.click(timeout=timeout * 1000)


# ----------------------------------------------------------------------------- one notebook


def cell_name(cell: dict) -> str:
    count = cell.get("count")
    where = f"cell {cell['index']} (id {cell['id']}"
    where += f", In [{count}]" if count else ""
    return where + f": {cell['first_line']!r})"


def wait_idle(page, path: str, deadline: float, *, settle: float = 1.5, need_busy: float = 0.0):
    """Poll until the kernel is idle with no cell queued or running for ``settle`` seconds
    (after it was seen busy, or ``need_busy`` seconds passed). Returns the last state and
    whether it settled before ``deadline``."""
    started = time.monotonic()
    seen_busy, quiet_since, state = False, None, None
    while time.monotonic() < deadline:
        state = page.evaluate(STATE_JS, path)
        if state.get("error"):  # the panel is not there yet: poll on
            time.sleep(0.5)
            continue
        running = any("*" in c.get("prompt", "") for c in state["cells"])
        busy = state["status"] != "idle" or running
        seen_busy = seen_busy or busy
        if busy or not (seen_busy or time.monotonic() - started >= need_busy):
            quiet_since = None
        else:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since >= settle:
                return state, True
        time.sleep(0.5)
    return state, False


def fingerprints(page, keys: list[str]) -> list[dict | None]:
    prints = page.evaluate(FINGERPRINT_JS, keys)
    return [
        None if p is None else {k: hashlib.sha1(v.encode()).hexdigest()[:16] for k, v in p.items()}
        for p in prints
    ]


def move_control(page, control: dict) -> str:
    """Move one control through the UI; returns what was done (or raises ValueError for a kind
    this check cannot move)."""
    el = page.locator(f'[data-zg-control="{control["key"]}"]')
    el.scroll_into_view_if_needed()
    kind = control["kind"]
    if kind == "slider":
        handle = el.locator(".noUi-handle").first
        now, top = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuemax")
        key = "Home" if now is not None and top is not None and float(now) >= float(top) else "End"
        handle.focus()
        handle.press(key)
        return f"slider {key} (was {now}, max {top})"
    if kind in ("dropdown", "select"):
        select = el.locator("select").first
        values = select.evaluate("s => Array.from(s.options).map(o => o.value)")
        current = select.evaluate("s => s.value")
        if len(values) < 2:
            raise ValueError(f"{kind} has {len(values)} option(s): nothing to choose")
        target = (
            values[(values.index(current) + 1) % len(values)] if current in values else values[0]
        )
        select.select_option(target)
        return f"{kind}: {current!r} -> {target!r}"
    if kind == "toggle-button":
        el.click()
        return "toggle clicked"
    if kind == "toggle-buttons":
        buttons = el.locator("button:not(.mod-active)")
        if buttons.count() == 0:
            raise ValueError("toggle buttons: no other button to click")
        label = buttons.first.inner_text()
        buttons.first.click()
        return f"toggle buttons: clicked {label!r}"
    if kind == "checkbox":
        el.locator("input").first.click()
        return "checkbox clicked"
    if kind == "radio":
        radios = el.locator("input[type=radio]:not(:checked)")
        if radios.count() == 0:
            raise ValueError("radio buttons: no other option")
        radios.first.click()
        return "radio: chose another option"
    raise ValueError(f"a control of kind {kind!r} cannot be moved by this check")


def check_notebook(browser: Browser, server: LabServer, notebook: Path, timeout: float) -> dict:
    """Open ``notebook`` in the server's JupyterLab, run it from the menu, check its outputs and
    move every control. Returns a result dict with ``problems`` (empty when it passed)."""
    rel = notebook.resolve().relative_to(server.root).as_posix()
    result = {"notebook": str(notebook), "problems": [], "figures": 0, "controls": [], "cells": 0}
    problems = result["problems"]
    started = time.monotonic()
    deadline = started + timeout
    page = browser.page(server)
    try:
        open_lab(page, server, rel)
        page.wait_for_selector(".jp-NotebookPanel .jp-Cell", timeout=120_000)
        state, _ = wait_idle(page, rel, min(deadline, time.monotonic() + 60), settle=1.0)
        if state is None or state.get("error"):
            problems.append(f"{notebook.name}: {state and state.get('error')}")
            return result
        menu(page, "Run", "Run All Cells")
        state, settled = wait_idle(page, rel, deadline, settle=2.0, need_busy=5.0)
        result["run_seconds"] = round(time.monotonic() - started, 1)
        if not settled:
            running = [
                cell_name(c) for c in (state or {}).get("cells", []) if "*" in c.get("prompt", "")
            ]
            problems.append(
                f"{notebook.name}: the kernel was still busy after {timeout:.0f} s"
                + (f" ({', '.join(running[:3])} running or queued)" if running else "")
            )
            return result
        browser.shot(page, f"{notebook.stem}-ran")
        code = [c for c in state["cells"] if c["type"] == "code"]
        result["cells"] = len(code)
        for cell in code:
            for err in cell["errors"]:
                problems.append(f"{notebook.name}, {cell_name(cell)}: error output {err}")
            if not cell["count"] and not cell["errors"]:
                problems.append(f"{notebook.name}, {cell_name(cell)}: did not run")
        # Every figure and every panel of controls, drawn; each control moved.
        for cell in code:
            page.locator(f'[data-zg-cell="{cell["index"]}"]').scroll_into_view_if_needed()
            dom = page.evaluate(CELL_DOM_JS, cell["index"])
            if dom is None:
                problems.append(f"{notebook.name}, {cell_name(cell)}: not in the page")
                continue
            if dom["plots"]:
                # Plots below the fold may draw only once scrolled to: give them a moment.
                page.wait_for_timeout(200)
                dom = page.evaluate(CELL_DOM_JS, cell["index"])
            where = f"{notebook.name}, {cell_name(cell)}"
            result["figures"] += len(dom["plots"])
            for tb in dom["tracebacks"]:
                problems.append(f"{where}: a traceback is drawn: {tb[:200]!r}")
            for bad in dom["widget_errors"]:
                problems.append(f"{where}: {bad!r} in its output (a widget did not render)")
            if len(dom["plots"]) < cell["plotly"]:
                problems.append(
                    f"{where}: {cell['plotly']} plotly figure(s) in its outputs, {len(dom['plots'])} drawn"
                )
            for plot in dom["plots"]:
                if not plot["drawn"]:
                    problems.append(
                        f"{where}: figure {plot['key']} is not drawn ({plot['width']}x{plot['height']} px)"
                    )
            for panel in dom["interacts"]:
                if panel["plots"] == 0:
                    problems.append(f"{where}: the controls' panel {panel['key']} shows no figure")
            if (
                cell["widgets"]
                and not dom["controls"]
                and not dom["interacts"]
                and not dom["plots"]
            ):
                problems.append(f"{where}: a widget output is not drawn")
            for control in dom["controls"]:
                outcome = check_control(page, rel, notebook, cell, control, deadline)
                result["controls"].append(outcome)
                problems.extend(outcome["problems"])
        browser.shot(page, f"{notebook.stem}-moved")
        for err in page.zg_errors:
            problems.append(f"{notebook.name}: uncaught JavaScript error: {err}")
        result["requests_refused"] = list(page.zg_remote)
    except Exception as e:  # a driver time-out or a page that went away: a failure, named
        problems.append(f"{notebook.name}: the check stopped: {type(e).__name__}: {str(e)[:400]}")
    finally:
        result["seconds"] = round(time.monotonic() - started, 1)
        try:
            page.close()
        except Exception:
            pass
        server.shutdown_kernels()
    return result


def check_control(page, rel, notebook: Path, cell: dict, control: dict, deadline: float) -> dict:
    """Move one control and check that its figure is drawn again with other data."""
    name = f"{notebook.name}, {cell_name(cell)}, control {control['label'] or control['key']!r} ({control['kind']})"
    outcome = {
        "cell": cell["index"],
        "cell_id": cell["id"],
        "control": control["label"],
        "kind": control["kind"],
        "problems": [],
    }
    dom = page.evaluate(CELL_DOM_JS, cell["index"])
    same_panel = [
        p["key"] for p in dom["plots"] if control["panel"] and p["panel"] == control["panel"]
    ]
    keys = same_panel or [p["key"] for p in dom["plots"]]
    if not keys:
        outcome["problems"].append(f"{name}: no figure beside it to redraw")
        return outcome
    before = fingerprints(page, keys)
    started = time.monotonic()
    try:
        outcome["action"] = move_control(page, control)
    except ValueError as e:
        outcome["problems"].append(f"{name}: {e}")
        return outcome
    # The kernel rebuilds the figure: wait for it to be busy then idle, and for the new plot.
    state, settled = wait_idle(
        page, rel, min(deadline, time.monotonic() + 180), settle=1.0, need_busy=3.0
    )
    after, changed = None, False
    while True:
        dom = page.evaluate(CELL_DOM_JS, cell["index"])
        now_keys = [
            p["key"] for p in dom["plots"] if not control["panel"] or p["panel"] == control["panel"]
        ]
        drawn = bool(now_keys) and all(p["drawn"] for p in dom["plots"] if p["key"] in now_keys)
        after = fingerprints(page, now_keys) if drawn else None
        changed = bool(after) and [a and a["data"] for a in after] != [
            b and b["data"] for b in before
        ]
        if (
            changed
            or time.monotonic() > min(deadline, started + 60)
            or (settled and time.monotonic() - started > 10)
        ):
            break
        page.wait_for_timeout(500)
    outcome["seconds"] = round(time.monotonic() - started, 1)
    outcome["before"], outcome["after"] = before, after
    outcome["svg_changed"] = bool(after) and [a and a["svg"] for a in after] != [
        b and b["svg"] for b in before
    ]
    for tb in dom["tracebacks"]:
        outcome["problems"].append(f"{name}: a traceback is drawn after the move: {tb[:200]!r}")
    if not settled:
        outcome["problems"].append(f"{name}: the kernel was still busy after the move")
    elif after is None:
        outcome["problems"].append(f"{name}: its figure is not drawn after the move")
    elif not changed:
        outcome["problems"].append(
            f"{name}: its figure was not drawn with new data after the move ({outcome['action']})"
        )
    return outcome


# ----------------------------------------------------------------------------- first screens


def markers_in(text: str) -> list[str]:
    return [name for name, rx in NBGRADER_MARKERS.items() if re.search(rx, text)]


def open_notebook_idle(page, server: LabServer, notebook: str) -> None:
    """Open ``notebook`` and wait for its kernel to start and be idle (a page closed while the
    kernel's websocket connects makes the server log an error of its own)."""
    open_lab(page, server, notebook)
    page.wait_for_selector(".jp-NotebookPanel-toolbar", timeout=60_000)
    wait_idle(page, notebook, time.monotonic() + 60, settle=1.0)
    page.wait_for_timeout(500)


def student_screen(browser: Browser, server: LabServer, notebook: str) -> dict:
    """`make lab`'s first screen and a notebook opened there: no nbgrader tool, no endpoint,
    no nbgrader line and no CRITICAL or ERROR line in the log."""
    out = {"screen": "student (make lab)", "problems": [], "screenshots": []}
    page = browser.page(server)
    try:
        open_lab(page, server)
        page.wait_for_selector(".jp-Launcher", timeout=60_000)
        page.wait_for_timeout(1500)
        out["screenshots"].append(browser.shot(page, "first-screen-student"))
        text = page.evaluate(PAGE_TEXT_JS)
        if notebook:
            open_notebook_idle(page, server, notebook)
            out["screenshots"].append(browser.shot(page, "first-screen-student-notebook"))
            text += "\n" + page.evaluate(PAGE_TEXT_JS)
        out["menus"] = page.evaluate(
            "() => Array.from(document.querySelectorAll('#jp-MainMenu .lm-MenuBar-itemLabel')).map(e => e.textContent)"
        )
        for found in markers_in(text):
            out["problems"].append(f"student screen: {found} is shown")
        for endpoint in NBGRADER_ENDPOINTS:
            code = server.http_status(endpoint)
            out[f"GET /{endpoint}"] = code
            if code != 404:
                out["problems"].append(
                    f"student screen: /{endpoint} answers {code} (nbgrader's server extension is on)"
                )
        for err in page.zg_errors:
            out["problems"].append(f"student screen: uncaught JavaScript error: {err}")
    finally:
        page.close()
        server.shutdown_kernels()
    return out


def instructor_screen(browser: Browser, server: LabServer, notebook: str) -> dict:
    """`make lab-instructor`'s formgrader: the labs listed, no warning banner; nbgrader's tools
    there (the detector's positive control)."""
    out = {"screen": "instructor (make lab-instructor)", "problems": [], "screenshots": []}
    page = browser.page(server)
    try:
        open_lab(page, server)
        page.wait_for_selector(".jp-Launcher", timeout=60_000)
        page.wait_for_timeout(1500)
        menu(page, "Nbgrader", "Formgrader")
        frame = None
        for _ in range(120):
            frame = next((f for f in page.frames if "/formgrader" in f.url), None)
            if frame is not None:
                break
            page.wait_for_timeout(250)
        if frame is None:
            out["problems"].append(
                "instructor screen: Nbgrader > Formgrader opened no formgrader page"
            )
            return out
        frame.wait_for_selector("#main-table, table", timeout=60_000)
        # The table of assignments fills from the formgrader's API ("Loading, please wait..."
        # until then; the first time, nbgrader also makes its gradebook).
        try:
            frame.wait_for_function(
                "() => document.querySelectorAll('table tbody tr').length > 0 && "
                "!document.body.innerText.includes('Loading, please wait')",
                timeout=90_000,
            )
        except Exception:
            out["problems"].append("instructor screen: the formgrader's table did not load in 90 s")
        page.wait_for_timeout(1000)
        out["screenshots"].append(browser.shot(page, "first-screen-instructor-formgrader"))
        banner = frame.evaluate(
            "() => Array.from(document.querySelectorAll('.alert')).map(e => e.innerText.trim()).filter(Boolean)"
        )
        body = frame.evaluate("() => document.body.innerText")
        out["banners"] = banner
        for text in banner:
            out["problems"].append(
                f"instructor screen: the formgrader shows a banner: {text[:200]!r}"
            )
        if "does not exist" in body:
            out["problems"].append(
                "instructor screen: the formgrader says a directory does not exist"
            )
        labs = sorted(p.name for p in (server.root / "source").glob("*") if p.is_dir())
        out["labs_listed"] = [lab for lab in labs if lab in body]
        if labs and not out["labs_listed"]:
            out["problems"].append(
                f"instructor screen: the formgrader lists none of the labs ({labs[:3]} ...)"
            )
        text = page.evaluate(PAGE_TEXT_JS)
        if notebook:
            open_notebook_idle(page, server, notebook)
            out["screenshots"].append(browser.shot(page, "first-screen-instructor-notebook"))
            text += "\n" + page.evaluate(PAGE_TEXT_JS)
        out["markers"] = markers_in(text)
        out["detector_broken"] = sorted(set(NBGRADER_MARKERS) - set(out["markers"]))
        for err in page.zg_errors:
            out["problems"].append(f"instructor screen: uncaught JavaScript error: {err}")
    finally:
        page.close()
        server.shutdown_kernels()
    return out


def first_screens(browser, workdir, scale, startup, student_root, instructor_root):
    """Both first screens, each in its own server; returns (results, checker problems)."""
    results, broken = [], []
    with LabServer("lab", student_root, scale, workdir, startup, browser.screenshots) as server:
        r = student_screen(browser, server, first_notebook(server.root, server.root))
    r["problems"] += server.log_problems(nbgrader_config_line=True)
    results.append(r)
    with LabServer(
        "lab-instructor", instructor_root, scale, workdir, startup, browser.screenshots
    ) as server:
        r = instructor_screen(browser, server, first_notebook(server.root, server.root / "source"))
    r["problems"] += server.log_problems(nbgrader_config_line=False)
    results.append(r)
    if r.get("detector_broken"):
        broken.append(
            "the instructor's screen does not show "
            + ", ".join(r["detector_broken"])
            + ": the detector of nbgrader's tools cannot be trusted"
        )
    return results, broken


# ----------------------------------------------------------------------------- command line


def has_controls(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return any(
        c["cell_type"] == "code" and CONTROL_SOURCE.search("".join(c["source"])) for c in cells
    )


def find_chromium(explicit: str | None) -> str | None:
    for name in ([explicit] if explicit else []) + [
        "/usr/bin/chromium",
        "chromium",
        "chromium-browser",
    ]:
        path = shutil.which(name) if name else None
        if path:
            return path
    return None


def saved_by_jupyterlab(notebook: Path, before: bytes) -> str:
    """The notebooks stay as they were: JupyterLab's autosave is off. Should JupyterLab still
    have saved one (outputs in it), it is put back and the check fails. A change without
    outputs is someone's edit made meanwhile: it is left alone."""
    now = notebook.read_bytes()
    if now == before:
        return ""
    try:
        cells = json.loads(now)["cells"]
    except (ValueError, KeyError):
        return f"{notebook.name}: the file changed while JupyterLab had it open (left as it is)"
    if not any(c.get("outputs") or c.get("execution_count") for c in cells):
        print(f"lab-live-check: {notebook.name} was edited meanwhile (no outputs): left as it is")
        return ""
    notebook.write_bytes(before)
    return f"{notebook.name}: JupyterLab saved it with outputs while it was open (put back)"


def interrupted(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def first_notebook(root: Path, folder: Path) -> str:
    """The first notebook under ``folder``, as a path inside the lab's ``root`` ('' if none)."""
    found = [p for p in sorted(folder.rglob("*.ipynb")) if ".ipynb_checkpoints" not in p.parts]
    return found[0].relative_to(root).as_posix() if found else ""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See the module docstring (tools/lab_live_check.py) for what is checked.",
    )
    ap.add_argument(
        "notebooks", nargs="*", type=Path, help="notebooks to run (inside the lab's root)"
    )
    ap.add_argument(
        "--timeout", type=float, default=600.0, help="seconds per notebook (default 600)"
    )
    ap.add_argument(
        "--json", type=Path, default=None, metavar="OUT", help="write every result here"
    )
    ap.add_argument(
        "--controls-only",
        action="store_true",
        help="only the notebooks whose code makes a control (ipywidgets, FigureWidget)",
    )
    ap.add_argument(
        "--first-screens",
        action="store_true",
        help="check `make lab`'s and `make lab-instructor`'s first screens too",
    )
    ap.add_argument(
        "--root",
        type=Path,
        default=None,
        help="start `jupyter lab` in this folder directly instead of `make lab`",
    )
    ap.add_argument(
        "--instructor-root",
        type=Path,
        default=None,
        help="with --first-screens: the nbgrader course folder to start the instructor's "
        "JupyterLab in directly, instead of `make lab-instructor`",
    )
    ap.add_argument(
        "--scale", default="small", choices=["small", "full"], help="ZG_SCALE for the kernels"
    )
    ap.add_argument("--screenshots", type=Path, default=None, metavar="DIR", help="save PNGs here")
    ap.add_argument("--chromium", default=None, help="the browser (default /usr/bin/chromium)")
    ap.add_argument(
        "--startup", type=float, default=120.0, help="seconds JupyterLab may take to start"
    )
    args = ap.parse_args(argv)
    from zg._io import command_output_arg, write_text

    # Checked before JupyterLab or a browser starts: one line naming --json, exit 2.
    command_output_arg(ap, args.json, "--json", make_parents=True)
    if args.timeout <= 0:
        ap.error(f"--timeout must be a positive number of seconds, got {args.timeout}")
    for flag, folder in (("--root", args.root), ("--instructor-root", args.instructor_root)):
        if folder is not None and not folder.is_dir():
            ap.error(f"{flag} {folder}: not a folder")
    if (
        args.instructor_root is not None
        and not (args.instructor_root / "nbgrader_config.py").is_file()
    ):
        ap.error(f"--instructor-root {args.instructor_root}: has no nbgrader_config.py")
    lab_root = (args.root or NOTEBOOK_ROOT).resolve()
    for nb in args.notebooks:
        if not nb.is_file() or nb.suffix != ".ipynb":
            ap.error(f"notebook {nb}: not an .ipynb file")
        if not nb.resolve().is_relative_to(lab_root):
            ap.error(f"notebook {nb}: not inside the lab's root {lab_root} (see --root)")
    notebooks = [nb for nb in args.notebooks if not args.controls_only or has_controls(nb)]
    if not notebooks and not args.first_screens:
        ap.error(
            "nothing to check: give notebooks (with controls, under --controls-only) or --first-screens"
        )

    chromium = find_chromium(args.chromium)
    if chromium is None:
        print(
            "lab-live-check: no chromium found (Debian: apt-get install -y chromium)",
            file=sys.stderr,
        )
        return 2
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        print(
            "lab-live-check: playwright is not installed (make env installs it: "
            "requirements/reference.txt)",
            file=sys.stderr,
        )
        return 2

    report = {"chromium": chromium, "scale": args.scale, "screens": [], "notebooks": []}
    broken: list[str] = []
    started = time.monotonic()
    # SIGTERM (a CI time-out, a kill) ends the run through the same clean-up as a failure.
    signal.signal(signal.SIGTERM, interrupted)
    # What JupyterLab and the formgrader may leave in the checkout (checkpoints of the opened
    # notebooks, the gradebook): whatever of it this run created is removed at its end.
    leftovers = [lab_root / ".ipynb_checkpoints"]
    leftovers += [nb.resolve().parent / ".ipynb_checkpoints" for nb in notebooks]
    if args.first_screens:
        course = (args.instructor_root or LABS_ROOT).resolve()
        leftovers += [course / name for name in INSTRUCTOR_LEFTOVERS]
        leftovers += [lab / ".ipynb_checkpoints" for lab in (course / "source").glob("*")]
    created = [path for path in dict.fromkeys(leftovers) if not path.exists()]
    with tempfile.TemporaryDirectory(prefix="zg-lab-live-") as tmp:
        workdir = Path(tmp)
        browser = None
        try:
            browser = Browser(chromium, args.screenshots)
            if args.first_screens:
                screens, broken = first_screens(
                    browser, workdir, args.scale, args.startup, args.root, args.instructor_root
                )
                report["screens"] = screens
                for s in screens:
                    print(
                        f"lab-live-check: {s['screen']}: "
                        + ("ok" if not s["problems"] else f"{len(s['problems'])} problem(s)")
                    )
            if notebooks:
                with LabServer(
                    "lab", args.root, args.scale, workdir, args.startup, args.screenshots
                ) as server:
                    for nb in notebooks:
                        before = nb.read_bytes()
                        try:
                            r = check_notebook(browser, server, nb, args.timeout)
                        finally:
                            saved = saved_by_jupyterlab(nb, before)
                        if saved:
                            r["problems"].append(saved)
                        report["notebooks"].append(r)
                        status = "ok" if not r["problems"] else f"{len(r['problems'])} problem(s)"
                        print(
                            f"lab-live-check: {nb.name}: {r['cells']} code cells, {r['figures']} "
                            f"figures, {len(r['controls'])} controls moved, {r['seconds']} s: {status}",
                            flush=True,
                        )
                report["server_log_errors"] = server.log_problems(nbgrader_config_line=True)
        except KeyboardInterrupt:
            print(
                "lab-live-check: interrupted; JupyterLab and its kernels were stopped",
                file=sys.stderr,
            )
            return 1
        except RuntimeError as e:
            print(f"lab-live-check: {e}", file=sys.stderr)
            return 2
        finally:
            if browser is not None:
                browser.close()
            for path in created:
                if path.is_dir():
                    shutil.rmtree(path, ignore_errors=True)
                elif path.exists():
                    path.unlink()
    report["seconds"] = round(time.monotonic() - started, 1)
    problems = [p for s in report["screens"] + report["notebooks"] for p in s["problems"]]
    report["problems"], report["checker_problems"] = problems, broken
    if args.json:
        write_text(args.json, json.dumps(report, indent=1) + "\n", name="--json", make_parents=True)
    for p in broken:
        print(f"lab-live-check: the checker cannot be trusted: {p}", file=sys.stderr)
    for p in problems:
        print(f"lab-live-check: FAIL {p}", file=sys.stderr)
    if broken:
        return 2
    print(
        f"lab-live-check: {'passed' if not problems else 'failed'} in {report['seconds']} s "
        f"({len(report['notebooks'])} notebook(s), {len(report['screens'])} first screen(s))"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
