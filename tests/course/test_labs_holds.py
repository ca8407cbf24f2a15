"""A function a lab holds refuses to run from a student's code however the student reached it.

Every route is written as a student would write it in a notebook cell (exec'd into the
notebook's namespace, a dict), and is run against every function the labs hold
(``zg_course.labs._lab_references()``, and the references the labs' setup cells define and hold with
``zg_course.labs.hold``): the student's name bound to a partial, a bound method, a callable object, a
decorator's wrapper, a cache, a closure; the work handed to a thread, a thread pool (made in
the function or before it), a forked process or a process pool. Each is called three ways:
by a test cell naming the student's function, by a test's helper it is handed to, and by a
contract harness inside ``zg_course.labs.as_student()``. Outside the student's code the held
function still runs its original.
"""

from __future__ import annotations

import ast
import inspect
import json
import sys
from pathlib import Path

import pytest
import torch

import zg
import zg_course.labs
from zg_course.labs import ForbiddenCall

ROOT = Path(__file__).resolve().parents[2]
LABS = ROOT / "labs" / "source"


def _setup_cells() -> dict[int, str]:
    """{lab: its locked setup cell's code}."""
    out = {}
    for lab_dir in sorted(LABS.iterdir()):
        cells = json.loads((lab_dir / f"{lab_dir.name}.ipynb").read_text())["cells"]
        for c in cells:
            if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "setup":
                out[int(lab_dir.name[:2])] = "".join(c["source"])
    return out


def _setup_holds(setup: str) -> list[tuple[list[str], list[str] | None]]:
    """([held names], within or None) of every ``zg_course.labs.hold(globals(), N, ...)`` call."""
    out = []
    for node in ast.walk(ast.parse(setup)):
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "zg_course.labs.hold":
            within = next((k.value for k in node.keywords if k.arg == "within"), None)
            out.append(
                (
                    [ast.unparse(a) for a in node.args[2:]],
                    None if within is None else list(ast.literal_eval(within)),
                )
            )
    return out


def _setup_reference(lab: int, name: str):
    """The function ``name`` a lab's setup cell defines, defined alone in a namespace."""
    tree = ast.parse(SETUPS[lab])
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    namespace = {"torch": torch, "zg": zg, "zg_course": zg_course}
    exec(compile(ast.Module([node], []), f"<lab {lab} setup>", "exec"), namespace)
    return namespace[name]


SETUPS = _setup_cells()


def _held_functions() -> list:
    """(id, lab, function, the student's names it refuses within) for every function a lab
    holds: the kit's (hold_references) and those the labs' setup cells define (zg_course.labs.hold)."""
    out = []
    for lab, (_, targets) in sorted(zg_course.labs._lab_references().items()):
        for target in targets:
            names = zg_course.labs._held_within(lab, target)
            for fn in zg_course.labs._functions_of(target):
                out.append((f"lab{lab}-{fn.__qualname__}", lab, fn, names))
    for lab, setup in sorted(SETUPS.items()):
        for held, within in _setup_holds(setup):
            names = within or zg_course.labs._lab_references()[lab][0]
            for name in held:
                fn = _setup_reference(lab, name)
                out.append((f"lab{lab}-setup-{name}", lab, fn, names))
    return out


HELD = _held_functions()
SETUP_HELD = {h[0]: h for h in HELD if "-setup-" in h[0]}


@pytest.fixture(autouse=True)
def _setup_references_restored():
    """The setup cells' references, defined once here, get their own code back after each test
    (as labs_held_then_restored does for the kit's): each test holds them afresh."""
    saved = [
        (f, f.__code__, f.__defaults__, f.__kwdefaults__) for _, _, f, _ in SETUP_HELD.values()
    ]
    yield
    for fn, code, defaults, kwdefaults in saved:
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


