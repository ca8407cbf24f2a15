#!/usr/bin/env python
"""Grade each lab submission in a sandbox that holds nothing of the grader.

nbgrader runs a submission in the instructor's account: its code can read every lab's hidden
tests under ``source/``, the gradebook and the instructor's home, write beside them, open
network connections, forge what the grader reads and leave a process running after grading.
This tool grades one submission (a student's ``NN_name.ipynb``, as nbgrader collects it)
with three processes, each holding less than the one before:

* **the grader** (this process, outside): runs the tamper scan (``zg_course/tamper.py``; a
  finding earns no points and the submission does not run), merges the student's solution
  cells with the lab's locked cells from ``source/`` (never from the submission), starts the
  sandbox and keeps the wall clock. It reads only the supervisor's stdout, which no process
  of the submission holds.
* **the supervisor** (the first process of new mount, PID, network, IPC and UTS namespaces,
  started by ``unshare``; root there, never running student code, not dumpable): receives
  the cells on its stdin, builds the sandbox's file view, brings the loopback interface up,
  starts the worker, hands it the cells one at a time and forwards each verdict. It is the
  PID namespace's init: when it ends, the kernel kills every process in the sandbox.
* **the worker** (uid ``nobody`` with no groups when the grader is root; otherwise the
  caller's uid in a user namespace with every capability dropped): a fresh interpreter
  (``exec``, so nothing of the supervisor's memory) that runs the cells in one namespace,
  in order, as nbgrader's kernel does. It holds one socket to the supervisor and its own
  stdout and stderr, nothing else. It checks that the grader's own code is intact
  (``zg_course/integrity.py``, bound read-only with this file): recorded after each locked
  cell that is not a test, compared before every locked cell and after every test; once it
  changed (``zg_course.contract``, ``zg_course.labs``, ``zg.audit``, ``zg``, ``builtins``, torch's
  comparisons, a kit class, torch's mode stacks), every test from there on fails with
  "tamper: the submission changed the grader's code: <names>", which the report's
  ``failure`` then says.

The protocol on that socket. The worker asks for the next cell; the supervisor sends it. A
graded cell comes with a fresh random nonce, and its verdict counts only when it comes back
with that nonce, as the answer to that cell: lines written ahead ("passed" for every cell),
a wrong nonce, an unknown operation or a message over 1 MiB end the run, and every graded
cell without a verdict by then fails. A cell with hidden tests (``### BEGIN HIDDEN TESTS``)
is not sent to the worker at all: the worker forks, and only the fork (one thread: the
student's threads do not survive ``fork``; trace and profile hooks cleared) asks for it, runs
it, reports and exits, so a hidden test never enters the process that runs the cells after
it, its side effects are dropped, and no hidden test is in the sandbox before the cells
before it ran. A worker or fork that ends before its verdict fails that cell and, for the
worker, every cell after it.

The file view is an allow-list, built on a fresh tmpfs the worker is ``chroot``-ed into:
``/usr``, ``/lib*``, ``/bin``, the interpreter's prefixes (the virtual environment and the
Python it points to), the repository's ``zg/``, ``zg_course/`` (the course package: the
labs import its contracts and holds) and ``data/`` (Cora), each bound read-only; a few generated files in ``/etc`` (``hosts``,
``passwd``, ``group``, the loader's cache); ``/dev`` with null, zero, full, random and urandom;
a new ``/proc`` (the sandbox's processes only); and a fresh private ``/tmp`` (1 GiB) and
``/dev/shm`` (256 MiB), the only writable places.
The course (``source/``, the gradebook, ``submitted/``), the rest of the repository, every
home and the host's ``/run``, ``/var`` and ``/tmp`` are not in it. It works the same from a
clone anywhere and from a git worktree (it never touches ``.git``).

Limits, in the worker and everything it starts: address space (``--memory``, default 8 GiB
per process), processes and threads (``--processes``, default 512, for the uid ``nobody``),
file size 512 MiB, no core files; the worker's raw stdout and stderr are read continuously by
the supervisor, which keeps the first 16 kB of each and drops the rest, so a flood never
blocks; each cell's captured output is cut to 4000 characters; the wall clock
(``--timeout``, a finite number of seconds > 0) is kept by the grader. The sandbox dies with
its grader on every path: the ``unshare`` process gets ``SIGKILL`` when the grader dies
(``PR_SET_PDEATHSIG``), ``unshare --kill-child`` kills the supervisor with it, the supervisor
being the namespace's init takes every process with it, the worker has its own death signal
set after it changed user (a change of user clears it), and the grader kills the whole
process group in a ``finally`` (interrupt, error, timeout or success alike). An interrupt is
never lost (:func:`watch_interrupts`: torch's import swallows most of them) and waits while
the supervisor is being started.

What it cannot stop (the residual risk, stated in ``docs/reliability.md`` too): a test calls
the student's functions, so while a graded cell runs, student code shares the interpreter
with it and with the harness that reports its verdict. Code that defeats the tamper scan
(introspection through a module that re-exports ``sys`` or ``gc``, say) can, from inside a
test, read that cell, take its nonce and forge that cell's verdict, or change what the test
sees; from a thread it started earlier it can race the harness for the socket and do the same
for later cells. A patch of the grader's code that outlives a cell is caught by the
integrity check; one made and undone inside a single call of the student's function is not.
It cannot get a verdict without the cell's nonce, cannot read a hidden test
before it is due, keep anything after the sandbox ends, reach the network or the grader, or
outlive the grading. The tamper scan makes those attacks deliberate (they need names it
forbids, reached around it), and a report whose run ended on a protocol error says so.

    python -m zg_course.sandbox labs/submitted/alice/02_fixed_shape_sampler/02_fixed_shape_sampler.ipynb
    python -m zg_course.sandbox --json grades.json --timeout 300 SUBMISSION.ipynb [...]
    python -m zg_course.sandbox --check [LAB ...]   # every model solution earns full marks
"""

