"""The running time each notebook states is the one the report run measured.

``tools/build_report.py --timings notebooks/timings.json`` writes every notebook's running time
to that file and into the notebook's "Running time" line; here the line and the file must agree,
so a typed or stale time fails.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import build_report  # noqa: E402

TIMINGS = ROOT / "notebooks" / "timings.json"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def markdown(path: Path) -> str:
    nb = json.loads(path.read_text())
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_the_running_time_line_reads_the_measured_time(path):
    seconds = json.loads(TIMINGS.read_text())["seconds"]
    assert path.stem in seconds, (
        f"{path.stem} has no time in {TIMINGS.name}: run build_report --timings"
    )
    found = build_report.RUNNING_TIME.findall(markdown(path))
    assert len(found) == 1, (
        f"{path.name}: one 'about N minutes (shared cores; ...)' line, found {found}"
    )
    want = build_report.minutes_text(seconds[path.stem])
    assert f"about {found[0]} minute" in f"about {want}", (path.name, found[0], want)


def test_the_timings_name_their_machine_and_scale():
    doc = json.loads(TIMINGS.read_text())
    assert doc["machine"] and doc["scale"] in ("small", "full")


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(5, "0.5 minutes"), (50, "1 minute"), (100, "1.5 minutes"), (185, "3 minutes")],
)
def test_minutes_are_said_in_half_minutes(seconds, text):
    assert build_report.minutes_text(seconds) == text
