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
