"""The sandboxed grader (zg_course/sandbox.py) is a boundary: a submission can neither forge its
report, read a hidden test before it is due, reach the network, write outside its private
/tmp, exhaust the machine, block the grader, nor outlive it; a correct one still earns every
point; a tampering one earns none; a malformed one is reported and the batch goes on.

The hostile submissions run with the tamper scan off (``run_scan=False``), so what is tested is
the sandbox alone: the scan would have stopped most of them before they ran. Each escape
attempt is a small generated Lab 0 submission: a wrong answer (it earns 0 on its own) plus the
attempt; each must end with 0 points and nothing left behind (no process, no file outside).
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import processes
import pytest

import zg_course.sandbox

ROOT = Path(__file__).resolve().parents[2]

WHY = zg_course.sandbox.available()
needs_sandbox = pytest.mark.skipif(WHY is not None, reason=f"no sandbox here: {WHY}")

LAB = "00_setup"
SOURCE = ROOT / "labs" / "source" / LAB / f"{LAB}.ipynb"
HIDDEN = ROOT / "labs" / "source" / "02_fixed_shape_sampler" / "02_fixed_shape_sampler.ipynb"
WRONG = {  # Lab 0, answered wrongly: 0 points on its own
    "run_report": "report = {}\n",
    "labelled_per_class": "import zg\n\ndef labelled_per_class(g, nodes):\n"
    "    return torch.zeros(1, dtype=torch.int64)\n",
}


def _notebook(tmp_path: Path, cells: dict[str, str]) -> Path:
    nb = json.loads(SOURCE.read_text())
    for c in nb["cells"]:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in cells:
            c["source"] = cells[gid]
    path = tmp_path / f"{LAB}.ipynb"
    path.write_text(json.dumps(nb))
    return path


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
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                pids.append(int(entry.name))
    return pids


def _sandbox_processes() -> list[int]:
    return _running(f"{zg_course.sandbox.THIS} --worker") + _running(
        f"{zg_course.sandbox.THIS} --supervise"
    )


def _gone(marker: str, seconds: float = 10.0) -> bool:
    """True once no process whose command line holds ``marker`` is left (the kernel needs a
    moment to end a PID namespace)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if not _running(marker):
            return True
        time.sleep(0.2)
    return False


# Places a submission must not be able to leave anything in (host paths).
OUTSIDE = ["/run/lock", "/dev/shm", "/tmp", "/var/tmp", str(ROOT), str(ROOT / "labs"),
           str(ROOT / "zg"), os.environ.get("HOME", "/root"), "/etc", "/"]  # fmt: skip


def _left_behind(token: str) -> list[str]:
    found = []
    for place in OUTSIDE:
        try:
            names = os.listdir(place)
        except OSError:
            continue
        found += [f"{place}/{n}" for n in names if token in n]
    return found


# ------------------------------------------------------------------------ escape attempts
# Each: (code put first in the run_report cell, {grade() keywords}); %(token)s is unique.

FORGE = r"""
import glob, json, os
lines = [json.dumps({"grade_id": g, "passed": True}) for g in
         ["test_report", "test_report_hidden", "test_labelled_per_class", "test_labelled_per_class_hidden"]]
lines += [json.dumps({"op": "result", "index": i, "nonce": "0" * 32, "passed": True}) for i in range(12)]
lines += [json.dumps({"end": True, "complete": True, "failure": None})]
data = ("\n".join(lines) + "\n").encode()
for fd in range(0, 1024):
    try:
        os.write(fd, data)
    except OSError:
        pass
for path in glob.glob("/proc/*/fd/*"):
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, data)
        os.close(fd)
    except OSError:
        pass
"""

