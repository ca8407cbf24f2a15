#!/usr/bin/env python
"""Put a Colab install cell (and, given a URL, an "Open in Colab" link) at the top of lab notebooks.

    python tools/colab_cell.py labs/source/*/*.ipynb                       # in place
    python tools/colab_cell.py --out /tmp/labs labs/source/*/*.ipynb       # into copies
    python tools/colab_cell.py --install "zg @ https://example.org/zg-{version}-py3-none-any.whl" \\
        --badge "https://github.com/ORG/COURSE/blob/v{version}/{lab}/{lab}.ipynb" labs/source/*/*.ipynb
    python tools/colab_cell.py --remove labs/source/*/*.ipynb              # take them out again

The code cell (id ``colab-install``) is the notebook's first code cell, right after its title,
locked for nbgrader as the setup cell is (grade_id ``colab_install``: autograde runs the
instructor's version of it).
Anywhere but Google Colab it does nothing: it defines two names and tests
``"google.colab" in sys.modules``. On Colab, which already has a recent torch (with CUDA on a
GPU runtime), it pip-installs the kit at the version the lab was released with (read from
zg/__init__.py) and nothing else the labs need: pip keeps Colab's torch and numpy, which satisfy
zg's requirements, and adds pymetis.

What it installs is ``ZG_INSTALL``, a pip requirement set by ``--install`` (``{version}`` is
replaced by the kit's version). pyproject.toml names no project URL, so there is no default
location: without ``--install`` the cell installs the wheel ``zg-<version>-py3-none-any.whl``
that the student uploads to the Colab session (Colab's Files panel puts it in the working
folder), the wheel of the course's student distribution (`make student-dist`, wheels/). The
course staff who publish the wheel (a release asset, the course's web page) or tag the
repository pass its URL once and run this again: ``--install "zg @ https://.../zg-{version}-py3-none-any.whl"``
or ``--install "zg @ git+https://github.com/ORG/REPO@v{version}"``.

``--badge`` adds a Markdown cell (id ``colab-badge``) above the install cell with an "Open in
Colab" link. Its value is the URL of the released notebook on GitHub (``{lab}``: the notebook's
name, ``{version}``: the kit's), turned into Colab's
``https://colab.research.google.com/github/...`` address. It must point at the *released* labs
(published on their own, e.g. from dist/student): labs/source holds the solutions. The link is
text, not the usual badge image, so the notebook loads nothing from the network.

Idempotent: both cells are found by their ids and replaced, so running it again with the same
options leaves every byte as it was. Notebooks are written in the repository's format
(``json.dumps(nb, indent=1, ensure_ascii=False)`` and a newline), without outputs, through the
kit's writer (``zg._io.write_text``: atomic, a link kept and its target replaced). Every path is
checked before anything is written (exit status 2, naming the argument): a notebook must be a
regular file holding JSON, ``--out`` a folder, and each file written a regular file or absent.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
INSTALL_ID = "colab-install"
BADGE_ID = "colab-badge"
COLAB_GITHUB = "https://colab.research.google.com/github/"
NOTEBOOK_LIMIT = 64 << 20  # bytes of a notebook read (a lab notebook is well under 1 MiB)

INSTALL_CELL = """\
# On Google Colab this cell installs the kit, zg {version} (the version this lab was released
# with); anywhere else it does nothing. ZG_INSTALL: what pip installs (set by the course staff
# with tools/colab_cell.py --install; docs/install.md); empty: the wheel
# zg-{version}-py3-none-any.whl uploaded to this Colab session (the Files panel).
import sys

ZG_VERSION = "{version}"
ZG_INSTALL = {install}
if "google.colab" in sys.modules:
    import glob
    import importlib
    import subprocess

    ZG_INSTALL = ZG_INSTALL or next(iter(glob.glob(f"zg-{{ZG_VERSION}}-py3-none-any.whl")), "")
    if not ZG_INSTALL:
        raise RuntimeError(
            f"nothing to install zg {{ZG_VERSION}} from: upload zg-{{ZG_VERSION}}-py3-none-any.whl "
            "(wheels/ in the course's student distribution) with Colab's Files panel, "
            "or ask the course staff for its URL, and run this cell again"
        )
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", ZG_INSTALL], check=True)
    importlib.invalidate_caches()  # the new package is seen without restarting the kernel
    import torch
    import zg

    print(f"installed zg {{zg.__version__}} (torch {{torch.__version__}}, "
          f"CUDA {{'yes' if torch.cuda.is_available() else 'no'}})")"""

BADGE_CELL = """\
**[Open in Colab]({url})**: run this lab on Google Colab (its first code cell installs the
kit there; the labs need no GPU)."""


def kit_version() -> str:
    """The kit's version, as zg/__init__.py states it (what the lab was released with)."""
    found = re.search(r'^__version__ = "([^"]+)"', (ROOT / "zg" / "__init__.py").read_text(), re.M)
    if not found:
        raise SystemExit("colab_cell: zg/__init__.py has no __version__")
    return found.group(1)


