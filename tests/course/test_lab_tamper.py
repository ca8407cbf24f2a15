"""Tests a student cannot rewrite: the comparisons bound before any student cell
(zg_course.labs.checks), the tamper scan (zg_course/tamper.py) and the duplicate-order mode
(zg_course.labs.FirstWriteWins)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import zg
import zg_course.contract
import zg_course.integrity
import zg_course.labs
import zg_course.right
import zg_course.tamper
import zg_course.wrong
from zg_course.grade import code_cells, lab_source

ROOT = Path(__file__).resolve().parents[2]

COURSE = ROOT / "labs"
LABS = sorted(p.parent.name for p in (COURSE / "source").glob("*/*.ipynb"))
TAMPERING = {
    "lab1_rebinds_equal",
    "lab2_rebinds_check",
    "lab4_input_transformer",
    "lab5_runpy_coverage",
    "lab5_reads_held_originals",
    # modules off the allow-list (a pool of threads or processes, a private name of the kit)
    "lab5_calls_local_coverage",
    "lab5_process_pool_coverage",
    "lab5_thread_pool_coverage",
    # the outside probe's gaming submissions (unittest.mock, pydoc, timeit, types.FunctionType)
    "lab1_c_gaming_mock_syncaudit",
    "lab2_a_gaming_mock_first_write_wins",
    "lab3_b_gaming_mock_compare_values",
    "lab5_b_gaming_mock_contract_check",
    "lab5_b_gaming_pydoc_gc_original",
    "lab6_c_gaming_peek_expected",
    "lab7_a_gaming_mock_equal",
    "lab7_b_gaming_timeit_kit_source",
}


def _locked(lab: str):
    cells = code_cells(lab_source(COURSE, lab))
    setup = [c.source for c in cells if not c.solution and not c.graded]
    tests = [c.source for c in cells if c.graded]
    return cells, setup, tests


# ----------------------------------------------------------------------------- zg_course.labs.checks


def test_checks_keep_the_comparisons_bound_before_a_student_rebinds_them(monkeypatch):
    check = zg_course.labs.checks()
    monkeypatch.setattr(torch, "equal", lambda a, b: True)
    monkeypatch.setattr(torch, "allclose", lambda *a, **k: True)
    a, b = torch.tensor([1, 2]), torch.tensor([1, 3])
    assert torch.equal(a, b)  # the rebound one agrees with anything
    assert not check.equal(a, b) and not check.allclose(a.float(), b.float())
    assert check.SyncAudit is zg.audit.SyncAudit
    with pytest.raises(AttributeError, match="read-only"):
        check.equal = lambda a, b: True


def test_every_lab_binds_the_checks_in_its_setup_and_its_tests_use_them():
    for lab in LABS:
        cells, setup, tests = _locked(lab)
        assert any("zg_check = zg_course.labs.checks()" in s for s in setup), lab
        for cell in cells:
            if cell.graded:
                for name in ("torch.equal(", "torch.allclose(", "torch.isclose("):
                    assert name not in cell.source, f"{lab} {cell.grade_id} calls {name}"


# ----------------------------------------------------------------------------- the tamper scan


def test_every_model_and_alternative_solution_scans_clean():
    for lab in LABS:
        cells, setup, tests = _locked(lab)
        sols = {c.grade_id: c.source for c in cells if c.solution}
        assert zg_course.tamper.scan(sols, setup, tests) == [], lab
    for path in sorted((COURSE / "right").glob("*.py")):
        right = zg_course.right.read_right(path)
        _, setup, tests = _locked(right["lab"])
        assert zg_course.tamper.scan(right["cells"], setup, tests) == [], path.name


def test_the_wrong_solutions_that_tamper_are_found_and_no_other():
    for path in sorted((COURSE / "wrong").glob("*.py")):
        wrong = zg_course.wrong.read_wrong(path)
        _, setup, tests = _locked(wrong["lab"])
        found = zg_course.tamper.scan({wrong["cell"]: wrong["code"]}, setup, tests)
        assert bool(found) == (path.stem in TAMPERING), (path.name, found)


HOSTILE = [
    ("torch.equal = lambda a, b: True", "torch.equal"),
    ("import torch\ntorch.Tensor.all = lambda self: True", "torch.Tensor.all"),
    ("zg_check = None", "rebinds 'zg_check'"),
    ("SyncAudit = object", "rebinds 'SyncAudit'"),
    ("SyncAudit.__exit__ = lambda *a: False", "SyncAudit.__exit__"),
    ("import numpy as torch", "as 'torch'"),
    ("from zg_course import labs as zg", "as 'zg'"),
    # of the course package, only what the locked cells use: never the graders
    ("import zg_course.sandbox", "zg_course.sandbox"),
    ("from zg_course.grade import Lab", "zg_course.grade"),
    ("x = zg_course.tamper.scan", "zg_course.tamper"),
    ("g = None", "rebinds 'g'"),
    ("def f():\n    global seeds\n    seeds = None", "global seeds"),
    ("for seeds in range(2):\n    pass", "rebinds 'seeds'"),
    ("setattr(torch, 'equal', min)", "setattr"),
    ("get_ipython().run_line_magic('reset', '-f')", "get_ipython"),
    ("exec('torch.equal = min')", "exec"),
    ("f = eval\nf('1')", "eval"),
    ("import builtins", "builtins"),
    ("x = getattr(first_occurrence, '__glo' + 'bals__')", "getattr"),
    ("x = getattr(torch, '__dict__')", "getattr"),
    ("import sys\nsys.modules['torch'] = None", "imports sys"),
    ("from importlib import reload", "importlib"),
    ("x = (lambda: 0).__globals__", "__globals__"),
    ("x = ().__class__.__bases__[0].__subclasses__()", "__subclasses__"),
    ("__builtins__['len'] = min", "__builtins__"),
    ("import inspect\nframe = inspect.currentframe()", "inspect"),
    ("def hook_cases():\n    pass", "redefines 'hook_cases'"),
    # the originals a hold keeps, and the holds themselves
    (
        "import operator\nx = operator.attrgetter('__closure__')(zg_course.labs.as_student)",
        "__closure__",
    ),
    ("import operator\nx = operator.attrgetter('__clo' + 'sure__')", "attrgetter"),
    ("x = zg_course.labs._held_call", "zg_course.labs._held_call"),
    ("zg_course.labs.hold_references({}, 5)", "zg_course.labs.hold_references"),
    ("from zg_course.labs import _hold", "zg_course.labs._hold"),
    ("from zg_course import labs\nlabs.forbid_within({}, [], min)", "zg_course.labs.forbid_within"),
    ("import __main__\nx = __main__.hook_cases", "__main__"),
    # the tests' own reference, defined in a test cell
    ("def first_occurrence(cand, marker):\n    return hook_cases(cand)", "uses hook_cases"),
    # off the allow-list: threads, a dispatch mode (it intercepts the tests' torch calls too)
    ("from concurrent.futures import ThreadPoolExecutor", "concurrent.futures"),
    ("from torch.utils._python_dispatch import TorchDispatchMode", "torch.utils._python_dispatch"),
]
# The routes an outside probe used to reach the grader past a list of forbidden names (its
# gaming submissions), and their neighbours: each is a finding now (the allow-list of modules,
# what an allowed module leads to, an alias of what a module holds).
ROUTES = [
    ('import pydoc\ngc = pydoc.locate("gc")', "pydoc"),
    ('import pydoc\nm = pydoc.locate("sys").modules', "pydoc"),
    ('from pydoc import locate\ninsp = locate("inspect")', "pydoc"),
    (
        'import pydoc\ni = pydoc.locate("inspect")\nx = i.getargvalues(i.currentframe()).locals',
        "pydoc",
    ),
    (
        'import timeit\ntimeit.timeit(stmt="found.append(1)", number=1, globals={"found": []})',
        "timeit",
    ),
    (
        'import unittest.mock\nunittest.mock.patch("zg_course.contract.check", new=min).start()',
        "unittest.mock",
    ),
    (
        'import unittest.mock\nunittest.mock.patch("zg_course.contract.compare_values", new=min).start()',
        "unittest.mock",
    ),
    (
        'from unittest import mock\nmock.patch.object(zg.audit.SyncAudit, "__enter__", new=id).start()',
        "unittest",
    ),
    (
        'import unittest.mock as m\nm.patch("zg_course.labs.FirstWriteWins", new=None).start()',
        "unittest.mock",
    ),
    ('import unittest.mock\nunittest.mock.patch("torch.equal", new=min).start()', "unittest"),
    (
        'import unittest.mock\nunittest.mock.patch.object(zg_course.labs.Checks, "equal", new=min).start()',
        "unittest",
    ),
    ("import contextlib", "contextlib"),
    ("from . import labs", "relative import"),
    ("import torch.multiprocessing", "torch.multiprocessing"),
    ("from torch import multiprocessing", "torch.multiprocessing"),
    ("x = torch.multiprocessing.Process", "torch.multiprocessing"),
    ("import torch.utils.cpp_extension", "torch.utils.cpp_extension"),
    ("from torch.utils import cpp_extension", "torch.utils.cpp_extension"),
    ("x = torch.sys.modules", "module sys"),
    ("import numpy as np\nx = np.lib.npyio.os.system", "module os"),
    ("import numpy as np\nx = np.lib.utils.sys", "module sys"),
    ("import numpy as np\nx = np.testing", "numpy.testing"),
    ("import numpy as np\nx = np.ctypeslib", "numpy.ctypeslib"),
    ("import functools\nx = functools.update_wrapper", "functools.update_wrapper"),
    ("import random\nx = random._os", "private name random._os"),
    ("x = torch._C", "torch._C"),
    ("x = zg_course.labs.inspect.stack()", "module inspect"),
    ("f = torch.fx.symbolic_trace", "torch.fx"),
    ("y = torch.jit.script", "torch.jit"),
    ("class M(torch.overrides.TorchFunctionMode):\n    pass", "torch.overrides"),
    ("x = torch.load", "torch.load"),
    ("import numpy as np\nx = np.load('a.npy', allow_pickle=True)", "numpy.load"),
    ("import typing\nh = typing.get_type_hints(len)", "typing.get_type_hints"),
    ("import types\nf = types.FunctionType", "types.FunctionType"),
    ("from types import CodeType", "types.CodeType"),
    ("x = (i for i in ()).gi_code", "gi_code"),
    ("x = zg.__loader__", "__loader__"),
    ("x = zg_check.__reduce_ex__(2)", "__reduce_ex__"),
    (
        "class T(torch.Tensor):\n    def __torch_function__(cls, f, t, a=(), k=None):\n"
        "        return True",
        "__torch_function__",
    ),
    ("import dataclasses\ndataclasses.dataclass(zg.audit.SyncAudit)", "decorator"),
    ("import functools\nfunctools.total_ordering(zg.audit.SyncAudit)", "decorator"),
    (
        "import functools\n@functools.wraps(len, assigned=('x',))\ndef f():\n    pass",
        "more than the function",
    ),
    # setting what a module holds through another name
    ("C = zg_course.labs.Checks\nC.equal = min", "through 'C'"),
    ("from zg_course.labs import Checks\nChecks.equal = min", "through 'Checks'"),
    ("a = torch\na.equal = min", "through 'a'"),
    ("for m in (torch,):\n    m.equal = min", "as a value"),
    ("for c in (zg_course.labs.Checks,):\n    c.equal = min", "through 'c'"),
    ("def f(c=zg_course.labs.Checks):\n    c.equal = min", "through 'c'"),
    ("type(zg_check).equal = min", "type()"),
    ("t = type(seeds)\nt.__eq__ = min", "through 't'"),
    ("del zg_course.labs.Checks.equal", "zg"),
    ("def f(m):\n    m.equal = min\nf(torch)", "as a value"),
]
BENIGN = [
    "import torch\nimport zg",
    "def first_occurrence(cand, marker):\n    g = cand.clone()\n    return g",
    "class Buf:\n    def __init__(self):\n        self.x = 1\n    def __enter__(self):\n        return self",
    "model = torch.nn.Linear(2, 2)\nmodel.eval()\nmodel.weight.grad = None",
    "y = g.num_nodes + len(seeds)",
    "t = 3  # a temporary the setup also used, and no test reads",
    "import numpy as np\nfrom collections import deque",
    "w = getattr(torch.nn, 'Linear')",
    "import torch.nn.functional as F\ny = F.one_hot(seeds).sum(0)",
    "F = torch.nn.functional\ny = F.relu(seeds)",
    "import math, itertools, functools, collections, heapq, bisect, statistics, operator",
    "import dataclasses, typing, enum, random, fractions, decimal, copy, time, cmath, numbers",
    "from types import SimpleNamespace\nstate = SimpleNamespace(b=0)\nstate.b = 1",
    "import dataclasses\n@dataclasses.dataclass(frozen=True)\nclass P:\n    x: int",
    "import functools\ndef deco(f):\n    @functools.wraps(f)\n    def w(*a):\n"
    "        return f(*a)\n    return w",
    "x = torch._foreach_add([seeds], 1)",  # torch's operators under a private name
    "def f(run):\n    b = getattr(run, 'b', 0)\n    run.b = b + 1",
    "s = torch.cuda.Stream() if torch.cuda.is_available() else None",
    "p = torch.nn.Linear(2, 2)\nfor q in p.parameters():\n    q.grad = None",
    "def f(hook_cases):\n    return hook_cases + 1",  # a name of the student's own
    "x = zg_course.labs.checks()",
]
SETUP = """
import torch
import zg
import zg_course.labs
from zg.audit import SyncAudit
g = zg.datasets.cora()
seeds = torch.arange(3)
t = 0
zg_check = zg_course.labs.checks()
"""
TEST = """
def hook_cases(x):
    return x