from __future__ import annotations

import argparse
import json
import math
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

# Only the standard library at the top: the worker and the supervisor import this file too.
ROOT = Path(__file__).resolve().parent.parent
THIS = Path(__file__).resolve()
COURSE = THIS.parent  # zg_course/: the labs import its contract and holds, the worker its checks

NOBODY = 65534
OUTPUT_LIMIT = 4000  # characters of each cell's output kept in the report
RAW_LIMIT = 16_000  # bytes of the worker's raw stdout and of its stderr kept
MESSAGE_LIMIT = 1 << 20  # bytes of one message from the worker
MEMORY_GIB = 8.0  # address space of each process in the sandbox
PROCESSES = 512  # processes and threads of the sandbox's uid
NOTEBOOK_LIMIT = 256 << 20  # bytes of a submitted notebook read (outputs and images included)
FILE_LIMIT = 512 << 20
TMP_SIZE, SHM_SIZE = "1g", "256m"
HIDDEN_MARK = "### BEGIN HIDDEN TESTS"
ENV_KEEP = ("LANG", "LC_ALL", "DGLBACKEND", "PYTHONHASHSEED", "OMP_WAIT_POLICY", "TZ")
WORKDIR = "/tmp/submission"
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")
DEVICES = ("null", "zero", "full", "random", "urandom")

PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 1, 4, 38
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT = 24, 28, 47


def _prctl(option: int, arg: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {arg})")


class Malformed(Exception):
    """A submission that cannot be graded (not a notebook, no such lab, ...): it earns 0."""


