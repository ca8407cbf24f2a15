"""Mutation-test the graded labs (`make labs-mutants`): every part must kill its mutants.

A small AST mutator makes mutants of each solution cell, only inside its
``### BEGIN SOLUTION`` / ``### END SOLUTION`` region: swapped arithmetic operators, swapped
comparisons, ``and``/``or``, a dropped ``not``/``~``/``-`` (a flipped mask), off-by-one slice
bounds and ``range`` arguments, a dropped statement, an in-place method made out-of-place
(``add_`` -> ``add``, ``x += y`` -> ``x = x + y``), ``amin``/``amax`` and their kin, and changed
constants. Besides the value, mutants of the contract (zg_course.contract): a narrower dtype
(``torch.float64`` -> ``torch.float32``, ``.long()`` -> ``.int()``), a factory call that drops
its ``device=`` (the tensor lands on the default device), a collective made blocking (its work
waited on at once), an argument changed in place after the result is computed (a tensor rolled,
a list reversed), and a cache keyed by the arguments' shapes that ignores their values. Each mutant replaces its cell and is graded by the lab's own tests (public and
hidden) in a forked child (zg_course/grade.py): killed when it loses any point of its part.

A mutant that no test can tell from the solution (it computes the same thing) is listed in
``labs/equivalent_mutants.toml`` with its reason; it counts neither way. A listed mutant that is
no longer generated, or that the tests kill, is an error: the list stays true.

Passes when every part kills at least ``--min-score`` (90 %) of its non-equivalent mutants.

    python -m zg_course.mutants [lab ...] [--survivors] [--write docs/course/mutation_scores.md]
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import tomllib

from zg_course.grade import ROOT, Lab, Variant, lab_source

EQUIVALENT = ROOT / "labs" / "equivalent_mutants.toml"
SKIP_LABS = {"00_setup"}  # the environment check: its cells call the kit's own report
TIMINGS = ROOT / "labs" / "timings.json"  # nbgrader's measured seconds per lab (zg_course/check.py)


def deadline(lab: str, timings: Path = TIMINGS) -> float:
    """Seconds a mutant of ``lab`` may run: three times what nbgrader took on the whole
    notebook with the instructor's solutions (labs/timings.json; a mutant runs only part of
    it), at least 20 s; 60 s for a lab the file does not time. A mutant that loops forever
    (a dropped ``b += 1``) is killed after that long instead of a flat minute."""
    import json

    seconds = json.loads(timings.read_text())["seconds"] if timings.is_file() else {}
    return max(20.0, 3.0 * seconds[lab]) if lab in seconds else 60.0


BINOPS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Div,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
    ast.MatMult: ast.Mult,
}
CMPOPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
NAMES = {
    "amin": "amax",
    "amax": "amin",
    "min": "max",
    "max": "min",
    "argmin": "argmax",
    "argmax": "argmin",
    "minimum": "maximum",
    "maximum": "minimum",
    "cummin": "cummax",
    "cummax": "cummin",
    "any": "all",
    "all": "any",
    "floor": "ceil",
    "ceil": "floor",
    "sum": "mean",
    "mean": "sum",
}
# Mutants of the contract: dtype narrowing, and the torch factories whose device= may be dropped.
NARROW = {"float64": "float32", "double": "float32", "int64": "int32", "long": "int32"}
NARROW_METHODS = {"double": "float", "long": "int"}
FACTORIES = {
    "zeros", "ones", "empty", "full", "arange", "linspace", "eye", "tensor", "as_tensor",
    "rand", "randn", "randint", "randperm", "empty_strided", "logspace", "range", "tril_indices",
    "triu_indices",
}  # fmt: skip
# Calls whose arguments are text for people, not values a test can see.
QUIET_CALLS = {"print", "display", "warn", "ValueError", "TypeError", "RuntimeError"}


@dataclass
class Mutant:
    lab: str
    cell: str
    line: int  # line within the cell
    col: int
    op: str
    before: str
    after: str
    code: str

    @property
    def key(self) -> str:
        return f"{self.cell} {self.line}:{self.col} {self.op}: `{self.before}` -> `{self.after}`"


def solution_lines(code: str) -> tuple[int, int]:
    """1-based (first, last) line of the cell's solution region (the whole cell without one)."""
    lines = code.splitlines()
    begin = [i for i, s in enumerate(lines, 1) if "### BEGIN SOLUTION" in s]
    end = [i for i, s in enumerate(lines, 1) if "### END SOLUTION" in s]
    if begin and end:
        return begin[0] + 1, end[-1] - 1
    return 1, len(lines)


