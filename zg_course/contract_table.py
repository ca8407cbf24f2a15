#!/usr/bin/env python
"""The contract of every graded function of the labs, read from the notebooks (zg_course.contract).

Each lab declares, in a locked cell ``contract_<function>`` right after the function's solution
cell, a ``zg_course.contract.Contract(...)`` whose arguments are literals; its hidden cell
``test_<function>_contract`` checks every clause on generated inputs. This tool reads the
declarations (with ``ast``, running nothing) and prints the table of clauses per part, or
writes it into labs/README.md between its markers:

    python -m zg_course.contract_table                    # print the table
    python -m zg_course.contract_table --write labs/README.md
    python -m zg_course.contract_table --check labs/README.md   # exit 1 when the README is stale
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from zg_course.contract import CLAUSES, Contract

ROOT = Path(__file__).resolve().parents[1]

BEGIN, END = "<!-- contract clauses: begin -->", "<!-- contract clauses: end -->"
PART = re.compile(r"^##\s+Part\s+([A-Z])\b")


@dataclass
class Declared:
    lab: str
    part: str  # "A", "B", ...
    cell: str  # grade_id of the contract cell
    contract: Contract


def _contracts_in(source: str, where: str) -> list[tuple[str, Contract]]:
    """The ``(name, Contract)`` pairs a cell declares (``contract_F = zg_course.contract.Contract(...)``),
    their literal arguments evaluated (``compare=``, which may not be a literal, is left out)."""
    out = []
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
            continue
        call, f = node.value, node.value.func
        if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) != "Contract":
            continue
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {}
        for k in call.keywords:
            try:
                kwargs[k.arg] = ast.literal_eval(k.value)
            except ValueError:
                if k.arg != "compare":
                    raise SystemExit(
                        f"zg_course.contract_table: {where}: {k.arg}= is not a literal"
                    ) from None
        name = node.targets[0].id if isinstance(node.targets[0], ast.Name) else "?"
        out.append((name, Contract(*args, **kwargs)))
    if not out:
        raise SystemExit(
            f"zg_course.contract_table: {where}: no contract_F = zg_course.contract.Contract(...)"
        )
    return out


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def parts_of(path: Path) -> list[dict]:
    """Each part of a lab notebook: its letter, its graded code cells (grade_id, points,
    hidden?, a contract check?) and the contracts it declares, as (variable, Contract)."""
    out: list[dict] = []
    for cell in cells(path):
        source = "".join(cell["source"])
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "markdown" and PART.match(source):
            out.append(
                dict(part=PART.match(source).group(1), graded=[], contracts=[], solutions=[])
            )
            continue
        if not out:
            continue
        gid = meta.get("grade_id", "")
        if cell["cell_type"] == "code" and meta.get("grade"):
            out[-1]["graded"].append(
                dict(
                    grade_id=gid,
                    points=float(meta.get("points", 0)),
                    hidden="### BEGIN HIDDEN TESTS" in source,
                    contract=gid.endswith("_contract") and "zg_course.contract.check(" in source,
                )
            )
        if cell["cell_type"] == "code" and meta.get("solution"):
            out[-1]["solutions"].append(gid)
        if cell["cell_type"] == "code" and gid.startswith("contract_"):
            out[-1]["contracts"].extend(_contracts_in(source, f"{path.name} {gid}"))
    return [p for p in out if p["graded"]]


def labs(course: Path = ROOT / "labs") -> list[Path]:
    """Labs 1-9's source notebooks (Lab 0, the setup check, has one contract, on Part B's
    function, in a part of 2 points: its hidden cell holds half of them, not more, and the
    table lists the labs whose contract cells hold more than half of every part)."""
    return sorted(
        p
        for p in (course / "source").glob("*/*.ipynb")
        if p.parent.name == p.stem and not p.stem.startswith("00_")
    )


def table(course: Path = ROOT / "labs") -> str:
    head = ["lab", "part", "function", "points (contract / part)"] + [c for c in CLAUSES]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for path in labs(course):
        for part in parts_of(path):
            total = sum(g["points"] for g in part["graded"])
            held = sum(g["points"] for g in part["graded"] if g["contract"])
            for _gid, c in part["contracts"]:
                marks = []
                for clause in CLAUSES:
                    if clause not in c.clauses:
                        marks.append("")
                    elif clause == "host syncs":
                        marks.append(f"<= {c.host_syncs}")
                    elif clause == "updates":
                        marks.append(", ".join(f"`{n}`" for n in c.may_change))
                    else:
                        marks.append("yes")
                cells_ = [path.stem, part["part"], f"`{c.function}`", f"{held:g} / {total:g}"]
                rows.append("| " + " | ".join(cells_ + marks) + " |")
    return "\n".join(rows)


def write(readme: Path, text: str) -> str:
    doc = readme.read_text()
    if BEGIN not in doc:
        raise SystemExit(f"zg_course.contract_table: {readme} has no {BEGIN} marker")
    return re.sub(
        re.escape(BEGIN) + ".*?" + re.escape(END), f"{BEGIN}\n{text}\n{END}", doc, flags=re.S
    )


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", default=None, help="write the table into this Markdown file")
    ap.add_argument("--check", default=None, help="exit 1 when this file's table is stale")
    args = ap.parse_args(argv)
    if args.write:  # checked before the table is built: one line naming --write, exit 2
        from zg._io import command_output_arg

        command_output_arg(ap, args.write, "--write")
        if not Path(args.write).is_file():
            ap.error(f"--write {args.write!r}: no such file; it must hold the table's markers")
    text = table()
    if args.write:
        from zg._io import write_text

        write_text(args.write, write(Path(args.write), text), name="--write")
    elif args.check:
        path = Path(args.check)
        if write(path, text) != path.read_text():
            print(
                f"zg_course.contract_table: {path}'s table is stale: run zg_course/contract_table.py --write {path}"
            )
            return 1
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