def timeout_seconds(value) -> float:
    """A wall-clock limit: a finite number of seconds > 0, else ValueError naming it."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--timeout must be a number of seconds, got {value!r}") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"--timeout must be a finite number of seconds > 0, got {value!r}")
    return seconds


def available() -> str | None:
    """None when this machine can run the sandbox, else why not."""
    if sys.platform != "linux":
        return f"the sandbox needs Linux namespaces (this is {sys.platform})"
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            return f"the sandbox needs util-linux's `{tool}`, which is not on PATH"
    probe = [*_unshare(), "mount", "-t", "tmpfs", "probe", "/tmp"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`unshare` does not run here: {exc}"
    if done.returncode != 0:
        return f"`unshare` may not create namespaces here: {done.stderr.decode().strip()}"
    return None


def _unshare() -> list[str]:
    cmd = ["unshare", "--fork", "--pid", "--net", "--mount", "--ipc", "--uts"]
    cmd.append("--kill-child=SIGKILL")
    if os.geteuid() != 0:
        cmd += ["--user", "--map-root-user"]
    return cmd


# ----------------------------------------------------------------------------- the grader


def submission_cells(source: Path, submission: Path):
    """The lab's cells with the student's solution cells in place (as nbgrader's autograde: the
    locked cells come from ``source``), and {grade_id: the student's code}. Malformed when the
    submission is not a notebook this can read."""
    from zg_course.grade import Cell, code_cells

    cells = code_cells(source)
    try:
        from zg._io import read_text_file  # a regular file only: a named pipe would block

        nb = json.loads(read_text_file(submission, "submission", limit=NOTEBOOK_LIMIT,
                                       what="a notebook"))  # fmt: skip
        theirs = {}
        for c in nb.get("cells", []):
            meta = c.get("metadata", {}).get("nbgrader", {})
            if c.get("cell_type") == "code" and meta.get("solution") and meta.get("grade_id"):
                src = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
                theirs[str(meta["grade_id"])] = src
    except (OSError, UnicodeDecodeError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise Malformed(f"not a notebook this can read: {type(exc).__name__}: {exc}") from exc
    merged = []
    for cell in cells:
        if cell.solution:
            code = theirs.get(cell.grade_id, "raise NotImplementedError('cell missing')\n")
            theirs.setdefault(cell.grade_id, code)
            cell = Cell(cell.index, cell.grade_id, code, True, cell.points)
        merged.append(cell)
    return merged, theirs


def _allowed() -> list[str]:
    """What the worker may read (read-only): the system, the interpreter, the kit, this file."""
    paths = list(SYSTEM) + list(ETC_FILES)
    exe = Path(sys.executable)
    paths += [sys.base_prefix, sys.base_exec_prefix, sys.prefix, sys.exec_prefix]
    paths += [str(exe.parent), str(exe.resolve().parent.parent)]
    paths += [str(ROOT / "zg"), str(COURSE), str(ROOT / "data")]  # data/: Cora
    return [p for p in dict.fromkeys(os.path.abspath(p) for p in paths) if os.path.lexists(p)]


def _env() -> dict:
    env = {k: os.environ[k] for k in ENV_KEEP if k in os.environ}
    bindir = str(Path(sys.executable).parent)
    env.update(
        PATH=f"{bindir}:/usr/local/bin:/usr/bin:/bin", PYTHONPATH=str(ROOT), HOME=WORKDIR,
        TMPDIR=WORKDIR, MPLCONFIGDIR=WORKDIR, NUMBA_CACHE_DIR=WORKDIR,
        PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
        GLOO_SOCKET_IFNAME="lo", USER="nobody", LOGNAME="nobody",
    )  # fmt: skip
    return env


def _empty_report(submission: Path, lab: str) -> dict:
    report = {"submission": str(submission), "lab": lab, "findings": [], "timed_out": False}
    report.update(points={}, passed={}, outputs={})
    return report


def grade(
    submission: Path,
    *,
    course: Path = ROOT / "labs",
    lab: str | None = None,
    timeout: float = 600.0,
    run_scan: bool = True,
    memory_gib: float = MEMORY_GIB,
    processes: int = PROCESSES,
) -> dict:
    """Grade one submission in the sandbox: {lab, points, passed, earned, total, failure, ...}.

    A malformed submission (unreadable, not a notebook, no such lab) earns 0 and its report's
    ``failure`` starts with "malformed:"; it does not raise.
    """
    timeout = timeout_seconds(timeout)
    submission = Path(submission).absolute()
    lab = lab or submission.stem
    report = _empty_report(submission, lab)
    try:
        from zg_course.grade import lab_source

        if not submission.is_file():
            raise Malformed(f"no such file {submission}")
        try:
            source = lab_source(course, lab)
        except SystemExit as exc:
            raise Malformed(str(exc)) from None
        cells, theirs = submission_cells(source, submission)
    except Malformed as exc:
        report["failure"] = f"malformed: {exc}"
        return _totals(report)
    report["points"] = {c.grade_id: c.points for c in cells if c.graded}
    report["passed"] = {g: False for g in report["points"]}
    if run_scan:
        from zg_course.tamper import scan

        setup = [c.source for c in cells if not c.solution and not c.graded]
        tests = [c.source for c in cells if c.graded]
        report["findings"] = [str(f) for f in scan(theirs, setup, tests)]
    if report["findings"]:
        report["failure"] = f"tamper: {report['findings'][0]}"
        return _totals(report)
    stop_if_interrupted()
    why = available()
    if why:
        raise SystemExit(f"zg_course.sandbox: {why}")
    spec = {
        "cells": [
            {
                "index": c.index,
                "grade_id": c.grade_id,
                "source": c.source,
                "graded": c.graded,
                "locked": not c.solution,
                "hidden": c.graded and HIDDEN_MARK in c.source,
            }  # fmt: skip
            for c in cells
        ],
        "allowed": _allowed(),
        "worker": [sys.executable, "-B", str(THIS), "--worker"],
        "env": _env(),
        "uid": NOBODY if os.geteuid() == 0 else None,
        "memory": int(memory_gib * (1 << 30)),
        "processes": int(processes),
    }
    _run(spec, report, timeout)
    return _totals(report)


def _die_with_parent(parent: int, mask: set):
    def arm():
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # the grader's, not its brief block
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the grader died before the line above
            os._exit(1)

    return arm


# ----------------------------------------------------------------------------- interrupts

_INTERRUPTS: dict = {"fd": None, "seen": False}


def watch_interrupts() -> None:
    """Remember every SIGINT where no library can take it back (the command calls it first).

    Python raises KeyboardInterrupt when its main thread next runs Python code; a library that
    clears it, or polls it away, leaves the grader running with the sandbox (a SIGINT during
    torch's import, the two or three seconds after the grader starts, mostly never arrives). The
    interpreter's C-level handler also writes the signal's number to the wakeup fd
    (``signal.set_wakeup_fd``) before anything else runs: the grader reads that pipe at each
    step (:func:`stop_if_interrupted`) and while it waits for the sandbox."""
    if _INTERRUPTS["fd"] is not None:
        return
    read, write = os.pipe()  # neither end is inherited by the sandbox
    os.set_blocking(read, False)
    os.set_blocking(write, False)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _INTERRUPTS["fd"] = read


def stop_if_interrupted() -> None:
    """Raise KeyboardInterrupt once a SIGINT came since :func:`watch_interrupts`, whether or
    not Python raised it then (a no-op when nothing watches)."""
    fd = _INTERRUPTS["fd"]
    if fd is not None and not _INTERRUPTS["seen"]:
        try:
            while data := os.read(fd, 512):  # one byte per signal: its number
                _INTERRUPTS["seen"] = _INTERRUPTS["seen"] or signal.SIGINT in data
        except BlockingIOError:
            pass
    if _INTERRUPTS["seen"]:
        raise KeyboardInterrupt


def _run(spec: dict, report: dict, timeout: float) -> None:
    """Start the supervisor, feed it the spec, read its events until it ends or the clock does."""
    env = {k: os.environ[k] for k in ("PATH", "LANG", "LC_ALL") if k in os.environ}
    cmd = [*_unshare(), sys.executable, "-B", str(THIS), "--supervise"]
    began = time.monotonic()
    payload = memoryview(json.dumps(spec).encode())
    lines: list[bytes] = []
    buffer, err_tail, sent = b"", b"", 0
    # An interrupt while the supervisor starts waits until the try below, which kills it; one
    # raised inside Popen would leave it to the death signal alone.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            start_new_session=True, preexec_fn=_die_with_parent(os.getpid(), mask),
        )  # fmt: skip
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a SIGINT that came is raised here
        stop_if_interrupted()
        fds = {proc.stdout.fileno(): "out", proc.stderr.fileno(): "err"}
        for fd in fds:
            os.set_blocking(fd, False)
        wfd = proc.stdin.fileno()
        os.set_blocking(wfd, False)
        while fds:
            left = timeout - (time.monotonic() - began)
            if left <= 0:
                report["timed_out"] = True
                break
            writers = [wfd] if sent < len(payload) else []
            watched = [*fds, _INTERRUPTS["fd"]] if _INTERRUPTS["fd"] is not None else list(fds)
            ready_r, ready_w, _ = select.select(watched, writers, [], min(left, 0.5))
            if _INTERRUPTS["fd"] in ready_r:
                stop_if_interrupted()
            if ready_w:
                try:
                    sent += os.write(wfd, payload[sent : sent + 65536])
                except BlockingIOError:
                    pass
                except BrokenPipeError:  # the supervisor is gone: its stdout says why
                    sent = len(payload)
                if sent >= len(payload):
                    proc.stdin.close()
            for fd in ready_r:
                if fd not in fds:
                    continue
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    del fds[fd]
                    if fds.get(proc.stdout.fileno()) is None:
                        fds.clear()  # the supervisor ended: do not wait for its stderr
                    continue
                if fds[fd] == "err":
                    err_tail = (err_tail + chunk)[-4000:]
                    continue
                buffer += chunk
                *done, buffer = buffer.split(b"\n")
                lines.extend(done)
                if len(buffer) > 4 * MESSAGE_LIMIT:  # the supervisor bounds its lines
                    buffer = b""
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # unshare and the supervisor: the namespace ends
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            try:
                stream.close()
            except OSError:
                pass
    report["seconds"] = round(time.monotonic() - began, 2)
    end, tampered = None, False
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if event.get("end"):
            end = event
            continue
        gid = event.get("grade_id")
        if gid in report["passed"] and "passed" in event:
            report["passed"][gid] = bool(event["passed"])
        if gid and event.get("output"):
            report["outputs"][gid] = event["output"]
        if event.get("error") and "failure" not in report:
            report["failure"] = f"{gid}: {event['error']}"
        if str(event.get("error") or "").startswith("tamper: ") and not tampered:
            tampered = True  # the grader's code changed: that is the failure to report
            report["failure"] = event["error"]
    if end is not None:
        report["log"] = end.get("log", "")
    if report["timed_out"]:
        report["passed"] = {g: False for g in report["passed"]}
        report["failure"] = f"killed at the {timeout:g} s wall-clock limit"
    elif end is None:
        why = err_tail.decode(errors="replace").strip()[-600:]
        report["failure"] = "the sandbox did not start or died: " + (why or "no message")
    elif not end.get("complete"):
        report["failure"] = end.get("failure") or "the submission's run ended early"
        if report["log"] and "before its first cell" in report["failure"]:
            report["failure"] += "; its last output: " + report["log"][-400:].strip()


def _totals(report: dict) -> dict:
    report["total"] = sum(report["points"].values())
    report["earned"] = sum(p for g, p in report["points"].items() if report["passed"].get(g))
    return report


# ----------------------------------------------------------------------------- the supervisor


def _mount(*args: str) -> None:
    done = subprocess.run(["mount", *args], capture_output=True)
    if done.returncode != 0:
        raise OSError(f"mount {' '.join(args)}: {done.stderr.decode().strip()}")


def _base(allowed: list[str]) -> Path:
    """Where the new root is built: an existing directory none of the allowed paths is in."""
    for candidate in ("/mnt", "/media", "/srv", "/opt", "/boot", "/var/tmp", "/tmp", "/dev/shm"):
        c = Path(candidate)
        if c.is_dir() and not c.is_symlink():
            if not any(Path(p).is_relative_to(c) or c.is_relative_to(p) for p in allowed):
                return c
    raise OSError("no directory to build the sandbox's root in")


def _readonly(path: Path) -> None:
    """Remount a bind mount read-only, keeping the flags a user namespace may not clear."""
    flags = ["remount", "bind", "ro", "nosuid", "nodev"]
    st = os.statvfs(path)
    if st.f_flag & os.ST_NOEXEC:
        flags.append("noexec")
    for name, bit in (("noatime", os.ST_NOATIME), ("nodiratime", os.ST_NODIRATIME)):
        if st.f_flag & bit:
            flags.append(name)
    _mount("-o", ",".join(flags), str(path))


def build_root(allowed: list[str], uid: int | None) -> Path:
    """The sandbox's file view, on a fresh tmpfs: only what ``allowed`` names, read-only, plus
    generated /etc files, a minimal /dev, a new /proc and a private /tmp and /dev/shm."""
    _mount("--make-rprivate", "/")
    base = _base(allowed)
    _mount("-t", "tmpfs", "-o", "size=16m,mode=755", "zg-sandbox", str(base))
    # The private /tmp first: what is allowed may live under the host's /tmp (a clone there).
    (base / "tmp").mkdir()
    _mount(
        "-t", "tmpfs", "-o", f"size={TMP_SIZE},mode=1777,nosuid,nodev", "zg-tmp", str(base / "tmp")
    )
    for path in sorted(allowed, key=lambda p: len(Path(p).parts)):
        src, dst = Path(path), base / path.lstrip("/")
        if src.is_symlink() and (str(src) in SYSTEM or str(src) in ETC_FILES):
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(os.readlink(src), dst)
            continue
        if dst.exists() and any(src.is_relative_to(p) for p in allowed if p != path):
            if os.stat(src).st_dev == os.stat(dst).st_dev:
                continue  # already visible through a path bound before it
        if src.is_dir():
            dst.mkdir(parents=True, exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.touch(exist_ok=True)
        _mount("--bind", str(src.resolve()), str(dst))
        _readonly(dst)
    etc = base / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "hosts").write_text("127.0.0.1 localhost sandbox\n::1 localhost\n")
    (etc / "hostname").write_text("sandbox\n")
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"nobody:x:{NOBODY}:{NOBODY}:nobody:{WORKDIR}:/usr/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nnogroup:x:{NOBODY}:\n")
    dev = base / "dev"
    dev.mkdir(exist_ok=True)
    _mount("-t", "tmpfs", "-o", "size=64k,mode=755,nosuid,noexec", "zg-dev", str(dev))
    for name in DEVICES:
        (dev / name).touch()
        _mount("--bind", f"/dev/{name}", str(dev / name))
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, dev / name)
    (dev / "shm").mkdir()
    _mount(
        "-t", "tmpfs", "-o", f"size={SHM_SIZE},mode=1777,nosuid,nodev", "zg-shm", str(dev / "shm")
    )
    _mount("-o", "remount,ro,nosuid,noexec", str(dev))
    (base / "proc").mkdir(exist_ok=True)
    _mount("-t", "proc", "-o", "nosuid,nodev,noexec", "proc", str(base / "proc"))
    work = base / WORKDIR.lstrip("/")
    work.mkdir()
    if uid is not None:
        os.chown(work, uid, uid)
    _mount("-o", "remount,ro", str(base))
    return base


def loopback_up() -> None:
    """Bring ``lo`` up in this network namespace (gloo needs it); nothing else is up."""
    import fcntl
    import struct

    SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP, IFF_RUNNING = 0x8913, 0x8914, 0x1, 0x40
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifr = fcntl.ioctl(s, SIOCGIFFLAGS, struct.pack("16sH14x", b"lo", 0))
        flags = struct.unpack("16sH14x", ifr)[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP | IFF_RUNNING))


def _drop_capabilities() -> None:
    """In a user namespace (no other uid to switch to): no capability now or after exec."""
    import ctypes

    SECBIT_NOROOT, SECBIT_NOROOT_LOCKED, SECBIT_NO_SETUID_FIXUP = 1, 2, 4
    SECBIT_NO_SETUID_FIXUP_LOCKED, SECBIT_KEEP_CAPS_LOCKED = 8, 32
    bits = SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP
    _prctl(PR_SET_SECUREBITS, bits | SECBIT_NO_SETUID_FIXUP_LOCKED | SECBIT_KEEP_CAPS_LOCKED)
    for cap in range(64):
        try:
            _prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_CAP_AMBIENT, 4, 0, 0, 0)  # PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    data = (ctypes.c_uint32 * 6)()
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _worker_preexec(base: Path, spec: dict, sock_fd: int):
    import resource

    def enter():
        os.chroot(base)
        os.chdir(WORKDIR)
        memory, nproc = spec["memory"], spec["processes"]
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if spec["uid"] is not None:  # counted per uid: the caller's own would count too
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if spec["uid"] is not None:
            os.setgroups([])
            os.setgid(spec["uid"])
            os.setuid(spec["uid"])
        else:
            _drop_capabilities()
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # after the change of user, which clears it
        if os.getppid() != 1:
            os._exit(1)

    return enter


def supervise() -> int:
    """The sandbox's first process: build the view, start the worker, run the protocol."""
    import secrets

    _prctl(PR_SET_DUMPABLE, 0)  # no process of the sandbox may read this one's memory or fds
    spec = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    cells = spec["cells"]
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)

    def emit(event: dict) -> None:
        out.write(json.dumps(event) + "\n")

    base = build_root(spec["allowed"], spec["uid"])
    loopback_up()
    socket.sethostname("sandbox")
    ours, theirs = socket.socketpair()
    raw = {}
    pipes = []
    for _ in range(2):
        r, w = os.pipe()
        pipes.append(w)
        raw[r] = [b"", 0]  # kept bytes, dropped bytes
    worker = subprocess.Popen(
        [*spec["worker"], str(theirs.fileno())], stdin=subprocess.DEVNULL,
        stdout=pipes[0], stderr=pipes[1], pass_fds=(theirs.fileno(),), env=spec["env"],
        start_new_session=True, preexec_fn=_worker_preexec(base, spec, theirs.fileno()),
    )  # fmt: skip
    theirs.close()
    for w in pipes:
        os.close(w)
    ours.setblocking(False)

    cur = 0  # the next cell to hand out
    awaiting = None  # (cell index, nonce) of the graded cell whose verdict is due
    forked = None  # the hidden cell a fork of the worker may take
    failure = None
    complete = False
    buffer = b""
    where = "before its first cell"

    def send(obj: dict) -> None:
        ours.setblocking(True)
        try:
            ours.sendall((json.dumps(obj) + "\n").encode())
        finally:
            ours.setblocking(False)

    def lose(index: int, why: str) -> None:
        emit({"grade_id": cells[index]["grade_id"], "passed": False, "error": why})

    def handle(msg) -> str | None:
        """Act on one message of the worker; a reason when it breaks the protocol."""
        nonlocal cur, awaiting, forked, complete, where
        if not isinstance(msg, dict):
            return "a message that is not an object"
        op = msg.get("op")
        if op == "next":
            if awaiting is not None:
                lose(awaiting[0], "its process ended before it reported a verdict")
                awaiting = None
            if forked is not None:
                lose(forked, "its process ended before it took the cell")
                forked = None
            if cur == len(cells):
                complete = True
                send({"op": "end"})
                return None
            cell = cells[cur]
            where = f"in cell {cell['grade_id'] or cur}"
            if cell["hidden"]:
                forked = cur
                send({"op": "fork"})
            else:
                nonce = secrets.token_hex(16) if cell["graded"] else None
                if nonce:
                    awaiting = (cur, nonce)
                send({"op": "cell", "cell": _public(cell), "nonce": nonce})
            cur += 1
            return None
        if op == "take":
            if forked is None or awaiting is not None:
                return "asked for a hidden cell that is not due"
            nonce = secrets.token_hex(16)
            awaiting, forked = (forked, nonce), None
            send({"op": "cell", "cell": _public(cells[awaiting[0]]), "nonce": nonce})
            return None
        if op == "result":
            if awaiting is None or msg.get("index") != awaiting[0]:
                return "a verdict for a cell whose verdict is not due"
            if not isinstance(msg.get("nonce"), str) or not secrets.compare_digest(
                msg["nonce"], awaiting[1]
            ):
                return "a verdict without the cell's nonce"
            index, awaiting = awaiting[0], None
            emit({"grade_id": cells[index]["grade_id"], "passed": msg.get("passed") is True,
                  "output": str(msg.get("output") or "")[-OUTPUT_LIMIT:],
                  "error": _short(msg.get("error"))})  # fmt: skip
            return None
        if op == "output":
            index = msg.get("index")
            if not isinstance(index, int) or not 0 <= index < cur or cells[index]["graded"]:
                return "output for a cell that is not an ungraded cell already sent"
            emit({"grade_id": cells[index]["grade_id"],
                  "output": str(msg.get("output") or "")[-OUTPUT_LIMIT:],
                  "error": _short(msg.get("error"))})  # fmt: skip
            return None
        return f"an unknown operation {str(op)[:40]!r}"

    streams = [ours, *raw]
    status = {}
    while not complete and failure is None:
        ready, _, _ = select.select(streams, [], [], 0.5)
        status.update(_reap())
        if worker.pid in status and ours not in select.select([ours], [], [], 0)[0]:
            # Its children may hold the socket open: the worker's end is the run's end.
            failure = f"the submission's process ended {where} ({_status(status[worker.pid])})"
            break
        for r in [s for s in ready if s is not ours]:
            chunk = os.read(r, 65536)
            if not chunk:
                streams.remove(r)
                continue
            kept, dropped = raw[r]
            room = RAW_LIMIT - len(kept)
            raw[r] = [kept + chunk[:room], dropped + max(0, len(chunk) - room)]
        if ours not in ready:
            continue
        try:
            data = ours.recv(65536)
        except BlockingIOError:
            continue
        if not data:
            failure = f"the submission's process ended {where}"
            time.sleep(0.05)
            status.update(_reap())
            if worker.pid in status:
                failure += f" ({_status(status[worker.pid])})"
            break
        buffer += data
        *msgs, buffer = buffer.split(b"\n")
        if len(buffer) > MESSAGE_LIMIT:
            failure = "protocol: a message over 1 MiB"
            break
        for line in msgs:
            try:
                msg = json.loads(line)
            except ValueError:
                msg = None
            why = handle(msg) if msg is not None else "a message that is not JSON"
            if why:
                failure = f"protocol: the submission's process sent {why} ({where})"
                break
            if complete:
                break
    log = []
    for name, (kept, dropped) in zip(("stdout", "stderr"), raw.values()):
        if kept:
            text = kept.decode(errors="replace")
            log.append(
                f"[{name}] {text}" + (f"\n[{dropped} more bytes dropped]" if dropped else "")
            )
    emit({"end": True, "complete": complete, "failure": failure, "log": "\n".join(log)[-8000:]})
    out.close()
    os._exit(0)  # the namespace's init: every process of the sandbox ends with it


def _public(cell: dict) -> dict:
    return {k: cell[k] for k in ("index", "grade_id", "source", "graded", "locked")}


def _short(error) -> str | None:
    return None if error is None else str(error)[:2000]


def _reap() -> dict:
    """Reap every child that ended (the namespace's init inherits the orphans): {pid: status}."""
    ended = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended[pid] = status


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.waitstatus_to_exitcode(status)}"


