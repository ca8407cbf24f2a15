"""Grade alternative correct solutions and check that each earns every point (`make labs-right`).

labs/right/<name>.py holds one correct solution written differently from the instructor's, as
another student would write it. A header, then the code of each solution cell it replaces:

    # lab: 04_overflow_rewind                 the lab
    # how: ...                                how it differs from the instructor's solution
    # cell: gated_sgd                         a solution cell's grade_id, then its code
    <code>
    # cell: train_with_rewind                 (as many cells as it replaces)
    <code>

Each is graded like labs/wrong/ (zg_course/grade.py: the lab runs once in this process, each
solution in a forked child from its first replaced cell to the end). Passes when every one
earns every autograded point after its first replaced cell, and the instructor's solution
earns every point before it.

    python -m zg_course.right [--course labs] [--right labs/right] [name ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from zg_course.grade import ROOT, Lab, Variant, lab_source

HEADER_KEYS = ("lab", "how")


def read_right(path: Path) -> dict:
    """{name, lab, how, cells: {grade_id: code}} of one alternative solution file."""
    meta, cells, current = {}, {}, None
    for line in path.read_text().splitlines(keepends=True):
        if line.startswith("# cell:"):
            current = line.split(":", 1)[1].strip()
            if current in cells:
                raise SystemExit(f"zg_course.right: {path} replaces cell {current!r} twice")
            cells[current] = []
            continue
        if current is None:
            key = line[2:].split(":", 1)[0] if line.startswith("# ") and ":" in line else None
            if key in HEADER_KEYS:
                meta[key] = line.split(":", 1)[1].strip()
            continue
        cells[current].append(line)
    missing = [k for k in HEADER_KEYS if k not in meta]
    if missing or not cells:
        raise SystemExit(
            f"zg_course.right: {path} lacks "
            + (f"the header line(s) {missing}" if missing else "")
            + (" a `# cell: <grade_id>` section" if not cells else "")
        )
    return {
        "name": path.stem,
        "lab": meta["lab"],
        "how": meta["how"],
        "cells": {k: "".join(v).strip("\n") + "\n" for k, v in cells.items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="solutions by file stem (default: all)")
    ap.add_argument("--course", default=str(ROOT / "labs"))
    ap.add_argument("--right", default=str(ROOT / "labs" / "right"))
    ap.add_argument(
        "--min-per-lab",
        type=int,
        default=2,
        help="alternatives each lab the folder has solutions of needs",
    )
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="run the tests in the solution's process, as before the judge",
    )
    ap.add_argument(
        "--sandbox",
        action="store_true",
        help="grade each in the sandbox (zg_course.sandbox: its tests in the judge, outside it)",
    )
    args = ap.parse_args(argv)
    start = time.time()
    course = Path(args.course).resolve()
    rights = [
        read_right(p)
        for p in sorted(Path(args.right).glob("*.py"))
        if not args.names or p.stem in args.names
    ]
    if not rights:
        raise SystemExit(f"zg_course.right: no solutions under {args.right}")
    failures = [] if args.names else missing_alternatives(course, rights, args.min_per_lab)
    print(f"{'solution':<34} {'lab':<27} {'earned':>6} {'of':>4}  how")
    if args.sandbox:
        failures += in_sandbox(course, rights, args.timeout)
        return report(len(rights), failures, time.time() - start)
    for lab_name in sorted({r["lab"] for r in rights}):
        lab = Lab(lab_source(course, lab_name), timeout=args.timeout, judge=not args.in_process)
        lines, failed = judge(lab, rights, lab.grade(variants(lab, rights)))
        print("\n".join(lines), flush=True)
        failures += failed
    return report(len(rights), failures, time.time() - start)


def in_sandbox(course: Path, rights: list[dict], timeout: float) -> list[str]:
    """Grade each alternative solution as a whole submission in the sandbox; a failure for each
    that misses a point."""
    import json
    import tempfile

    from zg_course import sandbox

    failures = []
    with tempfile.TemporaryDirectory(prefix="zg-right-") as tmp:
        for r in rights:
            nb = json.loads(lab_source(course, r["lab"]).read_text())
            for c in nb["cells"]:
                gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                if gid in r["cells"]:
                    c["source"] = r["cells"][gid]
            path = Path(tmp) / r["name"] / f"{r['lab']}.ipynb"
            path.parent.mkdir()
            path.write_text(json.dumps(nb))
            got = sandbox.grade(path, course=course, lab=r["lab"], timeout=timeout)
            print(f"{r['name']:<34} {r['lab']:<27} {got['earned']:>6g} {got['total']:>4g}  "
                  f"{r['how']}", flush=True)  # fmt: skip
            if got["earned"] < got["total"]:
                failures.append(
                    f"{r['name']} ({r['lab']}) earns {got['earned']:g} of {got['total']:g} points "
                    f"in the sandbox: {got.get('failure')}"
                )
    return failures


def missing_alternatives(course: Path, rights: list[dict], min_per_lab: int) -> list[str]:
    """A failure for each lab with some but fewer than ``min_per_lab`` alternative solutions
    (a folder may hold solutions of some labs only: the labs it has none of are not judged; that
    labs/right covers every lab is tests/course/test_lab_grading.py's), or whose lab is not in
    the course."""
    failures = []
    graded_labs = {
        p.name for p in (course / "source").iterdir() if (p / f"{p.name}.ipynb").is_file()
    }
    for lab_name in sorted({r["lab"] for r in rights}):
        if lab_name not in graded_labs:
            failures.append(f"{lab_name}: no such lab in {course / 'source'}")
            continue
        have = sum(r["lab"] == lab_name for r in rights)
        if have < min_per_lab:
            failures.append(
                f"{lab_name} has {have} alternative solution(s); at least {min_per_lab} wanted"
            )
    return failures


def variants(lab: Lab, rights: list[dict], timeout: float | None = None) -> list[Variant]:
    """The alternative solutions of ``lab`` as variants, judged on every graded cell after their
    first replaced cell."""
    return [Variant(r["name"], r["cells"], timeout=timeout) for r in rights if r["lab"] == lab.name]


def judge(lab: Lab, rights: list[dict], outcomes: dict) -> tuple[list[str], list[str]]:
    """A report line with the points of each of ``lab``'s alternative solutions (the
    instructor's run counts before its first replaced cell), and a failure for each that misses
    a point."""
    lines, failures = [], []
    broken = [g for g, ok in lab.base.items() if not ok]
    for r in [r for r in rights if r["lab"] == lab.name]:
        o = outcomes[r["name"]]
        first = min(lab.by_id[g].index for g in r["cells"])
        before = [c.grade_id for c in lab.cells[:first] if c.graded]
        earned = o.earned + sum(lab.by_id[g].points for g in before if lab.base.get(g))
        total = o.total + sum(lab.by_id[g].points for g in before)
        lines.append(f"{r['name']:<34} {lab.name:<27} {earned:>6g} {total:>4g}  {r['how']}")
        if earned < total or broken:
            failures.append(
                f"{r['name']} ({lab.name}) earns {earned:g} of {total:g} points: "
                f"{o.failure or lab.base_failures}"
            )
    return lines, failures


def report(count: int, failures: list[str], seconds: float) -> int:
    print(f"\n{count} alternative solutions graded in {seconds:.0f} s")
    if failures:
        print("zg_course.right: FAILED\n  " + "\n  ".join(failures))
        return 1
    print("zg_course.right: passed (every alternative solution earns every point)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