def _short(text: str, limit: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Sites(ast.NodeVisitor):
    """Every (path to a node, mutation) in the solution region, in source order."""

    def __init__(self, first: int, last: int):
        self.first, self.last = first, last
        self.sites: list[tuple[tuple, str, object]] = []
        self.path: list = []
        self.quiet = 0

    def inside(self, node) -> bool:
        return (
            hasattr(node, "lineno") and self.first <= node.lineno and node.end_lineno <= self.last
        )

    def generic_visit(self, node):
        for name, value in ast.iter_fields(node):
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if isinstance(item, ast.AST):
                        self.path.append((name, i))
                        self.visit(item)
                        self.path.pop()
            elif isinstance(value, ast.AST):
                self.path.append((name, None))
                self.visit(value)
                self.path.pop()

    def add(self, op, payload=None):
        self.sites.append((tuple(self.path), op, payload))

    def visit(self, node):
        quiet = isinstance(node, (ast.JoinedStr, ast.Raise, ast.Assert)) or (
            isinstance(node, ast.Call) and _call_name(node) in QUIET_CALLS
        )
        if quiet:
            self.quiet += 1
        if self.quiet == 0 and self.inside(node):
            self.mutations(node)
        elif isinstance(node, (ast.Raise, ast.Assert)) and self.inside(node):
            self.add("drop")  # dropping a check is a mutant too
        super().visit(node)
        if quiet:
            self.quiet -= 1

    def mutations(self, node):
        if isinstance(node, ast.stmt) and not isinstance(
            node, (ast.FunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Pass)
        ):
            if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
                self.add("drop")
        if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
            self.add("operator")
        if isinstance(node, ast.AugAssign):
            if type(node.op) in BINOPS:
                self.add("operator")
            if not (isinstance(node.value, ast.Constant) and isinstance(node.target, ast.Name)):
                self.add("out-of-place")  # not a counter: `x += 1` on a name rebinds an int
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                if type(op) in CMPOPS:
                    self.add("comparison", i)
        if isinstance(node, ast.BoolOp):
            self.add("boolean")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert, ast.USub)):
            self.add("flip")
        if isinstance(node, ast.Slice):
            for bound in ("lower", "upper"):
                if getattr(node, bound) is not None:
                    self.add("off-by-one", (bound, 1))
                    self.add("off-by-one", (bound, -1))
        if isinstance(node, ast.Call) and _call_name(node) == "range":
            for i in range(len(node.args)):
                self.add("off-by-one", (i, 1))
                self.add("off-by-one", (i, -1))
        if isinstance(node, ast.Attribute):
            if node.attr in NAMES:
                self.add("swap")
            elif node.attr.endswith("_") and not node.attr.startswith("_"):
                self.add("out-of-place")
        if isinstance(node, ast.Name) and node.id in NAMES and isinstance(node.ctx, ast.Load):
            self.add("swap")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (str, bytes)):
            if node.value is not None and node.value is not Ellipsis:
                self.add("constant")
        # the contract's mutants
        if (
            isinstance(node, ast.Attribute)
            and node.attr in NARROW
            and isinstance(node.value, ast.Name)
            and node.value.id == "torch"
        ):
            self.add("narrow dtype")
        if isinstance(node, ast.Call) and not node.args and not node.keywords:
            if isinstance(node.func, ast.Attribute) and node.func.attr in NARROW_METHODS:
                self.add("narrow dtype")
        if isinstance(node, ast.Call) and _is_factory(node):
            if any(k.arg == "device" for k in node.keywords):
                self.add("default device")
        if isinstance(node, ast.Call) and _like_factory(node) is not None:
            self.add("default device")
        if isinstance(node, ast.Call) and any(
            k.arg == "async_op" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in node.keywords
        ):
            self.add("blocking")


LIKE = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like"}
NEW = {"new_zeros", "new_ones", "new_empty", "new_full"}


def _like_factory(node: ast.Call):
    """(the tensor it follows, the factory's name) for ``torch.zeros_like(x, ...)`` or
    ``x.new_zeros(...)`` (whose device follows ``x``), else None."""
    f = node.func
    if not isinstance(f, ast.Attribute):
        return None
    if f.attr in LIKE and isinstance(f.value, ast.Name) and f.value.id == "torch" and node.args:
        return node.args[0], f.attr[: -len("_like")]
    if f.attr in NEW and node.args:
        return f.value, f.attr[len("new_") :]
    return None