READ_EARLY = r"""
import gc, glob, linecache, os, sys
needles = ['report["cuda"]' + '.ok ==', "g.y[:30]" + " = -1", "BEGIN HIDDEN" + " TESTS\n"]
found = []
def look(where, text):
    if isinstance(text, (bytes, bytearray)):
        text = text.decode(errors="replace")
    if isinstance(text, str) and any(n in text for n in needles):
        found.append(where)
for o in gc.get_objects():
    if isinstance(o, (str, bytes, bytearray)):
        look("gc", o)
    elif isinstance(o, dict):
        for v in list(o.values()):
            look("gc-dict", v)
f = sys._getframe()
while f is not None:
    for c in f.f_code.co_consts:
        look("frame", c)
    for v in list(f.f_globals.values()) + list(f.f_locals.values()):
        look("frame-var", v)
    f = f.f_back
for key, entry in list(linecache.cache.items()):
    look("linecache", "".join(entry[2]))
for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ") + glob.glob("/proc/*/fd/*"):
    try:  # non-blocking: a pipe reopened through /proc would wait for a writer
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            look(path, os.read(fd, 1 << 20))
        finally:
            os.close(fd)
    except OSError:
        pass
for top, dirs, files in os.walk("/"):
    if top.startswith(("/proc", "/sys", "/dev", "/usr")) or "site-packages" in top:
        dirs[:] = []
        continue
    for name in files:
        if name.endswith((".ipynb", ".json", ".txt")) or "hidden" in name:
            try:
                with open(os.path.join(top, name), "rb") as fh:
                    look(os.path.join(top, name), fh.read(1 << 20))
            except OSError:
                pass
print("FOUND", sorted(set(found)))
"""

WRITE = r"""
import os
for place in %(outside)r:
    for attempt in (lambda p: open(p, "w").write("x"), lambda p: os.mkdir(p)):
        try:
            attempt(os.path.join(place, "zg-escape-%(token)s"))
        except OSError:
            pass
"""

MEMORY = r"""
chunks = []
try:
    while True:
        chunks.append(bytearray(256 << 20))
except MemoryError:
    print("ALLOCATED", len(chunks))
del chunks
"""

FORK_BOMB = r"""
import os, time
n = 0
try:
    while n < 5000:
        if os.fork() == 0:
            try:
                os.fork()
            except OSError:
                pass
            time.sleep(600)
            os._exit(0)
        n += 1
except OSError:
    pass
print("FORKED", n)
"""

FLOOD = r"""
import os
chunk = b"x" * (1 << 20)
for fd in (1, 2):
    for _ in range(200):
        os.write(fd, chunk)
print("y" * (20 << 20))
if os.fork() == 0:
    while True:
        os.write(2, chunk)
"""

