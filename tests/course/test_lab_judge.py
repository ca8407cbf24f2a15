"""The judge (zg_course/remote.py, zg_course/sandbox.py): a lab's tests run where the student's
code cannot reach, and the student's functions are called by value in the worker.

The contract, clause by clause:

* what the worker sends back is read with a reader that calls nothing but its own rebuilders
  and the plain containers: a pickle naming any other callable, a class of the submission or a
  function of the kit is refused, and no code of the submission runs in the judge;
* every value of the kinds it reads comes back equal (hypothesis, over nested containers of
  tensors of every dtype, numpy arrays and scalars);
* what a call did to its arguments is written back onto the judge's own objects, in place
  (tensors keep their identity, objects their attributes, callbacks their closures);
* a contract checked through the judge fails the same clauses as the same contract checked in
  one process, for every function of a generated set of right and wrong ones;
* a measuring mode the test holds open (SyncAudit, a lab's own dispatch mode) counts the
  worker's call and nothing of the judge's own work;
* an exception the student's function raises is raised again as its kind;
* in the sandbox: a submission walking ``gc``, frames, ``sys.modules`` and ``linecache`` finds
  no test, no expected value and no reference, and one speaking on its socket changes no
  verdict.
"""

from __future__ import annotations

import io
import json
import pickle
import socket
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import zg_course.contract as C
import zg_course.sandbox
from zg_course import remote

ROOT = Path(__file__).resolve().parents[2]
WHY = zg_course.sandbox.available()
needs_sandbox = pytest.mark.skipif(WHY is not None, reason=f"no sandbox here: {WHY}")


# ----------------------------------------------------------------------------- the reader

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32,
          torch.int16, torch.int8, torch.uint8, torch.bool, torch.complex64]  # fmt: skip


@st.composite
def tensors(draw):
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=3))
    t = (torch.rand(shape, dtype=torch.float64) * 100 - 50).to(dtype)
    if draw(st.booleans()) and t.dim():  # strided views: a step, a size-1 dimension's stride
        t = torch.stack([t, t, t], dim=-1)[..., 1] if draw(st.booleans()) else t.transpose(0, -1)
    if dtype.is_floating_point and draw(st.booleans()):
        t.requires_grad_(True)
    return t


leaves = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
    st.text(max_size=5), st.binary(max_size=5), tensors(),
    st.builds(lambda a: np.asarray(a), st.lists(st.integers(-5, 5), max_size=4)),
    st.builds(np.float32, st.floats(-1e3, 1e3, width=32)), st.builds(np.int64, st.integers(-9, 9)),
    st.sampled_from([torch.float32, torch.int64, torch.device("cpu"), torch.Size([2, 3])]),
)  # fmt: skip
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.tuples(inner, inner),
        st.dictionaries(st.text(max_size=3), inner, max_size=3),
        st.frozensets(st.integers(0, 9), max_size=3),
    ),
    max_leaves=12,
)  # fmt: skip


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape
                and a.requires_grad == b.requires_grad and torch.equal(a.detach(), b.detach())
                and (a.numel() == 0 or a.stride() == b.stride()))  # the layout too  # fmt: skip
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


@settings(max_examples=150, deadline=None)
@given(values)
def test_every_value_of_the_kinds_read_comes_back_equal(value):
    assert _same(value, remote.loads(remote.dumps(value)))


def _payload(reduce) -> bytes:
    class Evil:
        def __reduce__(self):
            return reduce

    return pickle.dumps(Evil())


@pytest.mark.parametrize(
    "data",
    [
        _payload((eval, ("1 + 1",))),
        _payload((getattr, (object, "__subclasses__"))),
        _payload((__import__("os").system, ("true",))),
        _payload((__import__("zg._io", fromlist=["x"]).write_text, ("/tmp/x", "y"))),
        _payload((torch.load, (io.BytesIO(b""),))),
        pickle.dumps(torch.zeros(2)),  # torch's own pickle: torch.load inside it
        pickle.dumps(np.zeros(2, dtype=object)),
        pickle.dumps([1, 2, 3])[:-3],  # truncated
        _payload((bytes, (10**12,))),  # what the judge allocates is bounded by the stream
        _payload((bytearray, (10**12,))),
        _payload((list, (range(10**12),))),
        _payload((tuple, (range(10**12),))),
    ],
    ids=[
        "eval",
        "getattr",
        "os.system",
        "kit function",
        "torch.load",
        "torch pickle",
        "object array",
        "truncated",
        "bytes(N)",
        "bytearray(N)",
        "list(range)",
        "tuple(range)",
    ],  # fmt: skip
)
def test_a_stream_naming_any_other_callable_is_refused(data):
    with pytest.raises(remote.RemoteError, match="does not read|grader"):
        remote.loads(data)