def _default_device(node: ast.Call) -> ast.Call:
    """The same factory without the device it followed: ``torch.zeros_like(x)`` ->
    ``torch.zeros(x.shape, dtype=x.dtype)``, ``x.new_zeros(n)`` -> ``torch.zeros(n, dtype=x.dtype)``."""
    like, base = _like_factory(node)
    if isinstance(node.func, ast.Attribute) and node.func.attr in LIKE:
        args = [ast.Attribute(copy.deepcopy(like), "shape", ast.Load()), *node.args[1:]]
    else:
        args = list(node.args)
    keywords = [k for k in node.keywords if k.arg != "device"]
    if not any(k.arg == "dtype" for k in keywords):
        keywords.append(
            ast.keyword("dtype", ast.Attribute(copy.deepcopy(like), "dtype", ast.Load()))
        )
    return ast.Call(ast.Attribute(ast.Name("torch", ast.Load()), base, ast.Load()), args, keywords)


def _is_factory(node: ast.Call) -> bool:
    f = node.func
    return (
        isinstance(f, ast.Attribute)
        and f.attr in FACTORIES
        and isinstance(f.value, ast.Name)
        and f.value.id == "torch"
    )


def _call_name(node: ast.Call) -> str:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _at(tree, path):
    node = tree
    for name, i in path:
        node = getattr(node, name) if i is None else getattr(node, name)[i]
    return node


def _replace(tree, path, new):
    parent = _at(tree, path[:-1])
    name, i = path[-1]
    if i is None:
        setattr(parent, name, new)
    else:
        getattr(parent, name)[i] = new


def _plus(expr, delta):
    op = ast.Add() if delta > 0 else ast.Sub()
    return ast.BinOp(left=expr, op=op, right=ast.Constant(abs(delta)))


def _mutate(tree, path, op, payload):
    """Apply one mutation to a copy of the tree; (before node, after node) or None."""
    tree = copy.deepcopy(tree)
    node = _at(tree, path)
    before = copy.deepcopy(node)
    if op == "drop":
        new = ast.Pass()
    elif op == "operator" and isinstance(node, ast.BinOp):
        new = copy.deepcopy(node)
        new.op = BINOPS[type(node.op)]()
    elif op == "operator":  # an augmented assignment
        new = copy.deepcopy(node)
        new.op = BINOPS[type(node.op)]()
    elif op == "out-of-place" and isinstance(node, ast.AugAssign):
        target = copy.deepcopy(node.target)
        load = copy.deepcopy(node.target)
        for n in ast.walk(load):
            if hasattr(n, "ctx"):
                n.ctx = ast.Load()
        new = ast.Assign(targets=[target], value=ast.BinOp(left=load, op=node.op, right=node.value))
    elif op == "out-of-place":
        new = copy.deepcopy(node)
        new.attr = node.attr[:-1]
    elif op == "comparison":
        new = copy.deepcopy(node)
        new.ops[payload] = CMPOPS[type(node.ops[payload])]()
    elif op == "boolean":
        new = copy.deepcopy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
    elif op == "flip":
        new = node.operand
    elif op == "off-by-one" and isinstance(node, ast.Slice):
        bound, delta = payload
        new = copy.deepcopy(node)
        setattr(new, bound, _plus(getattr(node, bound), delta))
    elif op == "off-by-one":
        i, delta = payload
        new = copy.deepcopy(node)
        new.args[i] = _plus(node.args[i], delta)
    elif op == "swap" and isinstance(node, ast.Attribute):
        new = copy.deepcopy(node)
        new.attr = NAMES[node.attr]
    elif op == "swap":
        new = ast.Name(id=NAMES[node.id], ctx=node.ctx)
    elif op == "narrow dtype" and isinstance(node, ast.Attribute):
        new = copy.deepcopy(node)
        new.attr = NARROW[node.attr]
    elif op == "narrow dtype":
        new = copy.deepcopy(node)
        new.func.attr = NARROW_METHODS[node.func.attr]
    elif op == "default device" and _like_factory(node) is not None:
        new = _default_device(node)
    elif op == "default device":
        new = copy.deepcopy(node)
        new.keywords = [k for k in node.keywords if k.arg != "device"]
    elif op == "blocking":  # the work waited on where it is made: a blocking collective
        new = ast.parse("(lambda _zg_w: (_zg_w.wait(), _zg_w)[1])(CALL)", mode="eval").body
        new.args[0] = copy.deepcopy(node)
    elif op == "constant":
        v = node.value
        if isinstance(v, bool):
            new = ast.Constant(not v)
        elif isinstance(v, int):
            new = ast.Constant(v + 1)
        elif isinstance(v, float):
            new = ast.Constant(v * 2 if v else 1.0)
        else:
            return None
    else:
        return None
    _replace(tree, path, new)
    ast.fix_missing_locations(tree)
    return tree, before, new