assert zg_check.equal(first_occurrence(g, seeds), seeds)
"""


@pytest.mark.parametrize(("code", "needle"), HOSTILE, ids=[h[1] for h in HOSTILE])
def test_the_scan_finds_each_way_to_reach_the_grader(code, needle):
    found = zg_course.tamper.scan({"cell": code}, [SETUP], [TEST])
    assert found and any(needle in str(f) for f in found), found
    assert all(str(f).startswith("cell line ") for f in found)


@pytest.mark.parametrize("code", BENIGN)
def test_the_scan_leaves_honest_code_alone(code):
    assert zg_course.tamper.scan({"cell": code}, [SETUP], [TEST]) == []


@pytest.mark.parametrize(
    ("code", "needle"), ROUTES, ids=[f"{i}-{r[1]}" for i, r in enumerate(ROUTES)]
)
def test_each_route_around_a_list_of_forbidden_names_is_a_finding(code, needle):
    route = code.split("x = ", 1)[1] if code.startswith("import numpy as np\nx = np.") else ""
    if re.fullmatch(r"np(\.\w+)+", route):  # through numpy's own imports: some versions only
        import numpy as np

        target = np
        for name in route.split(".")[1:]:
            if not hasattr(target, name):
                pytest.skip(f"{route} does not exist in numpy {np.__version__}: no route to find")
            target = getattr(target, name)
    found = zg_course.tamper.scan({"cell": code}, [SETUP], [TEST])
    assert found and any(needle in str(f) for f in found), found


def test_a_module_a_locked_cell_imported_is_off_limits_unless_on_the_list():
    """Every lab's first cell imports sys (and, on Colab, glob, importlib, subprocess): the
    student's cells share its namespace, so using those names is reaching for them."""
    setup = "import sys\nif 'google.colab' in sys.modules:\n    import subprocess\n" + SETUP
    for code in ("x = sys.modules['gc']", "subprocess.run(['true'])", "f = sys._getframe"):
        found = zg_course.tamper.scan({"cell": code}, [setup], [TEST])
        assert found and "allow-list" in str(found[0]), (code, found)