def test_an_object_of_the_submissions_own_class_cannot_be_sent_or_read():
    ns = {"__name__": "__main__"}
    exec("class Mine:\n    def __init__(self):\n        self.x = 1\n", ns)
    with pytest.raises(remote.RemoteError, match="not a class the judge reads"):
        remote.loads(remote.dumps(ns["Mine"]()))  # not a class both processes ran: refused
    with pytest.raises(remote.RemoteError, match="cannot read"):
        remote.dumps(lambda: 1)


def test_a_tensor_whose_bytes_do_not_match_its_shape_is_refused():
    for shape, data, dtype in (([5], b"\0" * 32, "int64"), ([2], b"\0" * 16, "no_such"),
                               ([-1], b"", "int64")):  # fmt: skip
        forged = _payload((remote._rebuild, ("_tensor", dtype, shape, data, False, False, {})))
        with pytest.raises(remote.RemoteError):
            remote.loads(forged)


def test_a_kit_object_is_made_without_running_its_constructor():
    from zg.envelope import Envelope

    env = Envelope([10, 5], fanouts=[3, 2], batch_size=5, num_nodes=100, max_degree=4)
    back = remote.loads(remote.dumps(env))
    assert type(back) is Envelope and back.sizes == env.sizes


# ----------------------------------------------------------------------------- write-back


class Holder:
    def __init__(self):
        self.t = torch.zeros(3)
        self.items = [1, 2]
        self.table = {"a": torch.ones(2)}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["add", "resize", "append", "attr", "dict", "grad"]), max_size=4))
def test_what_a_call_did_to_its_arguments_is_written_back_in_place(steps):
    judge = [Holder(), torch.zeros(4, requires_grad=True), [torch.zeros(2)]]
    ids = [id(judge[0]), id(judge[0].t), id(judge[1]), id(judge[2][0])]
    worker = pickle.loads(pickle.dumps(judge))  # the worker's copy
    h, p, lst = worker
    for step in steps:
        if step == "add":
            h.t.add_(1)
            lst[0].mul_(3).add_(1)
        elif step == "resize":
            h.t.resize_(5).fill_(2)
        elif step == "append":
            h.items.append(len(h.items))
        elif step == "attr":
            h.t.memo = 7
            h.extra = "kept"
        elif step == "dict":
            h.table["b"] = torch.full((1,), 5.0)
        elif step == "grad":
            p.grad = torch.full((4,), 0.5)
    back = remote.loads(remote.dumps([remote._state(a) for a in worker]))
    remote.write_back(judge, back)
    assert [id(judge[0]), id(judge[0].t), id(judge[1]), id(judge[2][0])] == ids
    assert torch.equal(judge[0].t, h.t) and judge[0].items == h.items
    assert getattr(judge[0].t, "memo", None) == getattr(h.t, "memo", None)
    assert getattr(judge[0], "extra", None) == getattr(h, "extra", None)
    assert judge[0].table.keys() == h.table.keys()
    assert torch.equal(judge[2][0], lst[0])
    assert (judge[1].grad is None) == (p.grad is None)


# ----------------------------------------------------------------------------- a worker in a thread


@pytest.fixture
def worker():
    """A worker answering in a thread of this process (the protocol and the checks without a
    sandbox): its namespace, and a function that binds the judge's stand-ins."""
    a, b = socket.socketpair()
    ns = {"__name__": "__main__"}

    def serve():
        while True:
            try:
                header, blob = remote.recv_frame(b, remote.RESULT_LIMIT)
            except (EOFError, OSError):
                return
            remote.send_frame(b, *remote.serve(ns, header, blob))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    remote.connect(remote.Channel(a))
    remote.record_mode_arguments()

    def define(code: str) -> dict:
        before = set(ns)
        exec(code, ns)
        return {
            d["name"]: remote.RemoteFunction(d["name"], d["parameters"])
            for d in remote.describe(
                ns, [k for k in ns if k not in before and not k.startswith("__")]
            )
            if d["kind"] == "function"
        }

    yield ns, define
    remote.record_mode_arguments(False)
    a.close()
    b.close()
    thread.join(timeout=5)