# An argument changed in place once the result is computed: the value returned stays right, the
# caller's input does not (a tensor rolled by one, a list reversed; leaves that need grad kept).
TOUCH = """
for _zg_a in ({params},):
    if isinstance(_zg_a, torch.Tensor) and _zg_a.numel() > 1 and not _zg_a.requires_grad:
        _zg_a.copy_(_zg_a.flatten().roll(1).view_as(_zg_a))
    elif isinstance(_zg_a, list) and len(_zg_a) > 1:
        _zg_a.reverse()
"""
# A cache on the function keyed by its arguments' shapes and types, not their values.
CACHE = """
_zg_memo = {name}.__dict__.setdefault("_zg_memo", {{}})
_zg_key = repr([(getattr(_zg_a, "shape", None), type(_zg_a).__name__) for _zg_a in ({params},)])
if _zg_key in _zg_memo:
    return _zg_memo[_zg_key]
"""


def _contract_mutants(tree, first: int, last: int):
    """(op, before, after, mutated tree) for each function whose body holds the solution region:
    an argument touched before each return, and a shape-keyed cache."""
    out = []
    for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef)]:  # the graded ones
        body = [s for s in fn.body if first <= s.lineno and s.end_lineno <= last]
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]
        if not body or not params:
            continue
        index = fn.body.index(body[0])
        path = _path_to(tree, fn)
        touched = copy.deepcopy(tree)
        target = _at(touched, path)
        touch = ast.parse(TOUCH.format(params=", ".join(params))).body
        returns = [
            n
            for n in ast.walk(target)
            if isinstance(n, ast.Return)
            and first <= n.lineno <= last
            and _owner(target, n) is target
        ]
        for ret in returns:
            value = ret.value or ast.Constant(None)
            ret.value = ast.Name("_zg_result", ast.Load())
            _insert_before(
                target,
                ret,
                [ast.Assign([ast.Name("_zg_result", ast.Store())], value), *copy.deepcopy(touch)],
            )
        if not isinstance(target.body[-1], ast.Return):
            target.body.extend(copy.deepcopy(touch))
        ast.fix_missing_locations(touched)
        out.append(
            (
                "touch input",
                f"{fn.name}(...) leaves its arguments",
                f"{fn.name}(...) changes them after the result",
                touched,
            )
        )
        cached = copy.deepcopy(tree)
        target = _at(cached, path)
        for ret in [
            n for n in ast.walk(target) if isinstance(n, ast.Return) and _owner(target, n) is target
        ]:
            value = ret.value or ast.Constant(None)
            ret.value = ast.parse("_zg_memo.setdefault(_zg_key, VALUE)", mode="eval").body
            ret.value.args[1] = value
        target.body[index:index] = ast.parse(
            CACHE.format(name=fn.name, params=", ".join(params))
        ).body
        if not isinstance(target.body[-1], ast.Return):
            target.body.append(ast.parse("return _zg_memo.setdefault(_zg_key, None)").body[0])
        ast.fix_missing_locations(cached)
        out.append(
            (
                "cache",
                f"{fn.name}(...) computed on every call",
                f"{fn.name}(...) cached by its arguments' shapes",
                cached,
            )
        )
    return out


def _path_to(tree, node) -> tuple:
    """The path (as _Sites records it) from ``tree`` to ``node``."""
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is node:
                return _path_to(tree, parent) + ((name, None),)
            if isinstance(value, list) and any(v is node for v in value):
                i = next(i for i, v in enumerate(value) if v is node)
                return _path_to(tree, parent) + ((name, i),)
    return ()


def _owner(fn, node):
    """The innermost function (or lambda) of ``fn`` that holds ``node``."""
    owner = fn
    for child in ast.walk(fn):
        if child is not fn and isinstance(
            child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
        ):
            if any(n is node for n in ast.walk(child)):
                owner = child
    return owner


