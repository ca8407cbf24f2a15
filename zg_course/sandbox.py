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
* **the supervisor**, which is **the judge** (outside the sandbox, never running student
  code, not dumpable): receives the cells on its stdin, starts the worker in the sandbox, hands
  it the cells that are not tests one at a time, runs every cell of the lab's again in a
  namespace of its own, runs every test there and decides its verdict (:func:`_judge`). In that
  namespace each function a solution cell defined is a
  :class:`zg_course.remote.RemoteFunction`: a call sends the arguments to the worker, calls
  the student's function there and reads back, with a reader that runs no code of the
  submission, the result, what became of the arguments and what the contract's observers saw
  (``zg_course/remote.py``). A test's calls go to a fork of the worker that ends with the
  test (its side effects are dropped, as the test's own are in a fork of the judge). So the
  tests, their generators, expected values and references, and the comparisons, never enter
  the sandbox. A test the judge cannot run by value (Lab 6's DDP hook spawned on gloo
  processes: :class:`zg_course.remote.NeedsWorker`) is run in a fork of the worker as before
  the judge, and the report lists it (``judged_inside``); ``--inside`` (``judge=False``)
  grades every test that way, with the protocol below.
* **the worker**, in the sandbox, which bubblewrap (``bwrap``, Debian's ``bubblewrap``
  package, the sandbox of Flatpak) builds: new mount, PID, network, IPC, UTS and cgroup
  namespaces, with bubblewrap's own init as the PID namespace's first process (when the
  worker ends, the kernel kills every process in the sandbox). Root grading: the worker's
  uid is one no other process has (``SANDBOX_UIDS`` + the supervisor's pid), switched to by
  util-linux's ``setpriv`` with no groups, no capabilities and no new privileges, so the
  kernel's per-uid process count is the sandbox's alone. Any other caller: its uid mapped to
  ``nobody`` in a user namespace, every capability dropped, no further user namespaces. A
  fresh interpreter (nothing of the supervisor's memory) that runs the cells in one namespace,
  in order, as nbgrader's kernel does. It holds one socket to the supervisor and its own
  stdout and stderr, nothing else. It checks that the grader's own code is intact
  (``zg_course/integrity.py``, bound read-only with this file): recorded after each locked
  cell that is not a test, compared before every locked cell and after every test; once it
  changed (``zg_course.contract``, ``zg_course.labs``, ``zg.audit``, ``zg``, ``builtins``, torch's
  comparisons, a kit class, torch's mode stacks), every test from there on fails with
  "tamper: the submission changed the grader's code: <names>", which the report's
  ``failure`` then says.

The protocol of the judged run (the default): length-prefixed frames (``zg_course.remote``:
a JSON header, a pickle). "cell" (the worker runs it and reports its output and the names it
bound), "fork" / "done" (a fork of the worker answers one cell's calls), a call ("call",
"observe", "again", "device", "refill", "state", "value"), "test" (a cell handed to the
worker), "end". Whatever the worker sends is an answer to the judge's request, never a
verdict: a frame out of turn or unreadable ends the run, and every test without a verdict
fails.

The protocol of ``--inside``. The worker asks for the next cell; the supervisor sends it. A
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

The file view is an allow-list, bubblewrap's empty root (read-only) with bound paths:
``/usr``, ``/lib*``, ``/bin``, the interpreter's prefixes (the virtual environment and the
Python it points to), the repository's ``zg/``, ``zg_course/`` (the course package: the
labs import its contracts and holds) and ``data/`` (Cora), each bound read-only; a few generated files in ``/etc`` (``hosts``,
``passwd``, ``group``, the loader's cache); bubblewrap's minimal ``/dev`` (null, zero, full,
random, urandom, tty, a private ``pts``);
a new ``/proc`` (the sandbox's processes only); and a fresh private ``/tmp`` (1 GiB) and
``/dev/shm`` (256 MiB), the only writable places. Only ``lo`` is up in the network namespace.
The course (``source/``, the gradebook, ``submitted/``), the rest of the repository, every
home and the host's ``/run``, ``/var`` and ``/tmp`` are not in it. It works the same from a
clone anywhere and from a git worktree (it never touches ``.git``).

Limits, in the worker and everything it starts: address space (``--memory``, default 8 GiB
per process), processes and threads (``--processes``, default 512, at least 32: what every
lab's model solution needs; counted for the sandbox's own uid when root grades), file size
512 MiB, no core files; the worker's raw stdout and stderr are read continuously by the
supervisor, which keeps the first 16 kB of each and drops the rest, so a flood never blocks;
each cell's captured output is cut to 4000 characters, and the grader keeps one output per
cell however many the submission sends; the wall clock (``--timeout``, a finite number of
seconds > 0) is kept by the grader, whose report then says when the sandbox was at its
process limit. A limit flag out of range is the command's error (exit 2); a lab's own cell
that fails before any code of the submission ran (limits too small for torch's import, say)
is reported as the grader's error (``grader_error``, exit 1), not as the submission's 0.
The sandbox dies with its grader on every path: the supervisor gets ``SIGKILL`` when the
grader dies and bubblewrap when the supervisor dies (``PR_SET_PDEATHSIG``), bubblewrap's
``--die-with-parent`` and its init as the PID namespace's first process take every process
of the sandbox with them, and the grader kills the supervisor's process group in a
``finally`` (interrupt, error, timeout or success alike). An interrupt is never lost
(:func:`watch_interrupts`: torch's import swallows most of them) and waits while the
supervisor is being started.

What it cannot stop (the residual risk, stated in ``docs/reliability.md`` too): the
contract's observers run in the worker, beside the student's code, and report what the worker
sends; code that defeats the tamper scan and the integrity check can hide what its function
did to its inputs or the process (it cannot see a test or change a verdict). The tests handed
to the worker (``judged_inside``), and every test under ``--inside``, keep the older risk:
while such a graded cell runs, student code shares the interpreter
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
RESULT_LIMIT = 256 << 20  # bytes of one frame of the judged protocol (zg_course.remote)
MEMORY_GIB = 8.0  # address space of each process in the sandbox
PROCESSES = 512  # processes and threads of the sandbox's uid
PROCESSES_MIN = 32  # every lab's model solution earns full marks with this many (--check)
MEMORY_MAX_GIB = 1 << 20  # 1 PiB: beyond any machine, within what setrlimit takes
NOTEBOOK_LIMIT = 256 << 20  # bytes of a submitted notebook read (outputs and images included)
FILE_LIMIT = 512 << 20
TMP_BYTES, SHM_BYTES = 1 << 30, 256 << 20
SANDBOX_UIDS = 2_000_000_000  # + the supervisor's pid: the worker's uid when root grades
HIDDEN_MARK = "### BEGIN HIDDEN TESTS"
ENV_KEEP = ("LANG", "LC_ALL", "DGLBACKEND", "PYTHONHASHSEED", "OMP_WAIT_POLICY", "TZ")
WORKDIR = "/tmp/submission"
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime")

PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4


def _prctl(option: int, arg: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, arg, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {arg})")


_FRAME_SIZES = "!II"  # a frame: its header's and its blob's lengths, then both


def send_frame(sock, header: dict, blob: bytes = b"") -> None:
    """One frame of the judged protocol: a JSON header and a blob (``zg_course.remote``)."""
    import struct

    head = json.dumps(header).encode()
    sock.sendall(struct.pack(_FRAME_SIZES, len(head), len(blob)) + head + blob)


def _exactly(sock, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("the other process closed the socket")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(sock, limit: int) -> tuple[dict, bytes]:
    """One frame; ValueError for one over ``limit`` or whose header is not a JSON object."""
    import struct

    n_head, n_blob = struct.unpack(_FRAME_SIZES, _exactly(sock, struct.calcsize(_FRAME_SIZES)))
    if n_head > (1 << 20) or n_blob > limit:
        raise ValueError(f"a message of {n_head} + {n_blob} bytes, over the limit")
    header = json.loads(_exactly(sock, n_head))
    if not isinstance(header, dict):
        raise ValueError("a message that is not an object")
    return header, _exactly(sock, n_blob)


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


def memory_bytes(value) -> int:
    """``--memory`` in GiB per process, as bytes: a finite number > 0 the kernel can set as a
    limit (at most 1 PiB), else ValueError naming the flag."""
    try:
        gib = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"--memory must be a number of GiB, got {value!r}") from None
    if not math.isfinite(gib) or not 0 < gib <= MEMORY_MAX_GIB:
        raise ValueError(
            f"--memory must be a number of GiB in (0, {MEMORY_MAX_GIB}], got {value!r}"
        )
    return int(gib * (1 << 30))


def process_count(value) -> int:
    """``--processes``: a whole number of processes and threads, at least what every lab's model
    solution needs (``PROCESSES_MIN``) and at most the kernel's ``threads-max``, else
    ValueError naming the flag. Below the floor a correct submission fails or waits for the
    clock, and the report would blame it."""
    try:
        count = int(str(value).strip())
    except (TypeError, ValueError):
        raise ValueError(f"--processes must be a whole number, got {value!r}") from None
    try:
        most = int(Path("/proc/sys/kernel/threads-max").read_text())
    except (OSError, ValueError):
        most = 1 << 22
    if not PROCESSES_MIN <= count <= most:
        raise ValueError(
            f"--processes must be between {PROCESSES_MIN} (what the labs' model solutions need) "
            f"and {most} (the kernel's threads-max), got {value!r}"
        )
    return count


def available() -> str | None:
    """None when this machine can run the sandbox, else why not."""
    if sys.platform != "linux":
        return f"the sandbox needs Linux namespaces (this is {sys.platform})"
    tools = ("bwrap", "setpriv") if os.geteuid() == 0 else ("bwrap",)
    for tool in tools:
        if shutil.which(tool) is None:
            package = "bubblewrap" if tool == "bwrap" else "util-linux"
            return f"the sandbox needs `{tool}` (Debian package {package}), which is not on PATH"
    system = [p for p in SYSTEM if os.path.lexists(p)]
    probe = [*bwrap_command(system, _sandbox_uid(), {}), "/usr/bin/true"]  # as the worker starts
    try:
        done = subprocess.run(probe, capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`bwrap` does not run here: {exc}"
    if done.returncode != 0:
        return f"`bwrap` may not create the sandbox here: {done.stderr.decode().strip()}"
    return None


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
    judge: bool = True,
) -> dict:
    """Grade one submission in the sandbox: {lab, points, passed, earned, total, failure, ...}.

    ``judge``: run the tests in the judge, outside the sandbox (True, the default), or in forks
    of the worker, as before the judge (False). The report's ``judged`` says which ("outside" or
    "inside"), and ``judged_inside`` lists the tests the judge handed to the worker
    (:class:`zg_course.remote.NeedsWorker`).

    A malformed submission (unreadable, not a notebook, no such lab) earns 0 and its report's
    ``failure`` starts with "malformed:"; it does not raise.
    """
    timeout = timeout_seconds(timeout)
    memory, processes = memory_bytes(memory_gib), process_count(processes)
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
    return grade_cells(cells, theirs, report, timeout=timeout, run_scan=run_scan, memory=memory,
                       processes=processes, judge=judge)  # fmt: skip


def grade_cells(cells, theirs: dict, report: dict, *, timeout: float, run_scan: bool = True,
                memory: int = int(MEMORY_GIB * (1 << 30)), processes: int = PROCESSES,
                judge: bool = True) -> dict:  # fmt: skip
    """Grade a lab's cells (``zg_course.grade.Cell``s, the student's solution cells in place;
    ``theirs``: {grade_id: the student's code}) into ``report`` (see :func:`grade`)."""
    judged = bool(judge)
    report["judged"] = "outside" if judged else "inside"
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
        "worker": [sys.executable, "-B", str(THIS), "--worker-judged" if judged else "--worker"],
        "judged": judged,
        "env": _env(),
        "memory": memory,
        "processes": processes,
        "root": os.geteuid() == 0,
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
    cmd = [sys.executable, "-B", str(THIS), "--supervise"]
    began = time.monotonic()
    payload = memoryview(json.dumps(spec).encode())
    buffer, err_tail, sent = b"", b"", 0
    seen = {"end": None, "tampered": False, "uid": None, "lab_failed": None}
    # Before this cell no code of the submission has run: a failure there is not its doing.
    first_theirs = next((c["index"] for c in spec["cells"] if not c["locked"]), math.inf)

    def take(line: bytes) -> None:
        """One event of the supervisor, as it comes: the report keeps one output per cell, so
        the grader's memory does not grow with what the submission prints."""
        try:
            event = json.loads(line)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        if event.get("end"):
            seen["end"] = event
            return
        if "uid" in event:
            seen["uid"] = event["uid"]
            return
        gid = event.get("grade_id")
        index = event.get("index")
        if event.get("error") and isinstance(index, int) and index < first_theirs:
            seen["lab_failed"] = seen["lab_failed"] or (gid or f"cell {index}", event["error"])
        if gid in report["passed"] and "passed" in event:
            report["passed"][gid] = bool(event["passed"])
            if event.get("error"):
                report.setdefault("errors", {})[gid] = str(event["error"])
            if event.get("inside"):
                report.setdefault("judged_inside", []).append(gid)
        if gid and event.get("output"):
            report["outputs"][gid] = event["output"]
        if event.get("error") and "failure" not in report:
            report["failure"] = f"{gid}: {event['error']}"
        if "could not fork" in str(event.get("error")):
            # EAGAIN from fork: the kernel's process limit said no (the count, taken later,
            # may miss processes that ended since)
            seen["fork_refused"] = seen.get("fork_refused") or "Errno 11" in str(event["error"])
            if seen["uid"] is not None:
                seen.setdefault("threads", _threads_of(seen["uid"]))  # how full the sandbox is
        if str(event.get("error") or "").startswith("tamper: ") and not seen["tampered"]:
            seen["tampered"] = True  # the grader's code changed: that is the failure to report
            report["failure"] = event["error"]

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
                if seen["uid"] is not None:  # before the kill: how full the sandbox was
                    seen["threads"] = _threads_of(seen["uid"])
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
                for line in done:
                    take(line)
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
    end = seen["end"]
    if end is not None:
        report["log"] = end.get("log", "")
    if report["timed_out"]:
        report["passed"] = {g: False for g in report["passed"]}
        report["failure"] = f"killed at the {timeout:g} s wall-clock limit"
        limit = spec["processes"]
        if seen.get("threads", 0) >= limit:  # a thread that could not start may wait forever
            report["failure"] += (
                f"; the sandbox was at its process limit then ({seen['threads']} processes and"
                f" threads, --processes {limit})"
            )
    elif end is None:
        why = err_tail.decode(errors="replace").strip()[-600:]
        report["failure"] = "the sandbox did not start or died: " + (why or "no message")
    elif not end.get("complete"):
        report["failure"] = end.get("failure") or "the submission's run ended early"
        if report["log"] and "before its first cell" in report["failure"]:
            report["failure"] += "; its last output: " + report["log"][-400:].strip()
    full = seen.get("threads", 0) >= spec["processes"] or seen.get("fork_refused")
    if not report["timed_out"] and full:
        report["failure"] = (report.get("failure") or "") + (  # a test could not fork: full
            f"; the sandbox was at its process limit then (a fork refused with EAGAIN;"
            f" {seen.get('threads', 0)} processes and threads counted after it,"
            f" --processes {spec['processes']})"
        )
    started = end is not None and "before its first cell" not in str(end.get("failure"))
    if seen["lab_failed"] or (end is not None and not started):
        where, why = seen["lab_failed"] or ("the worker's start", report["failure"])
        report["grader_error"] = True
        report["failure"] = (
            f"grader: {where} failed before any code of the submission ran ({why}); not the "
            f"submission's doing: check the sandbox's limits (--memory "
            f"{spec['memory'] / (1 << 30):g} GiB, --processes {spec['processes']}) and the "
            "installation"
        )


def _totals(report: dict) -> dict:
    report["total"] = sum(report["points"].values())
    report["earned"] = sum(p for g, p in report["points"].items() if report["passed"].get(g))
    return report


# ----------------------------------------------------------------------------- the supervisor


def _sandbox_uid() -> int | None:
    """The uid the worker runs as, when the grader is root: one no other process has.

    The kernel counts ``RLIMIT_NPROC`` per uid: with one uid for every sandbox (``nobody``), a
    submission holding threads used up the processes of every sandbox graded beside it. The
    supervisor's pid is unique among live processes, so this uid is too; it lies far above the
    ranges distributions hand out (users, ``/etc/subuid``)."""
    return SANDBOX_UIDS + os.getpid() if os.geteuid() == 0 else None


def _etc_files(uid: int | None) -> dict[str, str]:
    """The generated ``/etc`` files the worker sees: the sandbox's user is called nobody."""
    user = NOBODY if uid is None else uid
    return {
        "/etc/hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
        "/etc/hostname": "sandbox\n",
        "/etc/passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n"
        f"nobody:x:{user}:{user}:nobody:{WORKDIR}:/usr/sbin/nologin\n",
        "/etc/group": f"root:x:0:\nnogroup:x:{user}:\n",
    }


def bwrap_command(allowed: list[str], uid: int | None, data_fds: dict[str, int]) -> list[str]:
    """bubblewrap's arguments for the sandbox: new namespaces (mount, PID, network with only
    ``lo``, IPC, UTS, cgroup), the allowed paths bound read-only on an otherwise empty,
    read-only root, ``/etc`` files from ``data_fds``, a new ``/proc`` and minimal ``/dev``, a
    private ``/tmp`` and ``/dev/shm``; no capability, no new privileges, a new session, and
    SIGKILL when the supervisor dies. Root switches to ``uid`` (util-linux's ``setpriv``) and
    keeps nothing; any other caller is mapped to nobody in a user namespace of its own."""
    cmd = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    cmd += ["--unshare-cgroup-try", "--hostname", "sandbox", "--die-with-parent", "--new-session"]
    if uid is None:
        cmd += ["--unshare-user", "--uid", str(NOBODY), "--gid", str(NOBODY), "--disable-userns"]
        cmd += ["--cap-drop", "ALL"]
    else:  # setpriv needs these three to give up root; it drops them with the rest
        cmd += ["--cap-drop", "ALL"]
        cmd += [x for cap in ("SETUID", "SETGID", "SETPCAP") for x in ("--cap-add", f"CAP_{cap}")]
    # The private /tmp first: what is allowed may live under the host's /tmp (a clone there).
    cmd += ["--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    cmd += ["--perms", "0777", "--dir", WORKDIR]
    kept: list[str] = []
    made = {"/", "/tmp", WORKDIR}
    for path in sorted(allowed, key=lambda p: len(Path(p).parts)):
        if any(Path(path).is_relative_to(k) for k in kept):
            continue  # visible through a folder bound before it
        for parent in reversed(Path(path).parents):  # bubblewrap would make them 0700
            if str(parent) not in made:
                cmd += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        if os.path.islink(path) and (path in SYSTEM or path in ETC_FILES):
            cmd += ["--symlink", os.readlink(path), path]  # /lib -> usr/lib, as on the host
        else:
            cmd += ["--ro-bind", path, path]
        kept.append(path)
    for dest, fd in data_fds.items():
        cmd += ["--ro-bind-data", str(fd), dest]
    cmd += ["--proc", "/proc", "--dev", "/dev"]
    cmd += ["--perms", "1777", "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm"]
    cmd += ["--remount-ro", "/", "--chdir", WORKDIR, "--"]
    if uid is not None:
        cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all", "--no-new-privs", "--"]  # fmt: skip
    return cmd


def _limits(spec: dict, uid: int | None, parent: int):
    """Before bubblewrap runs: the worker's limits (inherited by all it starts) and death with
    the supervisor."""
    import resource

    def enter():
        memory, nproc = spec["memory"], spec["processes"]
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        if uid is not None:  # counted per uid: the sandbox's own, unique to it
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the supervisor died before the line above
            os._exit(1)

    return enter


def _threads_of(uid: int) -> int:
    """Processes and threads the uid runs now (what ``RLIMIT_NPROC`` counts)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def supervise() -> int:
    """Between the grader and the sandbox: start the worker in bubblewrap, run the protocol."""
    import secrets

    _prctl(PR_SET_DUMPABLE, 0)  # no process of the sandbox may read this one's memory or fds
    spec = json.loads(sys.stdin.buffer.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    cells = spec["cells"]
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)

    def emit(event: dict) -> None:
        out.write(json.dumps(event) + "\n")

    uid = _sandbox_uid() if spec["root"] else None
    if uid is not None:
        emit({"uid": uid})  # the grader counts its processes if the clock runs out
    data_fds = {}
    for dest, text in _etc_files(uid).items():  # bubblewrap reads each, then closes it
        r, w = os.pipe()
        os.write(w, text.encode())
        os.close(w)
        data_fds[dest] = r
    ours, theirs = socket.socketpair()
    raw = {}
    pipes = []
    for _ in range(2):
        r, w = os.pipe()
        pipes.append(w)
        raw[r] = [b"", 0]  # kept bytes, dropped bytes
    command = [*bwrap_command(spec["allowed"], uid, data_fds), *spec["worker"]]
    worker = subprocess.Popen(
        [*command, str(theirs.fileno())], stdin=subprocess.DEVNULL, stdout=pipes[0],
        stderr=pipes[1], pass_fds=(theirs.fileno(), *data_fds.values()), env=spec["env"],
        start_new_session=True, preexec_fn=_limits(spec, uid, os.getpid()),
    )  # fmt: skip
    theirs.close()
    for fd in data_fds.values():
        os.close(fd)
    for w in pipes:
        os.close(w)
    if spec.get("judged"):
        _judge(spec, ours, emit, worker, raw)  # never returns
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
            emit({"grade_id": cells[index]["grade_id"], "index": index,
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
    try:  # bubblewrap's death takes its PID namespace, and every process in it, with it
        os.kill(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os._exit(0)


def _judge(spec: dict, ours, emit, worker, raw) -> None:
    """The judged run (the supervisor is the judge): every cell of the lab's that is not a test
    runs here too, in a namespace of the judge's, where each name a solution cell bound is a
    :class:`zg_course.remote.RemoteFunction` (or its value, read back by value); every test runs
    only here, in a fork of the judge, against a fork of the worker, and its verdict is the
    judge's. The worker runs the cells that are not tests, in order, and answers calls."""
    import builtins
    import contextlib
    import threading

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    cells = spec["cells"]
    kept = {r: [b"", 0] for r in raw}

    def drain(fd: int) -> None:  # the worker's raw stdout and stderr, read while the judge works
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            have, dropped = kept[fd]
            room = RAW_LIMIT - len(have)
            kept[fd] = [have + chunk[:room], dropped + max(0, len(chunk) - room)]

    threads = [threading.Thread(target=drain, args=(fd,), daemon=True) for fd in raw]
    for t in threads:
        t.start()
    ours.setblocking(True)
    import resource

    # the judge reads what the worker sends: bounded as a worker's process is by default
    # (--memory lower than that is the worker's alone: the judge must still report)
    limit = max(spec["memory"], int(MEMORY_GIB * (1 << 30)))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    from zg_course import remote

    channel = remote.Channel(ours)
    remote.connect(channel)
    remote.record_mode_arguments()
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    complete, failure = judge_cells(cells, channel, namespace, emit)
    if failure:
        with contextlib.suppress(Exception):
            status = _reap()
            if worker.pid in status:
                failure += f" ({_status(status[worker.pid])})"
    with contextlib.suppress(OSError):
        ours.shutdown(socket.SHUT_RDWR)
    try:
        os.kill(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for t in threads:
        t.join(timeout=2)
    log = []
    for name, (have, dropped) in zip(("stdout", "stderr"), kept.values()):
        if have:
            text = have.decode(errors="replace")
            log.append(
                f"[{name}] {text}" + (f"\n[{dropped} more bytes dropped]" if dropped else "")
            )
    emit({"end": True, "complete": complete, "failure": failure, "log": "\n".join(log)[-8000:]})
    sys.stdout.flush()
    os._exit(0)


def judge_cells(
    cells: list, channel, namespace: dict, emit, stop=None, fork_worker: bool = True
) -> tuple[bool, str | None]:
    """Run ``cells`` as the judge, against the worker at the other end of ``channel``: the
    cells that are not tests in the worker and again in ``namespace``, every test in
    ``namespace`` only (in a fork, for a hidden one), each solution cell's names bound to
    :class:`zg_course.remote.RemoteFunction` stand-ins. ``emit`` gets each cell's output and
    each test's verdict; ``stop(verdict)`` True ends the run there. Returns (complete,
    failure): failure says where the worker ended or broke the protocol. ``fork_worker``: each
    cell of the judge's calls a fork of the worker (its side effects there end with the cell),
    else the worker itself (as a kernel keeps them: the forked graders)."""
    import contextlib
    import io
    import linecache
    import traceback

    from zg_course import remote

    where = "before its first cell"

    def expect(*ops: str) -> dict:
        header, _ = channel.recv()
        if header.get("op") not in ops:
            raise remote.RemoteError(f"protocol: {str(header.get('op'))[:40]!r} for {ops}")
        return header

    def here(cell: dict, forked: bool) -> str | None:
        """Run one cell in the judge's namespace; its error, or None."""
        ids = {k: id(v) for k, v in namespace.items()}
        try:
            return _exec(cell)
        finally:
            if not cell["hidden"]:  # the worker ran it too: what it bound, the worker has
                remote.shared(namespace, [k for k, v in namespace.items() if ids.get(k) != id(v)])

    def _exec(cell: dict) -> str | None:
        code = cell["source"]
        filename = f"<lab-cell {cell['grade_id'] or cell['index']}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                exec(compile(code, filename, "exec"), namespace)
            except remote.NeedsWorker:
                raise
            except BaseException as exc:
                return traceback.format_exception_only(type(exc), exc)[-1].strip()
        return None

    def opened() -> str | None:
        """The worker's side of one cell of the judge's: a fork of it, or itself."""
        if fork_worker:
            channel.send({"op": "fork"})
            header = expect("ready", "back")
            if header["op"] == "back":
                why = str(header.get("error") or "")[:200]
                return f"the submission's process could not fork for the test ({why})"
        return None

    def closed() -> tuple[str | None, bool]:
        """(what the integrity check found, whether the worker's fork ended before)."""
        if not fork_worker:
            channel.send({"op": "check"})
            return expect("closed").get("tampered"), False
        channel.send({"op": "done"})
        header = expect("closed", "back")
        return header.get("tampered"), header["op"] == "back"

    def in_worker(cell: dict) -> str | None:  # a test the judge cannot run by value
        return channel.request({"op": "test", "cell": _public(cell)})[0].get("error")

    def session(cell: dict) -> dict:
        """A cell of the judge's, its calls answered by the worker (a fork of it, with
        ``fork_worker``): {"error": ..., "inside": ...}; the judge itself forks for a hidden
        test, whose side effects end with it."""
        error = opened()
        if error:
            return {"error": error}
        if not cell["hidden"]:  # a locked cell or a visible test: what it binds, later cells use
            inside = False
            try:
                error = here(cell, False)
            except remote.NeedsWorker:  # the cell runs in the worker instead
                inside = True
                error = in_worker(cell)
            tampered, back = closed()
            if fork_worker and not back:
                expect("back")
            return {"error": tampered or error, "inside": inside}
        r, w = os.pipe()
        torch = sys.modules.get("torch")
        if torch is not None:
            torch.set_num_threads(1)  # GNU OpenMP's pool does not survive fork
        pid = os.fork()
        if pid == 0:
            os.close(r)
            verdict = {"error": None, "back": False, "inside": False}
            try:
                try:
                    verdict["error"] = here(cell, True)
                except remote.NeedsWorker:  # the cell runs in the worker instead
                    verdict["inside"] = True
                    verdict["error"] = in_worker(cell)
                tampered, verdict["back"] = closed()
                if verdict["back"]:
                    verdict["error"] = (
                        verdict["error"] or "the submission's process ended during the test"
                    )
                elif tampered:
                    verdict["error"] = str(tampered)
            except BaseException as exc:
                verdict["error"] = verdict["error"] or f"{type(exc).__name__}: {exc}"[:2000]
            os.write(w, json.dumps(verdict).encode())
            os._exit(0)
        os.close(w)
        data = b""
        while True:
            chunk = os.read(r, 65536)
            if not chunk:
                break
            data += chunk
        os.close(r)
        os.waitpid(pid, 0)
        try:
            verdict = json.loads(data)
        except ValueError:
            verdict = {"error": "the judge's test process ended without a verdict", "back": False}
        if fork_worker and not verdict.get("back"):
            expect("back")
        return verdict

    first_theirs = min([c["index"] for c in cells if not c["locked"]], default=math.inf)
    try:
        for cell in cells:
            where = (
                f"in cell {cell['grade_id'] or cell['index']}"
                if cell["index"] >= first_theirs
                else "before its first cell"  # the lab's own cells: not the submission's doing
            )
            if not cell["hidden"]:  # the worker runs it too (a visible test: not its verdict)
                channel.send({"op": "cell", "cell": _public(cell)})
                header = expect("output")
                emit({"grade_id": cell["grade_id"], "index": cell["index"],
                      "output": str(header.get("output") or "")[-OUTPUT_LIMIT:],
                      "error": None if cell["graded"] else _short(header.get("error"))})  # fmt: skip
            if cell["graded"]:
                verdict = session(cell)
                event = {"grade_id": cell["grade_id"], "passed": verdict.get("error") is None,
                         "output": "", "error": _short(verdict.get("error")),
                         "inside": bool(verdict.get("inside"))}  # fmt: skip
                emit(event)
                if stop is not None and stop(event):
                    return False, None
                continue
            if not cell["locked"]:
                for d in header.get("defined") or []:
                    name = str(d.get("name"))
                    if d.get("kind") == "function":
                        namespace[name] = remote.RemoteFunction(
                            name, d.get("parameters") or [], d.get("source")
                        )
                    elif d.get("kind") == "module":  # one the judge has imported already
                        if str(d.get("module")) in sys.modules:
                            namespace[name] = sys.modules[str(d["module"])]
                    else:
                        with contextlib.suppress(remote.RemoteError):  # else no test sees it
                            namespace[name] = remote._ask("value", name=name)
                continue
            session(cell)
        channel.send({"op": "end"})
        return True, None
    except (remote.RemoteError, EOFError, OSError, ValueError) as exc:
        return False, f"the submission's process ended {where} ({str(exc)[:200]})"


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
    """What ended the worker, from bubblewrap's status (it exits 128 + N when a signal N
    killed the worker)."""
    if os.WIFSIGNALED(status):
        return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
    code = os.waitstatus_to_exitcode(status)
    if 128 < code < 128 + signal.NSIG:
        try:
            return f"killed by {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"exit status {code}"


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


def work_judged(fd: int, namespace: dict | None = None, intact_from_now: bool = False) -> int:
    """The worker of a judged run: runs the cells it is sent (none is a test), in one namespace,
    and answers the judge's calls of the notebook's functions (:func:`zg_course.remote.serve`);
    "fork" starts a fork that answers the calls of one cell of the judge's, then ends."""
    import contextlib
    import io
    import linecache
    import traceback

    sock = socket.socket(fileno=fd)
    if namespace is None:
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    from zg_course.integrity import changes, fingerprint
    from zg_course.integrity import message as integrity_message

    state = {"before": fingerprint() if intact_from_now else None, "tampered": None}

    def drop_references() -> None:
        """The kit's references and the lab's own, held so far: dropped from this process (their
        tests run in the judge). Once the lab's setup has run (it holds them), and again after
        every cell of the lab's; new holds keep no original either."""
        labs = sys.modules.get("zg_course.labs")
        if labs is not None:
            labs._absent_in_worker(namespace)

    drop_references()

    def tampered() -> str | None:
        if state["tampered"] is None and state["before"] is not None:
            changed = changes(state["before"])
            if changed:
                state["tampered"] = "tamper: " + integrity_message(changed)
        return state["tampered"]

    def recv() -> tuple[dict, bytes]:
        try:
            return recv_frame(sock, RESULT_LIMIT)
        except (EOFError, OSError, ValueError):
            os._exit(3)  # the judge is gone

    def run(cell: dict) -> None:
        code = cell["source"]
        filename = f"<lab-cell {cell['grade_id'] or cell['index']}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        buf, error = io.StringIO(), None
        if cell.get("locked", True):
            tampered()  # what the cells before did to the grader's code, kept from here on
        ids = {k: id(v) for k, v in namespace.items()}
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                exec(compile(code, filename, "exec"), namespace)
            except BaseException as exc:  # a failing cell earns 0, as in nbgrader
                error = traceback.format_exception_only(type(exc), exc)[-1].strip()
        defined = []
        if not cell.get("locked", True):
            bound = [k for k, v in namespace.items()
                     if not k.startswith("__") and ids.get(k) != id(v)]  # fmt: skip
            try:
                from zg_course import remote

                defined = remote.describe(namespace, bound)
            except Exception as exc:
                error = error or f"{type(exc).__name__}: {exc}"
        else:
            drop_references()
            if not cell.get("graded") and state["tampered"] is None:
                state["before"] = fingerprint()  # the locked cell's own changes are the lab's
        send_frame(sock, {"op": "output", "index": cell["index"],
                                 "output": buf.getvalue()[-OUTPUT_LIMIT:], "error": error,
                                 "defined": defined})  # fmt: skip

    def test(cell: dict) -> str | None:
        """A test cell run here (:class:`zg_course.remote.NeedsWorker`): its error, or None."""
        code = cell["source"]
        filename = f"<lab-cell {cell['grade_id'] or cell['index']}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
        if tampered():
            return state["tampered"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                exec(compile(code, filename, "exec"), namespace)
            except BaseException as exc:  # a failing test fails its cell
                return traceback.format_exception_only(type(exc), exc)[-1].strip()
        return tampered()

    def answer(header: dict, blob: bytes) -> None:
        from zg_course import remote

        out_header, out_blob = remote.serve(namespace, header, blob)
        send_frame(sock, out_header, out_blob)

    while True:
        header, blob = recv()
        op = header.get("op")
        if op == "end":
            os._exit(0)
        if op == "cell":
            run(header["cell"])
        elif op == "fork":
            tampered()  # kept in this process too: every fork after it reports it
            torch = sys.modules.get("torch")
            if torch is not None:
                torch.set_num_threads(1)  # GNU OpenMP's pool does not survive fork
            sys.stdout.flush()
            sys.stderr.flush()
            try:
                pid = os.fork()
            except OSError as exc:  # at the process limit: the cell fails, the run goes on
                send_frame(sock, {"op": "back", "error": f"{type(exc).__name__}: {exc}"})
                continue
            if pid == 0:
                try:
                    sys.settrace(None)
                    sys.setprofile(None)
                    send_frame(sock, {"op": "ready"})
                    while True:
                        header, blob = recv()
                        if header.get("op") == "done":
                            send_frame(sock, {"op": "closed", "tampered": tampered()})
                            break
                        if header.get("op") == "test":  # a test the judge could not run
                            send_frame(sock, {"op": "verdict", "error": test(header["cell"])})
                            continue
                        answer(header, blob)
                finally:
                    os._exit(0)
            os.waitpid(pid, 0)
            send_frame(sock, {"op": "back"})
        elif op == "done":
            continue  # a fork's, which ended before it
        elif op == "check":  # the end of a cell of the judge's, answered here
            contract = sys.modules.get("zg_course.contract")
            if contract is not None:
                contract._ALIVE.clear()  # what the cell's calls kept alive
            send_frame(sock, {"op": "closed", "tampered": tampered()})
        elif op == "test":  # a test the judge could not run, here
            send_frame(sock, {"op": "verdict", "error": test(header["cell"])})
        else:
            answer(header, blob)


# ----------------------------------------------------------------------------- the command


def check(labs: list[str], course: Path, timeout: float, **limits) -> int:
    """Grade every lab's model solution (its source notebook) in the sandbox: full marks each."""
    names = labs or sorted(
        p.name for p in (course / "source").iterdir() if (p / f"{p.name}.ipynb").is_file()
    )
    failed = 0
    began = time.monotonic()
    for name in names:
        source = course / "source" / name / f"{name}.ipynb"
        report = grade(source, course=course, lab=name, timeout=timeout, **limits)
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
    if argv[:1] in (["--worker"], ["--worker-judged"]):
        # Run as a file, this folder is first on sys.path: the cells import the course as
        # zg_course (PYTHONPATH), never its modules by their bare names.
        if sys.path and Path(sys.path[0] or ".").resolve() == COURSE:
            del sys.path[0]
        return (work_judged if argv[0] == "--worker-judged" else work)(int(argv[1]))

    def flag(check, name: str):
        def parse(text: str):
            try:
                return check(text)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{name} ")) from None

        return parse

    positive = flag(timeout_seconds, "--timeout")

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("submissions", nargs="*", type=Path, help="submitted NN_name.ipynb files")
    parser.add_argument("--course", type=Path, default=ROOT / "labs", help="the nbgrader course")
    parser.add_argument("--lab", help="the lab (default: the notebook's file name)")
    parser.add_argument("--timeout", type=positive, default=600.0, help="wall-clock seconds each")
    gib = flag(lambda text: memory_bytes(text) and float(text), "--memory")  # checked, in GiB
    parser.add_argument("--memory", type=gib, default=MEMORY_GIB,
                        help=f"GiB of address space per process (default {MEMORY_GIB:g})")  # fmt: skip
    parser.add_argument("--processes", type=flag(process_count, "--processes"), default=PROCESSES,
                        help=f"processes + threads of the sandbox (default {PROCESSES}, at least "
                        f"{PROCESSES_MIN})")  # fmt: skip
    parser.add_argument("--json", type=Path, help="write every report here")
    parser.add_argument("--check", action="store_true",
                        help="grade every lab's model solution (or the labs named): full marks")  # fmt: skip
    parser.add_argument("--inside", action="store_true",
                        help="run the tests in forks of the worker, as before the judge (to compare)")  # fmt: skip
    parser.add_argument("--no-scan", action="store_true",
                        help="skip the tamper scan (to test the sandbox alone)")  # fmt: skip
    args = parser.parse_args(argv)
    from zg._io import command_output_arg, write_text  # the kit's checks and its one writer

    stop_if_interrupted()  # the import takes seconds, and may swallow an interrupt

    # Before any grading: a folder, a named pipe, a dangling link, a missing folder (exit 2).
    command_output_arg(parser, args.json, "--json")
    if args.check:
        return check([str(s) for s in args.submissions], args.course, args.timeout,
                     memory_gib=args.memory, processes=args.processes)  # fmt: skip
    if not args.submissions:
        parser.error("no submissions given")
    reports, malformed, unfair = [], 0, 0
    for sub in args.submissions:
        report = grade(sub, course=args.course, lab=args.lab, timeout=args.timeout,
                       memory_gib=args.memory, processes=args.processes,
                       run_scan=not args.no_scan, judge=not args.inside)  # fmt: skip
        malformed += report.get("failure", "").startswith("malformed:")
        unfair += bool(report.get("grader_error"))
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
    if unfair:
        print(
            f"zg_course.sandbox: {unfair} of {len(reports)} submissions not graded: the lab's own "
            "code failed before theirs ran (see each failure)"
        )
    return 1 if malformed or unfair else 0


if __name__ == "__main__":
    if sys.argv[1:2] not in (["--supervise"], ["--worker"], ["--worker-judged"]):
        watch_interrupts()  # the grader: before its imports, which may swallow an interrupt
    sys.exit(main())