def colab_url(template: str, lab: str, version: str) -> str:
    """The Colab address of ``template`` (a GitHub URL of the released notebook) for ``lab``."""
    url = template.replace("{lab}", lab).replace("{version}", version)
    if url.startswith("https://github.com/"):
        url = COLAB_GITHUB + url[len("https://github.com/") :]
    return url


# Locked like the labs' setup cells: nbgrader's autograde runs the instructor's version of the
# cell, whatever a submission holds there (off Colab it is a no-op either way).
LOCKED = {
    "grade": False,
    "grade_id": "colab_install",
    "locked": True,
    "schema_version": 3,
    "solution": False,
    "task": False,
}


def _cell(cell_type: str, cell_id: str, source: str, metadata: dict | None = None) -> dict:
    """A cell as the repository stores it: keys in nbformat's order, no outputs."""
    cell = {"cell_type": cell_type}
    if cell_type == "code":
        cell["execution_count"] = None
    cell.update({"id": cell_id, "metadata": metadata or {}})
    if cell_type == "code":
        cell["outputs"] = []
    cell["source"] = source.splitlines(keepends=True)
    return cell


def install_cell(version: str, install: str = "") -> dict:
    return _cell(
        "code",
        INSTALL_ID,
        INSTALL_CELL.format(
            version=version, install=json.dumps(install.replace("{version}", version))
        ),
        {"nbgrader": dict(LOCKED)},
    )


def with_colab_cells(
    nb: dict, lab: str, version: str, install: str = "", badge: str | None = None
) -> dict:
    """``nb`` without any earlier Colab cell, then with the install cell (and the badge cell when
    ``badge`` is given) after its title: the first cell when that is Markdown."""
    cells = [c for c in nb["cells"] if c.get("id") not in (INSTALL_ID, BADGE_ID)]
    at = 1 if cells and cells[0]["cell_type"] == "markdown" else 0
    new = [install_cell(version, install)]
    if badge:
        new.insert(
            0, _cell("markdown", BADGE_ID, BADGE_CELL.format(url=colab_url(badge, lab, version)))
        )
    return {**nb, "cells": cells[:at] + new + cells[at:]}


def without_colab_cells(nb: dict) -> dict:
    return {**nb, "cells": [c for c in nb["cells"] if c.get("id") not in (INSTALL_ID, BADGE_ID)]}


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("notebooks", nargs="+", type=Path)
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write OUT/<folder>/<name>.ipynb instead of changing the notebooks",
    )
    ap.add_argument(
        "--install",
        default="",
        help='pip requirement for the kit on Colab ({version}: the kit\'s); default "": the '
        "wheel uploaded to the Colab session",
    )
    ap.add_argument(
        "--badge",
        default=None,
        help="GitHub URL of the released notebook ({lab}, {version}): adds an Open in Colab link",
    )
    ap.add_argument("--remove", action="store_true", help="take the Colab cells out instead")
    args = ap.parse_args(argv)
    if args.badge and "{lab}" not in args.badge:
        ap.error("--badge needs {lab} in the URL (each notebook has its own)")
    from zg._checks import output_folder_arg
    from zg._io import command_output_arg, read_text_file, write_text

    # Every path is checked before anything is written (exit status 2, naming the argument):
    # each notebook must be a regular file (a named pipe would block) holding JSON, --out a
    # folder that can be written in, and each file written a regular file or absent.
    if args.out is not None:
        try:
            output_folder_arg(args.out, "--out")
        except (TypeError, ValueError) as exc:
            ap.error(str(exc))
    flag = "--out" if args.out is not None else "notebook"  # what names a file written
    notebooks = []
    for path in args.notebooks:
        try:
            text = read_text_file(path, "notebook", limit=NOTEBOOK_LIMIT, what="a notebook")
            nb = json.loads(text)
        except json.JSONDecodeError as exc:
            ap.error(f"notebook {str(path)!r}: is not JSON, so not a notebook ({exc})")
        except (OSError, ValueError) as exc:  # absent, not a regular file, too big, not UTF-8
            ap.error(str(exc))
        target = path if args.out is None else args.out / path.parent.name / path.name
        command_output_arg(ap, target, flag, make_parents=True)
        notebooks.append((path, nb, target))
    version = kit_version()
    for path, nb, target in notebooks:
        if args.remove:
            changed = without_colab_cells(nb)
        else:
            changed = with_colab_cells(nb, path.stem, version, args.install, args.badge)
        text = dumps(changed)
        try:
            old = read_text_file(target, flag, limit=NOTEBOOK_LIMIT, what="a notebook")
        except (OSError, ValueError):  # absent (or unreadable): written afresh
            old = None
        if old == text:
            print(f"colab_cell: {target} unchanged")
            continue
        try:  # atomic, a link kept (its target replaced): all or nothing
            write_text(target, text, name=flag, make_parents=True)
        except (OSError, ValueError) as exc:  # changed since it was checked
            print(f"colab_cell: error: {exc}", file=sys.stderr)
            return 1
        print(f"colab_cell: {target} {'without' if args.remove else 'with'} the Colab cell")
    return 0


if __name__ == "__main__":
    sys.exit(main())