def _insert_before(fn, stmt, new: list) -> None:
    for parent in ast.walk(fn):
        for _name, value in ast.iter_fields(parent):
            if isinstance(value, list) and any(v is stmt for v in value):
                i = next(i for i, v in enumerate(value) if v is stmt)
                value[i:i] = new
                return


def mutants_of(lab: str, cell: str, code: str) -> list[Mutant]:
    first, last = solution_lines(code)
    tree = ast.parse(code)
    sites = _Sites(first, last)
    sites.visit(tree)
    out, seen = [], set()
    made = []
    for path, op, payload in sites.sites:
        done = _mutate(tree, path, op, payload)
        if done is not None:
            mutated, before, after = done
            made.append((mutated, _short(ast.unparse(before)), after, before, op))
    for op, before_text, after_text, mutated in _contract_mutants(tree, first, last):
        made.append((mutated, before_text, after_text, None, op))
    for mutated, before_text, after, before, op in made:
        text = ast.unparse(mutated)
        if text in seen or text == ast.unparse(tree):
            continue
        seen.add(text)
        out.append(
            Mutant(
                lab,
                cell,
                getattr(before, "lineno", first),
                getattr(before, "col_offset", 0),
                op,
                before_text,
                after
                if isinstance(after, str)
                else "(dropped)"
                if isinstance(after, ast.Pass)
                else _short(ast.unparse(after)),
                text + "\n",
            )
        )
    return out


def lab_mutants(lab_obj: Lab) -> list[Mutant]:
    out = []
    for cell_id, tests in lab_obj.parts.items():
        if not tests:
            continue
        out += mutants_of(lab_obj.name, cell_id, lab_obj.by_id[cell_id].source)
    return out


def read_equivalent(path: Path = EQUIVALENT) -> dict[tuple[str, str], str]:
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text())
    out = {}
    for entry in data.get("equivalent", []):
        missing = [k for k in ("lab", "mutant", "why") if not entry.get(k)]
        if missing:
            raise SystemExit(f"zg_course.mutants: {path}: an entry lacks {missing}: {entry}")
        out[(entry["lab"], entry["mutant"])] = entry["why"]
    return out


def labs(course: Path, names: list[str]) -> list[str]:
    found = sorted(
        p.name
        for p in (course / "source").iterdir()
        if p.is_dir() and (p / f"{p.name}.ipynb").is_file() and p.name not in SKIP_LABS
    )
    unknown = [n for n in names if n not in found]
    if unknown:
        raise SystemExit(f"zg_course.mutants: no lab(s) {unknown}; the labs are {found}")
    return [n for n in found if not names or n in names]


