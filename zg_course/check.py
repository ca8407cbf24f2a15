"""Grade the nbgrader labs both ways, as an outside check would (`make labs-check`).

1. Copy labs/ into a temp dir (only the course: nbgrader_config.py and source/), so nothing is
   written into the checkout.
2. ``nbgrader generate_assignment`` every lab (source/<lab>/<lab>.ipynb -> release/).
3. Submit two students in nbgrader's submitted/<student>/<lab>/ layout: ``solutions`` hands in
   the source notebooks (the instructor's solutions), ``untouched`` hands in the release exactly
   as a student receives it.
4. ``nbgrader autograde`` both, read the scores from the gradebook (nbgrader.api.Gradebook).
5. ``nbgrader generate_feedback`` both: no line of a hidden test is in what a student reads
   (labs/nbgrader_config.py, "Feedback").

Passes when there is the setup check (``00_setup``, Lab 0) and at least ``--min-labs`` graded
labs besides it (9: Labs 1-9), every lab has autograded points, hidden
tests and a hand-graded cell, the solutions earn every autograded point, and the untouched
release earns at most ``--max-untouched`` (10 %) of them in every lab. Hand-graded points are
reported, never counted (nobody has graded them).

    python -m zg_course.check [--labs labs] [--keep DIR] [lab ...]

The notebooks import zg: the kernels inherit this process's environment, so run it with the
repository root on PYTHONPATH (the Makefile does) to grade against this checkout's zg.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUDENTS = ("solutions", "untouched")
SETUP_LAB = "00_setup"  # Lab 0, the environment check: graded like the others, not counted


def lab_names(course: Path) -> list[str]:
    labs = sorted(
        p.name
        for p in (course / "source").iterdir()
        if p.is_dir() and (p / f"{p.name}.ipynb").is_file()
    )
    if not labs:
        raise SystemExit(
            f"zg_course.check: no labs under {course / 'source'} (want source/<lab>/<lab>.ipynb)"
        )
    return labs


def nbgrader_workspace(source_course: Path, keep: str | None, tool: str):
    """A temp copy of the course (nbgrader_config.py and source/ only) and nbgrader's API on it,
    shared by zg_course/check.py and zg_course/wrong.py. ``keep``: grade in this new or empty folder and
    leave it. Returns (api, course folder, cleanup (a TemporaryDirectory or None), Gradebook)."""
    # nbgrader runs `alembic` as a subprocess: it must be on PATH (it lives beside this python).
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    os.environ.setdefault("PYTHONPATH", str(ROOT))
    # nbgrader 0.9 with SQLAlchemy 2 warns about its own session handling on every submission.
    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", message=".*not in session.*")
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory

    if keep:
        work = Path(keep).resolve()
        if work.exists() and any(work.iterdir()):
            raise SystemExit(f"{tool}: --keep {work} must be new or empty")
        work.mkdir(parents=True, exist_ok=True)
        cleanup = None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix=f"zg-{tool.replace('_', '-')}-")
        work = Path(cleanup.name)
    course = work / "labs"
    course.mkdir()
    shutil.copy2(source_course / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(
        source_course / "source",
        course / "source",
        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"),
    )
    # The course's own nbgrader_config.py (its feedback settings included), as `nbgrader ...`
    # run in labs/ reads it; then this workspace's root.
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    config.CourseDirectory.root = str(course)
    config.ExecutePreprocessor.timeout = 300
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    return api, course, cleanup, Gradebook


def structure(notebook: Path) -> dict:
    """What the source notebook declares: autograded / manual points, hidden tests, solutions."""
    cells = json.loads(notebook.read_text())["cells"]
    out = {
        "auto_points": 0.0,
        "manual_points": 0.0,
        "hidden_tests": 0,
        "solutions": 0,
        "auto_ids": [],
    }
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        text = "".join(cell["source"])
        if meta.get("grade") and cell["cell_type"] == "code" and not meta.get("solution"):
            out["auto_points"] += float(meta.get("points", 0))
            out["auto_ids"].append(meta["grade_id"])
            out["hidden_tests"] += (
                "### BEGIN HIDDEN TESTS" in text and "### END HIDDEN TESTS" in text
            )
        if meta.get("grade") and cell["cell_type"] == "markdown" and meta.get("solution"):
            out["manual_points"] += float(meta.get("points", 0))
        out["solutions"] += "### BEGIN SOLUTION" in text and "### END SOLUTION" in text
    return out


def _split_hidden(path: Path) -> tuple[set[str], set[str]]:
    """(the stripped lines inside the notebook's hidden test regions, those outside them)."""
    import nbformat

    hidden, shown = set(), set()
    for cell in nbformat.read(str(path), as_version=4).cells:
        inside = False
        for line in cell.source.splitlines():
            if "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END HIDDEN TESTS" in line:
                inside = False
            else:
                (hidden if inside else shown).add(line.strip())
    return hidden, shown


def feedback_leaks(api, course: Path, lab: str, student: str) -> list[str]:
    """``nbgrader generate_feedback`` for one student's lab -> what is wrong with it: a missing
    file, or a line of a hidden test (in a cell's source, or quoted by a traceback's code
    context) that the student would read. A line is secret when it is in a hidden region of the
    source and nowhere else the student sees it: not in the release, not in their own cells."""
    import html

    result = api.generate_feedback(lab, student, force=True)
    path = course / "feedback" / student / lab / f"{lab}.html"
    if not result["success"] or not path.is_file():
        return [f"{lab} / {student}: no feedback ({result['log']}{result['error']})"]
    hidden, _ = _split_hidden(course / "source" / lab / f"{lab}.ipynb")
    for seen in (course / "release" / lab, course / "submitted" / student / lab):
        hidden -= _split_hidden(seen / f"{lab}.ipynb")[1]
    hidden = {line for line in hidden if len(line) >= 12 and not line.startswith("#")}
    page = re.sub(r"<(style|script)\b.*?</\1>", "", path.read_text(), flags=re.S | re.I)
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    # a line of the page, or a traceback's "----> 3 assert ..." / "      4 assert ..." line
    lines = {re.sub(r"^(-*>)?\s*\d+\s", "", line.strip()).strip() for line in text.splitlines()}
    leaked = sorted(hidden & lines)
    if leaked:
        return [
            f"{lab} / {student}: the feedback shows {len(leaked)} hidden line(s): {leaked[0]!r}"
        ]
    return []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("labs", nargs="*", help="lab names (default: every lab under source/)")
    ap.add_argument(
        "--course", default=str(ROOT / "labs"), help="the course folder (default labs/)"
    )
    ap.add_argument("--keep", default=None, help="grade in this (new or empty) folder and keep it")
    ap.add_argument("--min-labs", type=int, default=9, help="graded labs besides Lab 0 (00_setup)")
    ap.add_argument(
        "--max-untouched",
        type=float,
        default=0.10,
        help="largest share of autograded points the untouched release may earn",
    )
    ap.add_argument(
        "--timings",
        default=None,
        help="write each lab's grading time (the solutions' autograde) to this JSON file and "
        "write those times into the labs' headers (labs/timings.json)",
    )
    args = ap.parse_args(argv)
    if args.timings:  # checked before any grading: one line naming --timings, exit 2
        from zg._io import command_output_arg

        command_output_arg(ap, args.timings, "--timings")
    start = time.time()
    seconds = {}

    source_course = Path(args.course).resolve()
    api, course, cleanup, Gradebook = nbgrader_workspace(
        source_course, args.keep, "zg_course.check"
    )
    labs = args.labs or lab_names(course)

    failures = []
    for lab in labs:
        result = api.generate_assignment(lab, force=True, create=True)
        if not result["success"]:
            raise SystemExit(
                f"zg_course.check: generate_assignment {lab} failed:\n{result['log']}{result['error']}"
            )
        released = (course / "release" / lab / f"{lab}.ipynb").read_text()
        for secret in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "Model answer"):
            if secret in released:
                failures.append(f"{lab}: the student release contains {secret!r}")
        for student, origin in (
            ("solutions", course / "source"),
            ("untouched", course / "release"),
        ):
            folder = course / "submitted" / student / lab
            folder.mkdir(parents=True)
            shutil.copy2(origin / lab / f"{lab}.ipynb", folder / f"{lab}.ipynb")
            t = time.time()
            result = api.autograde(lab, student, force=True, create=True)
            if not result["success"]:
                raise SystemExit(
                    f"zg_course.check: autograde {lab} / {student} failed:\n{result['log']}{result['error']}"
                )
            print(f"  autograded {lab} as {student} in {time.time() - t:.1f} s", flush=True)
            if student == "solutions":
                seconds[lab] = round(time.time() - t, 1)
            failures += feedback_leaks(api, course, lab, student)

    print(
        f"\n{'lab':<28} {'auto pts':>8} {'solutions':>10} {'untouched':>10} {'manual pts':>10} {'hidden':>6}"
    )
    total_auto = 0.0
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for lab in labs:
            declared = structure(course / "source" / lab / f"{lab}.ipynb")
            scores = {}
            for student in STUDENTS:
                # The autograded test cells only: nbgrader also gives an unchanged hand-graded
                # answer an automatic 0, which is not an autograded point.
                grades = [gb.find_grade(gid, lab, lab, student) for gid in declared["auto_ids"]]
                scores[student] = sum(g.auto_score or 0.0 for g in grades)
                max_auto = sum(g.max_score for g in grades)
            total_auto += max_auto
            print(
                f"{lab:<28} {max_auto:>8g} {scores['solutions']:>10g} {scores['untouched']:>10g} "
                f"{declared['manual_points']:>10g} {declared['hidden_tests']:>6}"
            )
            if max_auto <= 0 or declared["auto_points"] != max_auto:
                failures.append(
                    f"{lab}: {max_auto:g} autograded points in the gradebook, "
                    f"{declared['auto_points']:g} declared in the notebook"
                )
            if scores["solutions"] < max_auto:
                failures.append(
                    f"{lab}: the solutions earn {scores['solutions']:g} of {max_auto:g} "
                    "autograded points (expected all); see autograded/solutions/" + lab
                )
            if scores["untouched"] > args.max_untouched * max_auto:
                failures.append(
                    f"{lab}: the untouched release earns {scores['untouched']:g} of "
                    f"{max_auto:g} autograded points (at most {args.max_untouched:.0%} "
                    "allowed): some test passes without any student work"
                )
            if declared["hidden_tests"] == 0:
                failures.append(f"{lab}: no test cell has hidden tests")
            if declared["manual_points"] <= 0:
                failures.append(
                    f"{lab}: no hand-graded question (a markdown solution cell with points)"
                )
            if declared["solutions"] == 0:
                failures.append(f"{lab}: no ### BEGIN SOLUTION / ### END SOLUTION markers")
    graded = [lab for lab in labs if lab != SETUP_LAB]
    if not args.labs and SETUP_LAB not in labs:
        failures.append(f"no setup check: expected source/{SETUP_LAB}/{SETUP_LAB}.ipynb (Lab 0)")
    if not args.labs and len(graded) < args.min_labs:
        failures.append(
            f"{len(graded)} graded labs besides {SETUP_LAB}, expected at least {args.min_labs}"
        )
    print(
        f"\n{len(labs)} labs, {total_auto:g} autograded points, checked in {time.time() - start:.0f} s"
        + (f"; graded course kept in {course}" if args.keep else "")
    )
    if cleanup is not None:
        cleanup.cleanup()
    if args.timings and not failures:
        write_timings(Path(args.timings), seconds, source_course)
    if failures:
        print("zg_course.check: FAILED\n  " + "\n  ".join(failures))
        return 1
    print(
        "zg_course.check: passed (solutions earn every autograded point; the untouched release "
        f"earns at most {args.max_untouched:.0%})"
    )
    return 0


