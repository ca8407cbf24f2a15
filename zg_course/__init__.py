"""The course: what grades, holds, scans and mutates the labs (labs/), beside ``zg``.

The course depends on the kit; the kit never imports the course (``tests/course`` and
``tests/core/test_import_cycles.py`` check it). The labs' locked cells import the first three;
the rest are the instructor's tools, each run as ``python -m zg_course.<name>`` from the
repository root (the Makefile's ``labs-*`` targets; docs/course/running_the_course.md).

    contract.py        the whole contract of a graded function and the harness that checks it
    labs.py            the labs' helpers: holds of the kit's references, checks, FirstWriteWins,
                       graded_against, Lab 4's rewind_loop, Lab 6's hook_on_workers
    hook.py            Lab 6's form of the exchange: the estimator's DDP communication hook
    grade.py           grade variants of a lab's solution cells in this process, each in a fork
    tamper.py          the scan of what a submission wrote, before it runs
    integrity.py       the check of the grader's own code while a submission runs
    sandbox.py         grade each submission in a sandbox that holds nothing of the grader
    check.py           grade the course with nbgrader as two students (`make labs-check`)
    release.py         the student version of every lab (`make labs`)
    wrong.py           deliberately wrong solutions lose their points (`make labs-wrong`)
    right.py           alternative correct solutions earn every point (`make labs-right`)
    mutants.py         mutants of every solution cell, and the mutation score (`make labs-mutants`)
    variants.py        wrong, right and mutants in one pass (`make labs-variants`)
    contract_table.py  the table of every graded function's contract clauses (labs/README.md)
"""
