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
