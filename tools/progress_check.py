"""Which long notebook cells show progress while they run (issue: "notebooks show progress on
long cells").

Executes each notebook as a person's JupyterLab would, with bars on (``ZG_PROGRESS=1``; the
kit's switch, zg/_progress_switch.py), at ``--scale`` (default small, CI size), and reads back
per code cell: its seconds (nbclient's recorded execute_input and execute_reply times) and
whether it showed progress before it ended: a tqdm widget (ipywidgets' progress model in the
recorded widget state, displayed by the cell) or a text bar on stderr (``%|``). A cell is
*long* when it takes at least ``--share`` of its notebook's run time and at least ``--min-seconds``;
a long cell without progress is a finding, except a notebook's setup cell: one that imports and
calls nothing but the setup calls in ``SETUP_CALLS`` (its seconds are the libraries' import,
the same at every scale, where a measurement's grow with it; it is listed, marked "setup").
Prints one line per long cell and a summary, writes
``--json`` if given, and exits 1 on a finding.

    .venv/bin/python tools/progress_check.py notebooks/*.ipynb --json /tmp/progress.json
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

SETUP_CALLS = {
    "os.environ.setdefault",
    "warnings.filterwarnings",
    "print",
    "zg.viz.setup_notebook",
    "ex.machine_note",
    "ex.machine_label",
}
BAR_TEXT = re.compile(r"\d+%\|")
PROGRESS_MODELS = {"FloatProgressModel", "IntProgressModel"}


def _seconds(cell: dict) -> float | None:
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return None
    parse = dt.datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))).total_seconds()


def _progress_widgets(nb: dict) -> set[str]:
    """Model ids of the displayed boxes that hold a progress bar (tqdm.auto's widget)."""
    state = nb.get("metadata", {}).get("widgets", {})
    models = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    bars = {k for k, m in models.items() if m.get("model_name") in PROGRESS_MODELS}
    boxes = set(bars)
    for k, m in models.items():
        children = m.get("state", {}).get("children", [])
        if any(str(c).removeprefix("IPY_MODEL_") in bars for c in children):
            boxes.add(k)
    return boxes


def shows_progress(cell: dict, boxes: set[str]) -> bool:
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream" and out.get("name") == "stderr":
            if BAR_TEXT.search("".join(out.get("text", ""))):
                return True
        view = out.get("data", {}).get("application/vnd.jupyter.widget-view+json")
        if view and view.get("model_id") in boxes:
            return True
    return False


def is_setup(source: str) -> bool:
    """A cell that imports and makes only :data:`SETUP_CALLS`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    imports = any(isinstance(n, ast.Import | ast.ImportFrom) for n in tree.body)
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    return imports and calls <= SETUP_CALLS


def long_cells(nb: dict, share: float, min_seconds: float) -> list[dict]:
    """One row per long code cell: index, seconds, share of the notebook, progress shown."""
    code = [(i, c) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code"]
    times = {i: _seconds(c) or 0.0 for i, c in code}
    total = sum(times.values()) or 1.0
    boxes = _progress_widgets(nb)
    rows = []
    for i, c in code:
        if times[i] >= min_seconds and times[i] / total >= share:
            rows.append(
                {
                    "cell": i,
                    "seconds": round(times[i], 2),
                    "share": round(times[i] / total, 3),
                    "progress": shows_progress(c, boxes),
                    "setup": is_setup("".join(c["source"])),
                    "first_line": "".join(c["source"]).splitlines()[0][:80] if c["source"] else "",
                }
            )
    return rows


def execute(path: Path, scale: str, timeout: int, retries: int = 1) -> dict:
    """The notebook executed; a kernel that stops answering (a timeout, a dead kernel, no
    answer to kernel_info: tools/build_report.py's stalls) is given ``retries`` more tries."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError

    for attempt in range(retries + 1):
        try:
            return _execute_once(path, scale, timeout)
        except (CellTimeoutError, DeadKernelError, AssertionError, RuntimeError) as exc:
            if attempt == retries:
                raise
            print(f"{path.stem}: the kernel stopped answering ({exc!s:.80}); again", flush=True)
    raise AssertionError("unreachable")


def _execute_once(path: Path, scale: str, timeout: int) -> dict:
    import nbformat
    from nbclient import NotebookClient
    from traitlets.config import Config

    nb = nbformat.read(path, as_version=4)
    # The kernel's own environment; this process's is left as it was (a caller, pytest
    # among them, keeps its switches).
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env.update(ZG_SCALE=scale, ZG_PROGRESS="1")
    env.setdefault("DGLBACKEND", "pytorch")
    with tempfile.TemporaryDirectory(prefix="zg-progress-kernel-") as sockets:
        config = Config(
            {"KernelManager": {"transport": "ipc", "ip": os.path.join(sockets, "kernel")}}
        )
        NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="python3",
            store_widget_state=True,
            record_timing=True,
            config=config,
            resources={"metadata": {"path": str(path.parent.resolve())}},
        ).execute(env=env)
    return nb


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument("--scale", default="small")
    ap.add_argument("--share", type=float, default=0.10, help="a long cell's least share (0.10)")
    ap.add_argument("--min-seconds", type=float, default=1.0, help="and least seconds (1.0)")
    ap.add_argument("--timeout", type=int, default=180, help="per cell, seconds (180)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    if not 0 < args.share <= 1:
        ap.error(f"--share must be in (0, 1], got {args.share}")
    report, missing = {}, 0
    for path in args.notebooks:
        start = time.perf_counter()
        nb = execute(path, args.scale, args.timeout)
        rows = long_cells(nb, args.share, args.min_seconds)
        report[path.stem] = {"seconds": round(time.perf_counter() - start, 1), "long_cells": rows}
        for r in rows:
            missing += not (r["progress"] or r["setup"])
            mark = "progress" if r["progress"] else "setup" if r["setup"] else "SILENT"
            print(
                f"{path.stem} cell [{r['cell']}]: {r['seconds']:.1f} s "
                f"({r['share']:.0%} of the notebook) {mark}: {r['first_line']}",
                flush=True,
            )
    rows = [r for v in report.values() for r in v["long_cells"] if not r["setup"]]
    shown = sum(r["progress"] for r in rows)
    print(
        f"progress_check: {shown} of {len(rows)} long cell(s) show progress, setup cells apart "
        f"({args.scale} scale)"
    )
    if args.json:
        args.json.write_text(
            json.dumps({"scale": args.scale, "share": args.share, "notebooks": report}, indent=1)
        )
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