# Each route: the cell a student writes, binding NAME (the lab's first exercise) so that calling
# it reaches _kit (the held function, as the student would have imported it).
ROUTES = {
    "plain": """
def NAME(*a, **k):
    return _kit(*a, **k)
""",
    "helper": """
def _helper(*a, **k):
    return _kit(*a, **k)
def NAME(*a, **k):
    return _helper(*a, **k)
""",
    "alias": "NAME = _kit\n",
    "partial": "import functools\nNAME = functools.partial(_kit)\n",
    "partial-of-partial": "import functools\nNAME = functools.partial(functools.partial(_kit))\n",
    "bound-method": """
class _Solver:
    def solve(self, *a, **k):
        return _kit(*a, **k)
NAME = _Solver().solve
""",
    "bound-kit-method": "NAME = _kit.__get__(object())\n",
    "callable-object": """
class _Solver:
    def __call__(self, *a, **k):
        return _kit(*a, **k)
NAME = _Solver()
""",
    "callable-object-holding-kit": """
import functools
class _Solver:
    def __init__(self, f):
        self.f = f
    def __call__(self, *a, **k):
        return self.f(*a, **k)
NAME = functools.partial(_Solver(_kit))
""",
    "class-new": """
class NAME:
    def __new__(cls, *a, **k):
        return _kit(*a, **k)
""",
    "decorator": """
import functools
def _via(kit):
    def decorate(f):
        @functools.wraps(f)
        def run(*a, **k):
            return kit(*a, **k)
        return run
    return decorate
@_via(_kit)
def NAME(*a, **k):
    raise NotImplementedError
""",
    "cache": "import functools\nNAME = functools.lru_cache(maxsize=None)(_kit)\n",
    "staticmethod": "NAME = staticmethod(_kit)\n",
    "closure": "NAME = (lambda f: lambda *a, **k: f(*a, **k))(_kit)\n",
    "map": "def NAME(*a, **k):\n    return list(map(lambda _: _kit(*a, **k), [0]))[0]\n",
    "thread-pool": """
from concurrent.futures import ThreadPoolExecutor
def NAME(*a, **k):
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_kit, *a, **k).result()
""",
    "thread-pool-made-before": """
from concurrent.futures import ThreadPoolExecutor
_pool = ThreadPoolExecutor(1)
def NAME(*a, **k):
    return _pool.submit(_kit, *a, **k).result()
""",
    "thread-pool-partial": """
import functools
from concurrent.futures import ThreadPoolExecutor
_pool = ThreadPoolExecutor(1)
def _run(f, *a, **k):
    return _pool.submit(f, *a, **k).result()
NAME = functools.partial(_run, _kit)
""",
    "thread": """
import threading
def NAME(*a, **k):
    out = []
    def work():
        try:
            out.append((True, _kit(*a, **k)))
        except BaseException as e:
            out.append((False, e))
    t = threading.Thread(target=work)
    t.start()
    t.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value
""",
}

# The work handed to a forked process: the student's frames are the child's too (fork copies
# the stack), and a pool forked before the call sees as_student's count (shared memory).
FORK_ROUTES = {
    "fork-process": """
import multiprocessing
def NAME(*a, **k):
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    def work():
        try:
            there.send((True, repr(_kit(*a, **k))))
        except BaseException as e:
            there.send((False, f"{type(e).__name__}: {e}"))
    p = ctx.Process(target=work)
    p.start()
    ok, value = here.recv()
    p.join()
    if not ok:
        raise RuntimeError(value)
    return value
""",
}

CALLS = {
    # a visible test naming the student's function in its cell
    "test-cell": "got = NAME()\n",
    # a test's helper the function is handed to
    "test-helper": "def _check(fn):\n    return fn()\ngot = _check(NAME)\n",
    # the contract harness
    "as-student": "with zg_course.labs.as_student():\n    got = NAME()\n",
    "as-student-named": "with zg_course.labs.as_student('NAME'):\n    got = NAME()\n",
}


def _student(lab: int, fn, route: str, names=None) -> tuple[dict, str]:
    """A notebook namespace holding lab ``lab``'s references (and ``fn``, inside ``names``),
    with the student's cell (the route) run in it; returns it and the student's name."""
    names = names or zg_course.labs._lab_references()[lab][0]
    name = names[0]
    namespace = {
        "__name__": "__main__",
        "zg": zg,
        "zg_course": zg_course,
        "torch": torch,
        "_kit": fn,
    }
    zg_course.labs.hold_references(namespace, lab)
    if fn.__code__.co_filename.startswith("<lab"):  # a setup cell's reference
        zg_course.labs.hold(namespace, lab, fn, within=names)
    cell = ROUTES.get(route) or FORK_ROUTES[route]
    exec(compile(cell.replace("NAME", name), "<student>", "exec"), namespace)
    return namespace, name


def _call(namespace: dict, name: str, how: str) -> None:
    exec(CALLS[how].replace("NAME", name), namespace)


def _reaches_the_original(fn) -> None:
    """Called with no arguments outside the student's code, the held function runs its own
    code: it fails as the original does (missing arguments), not with ForbiddenCall."""
    try:
        fn()
    except ForbiddenCall:
        raise AssertionError(f"{fn.__qualname__} refused the lab's own call") from None
    except TypeError as e:
        assert "argument" in str(e), e
    except Exception:
        pass