FUNCTIONS = {  # name: code; each takes x (int64 [n]) and returns its sorted unique values
    "right": "def f(x):\n    return torch.unique(x)\n",
    "right_python": "def f(x):\n    return torch.tensor(sorted(set(x.tolist())), dtype=x.dtype, device=x.device)\n",
    "in_place": "def f(x):\n    x.add_(0).sort()\n    x[0] = x[0]\n    x.mul_(1)\n    x[-1:] = x[-1:] + 0\n    x.neg_().neg_()\n    x.add_(1)\n    return torch.unique(x - 1)\n",
    "global": "seen = []\ndef f(x):\n    seen.append(1)\n    return torch.unique(x)\n",
    "memo": "memo = {}\ndef f(x):\n    key = x.numel()\n    if key not in memo:\n        memo[key] = torch.unique(x)\n    return memo[key]\n",
    "cpu": "def f(x):\n    return torch.unique(torch.cat([x, torch.tensor([], dtype=x.dtype, device='cpu')]))\n",
    "view": "def f(x):\n    u = torch.unique(x)\n    x[: u.numel()] = u\n    return x[: u.numel()]\n",
    "random": "def f(x):\n    u = torch.unique(x)\n    return u[torch.randperm(u.numel())] if torch.rand(()) < 2 else u\n",
    "attribute": "def f(x):\n    x.cached = True\n    return torch.unique(x)\n",
    "precision": "def f(x):\n    torch.set_printoptions(precision=2)\n    return torch.unique(x)\n",
    "raises": "def f(x):\n    raise ValueError('no')\n",
    "float": "def f(x):\n    return torch.unique(x).double()\n",
}


def _clauses(fn, ns) -> set[str]:
    gen = torch.Generator().manual_seed(0)
    cases = [C.Case((torch.randint(0, 6, (n,), generator=gen),), kinds={"one element"} if n == 1 else set())
             for n in (1, 5, 9, 9, 12)]  # fmt: skip
    contract = C.Contract("f", part="a test", boundaries=("one element",))
    try:
        C.check(fn, contract, cases, lambda x: torch.unique(x), namespace=ns)
    except C.ContractFailure as exc:
        return {line.split("'")[1] for line in str(exc).splitlines()[1:]}
    return set()


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_a_contract_checked_through_the_judge_fails_the_same_clauses(worker, name):
    ns, define = worker
    here = {"__name__": "__main__"}
    exec("import torch\n" + FUNCTIONS[name], here)
    remote_f = define("import torch\n" + FUNCTIONS[name])["f"]
    local = _clauses(here["f"], here)
    assert _clauses(remote_f, ns) == local
    assert (name.startswith("right")) == (not local)


def test_a_mode_the_test_holds_counts_the_workers_call_and_nothing_of_the_judges(worker):
    from zg.audit import SyncAudit

    ns, define = worker
    f = define("import torch\ndef f(x):\n    return x.sum().item() + int(x[0])\n")["f"]
    x = torch.arange(1000)
    with SyncAudit(strict=True) as audit:
        got = f(x)
    assert got == sum(range(1000))
    assert audit.host_syncs == 2, dict(audit.per_op)  # the item and the int: nothing else
    with SyncAudit(strict=True) as audit:
        f(x)
        f(x)
        x.sum().item()  # the judge's own, between: counted as well
    assert audit.host_syncs == 5


def test_an_exception_is_raised_again_as_its_kind(worker):
    ns, define = worker
    fns = define(
        "def v(x):\n    raise ValueError(f'bad {x}')\n"
        "def k(x):\n    return {}[x]\n"
        "class Mine(RuntimeError):\n    pass\n"
        "def m(x):\n    raise Mine('own')\n"
    )
    with pytest.raises(ValueError, match="bad 3"):
        fns["v"](3)
    with pytest.raises(KeyError):
        fns["k"](3)
    with pytest.raises(RuntimeError, match="own"):  # the submission's class: its builtin base
        fns["m"](3)