def test_the_allow_list_refuses_every_other_standard_module():
    allowed_roots = {m.split(".")[0] for m in zg_course.tamper.ALLOWED_MODULES}
    others = sorted(set(sys.stdlib_module_names) - allowed_roots)
    assert len(others) > 150
    for name in others:
        for code in (f"import {name}", f"from {name} import x", f"import {name} as m"):
            found = zg_course.tamper.scan({"cell": code}, [SETUP], [TEST])
            assert found and "allow-list" in str(found[0]) and name in str(found[0]), code
    for name in sorted(zg_course.tamper.ALLOWED_MODULES):
        assert zg_course.tamper.scan({"cell": f"import {name}"}, [SETUP], [TEST]) == [], name


def test_the_in_process_grader_gives_a_tampering_variant_nothing_and_says_why():
    from zg_course.grade import Lab, Variant

    wrong = zg_course.wrong.read_wrong(COURSE / "wrong" / "lab1_rebinds_equal.py")
    lab = Lab(lab_source(COURSE, wrong["lab"]))
    out = lab.grade([Variant("t", {wrong["cell"]: wrong["code"]}, judged_on=wrong["part"])])["t"]
    assert out.earned == 0 and out.failure.startswith("tamper:") and "torch.equal" in out.failure


@pytest.mark.slow
def test_without_the_scan_rebinding_torch_equal_still_gains_nothing():
    """The scan and the integrity check off: the tests compare with zg_check, bound before the
    student's cell ran."""
    from zg_course.grade import Lab, Variant

    wrong = zg_course.wrong.read_wrong(COURSE / "wrong" / "lab1_rebinds_equal.py")
    lab = Lab(lab_source(COURSE, wrong["lab"]), scan=False, integrity=False)
    out = lab.grade([Variant("t", {wrong["cell"]: wrong["code"]}, judged_on=wrong["part"])])["t"]
    assert out.earned == 0 and not out.failure.startswith("tamper"), out


