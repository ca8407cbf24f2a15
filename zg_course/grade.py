"""Grade variants of a lab's solution cells in this process, each in a forked child.

The shared engine of ``make labs-wrong``, ``make labs-right`` and ``make labs-mutants``. A lab's
source notebook runs once, cell by cell, in one namespace, as nbgrader's kernel runs it. Just
before a cell that a variant replaces, the process forks: the child runs the variant in that
cell's place and every code cell after it (up to the last graded cell the variant is judged on),
reports which graded cells passed through a pipe, and exits. The parent then runs the instructor's
cell and goes on. So a lab's setup runs once however many variants are graded, a variant cannot
disturb the next one (it runs in its own copy of the process), and a variant that never ends is
killed at its deadline with its process group (it earns nothing, as under nbgrader's timeout).

Each cell's code is registered in ``linecache`` under its own file name, as IPython does, so
``inspect.getsource`` works on the functions a cell defines (Lab 6 sends the student's hook to
its workers as source code).

    from zg_course.grade import Lab, Variant
    lab = Lab(Path("labs/source/04_overflow_rewind/04_overflow_rewind.ipynb"))
    results = lab.grade([Variant("mine", {"gated_sgd": code})])   # {key: Outcome}

Before any variant runs, ``zg_course/tamper.py`` scans its cells: a variant that rebinds a name
the lab's locked cells bind, sets an attribute of a module, or builds code at run time earns no
point, and its failure names the line (``Lab(scan=False)`` turns the scan off, for tests of
what the scan alone stops). While a variant runs, ``zg_course/integrity.py`` checks that the
grader's own code (``zg_course.contract``, ``zg_course.labs``, ``zg.audit``, ``zg``, ``builtins``, torch's
comparisons, the kit's classes) is what it was before the variant's first cell, before every
cell the variant did not write and after every test cell: a change, by whatever route, fails
every graded cell from there on, with the failure "tamper: the submission changed the grader's
code: <names>" (``Lab(integrity=False)`` turns it off).

The judge (``Lab(judge=True)``, the default): each variant's child is the judge and forks a
worker from itself; the worker runs the variant's cells and the lab's cells that are not tests
and answers calls, the judge runs every test (a hidden one in a fork of itself) with the
variant's functions as :class:`zg_course.remote.RemoteFunction` stand-ins, as the sandbox's
judge does (``zg_course.sandbox.judge_cells``, without bubblewrap). The instructor's run forks
for each hidden cell, so no test of the lab's is in the copies the workers start from.
``Lab(judge=False)`` (``--in-process`` of the tools) runs the tests in the variant's process.

What the fork does not contain: files the variant writes, and processes it starts outside its
process group. The graded labs write no files; `zg_course/wrong.py --nbgrader` grades with
nbgrader itself where that matters.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import linecache
import os
import select
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from zg_course.integrity import changes, fingerprint
from zg_course.integrity import message as integrity_message

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Cell:
    index: int  # position among the notebook's code cells
    grade_id: str | None
    source: str
    solution: bool  # a cell the student writes
    points: float  # autograded points (0 for a cell that is not an autograded test)

    @property
    def graded(self) -> bool:
        return self.points > 0 and not self.solution


@dataclass
class Variant:
    """A submission to grade: the code of one or more solution cells, by grade_id."""

    key: str
    cells: dict[str, str]
    judged_on: list[str] | None = None  # graded cells counted (default: every one after the fork)
    stop_at_failure: bool = False  # a mutant is killed by its first failing cell: stop there
    timeout: float | None = None  # seconds it may run (default: the Lab's)


@dataclass
class Outcome:
    key: str
    passed: dict[str, bool] = field(default_factory=dict)  # graded cell -> passed
    points: dict[str, float] = field(default_factory=dict)  # graded cell -> its points
    failure: str = ""  # the first failing cell and the last line of its error
    timed_out: bool = False
    seconds: float = 0.0

    @property
    def earned(self) -> float:
        return sum(p for g, p in self.points.items() if self.passed.get(g))

    @property
    def total(self) -> float:
        return sum(self.points.values())

    @property
    def full_marks(self) -> bool:
        return not self.timed_out and all(self.passed.get(g) for g in self.points)


def code_cells(source: Path) -> list[Cell]:
    return cells_of(json.loads(source.read_text()))


def cells_of(nb: dict) -> list[Cell]:
    """The code cells of a notebook (its JSON), with their nbgrader metadata."""
    cells = []
    for c in nb["cells"]:
        if c["cell_type"] != "code":
            continue
        meta = c.get("metadata", {}).get("nbgrader", {})
        src = c["source"] if isinstance(c["source"], str) else "".join(c["source"])
        cells.append(
            Cell(
                index=len(cells),
                grade_id=meta.get("grade_id"),
                source=src,
                solution=bool(meta.get("solution")),
                points=float(meta.get("points") or 0) if meta.get("grade") else 0.0,
            )
        )
    return cells


def parts(cells: list[Cell]) -> dict[str, list[str]]:
    """{solution cell: the graded test cells after it, up to the next solution cell}."""
    out, current = {}, None
    for cell in cells:
        if cell.solution and not cell.points:
            current = cell.grade_id
            out[current] = []
        elif cell.graded and current is not None:
            out[current].append(cell.grade_id)
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _contract_checked(node: ast.AST) -> set[str]:
    """The functions a cell hands to ``zg_course.contract.check`` (its first argument)."""
    return {
        n.args[0].id
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "check"
        and isinstance(n.func.value, ast.Attribute)
        and n.func.value.attr == "contract"
        and n.args
        and isinstance(n.args[0], ast.Name)
    }


def part_of(cells: list[Cell], cell: str, function: str | None = None) -> list[str]:
    """The graded test cells a submission of solution cell ``cell`` is judged on, read from the
    notebook's structure now (no grade_id of a test cell is named, so the labs may be
    reorganised: test cells renamed, moved, cells inserted).

    The part of ``cell`` is :func:`parts`: the graded cells after it, up to the next solution
    cell. Where the cell defines several functions, ``function`` narrows it to the graded cells
    about that function: a test cell is about the cell's functions it names (a call, or the
    function handed to ``zg_course.contract.check``), less those that another function it names
    calls in the instructor's solution (a test of ``smallest_margin`` that also calls
    ``overflow_rate``, which ``smallest_margin`` calls, is about ``smallest_margin``), except
    those it hands to ``zg_course.contract.check`` itself (Lab 6's contract cell checks
    ``batch_scales``' contract as well as ``shrink_scales``', which calls it). A test cell that
    names none of them is about every one. ``function=None`` is the whole part.
    """
    by_id = {c.grade_id: c for c in cells if c.grade_id}
    whole = parts(cells)
    if cell not in whole:
        raise ValueError(f"no solution cell {cell!r}")
    tree = ast.parse(by_id[cell].source)
    defs = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    if function is None:
        return list(whole[cell])
    if function not in defs:
        raise ValueError(
            f"solution cell {cell!r} defines no function {function!r} (it defines {sorted(defs)})"
        )
    if len(defs) == 1:
        return list(whole[cell])
    # what each function calls of the cell's others, transitively, in the instructor's solution
    calls = {f: _names(node) & set(defs) - {f} for f, node in defs.items()}
    changed = True
    while changed:
        changed = False
        for f in calls:
            more = set().union(*(calls[g] for g in calls[f])) - {f} if calls[f] else set()
            if not more <= calls[f]:
                calls[f] |= more
                changed = True
    out = []
    for gid in whole[cell]:
        tree = ast.parse(by_id[gid].source)
        named = _names(tree) & set(defs)
        checked = _contract_checked(tree)
        about = {
            f for f in named if f in checked or not any(f in calls[g] for g in named if g != f)
        }
        if function in (about or defs):
            out.append(gid)
    return out


def _run_cell(cell: Cell, code: str, namespace: dict, tag: str) -> str | None:
    """Run one cell's code; None when it passed, else the last line of its error."""
    filename = f"<lab-cell {tag} {cell.grade_id or cell.index}>"
    linecache.cache[filename] = (len(code), None, code.splitlines(keepends=True), filename)
    try:
        exec(compile(code, filename, "exec"), namespace)
    except BaseException as exc:  # a failing cell earns 0, as in nbgrader; SystemExit too
        if isinstance(exc, KeyboardInterrupt):
            raise
        return "".join(traceback.format_exception_only(type(exc), exc)).strip().splitlines()[-1]
    return None