@pytest.mark.parametrize("how", sorted(CALLS))
@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("lab,fn,names", [h[1:] for h in HELD], ids=[h[0] for h in HELD])
def test_a_held_function_refuses_every_route(labs_held_then_restored, lab, fn, names, route, how):
    namespace, name = _student(lab, fn, route, names)
    with pytest.raises(ForbiddenCall, match=rf"Lab {lab} asks you to write this yourself"):
        _call(namespace, name, how)
    if route != "alias":  # the student's name is the held function itself: a call naming
        _reaches_the_original(fn)  # that object by a bare name refuses, the lab's too
    pool = namespace.get("_pool")
    if pool is not None:
        pool.shutdown()


@pytest.mark.parametrize("how", sorted(CALLS))
@pytest.mark.parametrize("lab", sorted(zg_course.labs._lab_references()))
def test_a_forked_process_refuses(labs_held_then_restored, lab, how):
    _, _, fn, names = next(h for h in HELD if h[1] == lab)
    namespace, name = _student(lab, fn, "fork-process", names)
    with pytest.raises(RuntimeError, match=rf"ForbiddenCall: Lab {lab} asks you to write"):
        _call(namespace, name, how)
    _reaches_the_original(fn)


def _pool_student(lab: int, made_before: bool) -> tuple[dict, str]:
    """Lab ``lab``'s first held function handed to a fork ProcessPoolExecutor (pickled by
    its module and name, found held in the forked worker)."""
    _, _, fn, names = next(h for h in HELD if h[1] == lab and "." not in h[2].__qualname__)
    name = names[0]
    cell = (
        "import multiprocessing\nfrom concurrent.futures import ProcessPoolExecutor\n"
        "_ctx = multiprocessing.get_context('fork')\n"
        + (
            "_pool = ProcessPoolExecutor(1, mp_context=_ctx)\n_pool.submit(int).result()\n"
            "def NAME(*a, **k):\n    return _pool.submit(_kit, *a, **k).result()\n"
            if made_before
            else "def NAME(*a, **k):\n"
            "    with ProcessPoolExecutor(1, mp_context=_ctx) as pool:\n"
            "        return pool.submit(_kit, *a, **k).result()\n"
        )
    )
    namespace = {
        "__name__": "__main__",
        "zg": zg,
        "zg_course": zg_course,
        "torch": torch,
        "_kit": fn,
    }
    zg_course.labs.hold_references(namespace, lab)
    exec(cell.replace("NAME", name), namespace)
    return namespace, name


POOL_LABS = [
    lab
    for lab in sorted(zg_course.labs._lab_references())
    if any(h[1] == lab and "." not in h[2].__qualname__ and "-setup-" not in h[0] for h in HELD)
]


@pytest.mark.parametrize("lab", POOL_LABS)
def test_a_process_pool_made_in_the_function_refuses(labs_held_then_restored, lab):
    namespace, name = _pool_student(lab, made_before=False)
    with pytest.raises(ForbiddenCall, match=rf"Lab {lab} asks you to write"):
        _call(namespace, name, "test-cell")


@pytest.mark.parametrize("lab", POOL_LABS)
def test_a_process_pool_forked_before_refuses_inside_as_student(labs_held_then_restored, lab):
    """Forked before the student's function runs, the pool's worker has no frame of the
    student's; it sees as_student's count, which lives in memory it shares with the parent."""
    namespace, name = _pool_student(lab, made_before=True)
    try:
        with pytest.raises(ForbiddenCall, match=rf"Lab {lab} asks you to write"):
            _call(namespace, name, "as-student")
    finally:
        namespace["_pool"].shutdown()


def test_outside_the_student_the_held_function_gives_its_real_result(labs_held_then_restored):
    """Every route bound, the lab's own call gets the original's result (a real one: Lab 5's
    coverage on a graph), and the student's call through each route refuses."""
    from zg import grappa

    g = zg.datasets.csbm(80, avg_degree=4, num_classes=3, feat_dim=4, seed=0)
    part = grappa.partition(g, num_parts=2, method="random", seed=0)
    expected = grappa.coverage(g, part, hops=2)
    for route in ROUTES:
        namespace, name = _student(5, grappa.coverage, route)
        namespace.update(g=g, part=part)
        with pytest.raises(ForbiddenCall):
            exec(f"got = {name}(g, part, 2)\n", namespace)
        exec("ref = zg.grappa.coverage(g, part, hops=2)\n", namespace)  # the test's own call
        again = grappa.coverage(g, part, hops=2)
        assert torch.equal(namespace["ref"], expected), route
        assert torch.equal(again, expected), route
        if namespace.get("_pool") is not None:
            namespace["_pool"].shutdown()