# ----------------------------------------------------------------------------- FirstWriteWins


def _first_wins(size: int, index: list[int], values: list[int]) -> list[int]:
    out = [0] * size
    seen = set()
    for i, v in zip(index, values):
        if i not in seen:
            out[i] = v
            seen.add(i)
    return out


writes = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        st.just(n),
        st.lists(st.integers(0, n - 1), min_size=1, max_size=30),
    )
)


@settings(max_examples=60, deadline=None)
@given(writes, st.integers(0, 2**31 - 1))
def test_under_the_mode_the_first_of_several_writes_stays(case, seed):
    n, index = case
    gen = torch.Generator().manual_seed(seed)
    values = torch.randint(-100, 100, (len(index),), generator=gen)
    idx = torch.tensor(index)
    expect = _first_wins(n, index, values.tolist())
    with zg_course.labs.FirstWriteWins() as mode:
        a = torch.zeros(n, dtype=torch.int64).scatter_(0, idx, values)
        b = torch.zeros(n, dtype=torch.int64)
        b[idx] = values
        c = torch.zeros(n, dtype=torch.int64).index_copy_(0, idx, values)
        d = torch.zeros(n, dtype=torch.int64).index_put_((idx,), values)
        summed = torch.zeros(n, dtype=torch.int64).index_add_(0, idx, values)
    assert a.tolist() == b.tolist() == c.tolist() == d.tolist() == expect
    assert mode.flipped == 4  # the reduction is defined: it runs unchanged
    assert summed.tolist() == torch.zeros(n, dtype=torch.int64).index_add_(0, idx, values).tolist()