class Lab:
    """One lab's source notebook, run once in this process, with variants graded in forks."""

    def __init__(
        self,
        source: Path,
        *,
        timeout: float = 60.0,
        jobs: int = 2,
        quiet: bool = True,
        scan: bool = True,
        integrity: bool = True,
        judge: bool = True,
    ):
        self.source = Path(source).resolve()
        self.name = self.source.parent.name
        self.cells = code_cells(self.source)
        self.scan = scan
        self.integrity = integrity  # check the grader's code is intact (zg_course/integrity.py)
        self.judge = judge  # the tests in the judge, the variant in a worker (zg_course.remote)
        model = self.findings({c.grade_id: c.source for c in self.cells if c.solution})
        if model:
            raise ValueError(f"{self.name}: the model solution fails the tamper scan: {model[0]}")
        self.by_id = {c.grade_id: c for c in self.cells if c.grade_id}
        self.parts = parts(self.cells)
        self.timeout, self.jobs, self.quiet = timeout, max(1, jobs), quiet
        self.base: dict[str, bool] = {}  # graded cell -> passed, in the instructor's run
        self.base_failures: dict[str, str] = {}
        self.cell_seconds: dict[int, float] = {}

    def check_variant(self, variant: Variant) -> None:
        for gid in variant.cells:
            cell = self.by_id.get(gid)
            if cell is None or not cell.solution:
                raise ValueError(f"{variant.key}: {self.name} has no solution cell {gid!r}")
        for gid in variant.judged_on or ():
            if gid not in self.by_id or not self.by_id[gid].graded:
                raise ValueError(f"{variant.key}: {self.name} has no graded cell {gid!r}")

    def findings(self, cells: dict[str, str]) -> list:
        """What the tamper scan finds in ``cells`` ({grade_id: code}); [] with ``scan=False``."""
        if not self.scan:
            return []
        from zg_course.tamper import scan

        setup = [c.source for c in self.cells if not c.solution and not c.graded]
        tests = [c.source for c in self.cells if c.graded]
        return scan(cells, setup, tests)

    def grade(self, variants: list[Variant], progress=None) -> dict[str, Outcome]:
        """Run the notebook once; grade every variant in a fork at its first replaced cell.

        A variant the tamper scan flags is not run: it earns nothing, and its failure says why.
        """
        for v in variants:
            self.check_variant(v)
        outcomes: dict[str, Outcome] = {}
        clean = []
        for v in variants:
            found = self.findings(v.cells)
            if not found:
                clean.append(v)
                continue
            outcomes[v.key] = self._outcome(v, b"{}", False, 0.0)
            outcomes[v.key].failure = f"tamper: {found[0]}" + (
                f" (and {len(found) - 1} more)" if len(found) > 1 else ""
            )
            if progress is not None:
                progress(outcomes[v.key])
        variants = clean
        at: dict[int, list[Variant]] = {}
        for v in variants:
            at.setdefault(min(self.by_id[g].index for g in v.cells), []).append(v)
        # A forked child hangs in its first parallel region when the parent's OpenMP pool ran
        # (GNU OpenMP is not fork-safe): parent and children run single-threaded.
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        namespace = {"__name__": "__main__", "__builtins__": __builtins__}
        cwd = os.getcwd()
        os.chdir(self.source.parent)
        try:
            for cell in self.cells:
                if cell.index in at:
                    for outcome in self._fork_all(at[cell.index], namespace, progress):
                        outcomes[outcome.key] = outcome
                t = time.perf_counter()
                with self._silenced():
                    if self.judge and _hidden(cell):  # no test's objects in the workers' copies
                        error = _run_forked(cell, namespace)
                    else:
                        error = _run_cell(cell, cell.source, namespace, "source")
                self.cell_seconds[cell.index] = time.perf_counter() - t
                if cell.graded:
                    self.base[cell.grade_id] = error is None
                    if error:
                        self.base_failures[cell.grade_id] = error
        finally:
            torch.set_num_threads(threads)
            os.chdir(cwd)
        return outcomes

    @contextlib.contextmanager
    def _silenced(self):
        if not self.quiet:
            yield
            return
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            yield

    def _last_index(self, variant: Variant) -> int:
        judged = variant.judged_on
        if judged is None:
            return len(self.cells) - 1
        return max(self.by_id[g].index for g in judged)

    def _child(self, variant: Variant, namespace: dict, start: int, write_fd: int) -> None:
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        sys.stdout = sys.stderr = io.StringIO()
        passed, failure = {}, ""
        last = self._last_index(variant)
        judged = set(variant.judged_on) if variant.judged_on is not None else None
        if self.judge:
            passed, failure = self._judged(variant, namespace, start, last, judged)
            with os.fdopen(write_fd, "w") as pipe:
                pipe.write(json.dumps({"passed": passed, "failure": failure[:400]}) + "\n")
            os._exit(0)
        # The grader's code as it is before the variant's first cell (the lab's setup ran):
        # checked before every cell the variant did not write and after every test cell.
        before = fingerprint() if self.integrity else None
        for cell in self.cells[start : last + 1]:
            theirs = cell.grade_id in variant.cells
            changed = [] if theirs or before is None else changes(before)
            if changed:
                failure = "tamper: " + integrity_message(changed)
                break  # every graded cell from here on fails
            code = variant.cells.get(cell.grade_id, cell.source)
            error = _run_cell(cell, code, namespace, variant.key)
            if cell.graded and before is not None:
                changed = changes(before)  # what a test saw while it called the student's code
                if changed:
                    failure = "tamper: " + integrity_message(changed)
                    break
            elif not theirs and before is not None:
                before = fingerprint()  # a locked cell's (or the instructor's) own changes
            if cell.graded and (judged is None or cell.grade_id in judged):
                passed[cell.grade_id] = error is None
                if error and not failure:
                    failure = f"{cell.grade_id}: {error}"
                if error and variant.stop_at_failure:
                    break
        with os.fdopen(write_fd, "w") as pipe:
            # one line: the parent takes the report as whole at its newline, without waiting
            # for the pipe to close (a process the variant forked may hold it open)
            pipe.write(json.dumps({"passed": passed, "failure": failure[:400]}) + "\n")
        os._exit(0)

    def _judged(self, variant: Variant, namespace: dict, start: int, last: int, judged):
        """The variant graded by the judge (this process) against a worker (a fork of it that
        runs the variant's cells): ``zg_course.sandbox.judge_cells``, without the sandbox."""
        import socket

        from zg_course import remote, sandbox

        ours, theirs = socket.socketpair()
        pid = os.fork()
        if pid == 0:  # the worker: the variant's cells and the lab's, and the judge's calls
            ours.close()
            try:
                sandbox.work_judged(theirs.detach(), namespace, intact_from_now=self.integrity)
            finally:
                os._exit(0)
        theirs.close()
        remote.shared(namespace, list(namespace))  # what the worker has of its own: all of it
        remote.connect(remote.Channel(ours))
        remote.record_mode_arguments()
        cells = [
            {
                "index": c.index,
                "grade_id": c.grade_id,
                "source": variant.cells.get(c.grade_id, c.source),
                "graded": c.graded,
                "locked": not c.solution,
                "hidden": _hidden(c),
            }  # fmt: skip
            for c in self.cells[start : last + 1]
        ]
        passed, failures = {}, []

        def emit(event: dict) -> None:
            gid = event.get("grade_id")
            if "passed" in event and (judged is None or gid in judged):
                passed[gid] = bool(event["passed"])
                if not event["passed"]:
                    failures.append(f"{gid}: {event.get('error')}")

        def stop(event: dict) -> bool:
            return (
                variant.stop_at_failure
                and not event["passed"]
                and (judged is None or event["grade_id"] in judged)
            )

        complete, failure = sandbox.judge_cells(
            cells, remote._CHANNEL[0], namespace, emit, stop, fork_worker=False
        )  # the variant's process keeps what the tests' calls did, as before the judge
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        for f in failures:
            if f.split(": ", 1)[1].startswith("tamper: "):
                return passed, f.split(": ", 1)[1]
        if failure:  # the worker ended, or broke the protocol
            failure = f"the variant's process ended before it reported: {failure}"
        return passed, (failures[0] if failures else failure or "")

    def _fork_all(self, variants: list[Variant], namespace: dict, progress) -> list[Outcome]:
        start = min(self.by_id[g].index for g in variants[0].cells)
        pending, running, done = list(variants), {}, []
        sys.stdout.flush()
        sys.stderr.flush()
        import torch

        torch.set_num_threads(1)  # a cell may have raised it: see grade()
        while pending or running:
            while pending and len(running) < self.jobs:
                variant = pending.pop(0)
                read_fd, write_fd = os.pipe()
                pid = os.fork()
                if pid == 0:  # the child
                    os.close(read_fd)
                    try:
                        self._child(variant, namespace, start, write_fd)
                    finally:
                        os._exit(1)
                os.close(write_fd)
                running[read_fd] = (pid, variant, time.monotonic(), [])
            ready, _, _ = select.select(list(running), [], [], 0.05)
            now = time.monotonic()
            for fd in list(running):
                pid, variant, began, chunks = running[fd]
                finished = False
                if fd in ready:
                    chunk = os.read(fd, 65536)
                    if chunk:
                        chunks.append(chunk)
                    finished = not chunk or chunk.endswith(b"\n")  # closed, or the whole report
                if not finished and now - began <= (variant.timeout or self.timeout):
                    continue
                timed_out = not finished
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                os.close(fd)
                del running[fd]
                done.append(self._outcome(variant, b"".join(chunks), timed_out, now - began))
                if progress is not None:
                    progress(done[-1])
        return done

    def _outcome(self, variant: Variant, data: bytes, timed_out: bool, seconds: float) -> Outcome:
        start = min(self.by_id[g].index for g in variant.cells)
        if variant.judged_on is not None:
            judged = list(variant.judged_on)
        else:
            judged = [c.grade_id for c in self.cells[start:] if c.graded]
        outcome = Outcome(variant.key, seconds=seconds, timed_out=timed_out)
        outcome.points = {g: self.by_id[g].points for g in judged}
        try:
            report = json.loads(data.decode() or "{}")
        except ValueError:
            report = {}
        outcome.passed = {g: bool(report.get("passed", {}).get(g)) for g in judged}
        # The child's report says what failed ("" when every cell passed); with no report the
        # child was killed at the deadline or ended before writing one.
        if "passed" in report:
            outcome.failure = report.get("failure", "")
        elif timed_out:
            outcome.failure = f"killed at the {variant.timeout or self.timeout:g} s deadline"
        else:
            outcome.failure = "the child ended before it reported (it exited or was killed)"
        return outcome