# ----------------------------------------------------------------------------- the worker


def work(fd: int) -> int:
    """Run the cells the supervisor hands out, in one namespace, in order; hidden ones in forks."""
    import contextlib
    import io
    import linecache
    import traceback

    sock = socket.socket(fileno=fd)
    reader = sock.makefile("rb")

    def send(obj: dict) -> None:
        sock.sendall((json.dumps(obj) + "\n").encode())

    def recv() -> dict:
        line = reader.readline(MESSAGE_LIMIT)
        if not line.endswith(b"\n"):
            os._exit(3)  # the supervisor is gone
        return json.loads(line)

    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    from zg_course.integrity import changes, fingerprint  # through PYTHONPATH, the checkout
    from zg_course.integrity import message as integrity_message

    # The grader's code as the locked cells left it (zg_course/integrity.py): taken again
    # after each locked cell that is not a test, checked before every locked cell and after
    # every test; once it changed, every test from there on fails.
    state = {"before": None, "tampered": None}

    def intact() -> bool:
        if state["tampered"] is None and state["before"] is not None:
            changed = changes(state["before"])
            if changed:
                state["tampered"] = "tamper: " + integrity_message(changed)
        return state["tampered"] is None

    def run(msg: dict) -> None:
        cell, nonce = msg["cell"], msg["nonce"]
        code = cell["source"]
        filename = f"<lab-cell {cell['grade_id'] or cell['index']}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        buf, error = io.StringIO(), None
        locked = cell.get("locked", True)
        if locked and not intact() and cell["graded"]:
            send({"op": "result", "index": cell["index"], "nonce": nonce, "passed": False,
                  "output": "", "error": state["tampered"]})  # fmt: skip
            return
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                exec(compile(code, filename, "exec"), namespace)
            except BaseException as exc:  # a failing cell earns 0, as in nbgrader
                error = traceback.format_exception_only(type(exc), exc)[-1].strip()
        output = buf.getvalue()[-OUTPUT_LIMIT:]
        if cell["graded"] and not intact():  # changed while the test ran the student's code
            error = state["tampered"]
        elif locked and not cell["graded"] and state["tampered"] is None:
            state["before"] = fingerprint()  # the locked cell's own changes are the lab's
        if cell["graded"]:
            send({"op": "result", "index": cell["index"], "nonce": nonce,
                  "passed": error is None, "output": output, "error": error})  # fmt: skip
            return
        send({"op": "output", "index": cell["index"], "output": output, "error": error})

    while True:
        send({"op": "next"})
        msg = recv()
        if msg["op"] == "end":
            os._exit(0)
        if msg["op"] != "fork":
            run(msg)
            continue
        # A hidden cell: only a fork of this process sees it; its side effects end with it.
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)  # GNU OpenMP's pool does not survive fork
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError:  # at the process limit: the cell fails, the run goes on
            continue
        if pid == 0:
            try:
                sys.settrace(None)
                sys.setprofile(None)
                send({"op": "take"})
                run(recv())
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


