"""Grade deliberately wrong solutions and check that each loses its points (`make labs-wrong`).

labs/wrong/<name>.py holds one wrong solution, written as a student would, with a header:

    # lab: 03_sizing_an_envelope              the lab
    # cell: overflow                          the grade_id of the solution cell it replaces
    # function: smallest_margin               only where that cell defines several functions:
                                              the one it gets wrong (default: all of them)
    # why: ...                                what is wrong with it
    <the code of the cell>

It names no test cell: the part it is judged on is read from the lab's source notebook as it is
now (zg_course.grade.part_of: the graded cells after its solution cell, up to the next one, and
of those, the ones about ``function``), so the labs may be reorganised (test cells renamed,
moved, split, cells inserted) under a hidden set written against an older layout. An older
file's ``# part: <grade_id> ...`` line is still read and checked against that part: where the
two differ, the part the notebook gives is used and a line on stderr says so.

Each one is handed in as its own student: the lab's source notebook (every other solution
right) with that one cell replaced. By default the labs run in this process and each wrong
solution is graded in a forked child at its cell (zg_course/grade.py: the lab's setup runs
once, the cells run in order in one namespace, as nbgrader's kernel runs them); ``--nbgrader``
grades each one with ``nbgrader autograde`` exactly as zg_course/check.py grades (a temp copy
of the course, the gradebook read back: about 10 s a submission). Passes when every wrong
solution earns at most half the autograded points of its part.

    python -m zg_course.wrong [--nbgrader] [--keep DIR] [--course labs] [--wrong labs/wrong] [name ...]

``--keep DIR`` keeps what was graded in both modes (see ``--help``).

:func:`grade_in_process` runs the same cells without forking (one namespace, in this process)
for a quick check from pytest.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from zg_course.check import nbgrader_workspace
from zg_course.grade import Lab, Variant, code_cells, part_of

ROOT = Path(__file__).resolve().parent.parent
HEADER_KEYS = ("lab", "cell", "function", "part", "why")
REQUIRED = ("lab", "cell", "why")


def read_wrong(path: Path, course: Path | None = None) -> dict:
    """{name, lab, cell, function, part (the grade ids of its part, derived), why, code} of one
    wrong solution file; ``course`` (default labs/) holds the source notebook its part is read
    from."""
    meta, code = {}, []
    for line in path.read_text().splitlines(keepends=True):
        key = line[2:].split(":", 1)[0] if line.startswith("# ") and ":" in line else None
        if not code and key in HEADER_KEYS:
            meta[key] = line.split(":", 1)[1].strip()
        elif not code and line.startswith("# ruff:"):
            continue
        else:
            code.append(line)
    missing = [k for k in REQUIRED if k not in meta]
    if missing:
        raise SystemExit(f"zg_course.wrong: {path} lacks the header line(s) {missing}")
    wrong = {
        "name": path.stem,
        "lab": meta["lab"],
        "cell": meta["cell"],
        "function": meta.get("function") or None,
        "why": meta["why"],
        "code": "".join(code).strip("\n") + "\n",
    }
    declared = meta["part"].split() if "part" in meta else None
    wrong["part"] = derived_part(wrong, Path(course) if course else ROOT / "labs", declared)
    return wrong


_CELLS: dict = {}  # (source notebook, its mtime) -> its code cells, read once


def derived_part(wrong: dict, course: Path, declared: list[str] | None = None) -> list[str]:
    """The graded cells ``wrong`` is judged on, from its lab's source notebook in ``course`` as
    it is now; a ``declared`` part (an older file's ``# part:`` line) that differs is reported on
    stderr and not used."""
    source = Path(course) / "source" / wrong["lab"] / f"{wrong['lab']}.ipynb"
    if not source.is_file():
        raise SystemExit(f"zg_course.wrong: {wrong['name']}: no lab {wrong['lab']!r} ({source})")
    key = (source.resolve(), source.stat().st_mtime_ns)
    if key not in _CELLS:
        _CELLS[key] = code_cells(source)
    try:
        part = part_of(_CELLS[key], wrong["cell"], wrong["function"])
    except ValueError as exc:
        raise SystemExit(f"zg_course.wrong: {wrong['name']}: {wrong['lab']}: {exc}") from None
    if not part:
        raise SystemExit(
            f"zg_course.wrong: {wrong['name']}: {wrong['lab']}: no graded cell follows solution "
            f"cell {wrong['cell']!r}" + (f" about {wrong['function']}" if wrong["function"] else "")
        )
    if declared is not None and sorted(declared) != sorted(part):
        print(
            f"zg_course.wrong: {wrong['name']}: its '# part:' line names {declared}; "
            f"{wrong['lab']} now gives {part} after cell {wrong['cell']!r}"
            + (f" for {wrong['function']}" if wrong["function"] else "")
            + ": graded on the latter",
            file=sys.stderr,
        )
    return part


def submission(source: Path, wrong: dict) -> dict:
    """The source notebook with the wrong solution in place of its cell."""
    nb = json.loads(source.read_text())
    ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id"): c for c in nb["cells"]}
    if wrong["cell"] not in ids or not ids[wrong["cell"]]["metadata"]["nbgrader"].get("solution"):
        raise SystemExit(
            f"zg_course.wrong: {wrong['name']}: {wrong['lab']} has no solution cell {wrong['cell']!r}"
        )
    for gid in wrong["part"]:
        if gid not in ids or not ids[gid]["metadata"]["nbgrader"].get("grade"):
            raise SystemExit(
                f"zg_course.wrong: {wrong['name']}: {wrong['lab']} has no graded cell {gid!r}"
            )
    lines = wrong["code"].splitlines(keepends=True)
    ids[wrong["cell"]]["source"] = lines[:-1] + [lines[-1].rstrip("\n")]
    return nb


def grade_in_process(source: Path, wrong: dict) -> dict:
    """{grade_id: (earned, points)} of the wrong solution's part, the cells run in one namespace."""
    nb = submission(source, wrong)
    namespace = {"__name__": "__labs_wrong__"}
    scores = {}
    cwd = os.getcwd()
    os.chdir(source.parent)
    try:
        for cell in nb["cells"]:
            if cell["cell_type"] != "code":
                continue
            meta = cell.get("metadata", {}).get("nbgrader", {})
            try:
                exec(
                    compile("".join(cell["source"]), meta.get("grade_id", "<cell>"), "exec"),
                    namespace,
                )
                passed = True
            except Exception:  # a failing test cell earns 0, as in nbgrader
                passed = False
            if meta.get("grade_id") in wrong["part"]:
                scores[meta["grade_id"]] = (meta["points"] if passed else 0.0, meta["points"])
    finally:
        os.chdir(cwd)
    return scores


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="wrong solutions by file stem (default: all)")
    ap.add_argument("--course", default=str(ROOT / "labs"))
    ap.add_argument("--wrong", default=str(ROOT / "labs" / "wrong"))
    ap.add_argument(
        "--keep",
        default=None,
        help="keep the graded copies in this new or empty folder: each submission as "
        "labs/submitted/<name>/<lab>/<lab>.ipynb and, without --nbgrader, scores.json (each "
        "one's points per graded cell and its failure); with --nbgrader, nbgrader's whole course",
    )
    ap.add_argument(
        "--max-share",
        type=float,
        default=0.5,
        help="largest share of its part's points a wrong solution may earn",
    )
    ap.add_argument("--nbgrader", action="store_true", help="grade with nbgrader autograde")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="run the tests in the same process as the solution, as before the judge (by "
        "default the forked grader's tests run in the judge and the solution in a worker "
        "process, zg_course.remote, as in the sandbox, without bubblewrap)",
    )
    ap.add_argument(
        "--sandbox",
        action="store_true",
        help="grade each in the sandbox (zg_course.sandbox: its tests in the judge, outside the "
        "sandbox)",
    )
    args = ap.parse_args(argv)
    start = time.time()
    wrongs = [
        read_wrong(p, Path(args.course))
        for p in sorted(Path(args.wrong).glob("*.py"))
        if not args.names or p.stem in args.names
    ]
    if not wrongs:
        raise SystemExit(f"zg_course.wrong: no wrong solutions under {args.wrong}")
    if args.nbgrader:
        scores = grade_with_nbgrader(wrongs, args)
    elif args.sandbox:
        scores = grade_in_sandbox(wrongs, Path(args.course).resolve())
    else:
        keep = _keep_folder(args.keep) if args.keep else None
        outcomes: dict = {}
        scores = grade_forked(
            wrongs, Path(args.course).resolve(), outcomes, judge=not args.in_process
        )
        if keep is not None:
            keep_forked(keep, Path(args.course).resolve(), wrongs, outcomes)
    return report(wrongs, scores, args.max_share, time.time() - start)


