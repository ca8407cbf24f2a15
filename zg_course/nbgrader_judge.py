"""``nbgrader autograde`` through the judge: the tests run outside the student's process.

nbgrader's own ``Execute`` runs the whole notebook in one kernel, so the hidden tests, their
expected values and the student's code share an interpreter. :class:`JudgedExecute` takes its
place in ``Autograde.autograde_preprocessors`` (``labs/nbgrader_config.py``): it grades the
notebook nbgrader has merged (the locked cells from ``source/``, the student's solution cells)
with :func:`zg_course.sandbox.grade_cells` (the tamper scan, then the worker in bubblewrap and
every test in the judge, outside it), and writes what happened into the cells as a kernel
would: each cell's output as a stream, and a failed test as an error output with its one-line
message, which nbgrader's ``SaveAutoGrades`` turns into 0 points for that cell. The other
preprocessors (limits on output, the grades, the late penalty, the metadata check) run as
nbgrader runs them.

Where the sandbox cannot run (no ``bwrap``, not Linux), autograde stops with that reason: set
``ZG_NBGRADER_JUDGE=0`` to grade with nbgrader's own ``Execute`` instead, where the tests share
the student's kernel.
"""

from __future__ import annotations

import os

from nbgrader.preprocessors import Execute
from traitlets import Float


def judged() -> bool:
    """Whether autograde goes through the judge (``ZG_NBGRADER_JUDGE``, default on)."""
    return os.environ.get("ZG_NBGRADER_JUDGE", "1") != "0"


class JudgedExecute(Execute):
    """nbgrader's execute step, done by :mod:`zg_course.sandbox`'s judge."""

    seconds = Float(1800.0, help="wall-clock seconds a notebook may take").tag(config=True)

    def preprocess(self, nb, resources):
        from zg_course import sandbox
        from zg_course.grade import cells_of

        why = sandbox.available()
        if why:
            raise RuntimeError(
                f"zg_course.nbgrader_judge: the sandbox cannot run here ({why}); set "
                "ZG_NBGRADER_JUDGE=0 to grade in nbgrader's own kernel, where the tests share "
                "the student's process"
            )
        lab = str((resources.get("nbgrader") or {}).get("notebook") or "notebook")
        cells = cells_of(nb)
        theirs = {c.grade_id: c.source for c in cells if c.solution and c.grade_id}
        report = sandbox._empty_report(lab, lab)
        report = sandbox.grade_cells(cells, theirs, report, timeout=self.seconds)
        self.log.info(
            "%s: %g / %g (tests judged %s the sandbox)%s", lab, report["earned"],
            report["total"], report.get("judged"),
            f": {report['failure']}" if report.get("failure") else "",
        )  # fmt: skip
        code = [c for c in nb.cells if c.cell_type == "code"]
        failure = report.get("failure")
        for cell, graded in zip(code, cells):
            cell.outputs = []
            text = report["outputs"].get(graded.grade_id) if graded.grade_id else None
            if text:
                cell.outputs.append(_stream(text))
            if graded.graded and not report["passed"].get(graded.grade_id):
                why = report.get("errors", {}).get(graded.grade_id) or failure or "failed"
                cell.outputs.append(_error(why))
        return nb, resources


def _stream(text: str):
    from nbformat.v4 import new_output

    return new_output("stream", name="stdout", text=text)


def _error(message: str):
    from nbformat.v4 import new_output

    name, _, value = str(message).partition(": ")
    if not value and not name.isidentifier():
        name, value = "AssertionError", str(message)
    return new_output("error", ename=name.strip()[:200], evalue=value[:2000],
                      traceback=[f"{name}: {value}"[:2000]])  # fmt: skip