def _hidden(cell: Cell) -> bool:
    return cell.graded and "### BEGIN HIDDEN TESTS" in cell.source


def _run_forked(cell: Cell, namespace: dict) -> str | None:
    """Run a cell in a fork of this process (its side effects end with it): its error."""
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        error = _run_cell(cell, cell.source, namespace, "source")
        os.write(w, json.dumps({"error": error}).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    try:
        return json.loads(data)["error"]
    except (ValueError, KeyError):
        return "the cell's process ended without a verdict"


def lab_source(course: Path, lab: str) -> Path:
    path = Path(course) / "source" / lab / f"{lab}.ipynb"
    if not path.is_file():
        raise SystemExit(f"labs: no lab {lab!r} (want {path})")
    return path


def main(argv=None) -> int:
    """Run a lab's source notebook (the instructor's solutions) cell by cell in this process and
    report each graded cell: what a machine without Jupyter can still run (a GPU machine with
    only torch, for Lab 8's capture part). Exit status 1 when a graded cell fails."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__.split("\n")[0])
    ap.add_argument("notebook", help="a lab's source notebook, e.g. labs/source/08_capture/...")
    ap.add_argument("--json", default=None, help="write the per-cell results here")
    args = ap.parse_args(argv)
    from zg._io import command_output_arg, open_regular_file, write_text

    # Before any cell runs: the notebook must be a regular file (a named pipe would block), and
    # --json a path a file can be written at (exit status 2, naming the argument).
    try:
        open_regular_file(args.notebook, "notebook", what="a lab's notebook").close()
    except (OSError, ValueError) as exc:
        ap.error(str(exc))
    command_output_arg(ap, args.json, "--json")
    lab = Lab(Path(args.notebook), quiet=False)
    start = time.perf_counter()
    lab.grade([])
    seconds = time.perf_counter() - start
    rows = [
        {
            "grade_id": c.grade_id,
            "points": c.points,
            "passed": lab.base[c.grade_id],
            "failure": lab.base_failures.get(c.grade_id, ""),
            "seconds": round(lab.cell_seconds[c.index], 3),
        }
        for c in lab.cells
        if c.graded
    ]
    print(f"\n{'graded cell':<40} {'points':>6}  passed  seconds")
    for r in rows:
        print(f"{r['grade_id']:<40} {r['points']:>6g}  {str(r['passed']):<6}  {r['seconds']:.2f}")
        if r["failure"]:
            print(f"    {r['failure']}")
    earned = sum(r["points"] for r in rows if r["passed"])
    print(f"{lab.name}: {earned:g} of {sum(r['points'] for r in rows):g} points in {seconds:.0f} s")
    if args.json:
        import torch

        text = json.dumps(
            {
                "lab": lab.name,
                "torch": torch.__version__,
                "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
                "seconds": seconds,
                "cells": rows,
            },
            indent=1,
        )
        try:  # atomic, a link kept: all or nothing
            write_text(args.json, text + "\n", name="--json")
        except (OSError, ValueError) as exc:  # changed since it was checked: keep the results
            print(f"zg_course.grade: error: {exc}; the results follow on stdout", file=sys.stderr)
            print(text)
            return 1
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