def grade_in_sandbox(wrongs: list[dict], course: Path) -> dict[str, tuple[float, float]]:
    """{name: (earned, total)} of each wrong solution's part, graded by zg_course.sandbox."""
    import tempfile

    from zg_course import sandbox

    scores = {}
    with tempfile.TemporaryDirectory(prefix="zg-wrong-") as tmp:
        for wrong in wrongs:
            source = course / "source" / wrong["lab"] / f"{wrong['lab']}.ipynb"
            path = Path(tmp) / wrong["name"] / f"{wrong['lab']}.ipynb"
            path.parent.mkdir()
            path.write_text(json.dumps(submission(source, wrong)))
            report = sandbox.grade(path, course=course, lab=wrong["lab"], timeout=600)
            points = report["points"]
            total = sum(points[g] for g in wrong["part"])
            earned = sum(points[g] for g in wrong["part"] if report["passed"].get(g))
            scores[wrong["name"]] = (earned, total)
            print(f"  {wrong['name']}: {earned:g} / {total:g} (tests run {report.get('judged')} "
                  f"the sandbox's worker)", flush=True)  # fmt: skip
    return scores


def _keep_folder(keep: str) -> Path:
    work = Path(keep).resolve()
    if work.exists() and (not work.is_dir() or any(work.iterdir())):
        raise SystemExit(f"zg_course.wrong: --keep {work} must be a new or empty folder")
    work.mkdir(parents=True, exist_ok=True)
    return work