def test_as_student_refuses_in_every_thread_and_ends_with_its_block(labs_held_then_restored):
    from zg import grappa

    g = zg.datasets.csbm(40, avg_degree=4, num_classes=2, feat_dim=4, seed=0)
    part = grappa.partition(g, num_parts=2, method="random", seed=0)
    zg_course.labs.hold_references({}, 5)
    with zg_course.labs.as_student(), pytest.raises(ForbiddenCall, match="while a student's"):
        grappa.coverage(g, part, hops=1)
    with pytest.raises(RuntimeError), zg_course.labs.as_student():
        raise RuntimeError("the student's function failed")
    grappa.coverage(g, part, hops=1)  # the count went back to zero, also after an error


def test_the_originals_are_in_no_module_attribute():
    """What a student's cell can name without the tamper scan's forbidden names reaches no
    original: no module attribute of zg_course.labs holds a table of them, and calling the holds'
    entry point from anywhere but a held function's body is refused."""
    for name, value in vars(zg_course.labs).items():
        if isinstance(value, dict) and name != "__builtins__":
            for v in value.values():
                inside = v if isinstance(v, (tuple, list)) else (v,)
                assert not any(inspect.isfunction(x) for x in inside), name
    with pytest.raises(TypeError, match="held function's body"):
        zg_course.labs._held_call((), {})


def test_a_held_function_keeps_its_source_and_location(labs_held_then_restored):
    coverage_module = sys.modules["zg.grappa.coverage"]
    before = inspect.getsourcelines(coverage_module.coverage)
    zg_course.labs.hold_references({}, 5)
    assert zg_course.labs._is_held(coverage_module.coverage)
    assert inspect.getsourcelines(coverage_module.coverage) == before


# What a setup cell defines that is not an answer to any exercise: the tests' inputs, states,
# modes and checkers. Anything else a setup defines for the tests to compare with is held.
NOT_ANSWERS = {
    1: {"hop_inputs"},  # the inputs of a hop
    2: {"hop_cases", "NodeSizedWork"},  # inputs; a dispatch mode that counts node-sized work
    4: {"Run"},  # the toy training the loops run
    7: {"is_schedule"},  # a checker (True / False), not a schedule
    8: {"StaticState"},  # the state a step reads and writes
    9: {"accuracy", "Recorder"},  # a metric of trained models; a recording wrapper
}


def test_every_reference_a_setup_cell_defines_is_held():
    """A function a lab's locked setup cell defines for its tests to compare with is as good an
    answer as the kit's: the setup holds it too (``zg_course.labs.hold``), after defining it."""
    table = zg_course.labs._lab_references()
    for lab, setup in sorted(SETUPS.items()):
        if lab not in table:
            continue
        tree = ast.parse(setup)
        defined = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
        held = {name for names, _ in _setup_holds(setup) for name in names}
        unheld = defined - held - NOT_ANSWERS.get(lab, set())
        assert not unheld, f"Lab {lab}'s setup defines {sorted(unheld)} and holds none of them"
        assert not held & NOT_ANSWERS.get(lab, set()), lab
    assert {h[0] for h in SETUP_HELD.values()} == {
        "lab1-setup-first_seen",
        "lab8-setup-reference_run",
    }


def test_as_student_named_refuses_only_what_that_function_may_not_call(labs_held_then_restored):
    """Named, as_student refuses only the functions held inside that student's function: Lab
    6's hook records its bytes through CommLedger, whose byte model bytes_per_iteration may
    not call."""
    from zg.grappa.comm import CommLedger, wire_bytes

    zg_course.labs.hold_references({}, 6)
    with zg_course.labs.as_student("scaled_allreduce_hook"):
        ledger = CommLedger(4)
        ledger.record("gradients", "all_reduce", 400)
    with (
        zg_course.labs.as_student("bytes_per_iteration"),
        pytest.raises(ForbiddenCall, match="while"),
    ):
        wire_bytes("all_reduce", 400, 4)
    with zg_course.labs.as_student(), pytest.raises(ForbiddenCall, match="a student's function"):
        ledger.record("gradients", "all_reduce", 400)
    assert wire_bytes("all_reduce", 400, 4) == ledger.total_bytes  # outside: it runs
    with pytest.raises(TypeError, match="function must be"):
        with zg_course.labs.as_student("not a name"):
            pass
