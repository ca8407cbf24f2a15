#!/usr/bin/env python
"""Grade each lab submission in a sandbox: its own namespaces, another user, no network.

nbgrader runs a submission in the instructor's account: its code can read every lab's hidden
tests under ``source/``, the gradebook and the instructor's home, write beside them, open
network connections, and leave a process running after grading. This tool grades one
submission (a student's ``NN_name.ipynb``, as nbgrader collects it) so that it can do none of
that:

* the tamper scan (``tools/labs_tamper.py``) reads the submission's cells first; a finding
  earns no points and the submission does not run;
* the submission runs with the lab's locked cells (setup, tests, hidden tests taken from
  ``source/``, never from the submission), cell by cell, in a child process started by
  ``unshare`` in new mount, PID, network, IPC and UTS namespaces;
* in there, before any cell runs: the course directory (``source/``, the gradebook,
  ``submitted/``, ...), the repository's ``.git``, the instructor's home and ``/root`` are
  covered by empty file systems; ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh and
  private; the repository (the kit and its environments) is read-only; the network namespace
  has no interface up; a root caller switches to the user
  ``nobody`` (uid 65534) with no groups, so nothing the instructor's account owns is writable;
* a wall-clock limit (``--timeout``, default 600 s) kills the sandbox, and the end of the
  sandbox's first process ends every process the submission started: the kernel kills a PID
  namespace whole.

The Python interpreter and the kit stay readable (they are what the lab runs on): where the
interpreter lives under a covered path (a pyenv in the home), it is mounted back, read-only.
A caller that is not root runs in a user namespace (``unshare --user --map-root-user``)
where the kernel allows it: everything above but the switch of user.

What it cannot stop: the submission runs in one process with this lab's own hidden tests, which
arrive cell by cell after it, so a submission that slipped past the scan could read them as
they run or forge its report. It could not send them anywhere, keep them, or see another lab's.
``docs/course/running_the_course.md`` says the same.

    python tools/labs_sandbox.py labs/submitted/alice/02_fixed_shape_sampler/02_fixed_shape_sampler.ipynb
    python tools/labs_sandbox.py --json grades.json --timeout 300 SUBMISSION.ipynb [...]
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tools") not in sys.path:
    sys.path.insert(0, str(ROOT / "tools"))

from labs_grade import Cell, code_cells, lab_source
from labs_tamper import scan

NOBODY = 65534
OUTPUT_LIMIT = 4000  # characters of each cell's output kept in the report
ENV_KEEP = ("PATH", "LANG", "LC_ALL", "DGLBACKEND", "PYTHONHASHSEED", "OMP_WAIT_POLICY", "TZ")


def available() -> str | None:
    """None when this machine can run the sandbox, else why not."""
    if sys.platform != "linux":
        return f"the sandbox needs Linux namespaces (this is {sys.platform})"
    if shutil.which("unshare") is None:
        return "the sandbox needs util-linux's `unshare`, which is not on PATH"
    probe = [*_unshare(), "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare` does not run here: {exc}"
    if done.returncode != 0:
        return f"`unshare` may not create namespaces here: {done.stderr.decode().strip()}"
    return None


def _unshare() -> list[str]:
    cmd = ["unshare", "--fork", "--pid", "--mount-proc", "--net", "--mount", "--ipc", "--uts"]
    cmd.append("--kill-child=SIGKILL")
    if os.geteuid() != 0:
        cmd += ["--user", "--map-root-user"]
    return cmd


def submission_cells(source: Path, submission: Path) -> tuple[list[Cell], dict[str, str]]:
    """The lab's cells with the student's solution cells in place (as nbgrader's autograde: the
    locked cells come from ``source``), and {grade_id: the student's code}."""
    cells = code_cells(source)
    nb = json.loads(Path(submission).read_text())
    theirs = {}
    for c in nb.get("cells", []):
        meta = c.get("metadata", {}).get("nbgrader", {})
        if c.get("cell_type") == "code" and meta.get("solution") and meta.get("grade_id"):
            src = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
            theirs[meta["grade_id"]] = src
    merged = []
    for cell in cells:
        if cell.solution:
            code = theirs.get(cell.grade_id, "raise NotImplementedError('cell missing')\n")
            theirs.setdefault(cell.grade_id, code)
            cell = Cell(cell.index, cell.grade_id, code, True, cell.points)
        merged.append(cell)
    return merged, theirs


def _hidden_paths(course: Path) -> list[Path]:
    paths = [course.resolve(), ROOT / ".git", Path("/root")]
    home = os.environ.get("HOME")
    if home:
        paths.append(Path(home).resolve())
    return [p for p in dict.fromkeys(paths) if p.exists()]


def grade(submission: Path, *, course: Path = ROOT / "labs", lab: str | None = None,
          timeout: float = 600.0, run_scan: bool = True) -> dict:  # fmt: skip
    """Grade one submission in the sandbox: {lab, points, earned, passed, findings, ...}."""
    submission = Path(submission).resolve()
    lab = lab or submission.stem
    source = lab_source(course, lab)
    cells, theirs = submission_cells(source, submission)
    report = {"submission": str(submission), "lab": lab, "findings": [], "timed_out": False}
    report["points"] = {c.grade_id: c.points for c in cells if c.graded}
    report["passed"] = {g: False for g in report["points"]}
    report["outputs"] = {}
    if run_scan:
        setup = [c.source for c in cells if not c.solution and not c.graded]
        tests = [c.source for c in cells if c.graded]
        report["findings"] = [str(f) for f in scan(theirs, setup, tests)]
    if report["findings"]:
        report["failure"] = f"tamper: {report['findings'][0]}"
        return _totals(report)
    why = available()
    if why:
        raise SystemExit(f"labs_sandbox: {why}")
    spec_dir = Path(tempfile.mkdtemp(prefix="zg-sandbox-spec-"))
    os.chmod(spec_dir, 0o700)
    try:
        spec = {
            "cells": [c.__dict__ for c in cells],
            "hide": [str(p) for p in _hidden_paths(course)] + [str(spec_dir)],
            "python_prefix": [sys.base_prefix, sys.base_exec_prefix],
            "readonly": [str(ROOT)],
            "drop_to": NOBODY if os.geteuid() == 0 else None,
        }
        (spec_dir / "spec.json").write_text(json.dumps(spec))
        read_fd, write_fd = os.pipe()
        env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
        cmd = [*_unshare(), sys.executable, str(Path(__file__).resolve()), "--inside"]
        cmd += [str(spec_dir / "spec.json"), str(write_fd)]
        began = time.monotonic()
        proc = subprocess.Popen(
            cmd, pass_fds=(write_fd,), env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(write_fd)
        lines, buffer = [], b""
        while True:
            left = timeout - (time.monotonic() - began)
            if left <= 0:
                report["timed_out"] = True
                break
            ready, _, _ = select.select([read_fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(read_fd, 65536)
                if not chunk:
                    break
                buffer += chunk
                *done, buffer = buffer.split(b"\n")
                lines.extend(done)
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the sandbox's first process: the namespace ends
        except ProcessLookupError:
            pass
        _, stderr = proc.communicate()
        os.close(read_fd)
        report["seconds"] = round(time.monotonic() - began, 2)
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            gid = event.get("grade_id")
            if gid in report["passed"]:
                report["passed"][gid] = bool(event.get("passed"))
            if gid and event.get("output"):
                report["outputs"][gid] = event["output"]
            if event.get("error") and "failure" not in report:
                report["failure"] = f"{gid}: {event['error']}"
        if report["timed_out"]:
            report["passed"] = {g: False for g in report["passed"]}
            report["failure"] = f"killed at the {timeout:g} s wall-clock limit"
        elif not lines:
            report["failure"] = "the sandbox did not start: " + stderr.decode()[-400:].strip()
    finally:
        shutil.rmtree(spec_dir, ignore_errors=True)
    return _totals(report)


def _totals(report: dict) -> dict:
    report["total"] = sum(report["points"].values())
    report["earned"] = sum(p for g, p in report["points"].items() if report["passed"].get(g))
    return report


# ----------------------------------------------------------------------------- inside the sandbox


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


FRESH = ("/tmp", "/var/tmp", "/dev/shm")  # private and empty in the sandbox


def _enter(spec: dict) -> Path:
    """Build the sandbox's view of the files (we are root in the new mount namespace) and drop
    to the unprivileged user; returns the scratch directory the cells run in.

    What must stay readable (the interpreter, the repository with the kit and its environment)
    may lie under a covered path (a pyenv in the home; a clone in /tmp): it is bound to a
    staging point first, then bound back, read-only, once the covers are in place.
    """
    hide = [Path(h) for h in spec["hide"] if Path(h).exists()]
    covers = hide + [Path(f) for f in FRESH if Path(f).is_dir()]
    keep = [Path(k) for k in dict.fromkeys(spec["python_prefix"] + spec["readonly"])]
    staged = []
    for i, path in enumerate(keep):
        if any(path.is_relative_to(c) for c in covers):
            if not staged:
                _mount("-t", "tmpfs", "-o", "size=64k,mode=700", "tmpfs", "/dev/shm")
            target = Path("/dev/shm") / f"keep-{i}"
            target.mkdir()
            _mount("--bind", str(path), str(target))
            staged.append((path, target))
    staged_paths = {p for p, _ in staged}
    for path in spec["readonly"]:  # the kit, its environment: readable, never writable
        if Path(path) not in staged_paths:
            _mount("--bind", path, path)
            _mount("-o", "remount,bind,ro", path)
    # Covers and staged paths nest (a pyenv under a covered home; labs/ under a clone in a
    # fresh /tmp): outer ones first, so each lands on top of the one that holds it.
    steps = [(c, "fresh" if str(c) in FRESH else "cover") for c in covers if str(c) != "/dev/shm"]
    steps += [(p, "keep") for p, _ in staged]
    targets = dict(staged)
    for path, kind in sorted(steps, key=lambda step: len(step[0].parts)):
        if kind == "keep":  # back where it was, read-only
            path.mkdir(parents=True, exist_ok=True)
            _mount("--bind", str(targets[path]), str(path))
            _mount("-o", "remount,bind,ro", str(path))
        elif kind == "fresh":
            _mount("-t", "tmpfs", "-o", "size=1g,mode=1777", "tmpfs", str(path))
        else:
            path.mkdir(parents=True, exist_ok=True)
            _mount("-t", "tmpfs", "-o", "size=64k,mode=755", "tmpfs", str(path))
    for path in hide:
        _mount("-o", "remount,ro", str(path))
    _mount("-t", "tmpfs", "-o", "size=1g,mode=1777", "tmpfs", "/dev/shm")  # over the staging
    scratch = Path("/tmp/submission")
    scratch.mkdir()
    if spec["drop_to"] is not None:
        os.chown(scratch, spec["drop_to"], spec["drop_to"])
        os.setgroups([])
        os.setgid(spec["drop_to"])
        os.setuid(spec["drop_to"])
    return scratch


def inside(spec_path: str, fd: int) -> int:
    """Run the cells of ``spec_path`` in this (sandboxed) process; one JSON line per cell on fd."""
    import contextlib
    import io
    import linecache
    import resource
    import traceback

    spec = json.loads(Path(spec_path).read_text())
    cells = spec["cells"]
    scratch = _enter(spec)  # covers the spec's directory too: it is in spec["hide"]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.environ.update(HOME=str(scratch), TMPDIR=str(scratch), NUMBA_CACHE_DIR=str(scratch))
    os.environ.update(MPLCONFIGDIR=str(scratch))
    os.chdir(scratch)
    out = os.fdopen(fd, "w", buffering=1)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    for cell in cells:
        code = cell["source"]
        filename = f"<lab-cell {cell['grade_id'] or cell['index']}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        buf = io.StringIO()
        error = None
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                exec(compile(code, filename, "exec"), namespace)
            except BaseException as exc:  # a failing cell earns 0, as in nbgrader
                if isinstance(exc, KeyboardInterrupt):
                    raise
                error = traceback.format_exception_only(type(exc), exc)[-1].strip()
        graded = cell["points"] > 0 and not cell["solution"]
        event = {"grade_id": cell["grade_id"], "passed": error is None if graded else None}
        event.update(output=buf.getvalue()[-OUTPUT_LIMIT:], error=error)
        out.write(json.dumps(event) + "\n")
    out.close()
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--inside"]:
        return inside(argv[1], int(argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", nargs="+", type=Path, help="submitted NN_name.ipynb files")
    parser.add_argument("--course", type=Path, default=ROOT / "labs", help="the nbgrader course")
    parser.add_argument("--lab", help="the lab (default: the notebook's file name)")
    parser.add_argument("--timeout", type=float, default=600.0, help="wall-clock seconds each")
    parser.add_argument("--json", type=Path, help="write every report here")
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error(f"--timeout must be positive, got {args.timeout}")
    reports = []
    for sub in args.submissions:
        if not sub.is_file():
            parser.error(f"no submission {sub}")
        report = grade(sub, course=args.course, lab=args.lab, timeout=args.timeout)
        reports.append(report)
        line = f"{sub}: {report['earned']:g} / {report['total']:g}"
        if report.get("failure"):
            line += f"  ({report['failure']})"
        print(line, flush=True)
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
