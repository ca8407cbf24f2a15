"""Build the student version of every lab: labs/release/<lab>/<lab>.ipynb (`make labs`).

Runs ``nbgrader generate_assignment`` (solutions replaced by stubs that raise
NotImplementedError, hidden tests removed, cells checksummed) for every lab under
labs/source/, in one process (the nbgrader CLI takes ~10 s to start per lab). nbgrader also
records the labs in labs/gradebook.db; both are gitignored.

    python -m zg_course.release [lab ...]
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COURSE = ROOT / "labs"


def main(argv=None) -> int:
    labs = list(sys.argv[1:] if argv is None else argv)
    # nbgrader runs `alembic` (its database migrations) as a subprocess: put this env's bin first.
    os.environ["PATH"] = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    warnings.filterwarnings("ignore", message=".*not in session.*")
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    if not labs:
        labs = sorted(
            p.name
            for p in (COURSE / "source").iterdir()
            if p.is_dir() and (p / f"{p.name}.ipynb").is_file()
        )
    known = {p.name for p in (COURSE / "source").iterdir() if p.is_dir()}
    unknown = [lab for lab in labs if lab not in known]
    if unknown:
        raise SystemExit(
            f"zg_course.release: no lab named {unknown} under {COURSE / 'source'}; "
            f"choose from {sorted(known)}"
        )
    config = Config()
    config.CourseDirectory.root = str(COURSE)
    api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
    for lab in labs:
        result = api.generate_assignment(lab, force=True, create=True)
        if not result["success"]:
            print(result["log"], result["error"], file=sys.stderr)
            raise SystemExit(f"zg_course.release: generate_assignment {lab} failed")
        print(f"released {COURSE / 'release' / lab / (lab + '.ipynb')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