def test_under_the_mode_a_2d_scatter_keeps_the_first_write_per_row():
    index = torch.tensor([[0, 0, 2], [4, 4, 4]])
    src = torch.tensor([[1, 2, 3, 9], [4, 5, 6, 9]])
    with zg_course.labs.FirstWriteWins():
        got = torch.zeros(2, 5, dtype=torch.int64).scatter(1, index, src)
    assert got.tolist() == [[1, 0, 3, 0, 0], [0, 0, 0, 0, 4]]


# ----------------------------------------------------------------------------- the integrity check
# What the scan cannot see (code that reaches the grader at run time, by a route the scan does
# not know) the graders still catch by what it did: zg_course/integrity.py.

# Run-time patches that keep what they patch working (only the check can tell): a class
# attribute, a module's function, a builtin. Each is Lab 0's run_report cell's preamble.
MOCKS = {
    "class_attribute": (
        "import unittest.mock, torch, zg_course.labs\n"
        "unittest.mock.patch.object(zg_course.labs.Checks, 'equal',"
        " new=staticmethod(lambda a, b: torch.equal(a, b))).start()\n",
        "zg_course.labs.Checks.equal",
    ),
    "module_function": (
        "import unittest.mock, zg_course.contract\n"
        "_check = zg_course.contract.check\n"
        "unittest.mock.patch('zg_course.contract.check', new=lambda *a, **k: _check(*a, **k)).start()\n",
        "zg_course.contract.check",
    ),
    "builtin": (
        "import unittest.mock\n"
        "_sorted = sorted\n"
        "unittest.mock.patch('builtins.sorted', new=lambda *a, **k: _sorted(*a, **k)).start()\n",
        "builtins.sorted",
    ),
}


