"""Tests a student cannot rewrite: the comparisons bound before any student cell
(zg.labs.checks), the tamper scan (tools/labs_tamper.py) and the duplicate-order mode
(zg.labs.FirstWriteWins)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import zg.labs

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import labs_right  # noqa: E402
import labs_tamper  # noqa: E402
import labs_wrong  # noqa: E402
from labs_grade import code_cells, lab_source  # noqa: E402

COURSE = ROOT / "labs"
LABS = sorted(p.parent.name for p in (COURSE / "source").glob("*/*.ipynb"))
TAMPERING = {
    "lab1_rebinds_equal",
    "lab2_rebinds_check",
    "lab4_input_transformer",
    "lab5_runpy_coverage",
    "lab5_reads_held_originals",
}


def _locked(lab: str):
    cells = code_cells(lab_source(COURSE, lab))
    setup = [c.source for c in cells if not c.solution and not c.graded]
    tests = [c.source for c in cells if c.graded]
    return cells, setup, tests


# ----------------------------------------------------------------------------- zg.labs.checks


def test_checks_keep_the_comparisons_bound_before_a_student_rebinds_them(monkeypatch):
    check = zg.labs.checks()
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
        assert any("zg_check = zg.labs.checks()" in s for s in setup), lab
        for cell in cells:
            if cell.graded:
                for name in ("torch.equal(", "torch.allclose(", "torch.isclose("):
                    assert name not in cell.source, f"{lab} {cell.grade_id} calls {name}"


# ----------------------------------------------------------------------------- the tamper scan


def test_every_model_and_alternative_solution_scans_clean():
    for lab in LABS:
        cells, setup, tests = _locked(lab)
        sols = {c.grade_id: c.source for c in cells if c.solution}
        assert labs_tamper.scan(sols, setup, tests) == [], lab
    for path in sorted((COURSE / "right").glob("*.py")):
        right = labs_right.read_right(path)
        _, setup, tests = _locked(right["lab"])
        assert labs_tamper.scan(right["cells"], setup, tests) == [], path.name


def test_the_wrong_solutions_that_tamper_are_found_and_no_other():
    for path in sorted((COURSE / "wrong").glob("*.py")):
        wrong = labs_wrong.read_wrong(path)
        _, setup, tests = _locked(wrong["lab"])
        found = labs_tamper.scan({wrong["cell"]: wrong["code"]}, setup, tests)
        assert bool(found) == (path.stem in TAMPERING), (path.name, found)


HOSTILE = [
    ("torch.equal = lambda a, b: True", "torch.equal"),
    ("import torch\ntorch.Tensor.all = lambda self: True", "torch.Tensor.all"),
    ("zg_check = None", "rebinds 'zg_check'"),
    ("SyncAudit = object", "rebinds 'SyncAudit'"),
    ("SyncAudit.__exit__ = lambda *a: False", "SyncAudit.__exit__"),
    ("import numpy as torch", "as 'torch'"),
    ("from zg import labs as zg", "as 'zg'"),
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
    ("import operator\nx = operator.attrgetter('__closure__')(zg.labs.as_student)", "__closure__"),
    ("import operator\nx = operator.attrgetter('__clo' + 'sure__')", "attrgetter"),
    ("x = zg.labs._held_call", "zg.labs._held_call"),
    ("zg.labs.hold_references({}, 5)", "zg.labs.hold_references"),
    ("from zg.labs import _hold", "zg.labs._hold"),
    ("from zg import labs\nlabs.forbid_within({}, [], min)", "zg.labs.forbid_within"),
    ("import __main__\nx = __main__.hook_cases", "__main__"),
    # the tests' own reference, defined in a test cell
    ("def first_occurrence(cand, marker):\n    return hook_cases(cand)", "uses hook_cases"),
]
BENIGN = [
    "import torch\nimport zg",
    "from torch.utils._python_dispatch import TorchDispatchMode",
    "def first_occurrence(cand, marker):\n    g = cand.clone()\n    return g",
    "class Buf:\n    def __init__(self):\n        self.x = 1\n    def __enter__(self):\n        return self",
    "model = torch.nn.Linear(2, 2)\nmodel.eval()\nmodel.weight.grad = None",
    "y = g.num_nodes + len(seeds)",
    "t = 3  # a temporary the setup also used, and no test reads",
    "import numpy as np\nfrom collections import deque",
    "w = getattr(torch.nn, 'Linear')",
    "from concurrent.futures import ThreadPoolExecutor",
    "def f(hook_cases):\n    return hook_cases + 1",  # a name of the student's own
    "x = zg.labs.checks()",
]
SETUP = """
import torch
import zg
import zg.labs
from zg.audit import SyncAudit
g = zg.datasets.cora()
seeds = torch.arange(3)
t = 0
zg_check = zg.labs.checks()
"""
TEST = """
def hook_cases(x):
    return x
assert zg_check.equal(first_occurrence(g, seeds), seeds)
"""


@pytest.mark.parametrize(("code", "needle"), HOSTILE, ids=[h[1] for h in HOSTILE])
def test_the_scan_finds_each_way_to_reach_the_grader(code, needle):
    found = labs_tamper.scan({"cell": code}, [SETUP], [TEST])
    assert found and any(needle in str(f) for f in found), found
    assert all(str(f).startswith("cell line ") for f in found)


@pytest.mark.parametrize("code", BENIGN)
def test_the_scan_leaves_honest_code_alone(code):
    assert labs_tamper.scan({"cell": code}, [SETUP], [TEST]) == []


def test_the_in_process_grader_gives_a_tampering_variant_nothing_and_says_why():
    from labs_grade import Lab, Variant

    wrong = labs_wrong.read_wrong(COURSE / "wrong" / "lab1_rebinds_equal.py")
    lab = Lab(lab_source(COURSE, wrong["lab"]))
    out = lab.grade([Variant("t", {wrong["cell"]: wrong["code"]}, judged_on=wrong["part"])])["t"]
    assert out.earned == 0 and out.failure.startswith("tamper:") and "torch.equal" in out.failure


@pytest.mark.slow
def test_without_the_scan_rebinding_torch_equal_still_gains_nothing():
    """The scan off: the tests compare with zg_check, bound before the student's cell ran."""
    from labs_grade import Lab, Variant

    wrong = labs_wrong.read_wrong(COURSE / "wrong" / "lab1_rebinds_equal.py")
    lab = Lab(lab_source(COURSE, wrong["lab"]), scan=False)
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
    with zg.labs.FirstWriteWins() as mode:
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
    with zg.labs.FirstWriteWins():
        got = torch.zeros(2, 5, dtype=torch.int64).scatter(1, index, src)
    assert got.tolist() == [[1, 0, 3, 0, 0], [0, 0, 0, 0, 4]]
