"""nbgrader configuration of the zg labs course (read by every `nbgrader ...` command run in labs/).

The course root is this folder wherever it lives (a copy in a temp dir grades the same way):
source/<lab>/<lab>.ipynb are the instructor's notebooks (solutions and hidden tests inside),
release/, submitted/, autograded/, feedback/ and gradebook.db are made by nbgrader (gitignored).
"""

import os

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

c.CourseDirectory.course_id = "zg-labs"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# A solution cell's stub: it raises, so every test that calls an untouched function fails.
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"
# Every lab runs in well under a minute on 2 CPU cores; a cell that takes 5 minutes is a bug
# (an infinite loop in a student's answer), not slowness.
c.ExecutePreprocessor.timeout = 300
# nbgrader's exchange (release_assignment, fetch_assignment, submit, collect; the formgrader
# shows a warning and turns release and collect off while it is missing): the directory
# ZG_EXCHANGE names; else /srv/nbgrader/exchange where a shared machine or a JupyterHub made it
# (docs/course/running_the_course.md, section 7); else exchange/ beside this file, for one
# instructor on one machine (`make lab-instructor` creates it; gitignored).
SHARED_EXCHANGE = "/srv/nbgrader/exchange"
if os.environ.get("ZG_EXCHANGE"):
    c.Exchange.root = os.environ["ZG_EXCHANGE"]
elif os.path.isdir(SHARED_EXCHANGE):
    c.Exchange.root = SHARED_EXCHANGE
else:
    c.Exchange.root = os.path.join(c.CourseDirectory.root, "exchange")
# The formgrader's "Current configuration" panel: off. It prints the server's whole config,
# which nbgrader 0.9.6 cannot serialise here, so it logged a warning on every page load.
c.FormgradeExtension.debug = False

# Feedback (`nbgrader generate_feedback`) shows a student what they handed in and what each test
# said, never the hidden tests: their source is cleared (nbgrader's own ClearHiddenTests, as the
# release does), and the error a failing test cell raised keeps its one-line message
# ("AssertionError: ...", which names the clause and the values) without the traceback, whose
# code context would quote the hidden lines. zg_course/check.py checks every lab's feedback.
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor, Preprocessor  # noqa: E402
from nbgrader.preprocessors import ClearHiddenTests, GetGrades  # noqa: E402
from traitlets import Bool  # noqa: E402


class ErrorMessageOnly(Preprocessor):
    """A graded test cell's error output reduced to ``ename: evalue`` (no traceback)."""

    enabled = Bool(True).tag(config=True)  # nbconvert's preprocessors are off by default

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', '')}: {output.get('evalue', '')}"]
        return cell, resources


c.GenerateFeedback.preprocessors = [
    GetGrades,
    ClearHiddenTests,
    ErrorMessageOnly,
    CSSHTMLHeaderPreprocessor,
]

# Autograde through the judge (zg_course/nbgrader_judge.py): nbgrader's Execute would run the
# hidden tests in the student's kernel; JudgedExecute grades the merged notebook in the sandbox,
# every test in the judge outside it, and writes the outputs and failures into the cells for
# nbgrader's own grading steps. ZG_NBGRADER_JUDGE=0 keeps nbgrader's Execute (where bubblewrap
# is missing: the tests then share the student's kernel).
from nbconvert.preprocessors import ClearMetadataPreprocessor  # noqa: E402
from nbgrader.preprocessors import (  # noqa: E402
    AssignLatePenalties,
    CheckCellMetadata,
    IgnorePattern,
    LimitOutput,
    SaveAutoGrades,
)

from zg_course.nbgrader_judge import JudgedExecute, judged  # noqa: E402

if judged():
    c.Autograde.autograde_preprocessors = [
        JudgedExecute,
        IgnorePattern,
        ClearMetadataPreprocessor,
        LimitOutput,
        SaveAutoGrades,
        AssignLatePenalties,
        CheckCellMetadata,
    ]
