#!/usr/bin/env python
"""Execute notebooks and write each as a self-contained HTML report (what `make report` runs).

    python tools/build_report.py --scale full --out reports notebooks/*.ipynb
    python tools/build_report.py --scale small notebooks/02_envelopes.ipynb   # CI size
    python tools/build_report.py --scale small --execute-only notebooks/*.ipynb labs/source/*/*.ipynb

Each notebook runs top to bottom in a fresh kernel of this interpreter, in the notebook's own
folder, with ``ZG_SCALE`` set to ``--scale`` (the notebooks read it through
zg.experiments.scale()), and is exported with tools/report_template/ (JupyterLab's look, no CDN
scripts; see that template). Widget state is left out of the page: a static page has no kernel to drive a
widget, and zg.viz.explore() gives every control a static stand-in instead.

After writing a report this script checks it statically: plotly.js is embedded inline, and no
script or stylesheet is loaded from the network (cdn.plot.ly or anywhere else). Open the
reports in a real browser with tools/report_check.py (`make report-check`).

``--timings notebooks/timings.json`` writes each notebook's running time (seconds, with the
machine note) to that file and the same time, in minutes, into the notebook's own "Running
time" line: the times the notebooks state are this run's, never typed
(tests/docs/test_notebook_timings.py checks the lines agree with the file).

``--execute-only`` runs the notebooks the same way and writes nothing: what `make report-modern`
does in the modern environment (no DGL, no nbconvert), where the question is only whether every
cell runs.

Exit status: 0 if every notebook ran and every report passed; 1 otherwise (the others are
still written, so one failure does not hide the rest).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
TEMPLATE = "report_template"  # tools/report_template/: JupyterLab's look, offline
# plotly.js announces itself in its first lines ("plotly.js v3.1.0"), whatever the version.
PLOTLYJS_BANNER = re.compile(r"plotly\.js v\d+\.\d+\.\d+")
REMOTE_LOAD = re.compile(
    r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.IGNORECASE
)


def static_problems(text: str) -> list:
    """What makes a report depend on the network or miss plotly.js (empty list: fine)."""
    problems = []
    if not PLOTLYJS_BANNER.search(text):
        problems.append("plotly.js is not embedded (no 'plotly.js vX.Y.Z' banner)")
    if "cdn.plot.ly" in text and re.search(r"src\s*=\s*[\"'][^\"']*cdn\.plot\.ly", text):
        problems.append("loads plotly.js from cdn.plot.ly")
    for match in REMOTE_LOAD.finditer(text):
        problems.append(f"loads from the network: {match.group(0)[:120]}...")
    return problems


class _Stalled(Exception):
    """The kernel stopped answering (a timeout, a dead kernel): worth one more try."""


def build(
    notebook: Path, out_dir: Path, scale: str, timeout: int, retries: int = 1, html: bool = True
) -> tuple:
    """Execute one notebook and write out_dir/<stem>.html. Returns (ok, seconds, message).

    ``html=False``: execute only; nothing is written and nbconvert is not needed.

    A run that fails because the kernel stopped answering (a per-cell timeout or a dead
    kernel, not an error raised by the notebook's own code) is retried ``retries`` times in a
    fresh kernel: on a busy shared machine a kernel occasionally never answers one request.
    """
    start = time.perf_counter()
    for attempt in range(retries + 1):
        try:
            return _build_once(notebook, out_dir, scale, timeout, html)
        except _Stalled as exc:
            print(
                f"report: {notebook}: {exc}; "
                + ("retrying in a fresh kernel" if attempt < retries else "giving up"),
                file=sys.stderr,
                flush=True,
            )
            stalled = exc
    return False, time.perf_counter() - start, f"execution stopped (no report written): {stalled}"


def _build_once(notebook: Path, out_dir: Path, scale: str, timeout: int, html: bool) -> tuple:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError
    from traitlets.config import Config

    nb = nbformat.read(notebook, as_version=4)
    os.environ["ZG_SCALE"] = scale
    os.environ.setdefault("DGLBACKEND", "pytorch")
    # A report is unattended: no progress bars in its saved outputs (zg.experiments._progress).
    os.environ.setdefault("ZG_PROGRESS", "0")
    start = time.perf_counter()
    ok, message = True, "ok"
    # The kernel talks over Unix sockets in a private folder, not TCP ports on localhost:
    # picking "free" ports races with every other kernel being started on a shared machine,
    # and a lost race leaves the client waiting on a kernel that never hears it.
    with tempfile.TemporaryDirectory(prefix="zg-report-kernel-") as sockets:
        config = Config(
            {"KernelManager": {"transport": "ipc", "ip": os.path.join(sockets, "kernel")}}
        )
        # Widget state is recorded (nbclient's Output-widget handling needs it), dropped below.
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            allow_errors=False,
            store_widget_state=True,
            record_timing=False,
            config=config,
            resources={"metadata": {"path": str(notebook.parent.resolve())}},
        )
        try:
            client.execute()
        except CellTimeoutError as exc:
            raise _Stalled(f"a cell timed out after {timeout} s: {str(exc)[:200]}") from None
        except DeadKernelError as exc:
            raise _Stalled(f"the kernel died: {exc}") from None
        except AssertionError:  # nbclient's own check when kernel_info gets no answer in time
            raise _Stalled(f"the kernel did not answer kernel_info within {timeout} s") from None
        except CellExecutionError as exc:
            ok, message = False, f"a cell failed:\n{exc}"
        except Exception as exc:  # anything else: still write what ran
            ok, message = False, f"execution stopped: {type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - start
    if not html:
        return ok, seconds, message
    from nbconvert import HTMLExporter

    nb.metadata.pop("widgets", None)
    exporter = HTMLExporter(
        extra_template_basedirs=[str(HERE)], template_name=TEMPLATE, theme="light"
    )
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": notebook.stem}})
    from zg._io import atomic_write  # here: report_check imports this module without torch

    atomic_write(
        out_dir / f"{notebook.stem}.html", lambda f: f.write(body), text=True, make_parents=True
    )
    problems = static_problems(body)
    if problems:
        ok = False
        message = (message + "\n" if message != "ok" else "") + "; ".join(problems)
    return ok, seconds, message


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=Path("reports"))
    ap.add_argument(
        "--scale",
        choices=("small", "full"),
        default="full",
        help="ZG_SCALE for the notebooks (default: full)",
    )
    ap.add_argument(
        "--timeout",
        type=int,
        default=None,
        help="seconds per cell (default: 120 at small scale, 3600 at full)",
    )
    ap.add_argument(
        "--execute-only",
        action="store_true",
        help="run every cell (a failing cell fails), write no HTML (make report-modern)",
    )
    ap.add_argument(
        "--timings",
        type=Path,
        help="write each notebook's running time to this JSON file and into its Running time "
        "line (notebooks/timings.json)",
    )
    args = ap.parse_args(argv)
    # Where the reports and times go is checked before any notebook runs (a file as --out, a
    # folder, FIFO or dangling link as --timings: one line naming the flag, exit 2).
    from zg._checks import output_folder_arg
    from zg._io import command_output_arg

    if not args.execute_only:
        try:
            output_folder_arg(args.out, "--out")
        except (TypeError, ValueError) as exc:
            ap.error(str(exc))
    command_output_arg(ap, args.timings, "--timings")
    if args.timeout is None:
        # At CI size every cell finishes in seconds, so a short timeout turns the rare stalled
        # kernel (see build()) into a quick retry rather than a long wait.
        args.timeout = 120 if args.scale == "small" else 3600
    failures = 0
    times = {}
    for notebook in args.notebooks:
        if not notebook.exists():
            print(f"report: {notebook} does not exist", file=sys.stderr)
            failures += 1
            continue
        ok, seconds, message = build(
            notebook,
            args.out,
            args.scale,
            args.timeout,
            retries=3 if args.scale == "small" else 1,
            html=not args.execute_only,
        )
        times[notebook] = seconds
        status = "ok" if ok else "FAILED"
        where = "executed" if args.execute_only else f"-> {args.out / (notebook.stem + '.html')}"
        print(
            f"report: {notebook} {where}  [{status}, {seconds:.0f} s, ZG_SCALE={args.scale}]",
            flush=True,
        )
        if not ok:
            failures += 1
            print(message, file=sys.stderr)
    if failures:
        print(f"report: {failures} of {len(args.notebooks)} notebook(s) failed", file=sys.stderr)
    elif args.timings:
        write_timings(args.timings, times, args.scale)
    return 1 if failures else 0


# The "Running time" line of each notebook: "about N minutes (shared cores; ...)", N read from
# notebooks/timings.json, rounded to half a minute.
RUNNING_TIME = re.compile(
    r"about (\d+(?:\.\d+)?) minutes?(?= \(shared cores; quiet cores take less\))"
)


def minutes_text(seconds: float) -> str:
    """Seconds as the Running time line says them: half minutes, at least half a minute."""
    halves = max(1, round(seconds / 30))
    value = halves / 2
    return f"{value:g} minute" + ("" if value == 1 else "s")


def write_timings(path: Path, times: dict, scale: str) -> None:
    """notebooks/timings.json, and each notebook's Running time line from it."""
    import json

    sys.path.insert(0, str(HERE.parent))
    from zg.experiments.machine import machine_note

    doc = {"machine": machine_note(), "scale": scale, "command": " ".join(sys.argv)}
    doc["seconds"] = {nb.stem: round(sec, 1) for nb, sec in sorted(times.items())}
    old = json.loads(path.read_text()) if path.exists() else {}
    doc["seconds"] = {**old.get("seconds", {}), **doc["seconds"]}
    from zg._io import write_text  # the kit's one writer: a link kept, all or nothing

    write_text(path, json.dumps(doc, indent=1) + "\n", name="--timings")
    for nb_path, sec in times.items():
        nb = json.loads(nb_path.read_text())
        changed = False
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            text = "".join(cell["source"])
            new = RUNNING_TIME.sub(f"about {minutes_text(sec)}", text, count=1)
            if new != text:
                cell["source"] = new.splitlines(keepends=True)
                changed = True
                break
        if changed:
            write_text(
                nb_path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n", name="notebook"
            )
    print(f"report: running times written to {path} and the notebooks' Running time lines")


if __name__ == "__main__":
    sys.exit(main())