# ----------------------------------------------------------------------------- the command


def check(labs: list[str], course: Path, timeout: float) -> int:
    """Grade every lab's model solution (its source notebook) in the sandbox: full marks each."""
    names = labs or sorted(
        p.name for p in (course / "source").iterdir() if (p / f"{p.name}.ipynb").is_file()
    )
    failed = 0
    began = time.monotonic()
    for name in names:
        source = course / "source" / name / f"{name}.ipynb"
        report = grade(source, course=course, lab=name, timeout=timeout)
        ok = report["total"] > 0 and report["earned"] == report["total"]
        failed += not ok
        line = f"{name}: {report['earned']:g} / {report['total']:g} in {report.get('seconds', 0):.1f} s"
        print(line + ("" if ok else f"  FAILED ({report.get('failure')})"), flush=True)
    print(f"zg_course.sandbox --check: {len(names) - failed} of {len(names)} labs earn full marks "
          f"in the sandbox ({time.monotonic() - began:.0f} s)")  # fmt: skip
    return 1 if failed else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--supervise"]:
        return supervise()
    if argv[:1] == ["--worker"]:
        # Run as a file, this folder is first on sys.path: the cells import the course as
        # zg_course (PYTHONPATH), never its modules by their bare names.
        if sys.path and Path(sys.path[0] or ".").resolve() == COURSE:
            del sys.path[0]
        return work(int(argv[1]))

    def positive(text: str) -> float:
        try:
            return timeout_seconds(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc).removeprefix("--timeout ")) from None

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", nargs="*", type=Path, help="submitted NN_name.ipynb files")
    parser.add_argument("--course", type=Path, default=ROOT / "labs", help="the nbgrader course")
    parser.add_argument("--lab", help="the lab (default: the notebook's file name)")
    parser.add_argument("--timeout", type=positive, default=600.0, help="wall-clock seconds each")
    parser.add_argument("--memory", type=float, default=MEMORY_GIB, help="GiB per process")
    parser.add_argument("--processes", type=int, default=PROCESSES, help="processes + threads")
    parser.add_argument("--json", type=Path, help="write every report here")
    parser.add_argument("--check", action="store_true",
                        help="grade every lab's model solution (or the labs named): full marks")  # fmt: skip
    parser.add_argument("--no-scan", action="store_true",
                        help="skip the tamper scan (to test the sandbox alone)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.memory <= 0 or not math.isfinite(args.memory) or args.processes < 1:
        parser.error("--memory and --processes must be positive")
    from zg._io import command_output_arg, write_text  # the kit's checks and its one writer

    stop_if_interrupted()  # the import takes seconds, and may swallow an interrupt

    # Before any grading: a folder, a named pipe, a dangling link, a missing folder (exit 2).
    command_output_arg(parser, args.json, "--json")
    if args.check:
        return check([str(s) for s in args.submissions], args.course, args.timeout)
    if not args.submissions:
        parser.error("no submissions given")
    reports, malformed = [], 0
    for sub in args.submissions:
        report = grade(sub, course=args.course, lab=args.lab, timeout=args.timeout,
                       memory_gib=args.memory, processes=args.processes,
                       run_scan=not args.no_scan)  # fmt: skip
        malformed += report.get("failure", "").startswith("malformed:")
        reports.append(report)
        line = f"{sub}: {report['earned']:g} / {report['total']:g}"
        if report.get("failure"):
            line += f"  ({report['failure']})"
        print(line, flush=True)
    if args.json:
        text = json.dumps(reports, indent=1) + "\n"
        try:  # atomic, a link kept: all or nothing
            write_text(args.json, text, name="--json")
        except (OSError, ValueError) as exc:  # changed since it was checked: keep the grades
            print(f"zg_course.sandbox: error: {exc}; the reports follow on stdout", file=sys.stderr)
            sys.stdout.write(text)
            return 1
    if malformed:
        print(
            f"zg_course.sandbox: {malformed} of {len(reports)} submissions malformed (0 points each)"
        )
    return 1 if malformed else 0


if __name__ == "__main__":
    if sys.argv[1:2] not in (["--supervise"], ["--worker"]):
        watch_interrupts()  # the grader: before its imports, which may swallow an interrupt
    sys.exit(main())