def test_a_callback_the_test_passes_records_in_the_judge(worker):
    ns, define = worker
    f = define("def twice(fn):\n    fn()\n    fn()\n    return 2\n")["twice"]
    calls = []
    box = {"n": 0}

    def record():
        calls.append(1)
        box["n"] += 1

    assert f(record) == 2
    assert calls == [1, 1] and box == {"n": 2}


# ----------------------------------------------------------------------------- in the sandbox

LAB3 = "03_sizing_an_envelope"
SOURCE3 = ROOT / "labs" / "source" / LAB3 / f"{LAB3}.ipynb"

MODEL = """
def envelope_sizes(counts, quantile, margin, worst, batch_size):
    q = torch.quantile(counts.double(), quantile, dim=0)
    sizes = [min(math.ceil(float(v) * (1 + margin)), int(w)) for v, w in zip(q, worst)]
    rows = batch_size
    for i in reversed(range(len(sizes))):
        sizes[i] = max(sizes[i], rows)
        rows = sizes[i]
    return sizes
"""

HUNT = r'''
import gc, linecache, os, sys, types

# the names only Lab 3's hidden tests define, spelled so that this cell holds neither
SECRET = ("contract_" + "reference_sizes", "contract_" + "narrow_sizes", "contract_" + "cases")
# the kit's reference implementations Lab 3 holds (zg_course.labs._lab_references()[3])
REFERENCE = {"profile", "_feasible", "memory_model", "block_bytes"}


def _reference(code):
    """The code of one of the kit's references itself (a held function's stand-in calls
    zg_course.labs._held_call instead)."""
    return (isinstance(code, types.CodeType) and code.co_name in REFERENCE
            and code.co_filename.endswith(os.path.join("zg", "envelope.py"))
            and "_held_call" not in code.co_names)

def _hunt():
    """Anything of the tests here: their names, their source, an expected value."""
    found = set()
    for o in gc.get_objects():
        if type(o).__name__ in ("weakproxy", "weakcallableproxy"):
            continue  # one whose object is gone raises on any look
        if type(o) is types.FunctionType and _reference(o.__code__):
            found.add(f"gc function {o.__qualname__} running the reference's code")
        if type(o) in (types.FunctionType, tuple, list, dict):
            found |= {f"gc code {r.co_name} of the reference" for r in gc.get_referents(o)
                      if _reference(r)}
        if isinstance(o, dict):
            found |= {f"gc dict {k}" for k in list(o)[:500] if isinstance(k, str) and k.startswith(SECRET)}
        elif callable(o) and str(getattr(o, "__name__", "")).startswith(SECRET):
            found.add(f"gc function {o.__name__}")
        elif isinstance(o, str) and len(o) < 10**6 and any(m in o for m in SECRET):
            found.add("gc string with a hidden test's name")
    for name, m in list(sys.modules.items()):
        d = getattr(m, "__dict__", None) or {}
        found |= {f"module {name}.{k}" for k in list(d) if isinstance(k, str) and k.startswith(SECRET)}
    for key, entry in list(linecache.cache.items()):
        text = "".join(entry[2]) if len(entry) > 2 and isinstance(entry[2], list) else ""
        if any(m in text for m in SECRET):
            found.add(f"linecache {key}")
    f = sys._getframe()
    while f is not None:
        for k in ("expected", "want", "ref_args", "reference"):
            if k in f.f_locals:
                found.add(f"frame {f.f_code.co_name} holds {k}")
        f = f.f_back
    return sorted(found)
'''


def _lab3(tmp_path: Path, code: str) -> Path:
    nb = json.loads(SOURCE3.read_text())
    for c in nb["cells"]:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "envelope_sizes":
            c["source"] = code
    path = tmp_path / f"{LAB3}.ipynb"
    path.write_text(json.dumps(nb))
    return path


PART_A = ["test_envelope_sizes", "test_envelope_sizes_hidden", "test_envelope_sizes_contract"]


@needs_sandbox
@pytest.mark.slow
def test_a_submission_walking_gc_frames_and_modules_finds_no_test_and_no_expected_value(tmp_path):
    """Its function answers rightly only while it has found nothing: if anything of the tests
    were in its process, or the code of a reference the lab holds (a function or a code
    object any object refers to), the answer would be wrong and part A would lose points."""
    code = HUNT + MODEL.replace(
        "    return sizes\n",
        "    found = _hunt()\n    return sizes if not found else [-1] + found\n",
    )
    report = zg_course.sandbox.grade(_lab3(tmp_path, code), lab=LAB3, run_scan=False, timeout=600)
    assert report["judged"] == "outside"
    assert all(report["passed"][g] for g in PART_A), report.get("failure")