def test_the_integrity_check_names_what_changed_and_nothing_else():
    import importlib
    import unittest.mock

    before = zg_course.integrity.fingerprint()
    assert zg_course.integrity.changes(before) == []
    same = staticmethod(torch.equal)
    with unittest.mock.patch.object(zg_course.labs.Checks, "equal", new=same):
        assert zg_course.integrity.changes(before) == ["zg_course.labs.Checks.equal"]
    with unittest.mock.patch(
        "zg_course.contract.compare_values", new=zg_course.contract.compare_values
    ):
        assert zg_course.integrity.changes(before) == []  # the same object again: no change
    with unittest.mock.patch("zg_course.contract.compare_values", new=lambda *a, **k: None):
        assert zg_course.integrity.changes(before) == ["zg_course.contract.compare_values"]
    with unittest.mock.patch("builtins.sorted", new=lambda *a, **k: []):
        assert zg_course.integrity.changes(before) == ["builtins.sorted"]
    with unittest.mock.patch("torch.equal", new=lambda a, b: True):
        assert "torch.equal" in zg_course.integrity.changes(before)
    with unittest.mock.patch.object(torch.Tensor, "__eq__", new=lambda a, b: True):
        assert "torch.Tensor.__eq__" in zg_course.integrity.changes(before)
    with unittest.mock.patch.object(
        zg_course.labs.FirstWriteWins, "__enter__", create=True, new=id
    ):
        assert zg_course.integrity.changes(before) == [
            "zg_course.labs.FirstWriteWins.__enter__ (added)"
        ]
    code = zg_course.labs.checks.__code__
    zg_course.labs.checks.__code__ = (
        lambda: zg_course.labs._CHECKS
    ).__code__  # the same object, not the code
    try:
        assert zg_course.integrity.changes(before) == ["zg_course.labs.checks"]
    finally:
        zg_course.labs.checks.__code__ = code
    with torch.overrides.TorchFunctionMode():  # a mode left entered sees every torch call
        assert zg_course.integrity.changes(before) == ["torch's mode stacks (a mode left entered)"]
    assert zg_course.integrity.changes(before) == []
    importlib.import_module("zg.grappa.coverage")  # a later import adds a submodule: no change
    assert zg_course.integrity.changes(before) == []


def test_the_in_process_grader_gives_a_run_time_patch_of_its_code_nothing():
    """The scan off (it would refuse unittest.mock): each patch keeps Lab 0's model solution
    right, so only the integrity check stops it; with the check off too it earns every point."""
    from zg_course.grade import Lab, Variant

    source = lab_source(COURSE, "00_setup")
    model = {c.grade_id: c.source for c in code_cells(source) if c.solution}
    variants = [
        Variant(k, dict(model, run_report=m + model["run_report"])) for k, (m, _) in MOCKS.items()
    ]
    out = Lab(source, scan=False).grade(variants)
    for key, (_, name) in MOCKS.items():
        assert out[key].total > 0 and out[key].earned == 0, (key, out[key])
        assert out[key].failure.startswith("tamper: the submission changed the grader's code"), out[
            key
        ]
        assert name in out[key].failure, out[key].failure
    unchecked = Lab(source, scan=False, integrity=False).grade(variants)
    assert all(o.full_marks for o in unchecked.values()), unchecked
