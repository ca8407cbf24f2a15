"""Build what students get (`make student-dist`): the kit's wheel and the released labs.

    dist/student/zg-course-<version>/
        README.md                 how to install and open the labs
        MANIFEST.json             kit version, git commit, every file with its sha256
        wheels/zg-<version>-py3-none-any.whl   the kit (zg) and the course package (zg_course),
                                  which the released labs' cells import
        labs/<lab>/<lab>.ipynb    nbgrader's release: solutions replaced by stubs, hidden
                                  tests and model answers removed
    dist/student/zg-course-<version>.zip

What it leaves out, and checks it left out: labs/source, labs/wrong, labs/right, the
equivalent-mutant list, the instructor pack (docs/course), every hidden test, every solution
and model answer, marking notes. Every released lab records the kit version it was released
with (``zg_course.labs.graded_against``), the wheel's version.

    python tools/student_dist.py [--out dist/student]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a file: the course package sits at the root
    sys.path.insert(0, str(ROOT))
from zg_course.check import lab_names, nbgrader_workspace

# Text no student file may hold: an instructor's marker, a hidden test, a model answer.
FORBIDDEN_TEXT = (
    "BEGIN HIDDEN TESTS",
    "END HIDDEN TESTS",
    "BEGIN SOLUTION",
    "END SOLUTION",
    "**Model answer.**",
    "Marking notes",
)
# The course package's modules the labs' cells import: the wheel must carry them.
COURSE_MODULES = ("zg_course/__init__.py", "zg_course/labs.py", "zg_course/contract.py",
                  "zg_course/hook.py")  # fmt: skip
FORBIDDEN_PATHS = ("source/", "wrong/", "right/", "equivalent_mutants", "docs/course", "gradebook")


def kit_version() -> str:
    text = (ROOT / "zg" / "__init__.py").read_text()
    found = re.search(r'^__version__ = "([^"]+)"', text, re.M)
    if not found:
        raise SystemExit("student_dist: zg/__init__.py has no __version__")
    return found.group(1)


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() or "unknown"


def build_wheel(folder: Path) -> Path:
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="zg_wheel_") as build:
        src = Path(build) / "src"
        # a copy, so the build's egg-info and build/ never land in the checkout
        shutil.copytree(
            ROOT,
            src,
            ignore=shutil.ignore_patterns(
                ".git", ".venv*", "build", "dist", "site", "reports", "labs", "notebooks", "bench"
            ),
            symlinks=False,  # zg/_bundled/cora.npz becomes the file itself
        )
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "wheel",
                "--no-deps",
                "--no-build-isolation",
                "-q",
                "-w",
                str(folder),
                str(src),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
    if result.returncode != 0:
        raise SystemExit(f"student_dist: building the wheel failed:\n{result.stderr[-3000:]}")
    wheels = sorted(folder.glob("zg-*.whl"))
    if len(wheels) != 1:
        raise SystemExit(f"student_dist: expected one zg wheel in {folder}, found {wheels}")
    return wheels[0]


def release_labs(into: Path) -> list[str]:
    api, course, cleanup, _ = nbgrader_workspace(ROOT / "labs", None, "student_dist")
    try:
        labs = lab_names(course)
        for lab in labs:
            result = api.generate_assignment(lab, force=True, create=True)
            if not result["success"]:
                raise SystemExit(
                    f"student_dist: generate_assignment {lab} failed:\n{result['log']}"
                    f"{result['error']}"
                )
            shutil.copytree(course / "release" / lab, into / lab)
    finally:
        if cleanup is not None:
            cleanup.cleanup()
    return labs


README = """# zg course, version {version}

What you need: Python 3.10 to 3.12 and a recent PyTorch (2.2 or newer; a CPU build is enough
for every graded test).

    python -m venv .venv && . .venv/bin/activate
    pip install torch --index-url https://download.pytorch.org/whl/cpu   # a CPU torch (Linux)
    pip install "wheels/zg-{version}-py3-none-any.whl[lab]"
    jupyter lab labs/

(PyPI's torch for Linux is the CUDA build, a few GB; the first line takes the CPU build. On
macOS and Windows PyPI's torch is already the CPU one.) The wheel's `lab` extra is JupyterLab,
ipywidgets, plotly and tqdm.

Start with `labs/00_setup`: it checks your environment and says what is missing. Each lab
records the kit version it was released with (zg {version}); a kernel with another version
stops at the lab's first cell, so your grade is computed by the code you worked against.
Bundled data (Cora) is inside the wheel: nothing is downloaded.
"""


def problems_in(folder: Path, version: str) -> list[str]:
    """What the distribution must not hold, and what it must: [] when it is right."""
    out = []
    files = [p for p in folder.rglob("*") if p.is_file()]
    for path in files:
        rel = path.relative_to(folder).as_posix()
        if any(bad in rel for bad in FORBIDDEN_PATHS):
            out.append(f"{rel}: an instructor's file")
        if path.suffix in (".ipynb", ".md", ".py", ".txt", ".json"):
            text = path.read_text(errors="replace")
            out += [f"{rel}: holds {t!r}" for t in FORBIDDEN_TEXT if t in text]
        if path.suffix == ".whl":
            with zipfile.ZipFile(path) as whl:
                names = whl.namelist()
                if "zg/_bundled/cora.npz" not in names:
                    out.append(f"{rel}: Cora (zg/_bundled/cora.npz) is not in the wheel")
                for module in COURSE_MODULES:  # what the released labs' cells import
                    if module not in names:
                        out.append(f"{rel}: the course's {module} is not in the wheel")
                out += [f"{rel}: holds {n}" for n in names if n.startswith(("labs/", "tests/"))]
    for nb in folder.glob("labs/*/*.ipynb"):
        text = nb.read_text()
        if nb.parent.name != "00_setup" and f'graded_against(\\"{version}\\")' not in text:
            out.append(f"{nb.relative_to(folder)}: does not record zg {version}")
    if not list(folder.glob("wheels/*.whl")):
        out.append("no wheel")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "dist" / "student"))
    args = ap.parse_args(argv)
    from zg._checks import output_folder_arg
    from zg._io import command_output_arg, write_text

    try:  # before anything is built: one line naming --out, exit 2
        output_folder_arg(args.out, "--out")
    except (TypeError, ValueError) as exc:
        ap.error(str(exc))
    version = kit_version()
    out = Path(args.out).resolve()
    folder = out / f"zg-course-{version}"
    if os.path.lexists(folder) and (folder.is_symlink() or not folder.is_dir()):
        ap.error(f"--out {args.out!r}: {str(folder)!r} exists and is not a folder; not replaced")
    # the archive beside it; --out itself (dist/student/ in a fresh clone) is made below
    command_output_arg(ap, f"{folder}.zip", "--out", make_parents=True)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    wheel = build_wheel(folder / "wheels")
    labs = release_labs(folder / "labs")
    write_text(folder / "README.md", README.format(version=version), name="--out")
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    manifest = {
        "zg_version": version,
        "git_commit": git_commit(),
        "labs": labs,
        "files": {
            p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in files
        },
    }
    write_text(folder / "MANIFEST.json", json.dumps(manifest, indent=1) + "\n", name="--out")
    problems = problems_in(folder, version)
    if problems:
        print("student_dist: FAILED\n  " + "\n  ".join(problems))
        return 1
    archive = shutil.make_archive(str(folder), "zip", root_dir=out, base_dir=folder.name)
    print(
        f"student_dist: {folder} ({len(labs)} labs, {wheel.name}) and {archive}; "
        "no solution, hidden test or model answer in it"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