def table(rows: list[dict]) -> str:
    out = [
        "| lab | part | mutants | equivalent | killed | score |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        score = f"{r['score']:.0%}" if r["score"] is not None else "not run here"
        out.append(
            f"| {r['lab']} | `{r['part']}` | {r['mutants']} | {r['equivalent']} | "
            f"{r['killed']} | {score} |"
        )
    return "\n".join(out)


def plan(lab: Lab, equivalent: dict, timeout: float | None = None) -> tuple[list, list[Variant]]:
    """``lab``'s mutants, and the variants to grade: every mutant not listed as equivalent, judged
    on its part and stopped at its first failing test."""
    mutants = lab_mutants(lab)
    variants = [
        Variant(
            m.key,
            {m.cell: m.code},
            judged_on=lab.parts[m.cell],
            stop_at_failure=True,
            timeout=timeout,
        )
        for m in mutants
        if (lab.name, m.key) not in equivalent
    ]
    return mutants, variants


def judge(
    lab: Lab,
    mutants: list,
    outcomes: dict,
    equivalent: dict,
    used: set,
    min_score: float,
    survivors: bool = False,
) -> tuple[list[dict], list[str]]:
    """The score rows of ``lab``'s parts and the problems found (a part below ``min_score``, the
    instructor's solution failing, a listed equivalent mutant no longer made). Adds the
    equivalent mutants seen to ``used``; prints survivors (all with ``survivors``, else those
    of a failing part)."""
    name = lab.name
    rows, problems = [], []
    by_key = {m.key: m for m in mutants}
    broken = [g for g, ok in lab.base.items() if not ok]
    if broken:
        problems.append(f"{name}: the instructor's solution fails {broken}: {lab.base_failures}")
    for (lab_name, key), _why in equivalent.items():
        if lab_name != name:
            continue
        used.add((lab_name, key))
        if key not in by_key:
            problems.append(f"{name}: listed equivalent mutant is no longer made: {key}")
    for cell_id, tests in lab.parts.items():
        if not tests:
            continue
        ms = [m for m in mutants if m.cell == cell_id]
        eq = [m for m in ms if (name, m.key) in equivalent]
        graded = [outcomes[m.key] for m in ms if m.key in outcomes]
        killed = [o for o in graded if not o.full_marks]
        alive = [o for o in graded if o.full_marks]
        needs = lab.base and not all(lab.base.get(g) for g in tests)
        score = len(killed) / len(graded) if graded and not needs else None
        rows.append(
            dict(
                lab=name,
                part=cell_id,
                mutants=len(ms),
                equivalent=len(eq),
                killed=len(killed),
                score=score,
            )
        )
        if score is not None and score < min_score:
            problems.append(
                f"{name} {cell_id}: kills {len(killed)} of {len(graded)} mutants "
                f"({score:.0%}; at least {min_score:.0%} wanted)"
            )
        if survivors or (score is not None and score < min_score):
            for o in alive:
                print(f"  survivor {name}: {o.key}")
    return rows, problems


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("labs", nargs="*", help="labs by folder name (default: every graded lab)")
    ap.add_argument("--course", default=str(ROOT / "labs"))
    ap.add_argument("--min-score", type=float, default=0.9)
    ap.add_argument("--jobs", type=int, default=2, help="mutants graded at once")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="run the tests in the mutant's process, as before the judge",
    )
    ap.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds a mutant may run (default: 3x the lab's time in labs/timings.json, >= 20)",
    )
    ap.add_argument("--survivors", action="store_true", help="print every surviving mutant")
    ap.add_argument("--list", action="store_true", help="only list the mutants")
    ap.add_argument("--write", default=None, help="write the score table into this Markdown file")
    args = ap.parse_args(argv)
    from zg._io import command_output_arg

    command_output_arg(ap, args.write, "--write")  # before any grading (exit status 2)
    start = time.time()
    course = Path(args.course).resolve()
    equivalent = read_equivalent()
    rows, problems, used = [], [], set()
    for name in labs(course, args.labs):
        timeout = args.timeout or deadline(name)
        lab = Lab(
            lab_source(course, name), timeout=timeout, jobs=args.jobs, judge=not args.in_process
        )
        mutants, variants = plan(lab, equivalent)
        if args.list:
            for m in mutants:
                print(f"{name}: {m.key}")
            continue
        t = time.time()
        outcomes = lab.grade(variants)
        r, p = judge(lab, mutants, outcomes, equivalent, used, args.min_score, args.survivors)
        rows, problems = rows + r, problems + p
        print(f"{name}: {len(mutants)} mutants graded in {time.time() - t:.0f} s", flush=True)
    if args.list:
        return 0
    print()
    print(table(rows))
    written = True
    if args.write:
        try:
            write_table(Path(args.write), table(rows))
        except (OSError, ValueError) as exc:  # changed since it was checked; the table is above
            print(f"zg_course.mutants: error: {exc}", file=sys.stderr)
            written = False
    print(f"\n{sum(r['mutants'] for r in rows)} mutants in {time.time() - start:.0f} s")
    if problems:
        print("zg_course.mutants: FAILED\n  " + "\n  ".join(problems))
        return 1
    print(f"zg_course.mutants: passed (every part kills at least {args.min_score:.0%})")
    return 0 if written else 1


BEGIN, END = "<!-- mutation scores: begin -->", "<!-- mutation scores: end -->"


DOC_LIMIT = 16 << 20  # bytes of the Markdown file --write puts the table into


def write_table(path: Path, text: str, name: str = "--write") -> None:
    """Put the score table ``text`` between the markers of the Markdown file at ``path`` (a new
    file: the markers and the table). The file is read only if it is a regular file and written
    through the kit's writer (atomic, a link kept): a folder, a named pipe or a device is a
    ValueError naming ``name``, and a failed write leaves the old file as it was."""
    from zg._io import read_text_file, write_text

    try:
        doc = read_text_file(path, name, limit=DOC_LIMIT, what="a Markdown file")
    except FileNotFoundError:
        doc = f"{BEGIN}\n{END}\n"
    if BEGIN not in doc:
        doc += f"\n{BEGIN}\n{END}\n"
    doc = re.sub(
        re.escape(BEGIN) + ".*?" + re.escape(END),
        lambda _: f"{BEGIN}\n{text}\n{END}",
        doc,
        flags=re.S,
    )
    write_text(path, doc, name=name)


if __name__ == "__main__":
    sys.exit(main())