@needs_sandbox
@pytest.mark.slow
def test_the_same_hunt_finds_the_tests_when_they_run_in_the_workers_process(tmp_path):
    """The hunt can fail: graded as before the judge (the tests in a fork of the worker), it
    finds the hidden test, its references and the kit's (held, not absent), and part A loses
    its points."""
    code = HUNT + MODEL.replace(
        "    return sizes\n",
        "    found = _hunt()\n    return sizes if not found else [-1] + found\n",
    )
    report = zg_course.sandbox.grade(
        _lab3(tmp_path, code), lab=LAB3, run_scan=False, timeout=600, judge=False
    )
    assert report["judged"] == "inside"
    assert not report["passed"]["test_envelope_sizes_contract"]


FORGE3 = r"""
import json, os, struct

def _fd():
    args = open("/proc/self/cmdline", "rb").read().split(b"\0")
    return int(args[args.index(b"--worker-judged") + 1])

def _say(header, blob=b""):
    head = json.dumps(header).encode()
    os.write(_fd(), struct.pack("!II", len(head), len(blob)) + head + blob)

def envelope_sizes(counts, quantile, margin, worst, batch_size):
    for header in ({"op": "closed", "tampered": None}, {"op": "verdict", "error": None},
                   {"op": "back"}, {"op": "answer"}, {"op": "ready"}):
        _say(header)
    return [1] * counts.shape[1]
"""


@needs_sandbox
@pytest.mark.slow
def test_a_submission_speaking_on_its_socket_changes_no_verdict(tmp_path):
    report = zg_course.sandbox.grade(_lab3(tmp_path, FORGE3), lab=LAB3, run_scan=False, timeout=600)
    assert not any(report["passed"][g] for g in PART_A)
    assert report["earned"] <= report["total"] - sum(report["points"][g] for g in PART_A)


@needs_sandbox
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_nbgrader_autograde_goes_through_the_judge_and_agrees_with_the_sandbox(tmp_path):
    pytest.importorskip("nbgrader")
    import zg_course.check
    from zg_course.nbgrader_judge import JudgedExecute

    api, course, _, gradebook = zg_course.check.nbgrader_workspace(
        ROOT / "labs", str(tmp_path / "w"), "test"
    )
    assert api.config.Autograde.autograde_preprocessors[0] is JudgedExecute
    assert api.generate_assignment(LAB3, force=True, create=True)["success"]
    wrong = MODEL.replace("    sizes = [", "    sizes = worst\n    sizes[:] = [")  # worst changed
    folder = course / "submitted" / "alice" / LAB3
    folder.mkdir(parents=True)
    nb = json.loads((course / "release" / LAB3 / f"{LAB3}.ipynb").read_text())
    for c in nb["cells"]:
        if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "envelope_sizes":
            c["source"] = "import math\nimport torch\n" + wrong
    (folder / f"{LAB3}.ipynb").write_text(json.dumps(nb))
    assert api.autograde(LAB3, "alice", force=True, create=True)["success"]
    done = json.loads((course / "autograded" / "alice" / LAB3 / f"{LAB3}.ipynb").read_text())
    errors = {
        c["metadata"]["nbgrader"]["grade_id"]: [
            o for o in c["outputs"] if o["output_type"] == "error"
        ]
        for c in done["cells"]
        if c["cell_type"] == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade")
    }
    contract = errors["test_envelope_sizes_contract"]
    assert contract and "inputs unchanged" in contract[0]["evalue"]
    with gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nbgrader_score = gb.find_submission_notebook(LAB3, LAB3, "alice").score
    sandboxed = zg_course.sandbox.grade(folder / f"{LAB3}.ipynb", course=course, lab=LAB3)
    assert nbgrader_score == sandboxed["earned"] < sandboxed["total"]