# The header line of every lab states how long executing it takes: that number is read from
# labs/timings.json (written by `--timings`), never typed.
TIME_PHRASE = re.compile(r"(executing the notebook takes [^\n]*?about )(\d+)( s\b)")


def write_timings(path: Path, seconds: dict, course: Path) -> None:
    from zg.experiments.machine import machine_label

    data = json.loads(path.read_text()) if path.is_file() else {"seconds": {}}
    data["seconds"].update(seconds)
    data["machine"] = machine_label()
    data["what"] = (
        "seconds nbgrader's autograde takes on each lab's instructor solutions (kernel start "
        "included): python -m zg_course.check --timings labs/timings.json"
    )
    from zg._io import write_text  # the kit's one writer: a link kept, all or nothing

    write_text(path, json.dumps(data, indent=1, sort_keys=True) + "\n", name="--timings")
    for lab, secs in data["seconds"].items():
        nb_path = course / "source" / lab / f"{lab}.ipynb"
        if not nb_path.is_file():
            continue
        raw = nb_path.read_text()
        stated = max(1, round(secs))
        new = TIME_PHRASE.sub(lambda m, n=stated: f"{m.group(1)}{n}{m.group(3)}", raw, count=1)
        if new != raw:
            write_text(nb_path, new, name="notebook")
    print(f"zg_course.check: grading times written to {path} and the labs' headers")


if __name__ == "__main__":
    sys.exit(main())