ESCAPES = {
    "forge_report_and_exit": (FORGE + "os._exit(0)\n", {}),
    "forge_report_and_go_on": (FORGE, {}),
    "read_hidden_tests_early": (READ_EARLY, {}),
    "write_outside": (WRITE, {}),
    "exhaust_memory": (MEMORY, {"memory_gib": 4}),
    # At the process limit the worker's own threads cannot start (torch waits on one forever):
    # such a run ends at the wall clock, which is short here.
    "fork_bomb": (FORK_BOMB, {"processes": 64, "timeout": 30}),
    "flood_output": (FLOOD, {}),
}


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_an_escape_attempt_gains_nothing_and_leaves_nothing(tmp_path, name):
    token = uuid.uuid4().hex[:12]
    code, kwargs = ESCAPES[name]
    code = code % {"token": token, "outside": OUTSIDE} if "%(" in code else code
    cells = dict(WRONG, run_report=code + "\n" + WRONG["run_report"])
    if name == "read_hidden_tests_early":  # again after a hidden cell ran: still nothing
        cells["labelled_per_class"] = code + "\n" + WRONG["labelled_per_class"]
    began = time.monotonic()
    kwargs = {"timeout": 120, **kwargs}
    report = zg_course.sandbox.grade(_notebook(tmp_path, cells), run_scan=False, **kwargs)
    assert report["total"] > 0 and report["earned"] == 0, (name, report["passed"], report)
    assert name == "fork_bomb" or not report["timed_out"], (name, report.get("failure"))
    assert time.monotonic() - began < 110  # it never blocked the grader until the clock
    out = report["outputs"].get("run_report", "")
    if name == "read_hidden_tests_early":
        for gid in ("run_report", "labelled_per_class"):
            assert "FOUND []" in report["outputs"].get(gid, ""), (gid, report["outputs"])
    if name == "exhaust_memory":  # stopped at the limit (4 GiB), not by the machine
        assert "ALLOCATED" in out and int(out.split("ALLOCATED")[1].split()[0]) <= 16, out
    if name == "fork_bomb":  # stopped at the sandbox's process limit (64 for its own uid)
        if os.geteuid() == 0:
            assert "FORKED" in out and int(out.split("FORKED")[1].split()[0]) < 64, out
            # the clock ran out with the sandbox full: the report says so, naming the flag
            assert "at its process limit then" in report["failure"], report["failure"]
            assert "--processes 64" in report["failure"], report["failure"]
    if name == "flood_output":
        assert len(json.dumps(report)) < 200_000  # the grader kept a bounded tail
    if name.startswith("forge"):
        assert report["failure"], report
    assert _gone(str(zg_course.sandbox.THIS)), f"{name}: a sandbox process outlived the grading"
    assert _left_behind(token) == [], f"{name}: left {_left_behind(token)}"


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL", "timeout"])
def test_nothing_outlives_an_interrupted_or_timed_out_grader(tmp_path, how):
    """The submission starts a detached sleeper and never ends; the grader is interrupted (or
    its clock runs out): no process of the sandbox is left."""
    marker = f"31{uuid.uuid4().int % 10**6}.5"
    code = (
        "import subprocess, os\n"
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
        "if os.fork() == 0:\n    os.setsid()\n"
        f"    os.execvp('sleep', ['sleep', '{marker}7'])\n"
        "while True:\n    pass\n"
    )
    path = _notebook(tmp_path, dict(WRONG, run_report=code))
    timeout = 20 if how == "timeout" else 300
    cmd = [
        sys.executable,
        str(zg_course.sandbox.THIS),
        "--no-scan",
        "--timeout",
        str(timeout),
        str(path),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    began = time.monotonic()
    grader = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        while len(_running(f"sleep {marker}")) < 2:
            assert grader.poll() is None, grader.stdout.read().decode()
            assert time.monotonic() - began < 120, "the submission never started"
            time.sleep(0.2)
        if how != "timeout":
            grader.send_signal(getattr(signal, how))
        out = grader.communicate(timeout=120)[0].decode()
    finally:
        if grader.poll() is None:  # the test failed: nothing of it may outlive the test
            processes.kill_group(grader)
            grader.wait()
    if how == "timeout":
        assert "0 / 5" in out and "wall-clock" in out, out
    assert _gone(f"sleep {marker}"), f"{how}: the submission's sleeper outlived the grader"
    assert _gone(str(zg_course.sandbox.THIS)), f"{how}: a sandbox process outlived the grader"


# Moments of the grader's run, in seconds after it starts (one seeded draw in each 2 s of its
# first 8): its imports (torch's swallows most interrupts; the grader still sees them,
# zg_course.sandbox.watch_interrupts), the checks, the sandbox's start, the submission's cells.
_DRAW = random.Random(59)
INTERRUPT_AT = [round(_DRAW.uniform(start, start + 2.0), 2) for start in (0.0, 2.0, 4.0, 6.0)]


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("delay", INTERRUPT_AT)
def test_an_interrupt_at_any_moment_ends_the_grader_and_leaves_nothing(tmp_path, delay):
    """Issue 59: a SIGINT at a moment drawn over the grader's whole run, not only once the
    submission runs, ends the grader promptly, and nothing of the sandbox is left."""
    marker = f"32{uuid.uuid4().int % 10**6}.5"
    code = (
        "import subprocess\n"
        f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
        "while True:\n    pass\n"
    )
    path = _notebook(tmp_path, dict(WRONG, run_report=code))
    cmd = [sys.executable, str(zg_course.sandbox.THIS), "--no-scan", "--timeout", "300", str(path)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    grader = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        time.sleep(delay)
        grader.send_signal(signal.SIGINT)
        out = grader.communicate(timeout=60)[0].decode()
    finally:
        if grader.poll() is None:  # the test failed: nothing of it may outlive the test
            processes.kill_group(grader)
            grader.wait()
    assert grader.returncode != 0, out[-2000:]  # interrupted, not graded
    assert _gone(f"sleep {marker}"), f"at {delay} s: the submission's sleeper outlived the grader"
    assert _gone(str(zg_course.sandbox.THIS)), f"at {delay} s: a sandbox process outlived it"


# ------------------------------------------------------------------------ what still works


@needs_sandbox
@pytest.mark.slow
def test_a_correct_submission_earns_every_point(tmp_path):
    path = tmp_path / f"{LAB}.ipynb"
    path.write_text(SOURCE.read_text())
    report = zg_course.sandbox.grade(path, timeout=300)
    assert report["total"] > 0 and report["earned"] == report["total"], report.get("failure")
    assert not report["timed_out"] and not report["findings"]


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
_probe("root", lambda: sorted(os.listdir("/")))
_probe("network", lambda: socket.create_connection(("127.0.0.1", %(port)d), timeout=3).close())
_probe("interfaces", lambda: [name for _, name in socket.if_nameindex()])
def _loopback():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    socket.create_connection(server.getsockname(), timeout=3).close()
    return "up"
_probe("loopback", _loopback)
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
@pytest.mark.slow
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
        report = zg_course.sandbox.grade(_submission(tmp_path, code), timeout=300, run_scan=False)
    finally:
        server.close()
    out = report["outputs"]["run_report"]
    probe = json.loads(out.split("PROBE ", 1)[1].splitlines()[0])
    # the hidden tests of another lab, the course, the history: not in the file view at all
    for key in ("hidden_test", "course_listing", "git"):
        assert str(probe[key]).startswith("DENIED"), probe
    # the home holds only the way to the Python interpreter, where it lives there
    prefix = Path(sys.base_prefix)
    way = [prefix.relative_to(home).parts[0]] if prefix.is_relative_to(home) else []
    assert probe["home"] == way or (not way and str(probe["home"]).startswith("DENIED")), probe
    assert "run" not in probe["root"] and "var" not in probe["root"], probe
    # the grader's loopback is not reachable; the sandbox's own loopback is up, nothing else
    assert str(probe["network"]).startswith("DENIED"), probe
    assert probe["interfaces"] == ["lo"] and probe["loopback"] == "up", probe
    assert str(probe["write_course"]).startswith("DENIED"), probe
    assert str(probe["write_repo"]).startswith("DENIED"), probe
    assert probe["write_tmp"] == 1, probe
    assert not (ROOT / "labs" / "planted.txt").exists() and not (ROOT / "planted.txt").exists()
    assert not Path("/tmp/planted.txt").exists()
    # the correct part of it still earns its points: the sandbox does not break grading
    assert report["earned"] == report["total"], report.get("failure")
    assert _gone("313.7") and _gone("313.8"), "a process outlived the grading"


@needs_sandbox
@pytest.mark.slow
def test_it_runs_from_a_clone_in_tmp_whose_git_is_a_file_as_in_a_worktree(tmp_path):
    clone = tmp_path / "clone"
    clone.mkdir()
    for package in ("zg", "zg_course"):
        shutil.copytree(
            ROOT / package, clone / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copytree(ROOT / "data", clone / "data", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(SOURCE.parent, clone / "labs" / "source" / LAB)
    (clone / ".git").write_text("gitdir: /nonexistent/.git/worktrees/clone\n")
    env = dict(os.environ, PYTHONPATH=str(clone))
    sub = clone / "labs" / "source" / LAB / f"{LAB}.ipynb"
    done = processes.run(
        [sys.executable, "-m", "zg_course.sandbox", "--timeout", "300", str(sub)],
        env=env, cwd=clone, capture_output=True, text=True, timeout=400,
    )  # fmt: skip
    assert done.returncode == 0 and ": 5 / 5" in done.stdout, done.stdout + done.stderr


def test_a_tampering_submission_earns_nothing_and_does_not_run(tmp_path):
    code = "import torch\ntorch.equal = lambda a, b: True\n"
    report = zg_course.sandbox.grade(_submission(tmp_path, code), timeout=300)
    assert report["earned"] == 0 and report["total"] > 0
    assert any("torch.equal" in f for f in report["findings"]), report["findings"]
    assert report["failure"].startswith("tamper:")
    assert "seconds" not in report  # it never ran


def test_malformed_submissions_are_reported_one_by_one_and_the_batch_goes_on(tmp_path, capsys):
    (tmp_path / "bad").mkdir()
    not_json = tmp_path / "bad" / f"{LAB}.ipynb"
    not_json.write_text("{ not a notebook")
    (tmp_path / "worse").mkdir()
    wrong_shape = tmp_path / "worse" / f"{LAB}.ipynb"
    wrong_shape.write_text(json.dumps({"cells": [{"cell_type": "code", "source": 3,
                                                  "metadata": {"nbgrader": {"solution": True, "grade_id": "run_report"}}}]}))  # fmt: skip
    missing = tmp_path / "gone" / f"{LAB}.ipynb"
    no_lab = tmp_path / "99_no_such_lab.ipynb"
    no_lab.write_text(SOURCE.read_text())
    (tmp_path / "tamper").mkdir()
    tampering = _submission(tmp_path / "tamper", "import torch\ntorch.equal = lambda a, b: True\n")
    out_json = tmp_path / "grades.json"
    batch = [not_json, wrong_shape, missing, no_lab, tampering]
    status = zg_course.sandbox.main(["--json", str(out_json), *map(str, batch)])
    assert status == 1
    reports = json.loads(out_json.read_text())
    assert [r["submission"] for r in reports] == [str(p.absolute()) for p in batch]
    for r in reports[:4]:
        assert r["failure"].startswith("malformed:") and r["earned"] == 0, r
    assert reports[4]["failure"].startswith("tamper:")  # graded after four malformed ones
    printed = capsys.readouterr().out
    assert printed.count("malformed:") == 4 and "4 of 5 submissions malformed" in printed


@pytest.mark.parametrize("value", ["0", "-1", "inf", "-inf", "nan", "1e400", "soon", ""])
def test_timeout_must_be_a_finite_positive_number(value, capsys):
    with pytest.raises(SystemExit) as exc:
        zg_course.sandbox.main([f"--timeout={value}", str(SOURCE)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--timeout" in err and "number of seconds" in err and "Traceback" not in err, err
    with pytest.raises(ValueError, match="finite number of seconds > 0|number of seconds"):
        zg_course.sandbox.grade(
            SOURCE, timeout=float(value) if value not in ("soon", "") else value
        )


# ------------------------------------------------------------------------ the grader's own code

GRADER_PATCHES = {  # run-time patches that keep Lab 0's model solution right (see
    # tests/course/test_lab_tamper.py): only the worker's integrity check stops them
    "class_attribute": (
        "import unittest.mock, torch, zg_course.labs\n"
        "unittest.mock.patch.object(zg_course.labs.Checks, 'equal',"
        " new=staticmethod(lambda a, b: torch.equal(a, b))).start()\n",
        "zg_course.labs.Checks.equal",
    ),
    "module_function": (
        "import unittest.mock, zg_course.contract\n"
        "_check = zg_course.contract.check\n"
        "unittest.mock.patch('zg_course.contract.check', new=lambda *a, **k: _check(*a, **k)).start()\n",
        "zg_course.contract.check",
    ),
    "builtin": (
        "import unittest.mock\n"
        "_sorted = sorted\n"
        "unittest.mock.patch('builtins.sorted', new=lambda *a, **k: _sorted(*a, **k)).start()\n",
        "builtins.sorted",
    ),
}


@needs_sandbox
@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(GRADER_PATCHES))
def test_a_run_time_patch_of_the_graders_code_earns_nothing_in_the_sandbox(tmp_path, kind):
    code, name = GRADER_PATCHES[kind]
    report = zg_course.sandbox.grade(_submission(tmp_path, code), timeout=300, run_scan=False)
    assert report["total"] > 0 and report["earned"] == 0, (kind, report["passed"])
    assert report["failure"].startswith("tamper: the submission changed the grader's code")
    assert name in report["failure"], report["failure"]


# ------------------------------------------------------------------------ limits and the grader


@pytest.mark.parametrize(
    "flag, value",
    [("--memory", v) for v in ("0", "-2", "nan", "inf", "1e400", "2e6", "lots", "")]
    + [("--processes", v) for v in ("0", "-1", "8", "31", "1e3", "many", "", str(1 << 40))],
)
def test_limit_flags_out_of_range_are_refused_naming_the_flag(flag, value, capsys):
    """Issue 59: a limit no grading can run under (or the kernel cannot set) is the command's
    error, exit 2 naming the flag, not a submission's 0 points."""
    with pytest.raises(SystemExit) as exc:
        zg_course.sandbox.main([f"{flag}={value}", str(SOURCE)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert flag in err and "Traceback" not in err, err
    keyword = {"--memory": "memory_gib", "--processes": "processes"}[flag]
    with pytest.raises(ValueError, match=flag):
        zg_course.sandbox.grade(SOURCE, **{keyword: value})


@needs_sandbox
@pytest.mark.slow
def test_a_lab_failing_before_the_submissions_code_ran_is_not_blamed_on_it(tmp_path, capsys):
    """Issue 59: at 1 GiB of address space the lab's own setup cannot import torch. No code of
    the submission ran yet, so the report says so and names the limits; the command exits 1."""
    path = tmp_path / f"{LAB}.ipynb"
    path.write_text(SOURCE.read_text())
    status = zg_course.sandbox.main(["--memory", "1", "--timeout", "120", str(path)])
    printed = capsys.readouterr().out
    assert status == 1 and "1 of 1 submissions not graded" in printed, printed
    report = zg_course.sandbox.grade(path, memory_gib=1, timeout=120)
    assert report["grader_error"] and report["earned"] == 0, report
    assert report["failure"].startswith("grader: ") and "--memory 1 GiB" in report["failure"]
    assert "not the submission's doing" in report["failure"], report["failure"]


def _threads_by_sandbox_uid() -> dict[int, int]:
    counts: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text() if entry.name.isdigit() else ""
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        uid = int(fields.get("Uid", "0").split()[0])
        if uid >= zg_course.sandbox.SANDBOX_UIDS:
            counts[uid] = counts.get(uid, 0) + int(fields["Threads"])
    return counts


HOG = r"""
import threading, time
n = 0
while True:
    try:
        threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
    except RuntimeError:
        break
    n += 1
print("THREADS", n, flush=True)
time.sleep(600)
"""


@needs_sandbox
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="a sandbox of its own uid needs the grader as root")
def test_a_submission_holding_every_thread_does_not_starve_one_graded_beside_it(tmp_path):
    """Issue 59: the kernel counts processes per uid. With one uid for every sandbox, a
    submission at its process limit left none for another graded beside it, which then timed
    out with 0 points. Each sandbox now has a uid of its own."""
    (tmp_path / "hog").mkdir()
    hog = _notebook(tmp_path / "hog", dict(WRONG, run_report=HOG))
    cmd = [sys.executable, str(zg_course.sandbox.THIS), "--no-scan", "--processes", "64",
           "--timeout", "240", str(hog)]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    grader = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        began = time.monotonic()
        while max(_threads_by_sandbox_uid().values(), default=0) < 60:
            assert grader.poll() is None, grader.stdout.read().decode()
            assert time.monotonic() - began < 120, "the hog never reached its process limit"
            time.sleep(0.2)
        fair = tmp_path / f"{LAB}.ipynb"
        fair.write_text(SOURCE.read_text())
        report = zg_course.sandbox.grade(fair, processes=64, timeout=120)
        assert report["earned"] == report["total"] > 0, report.get("failure")
        assert max(_threads_by_sandbox_uid().values(), default=0) >= 60, "the hog let go early"
    finally:
        processes.kill_group(grader)
        grader.wait()
    assert _gone(str(zg_course.sandbox.THIS)), "a sandbox process outlived the grading"


FLOOD_EVENTS = r"""
import json, os, socket
fd = int(open("/proc/self/cmdline", "rb").read().split(b"\0")[-2])  # the worker's socket
sock = socket.socket(fileno=os.dup(fd))
message = (json.dumps({"op": "output", "index": 0, "output": "x" * 4000}) + "\n").encode()
for _ in range(%(count)d):  # output for an ungraded cell already sent: allowed, again and again
    sock.sendall(message)
sock.detach()
"""

PEAK = (
    "import resource, sys, zg_course.sandbox as s\n"
    "r = s.grade(sys.argv[1], run_scan=False, timeout=300)\n"
    "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, r['earned'])\n"
)


@needs_sandbox
@pytest.mark.slow
def test_the_graders_memory_does_not_grow_with_what_the_submission_sends(tmp_path):
    """Issue 59: the grader (outside the sandbox) kept every event the supervisor forwarded:
    about 200 MB more for 200 MB of output messages. It now keeps one output per cell. Its
    peak memory with 50,000 messages of 4 kB is measured against the same submission sending
    10, in fresh processes."""
    peaks = {}
    for count in (10, 50_000):
        (tmp_path / str(count)).mkdir()
        code = FLOOD_EVENTS % {"count": count}
        path = _notebook(tmp_path / str(count), dict(WRONG, run_report=code + WRONG["run_report"]))
        done = processes.run(
            [sys.executable, "-c", PEAK, str(path)], env=dict(os.environ, PYTHONPATH=str(ROOT)),
            capture_output=True, text=True, timeout=400,
        )  # fmt: skip
        assert done.returncode == 0 and "PEAK" in done.stdout, done.stdout + done.stderr
        peak_kib, earned = done.stdout.split("PEAK")[1].split()[:2]
        assert float(earned) == 0  # the wrong answer still earns nothing
        peaks[count] = int(peak_kib) * 1024
    grown = peaks[50_000] - peaks[10]
    assert grown < 40 << 20, f"the grader grew by {grown / 2**20:.0f} MiB with 200 MB of events"