def test_hooks_a_call_leaves_on_its_arguments_are_counted_in_the_judge(worker):
    ns, define = worker
    f = define(
        "import torch\n"
        "def f(x, m):\n"
        "    x.register_hook(lambda g: g)\n"
        "    m.register_forward_hook(lambda *a: None)\n"
        "    return x.detach() * 2\n"
    )["f"]
    x, m = torch.ones(3, requires_grad=True), torch.nn.Linear(2, 2)
    f(x, m)
    assert len(x._backward_hooks) == 1 and len(m._forward_hooks) == 1
    f(x, m)
    assert len(x._backward_hooks) == 2 and len(m._forward_hooks) == 2
    assert not hasattr(x, "_zg_hooks")  # the count is read, never left on the judge's tensor
    out = m(torch.ones(1, 2))  # the stand-in hooks change nothing
    assert out.shape == (1, 2)


# ----------------------------------------------------------------------------- absent, not held

ABSENT = r"""
import gc, json, types
import zg.kernels.sampling as kernels
import zg_course.labs as labs
from zg_course.labs import ForbiddenCall, _functions_of


def key(code):
    return (code.co_filename, code.co_firstlineno, code.co_name)


def hunt(keys):
    '''The keys of every reference's own code that any object of this process reaches: a
    function running it, or a code object any gc object refers to (not a stand-in's).'''
    found = set()
    for o in gc.get_objects():
        codes = [o.__code__] if type(o) is types.FunctionType else []
        if type(o) in (types.FunctionType, tuple, list, dict, types.CellType):
            codes += [r for r in gc.get_referents(o) if isinstance(r, types.CodeType)]
        for c in codes:
            if isinstance(c, types.CodeType) and "_held_call" not in c.co_names and key(c) in keys:
                found.add(key(c))
    return found


if kernels.available():
    kernels.warm_up()  # the compiled twins, made as a lab's setup may make them
table = labs._lab_references()
kept = labs._kept_in_worker()
keys, names, out = {}, {}, {"dropped": {}, "refused": {}}
for lab, (_, targets) in table.items():
    fns = [f for t in targets for f in _functions_of(t)]
    keys[lab] = {key(f.__code__) for f in fns}
    names[lab] = {f"{f.__module__}.{f.__qualname__}": f for f in fns}
    namespace = {}  # the lab's globals()
    labs.hold_references(namespace, lab)
    if lab == 3:
        out["found_while_held"] = len(hunt(keys[3]))
    out["dropped"][lab] = sorted(labs._absent_in_worker(namespace))
    out["refused"][lab] = []
    for name in sorted(set(names[lab]) - kept):
        try:
            names[lab][name]()
        except ForbiddenCall:
            out["refused"][lab].append(name)
every = set().union(*keys.values())
found = hunt(every)

out["found"] = sorted(map(list, found))
out["twins"] = sorted({getattr(getattr(o, "py_func", None), "__name__", "")
                       for o in gc.get_objects() if type(o).__name__ == "CPUDispatcher"}
                      & {"pick", "compact", "sample_all"})
out["twins_in_module"] = sorted({"pick", "compact", "sample_all"} & set(vars(kernels)))
out["expected_dropped"] = {lab: sorted(set(names[lab]) - kept) for lab in table}
out["kept_keys"] = sorted(map(list, {k for lab in table for n, f in names[lab].items()
                                      if n in kept for k in [key(f.__code__)]}))
print(json.dumps(out))
"""


def test_the_worker_drops_the_references_of_its_lab_and_nothing_reaches_their_code():
    """``zg_course.labs._absent`` (what the grading worker calls once the lab's setup has held
    them): every reference of every lab is dropped except the few code in the worker runs
    (Lab 1's sampler, Lab 6's hook); a dropped one refuses even outside the student's
    functions, and no function and no code object of the process holds its code any more,
    where the same hunt finds it while it is only held."""
    import sys

    import processes

    done = processes.run(
        [sys.executable, "-c", ABSENT], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["found_while_held"] > 0  # the hunt can find a held reference
    for lab, expected in out["expected_dropped"].items():
        assert out["dropped"][lab] == expected, lab
        assert out["refused"][lab] == expected, lab
    assert len(sum(out["expected_dropped"].values(), [])) >= 20
    # Lab 2's compiled twins (numba dispatchers, which cannot be held) are gone with it
    assert out["twins"] == [] and out["twins_in_module"] == []
    # what is left of the references' code: only the kept ones' (held, in the vault)
    assert {tuple(k) for k in out["found"]} <= {tuple(k) for k in out["kept_keys"]}