def keep_forked(keep: Path, course: Path, wrongs: list[dict], outcomes: dict) -> None:
    """Write what the forked grading graded into ``keep``: each submission (the source notebook
    with the wrong cell in place) where nbgrader keeps it, and scores.json."""
    table = {}
    for wrong in wrongs:
        lab = wrong["lab"]
        folder = keep / "labs" / "submitted" / wrong["name"] / lab
        folder.mkdir(parents=True, exist_ok=True)
        nb = submission(course / "source" / lab / f"{lab}.ipynb", wrong)
        (folder / f"{lab}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        o = outcomes[wrong["name"]]
        table[wrong["name"]] = {
            "lab": lab,
            "cell": wrong["cell"],
            "earned": o.earned,
            "total": o.total,
            "passed": o.passed,
            "points": o.points,
            "failure": o.failure,
            "timed_out": o.timed_out,
        }
    (keep / "scores.json").write_text(json.dumps(table, indent=1) + "\n")
    print(f"graded copies kept in {keep}")


def report(wrongs: list[dict], scores: dict, max_share: float, seconds: float) -> int:
    """Print each wrong solution's points; 1 when one earns more than ``max_share`` of its part."""
    failures = []
    print(f"\n{'wrong solution':<28} {'lab':<27} {'earned':>6} {'of':>4}  why")
    for wrong in wrongs:
        earned, total = scores[wrong["name"]]
        print(f"{wrong['name']:<28} {wrong['lab']:<27} {earned:>6g} {total:>4g}  {wrong['why']}")
        if earned > max_share * total:
            failures.append(
                f"{wrong['name']} ({wrong['lab']}, cell {wrong['cell']}) earns "
                f"{earned:g} of {total:g} points of its part (at most "
                f"{max_share:.0%} allowed): {wrong['why']}"
            )
    print(f"\n{len(wrongs)} wrong solutions graded in {seconds:.0f} s")
    if failures:
        print("zg_course.wrong: FAILED\n  " + "\n  ".join(failures))
        return 1
    print(
        f"zg_course.wrong: passed (every wrong solution earns at most {max_share:.0%} of its part)"
    )
    return 0


def variants(lab: Lab, wrongs: list[dict]) -> list[Variant]:
    """The wrong solutions of ``lab`` as variants, each judged on its part."""
    return [
        Variant(w["name"], {w["cell"]: w["code"]}, judged_on=w["part"])
        for w in wrongs
        if w["lab"] == lab.name
    ]


def scores_of(wrongs: list[dict], outcomes: dict) -> dict[str, tuple[float, float]]:
    """{name: (earned, total)} of each wrong solution's part, from its outcome."""
    return {w["name"]: (outcomes[w["name"]].earned, outcomes[w["name"]].total) for w in wrongs}


def grade_forked(
    wrongs: list[dict], course: Path, outcomes: dict | None = None, judge: bool = True
) -> dict[str, tuple[float, float]]:
    """{name: (earned, total)} of each wrong solution's part, graded in forks (zg_course.grade);
    ``outcomes``, a dict, gets each one's full outcome."""
    scores = {}
    for lab_name in sorted({w["lab"] for w in wrongs}):
        lab = Lab(course / "source" / lab_name / f"{lab_name}.ipynb", judge=judge)
        mine = [w for w in wrongs if w["lab"] == lab_name]
        t = time.time()
        graded = lab.grade(variants(lab, mine))
        if outcomes is not None:
            outcomes.update(graded)
        scores.update(scores_of(mine, graded))
        print(f"  graded {len(mine)} in {lab_name} in {time.time() - t:.1f} s", flush=True)
    return scores


def grade_with_nbgrader(wrongs: list[dict], args) -> dict[str, tuple[float, float]]:
    """{name: (earned, total)} of each wrong solution's part, graded by nbgrader autograde."""

    api, course, cleanup, Gradebook = nbgrader_workspace(
        Path(args.course).resolve(), args.keep, "zg_course.wrong"
    )
    for lab in sorted({w["lab"] for w in wrongs}):
        result = api.generate_assignment(lab, force=True, create=True)
        if not result["success"]:
            raise SystemExit(
                f"zg_course.wrong: generate_assignment {lab} failed:\n{result['log']}{result['error']}"
            )
    scanned = {}  # the tamper scan runs first, as in the other graders: nbgrader alone has none
    labs = {}  # each lab's cells, read once
    for wrong in wrongs:
        lab = wrong["lab"]
        if lab not in labs:
            labs[lab] = Lab(course / "source" / lab / f"{lab}.ipynb")
        found = labs[lab].findings({wrong["cell"]: wrong["code"]})
        if found:
            print(f"  {wrong['name']} ({lab}): no points, the tamper scan found {found[0]}")
            scanned[wrong["name"]] = (0.0, sum(labs[lab].by_id[g].points for g in wrong["part"]))
            continue
        folder = course / "submitted" / wrong["name"] / lab
        folder.mkdir(parents=True)
        nb = submission(course / "source" / lab / f"{lab}.ipynb", wrong)
        (folder / f"{lab}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
        t = time.time()
        result = api.autograde(lab, wrong["name"], force=True, create=True)
        if not result["success"]:
            raise SystemExit(
                f"zg_course.wrong: autograde {wrong['name']} failed:\n{result['log']}{result['error']}"
            )
        print(f"  autograded {wrong['name']} ({lab}) in {time.time() - t:.1f} s", flush=True)

    scores = dict(scanned)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for wrong in wrongs:
            if wrong["name"] in scanned:
                continue
            grades = [
                gb.find_grade(gid, wrong["lab"], wrong["lab"], wrong["name"])
                for gid in wrong["part"]
            ]
            scores[wrong["name"]] = (
                sum(g.auto_score or 0.0 for g in grades),
                sum(g.max_score for g in grades),
            )
    if args.keep:
        print(f"graded course kept in {course}")
    if cleanup is not None:
        cleanup.cleanup()
    return scores


if __name__ == "__main__":
    sys.exit(main())
