"""The sandboxed grader (tools/labs_sandbox.py): a submission can neither read a hidden test, nor
reach the network, nor write outside its scratch directory, nor leave a process running; a
correct one still earns every point; a tampering one earns none.

The hostile submission runs with the tamper scan off (``run_scan=False``), so what is tested is
the sandbox alone: the scan would have stopped it before it ran.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import labs_sandbox  # noqa: E402

pytestmark = pytest.mark.slow

WHY = labs_sandbox.available()
needs_sandbox = pytest.mark.skipif(WHY is not None, reason=f"no sandbox here: {WHY}")

LAB = "00_setup"
SOURCE = ROOT / "labs" / "source" / LAB / f"{LAB}.ipynb"
HIDDEN = ROOT / "labs" / "source" / "02_fixed_shape_sampler" / "02_fixed_shape_sampler.ipynb"


def _submission(tmp_path: Path, before: str, cell: str = "run_report") -> Path:
    """Lab 0's model solution with ``before`` run first in ``cell``: a correct answer that also
    does what ``before`` does."""
    nb = json.loads(SOURCE.read_text())
    for c in nb["cells"]:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == cell:
            c["source"] = before + "\n" + "".join(c["source"])
    path = tmp_path / f"{LAB}.ipynb"
    path.write_text(json.dumps(nb))
    return path


def _running(marker: str) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                pids.append(int(entry.name))
    return pids


PROBE = """
import json, os, socket, subprocess
probe = {}
def _probe(name, fn):
    try:
        probe[name] = fn()
    except BaseException as exc:
        probe[name] = "DENIED " + type(exc).__name__
_probe("hidden_test", lambda: len(open(%(hidden)r).read()))
_probe("course_listing", lambda: sorted(os.listdir(%(course)r)))
_probe("git", lambda: sorted(os.listdir(%(git)r)))
_probe("home", lambda: sorted(os.listdir(%(home)r)))
_probe("network", lambda: socket.create_connection(("127.0.0.1", %(port)d), timeout=3).close())
_probe("write_course", lambda: open(%(course)r + "/planted.txt", "w").write("x"))
_probe("write_repo", lambda: open(%(repo)r + "/planted.txt", "w").write("x"))
_probe("write_tmp", lambda: open("/tmp/planted.txt", "w").write("x"))
subprocess.Popen(["sleep", "313.7"], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    os.execvp("sleep", ["sleep", "313.8"])
print("PROBE " + json.dumps(probe))
"""


@needs_sandbox
def test_a_correct_submission_earns_every_point(tmp_path):
    path = tmp_path / f"{LAB}.ipynb"
    path.write_text(SOURCE.read_text())
    report = labs_sandbox.grade(path, timeout=300)
    assert report["total"] > 0 and report["earned"] == report["total"], report.get("failure")
    assert not report["timed_out"] and not report["findings"]


@needs_sandbox
def test_a_hostile_submission_reads_nothing_reaches_nothing_and_leaves_nothing(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    port = server.getsockname()[1]
    home = os.environ.get("HOME", "/root")
    code = PROBE % dict(
        hidden=str(HIDDEN), course=str(ROOT / "labs"), git=str(ROOT / ".git"), home=home,
        port=port, repo=str(ROOT),
    )  # fmt: skip
    try:
        report = labs_sandbox.grade(_submission(tmp_path, code), timeout=300, run_scan=False)
    finally:
        server.close()
    out = report["outputs"]["run_report"]
    probe = json.loads(out.split("PROBE ", 1)[1].splitlines()[0])
    # the hidden tests of another lab, the course, the history, the home: not there
    assert str(probe["hidden_test"]).startswith("DENIED"), probe
    assert probe["course_listing"] == [] and probe["git"] == [], probe
    # the home is empty but for the way to the Python interpreter, where it lives there
    prefix = Path(sys.base_prefix)
    way = [prefix.relative_to(home).parts[0]] if prefix.is_relative_to(home) else []
    assert probe["home"] == way, probe
    # no network, no writes outside the sandbox's own /tmp
    assert str(probe["network"]).startswith("DENIED"), probe
    assert str(probe["write_course"]).startswith("DENIED"), probe
    assert str(probe["write_repo"]).startswith("DENIED"), probe
    assert probe["write_tmp"] == 1, probe
    assert not (ROOT / "labs" / "planted.txt").exists() and not (ROOT / "planted.txt").exists()
    assert not Path("/tmp/planted.txt").exists()
    # the correct part of it still earns its points: the sandbox does not break grading
    assert report["earned"] == report["total"], report.get("failure")
    time.sleep(0.5)
    assert _running("313.7") == [] and _running("313.8") == [], "a process outlived the grading"


@needs_sandbox
def test_a_submission_that_never_ends_is_killed_with_everything_it_started(tmp_path):
    code = 'import subprocess\nsubprocess.Popen(["sleep", "313.9"], start_new_session=True)\nwhile True:\n    pass\n'
    began = time.monotonic()
    report = labs_sandbox.grade(_submission(tmp_path, code), timeout=20, run_scan=False)
    assert report["timed_out"] and report["earned"] == 0, report
    assert "wall-clock" in report["failure"]
    assert time.monotonic() - began < 60
    time.sleep(0.5)
    assert _running("313.9") == [], "a process outlived the wall-clock limit"


def test_a_tampering_submission_earns_nothing_and_does_not_run(tmp_path):
    code = "import torch\ntorch.equal = lambda a, b: True\n"
    report = labs_sandbox.grade(_submission(tmp_path, code), timeout=300)
    assert report["earned"] == 0 and report["total"] > 0
    assert any("torch.equal" in f for f in report["findings"]), report["findings"]
    assert report["failure"].startswith("tamper:")
    assert "seconds" not in report  # it never ran


def test_timeout_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit):
        labs_sandbox.main(["--timeout", "0", str(SOURCE)])
    assert "--timeout must be positive" in capsys.readouterr().err
