"""Grade every variant of every lab in one pass: wrong solutions, alternative right ones and
mutants (`make labs-variants`, run by `.ci/run`).

It is `make labs-wrong`, `make labs-right` and `make labs-mutants` in one: the same variants,
graded by the same engine (zg_course/grade.py) and judged by the same rules, with the same
reports and exit status. The difference is that each lab's source notebook runs once for all
three kinds instead of once per kind: its setup and the instructor's cells are the slow part of
grading (Labs 6 and 9 take most of a minute each), and the variants fork from that one run.

Timeouts are each kind's own: a wrong solution is killed at 60 s, a mutant at three times the
lab's measured grading time (labs/timings.json, at least 20 s: zg_course.mutants.deadline), an
alternative solution (which runs to the end of its lab) at 300 s.

    python -m zg_course.variants [lab ...] [--write docs/course/mutation_scores.md]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import zg_course.mutants
import zg_course.right
import zg_course.wrong
from zg_course.grade import ROOT, Lab, lab_source

KINDS = ("wrong", "right", "mutant")


def tagged(kind: str, variants: list) -> list:
    """The variants with their keys put under ``kind`` (the kinds' names may overlap)."""
    return [dataclasses.replace(v, key=f"{kind}/{v.key}") for v in variants]


def untagged(kind: str, outcomes: dict) -> dict:
    prefix = f"{kind}/"
    return {k[len(prefix) :]: o for k, o in outcomes.items() if k.startswith(prefix)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("labs", nargs="*", help="labs by folder name (default: every lab)")
    ap.add_argument("--course", default=str(ROOT / "labs"))
    ap.add_argument("--jobs", type=int, default=2, help="variants graded at once")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="run the tests in the solution's process, as before the judge",
    )
    ap.add_argument("--max-share", type=float, default=0.5, help="as zg_course/wrong.py")
    ap.add_argument("--min-score", type=float, default=0.9, help="as zg_course/mutants.py")
    ap.add_argument("--min-per-lab", type=int, default=2, help="as zg_course/right.py")
    ap.add_argument("--write", default=None, help="write the mutation score table here")
    args = ap.parse_args(argv)
    from zg._io import command_output_arg

    command_output_arg(ap, args.write, "--write")  # before any grading (exit status 2)
    start = time.time()
    course = Path(args.course).resolve()
    every = sorted(
        p.name for p in (course / "source").iterdir() if (p / f"{p.name}.ipynb").is_file()
    )
    unknown = [n for n in args.labs if n not in every]
    if unknown:
        raise SystemExit(f"zg_course.variants: no lab(s) {unknown}; the labs are {every}")
    names = args.labs or every
    wrongs = [
        zg_course.wrong.read_wrong(p, course) for p in sorted((course / "wrong").glob("*.py"))
    ]
    rights = [zg_course.right.read_right(p) for p in sorted((course / "right").glob("*.py"))]
    wrongs = [w for w in wrongs if w["lab"] in names]
    rights = [r for r in rights if r["lab"] in names]
    equivalent = zg_course.mutants.read_equivalent()

    scores, right_lines, right_failures, rows, problems, used = {}, [], [], [], [], set()
    if not args.labs:
        right_failures += zg_course.right.missing_alternatives(course, rights, args.min_per_lab)
    print(f"{'lab':<27} {'wrong':>5} {'right':>5} {'mutants':>7}  seconds", flush=True)
    for name in names:
        lab = Lab(lab_source(course, name), timeout=60.0, jobs=args.jobs, judge=not args.in_process)
        mutants, mutant_variants = [], []
        if name not in zg_course.mutants.SKIP_LABS:
            mutants, mutant_variants = zg_course.mutants.plan(
                lab, equivalent, timeout=zg_course.mutants.deadline(name)
            )
        wrong_variants = zg_course.wrong.variants(lab, wrongs)
        right_variants = zg_course.right.variants(lab, rights, timeout=300.0)
        t = time.time()
        outcomes = lab.grade(
            tagged("wrong", wrong_variants)
            + tagged("right", right_variants)
            + tagged("mutant", mutant_variants)
        )
        print(
            f"{name:<27} {len(wrong_variants):>5} {len(right_variants):>5} "
            f"{len(mutant_variants):>7}  {time.time() - t:.0f}",
            flush=True,
        )
        mine = [w for w in wrongs if w["lab"] == name]
        scores.update(zg_course.wrong.scores_of(mine, untagged("wrong", outcomes)))
        lines, failed = zg_course.right.judge(lab, rights, untagged("right", outcomes))
        right_lines, right_failures = right_lines + lines, right_failures + failed
        if name not in zg_course.mutants.SKIP_LABS:
            r, p = zg_course.mutants.judge(
                lab, mutants, untagged("mutant", outcomes), equivalent, used, args.min_score
            )
            rows, problems = rows + r, problems + p

    seconds = time.time() - start
    status = [zg_course.wrong.report(wrongs, scores, args.max_share, seconds)]
    print(f"\n{'solution':<34} {'lab':<27} {'earned':>6} {'of':>4}  how")
    print("\n".join(right_lines))
    status.append(zg_course.right.report(len(rights), right_failures, seconds))
    print()
    print(zg_course.mutants.table(rows))
    if args.write:
        try:
            zg_course.mutants.write_table(Path(args.write), zg_course.mutants.table(rows))
        except (OSError, ValueError) as exc:  # changed since it was checked; the table is above
            print(f"zg_course.variants: error: {exc}", file=sys.stderr)
            status.append(1)
    if problems:
        print("zg_course.mutants: FAILED\n  " + "\n  ".join(problems))
        status.append(1)
    else:
        print(f"zg_course.mutants: passed (every part kills at least {args.min_score:.0%})")
    print(
        f"\n{len(wrongs)} wrong, {len(rights)} right, {sum(r['mutants'] for r in rows)} mutants "
        f"graded in {seconds:.0f} s"
    )
    return 1 if any(status) else 0


if __name__ == "__main__":
    sys.exit(main())
