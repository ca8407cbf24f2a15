"""Sizes read from data are checked as sizes given as arguments are (issue 46, item 5).

A node count inferred from the largest id, ``data.num_nodes`` of a PyG object, a generator's
``num_nodes`` / ``avg_degree`` / ``feat_dim`` / ``scale`` / ``edge_factor``: each allocation they
size is estimated and refused before it is made, with a MemoryError naming the argument and the
value that drives it, or a ValueError / TypeError naming the argument. Never the kernel's
out-of-memory killer, a signal, or the allocator's "DefaultCPUAllocator: can't allocate memory".

The fuzz runs hypothesis-drawn constructor calls in a child (``tests/size_cases.py``) whose
address space is limited (RLIMIT_AS) to what it had after importing zg plus 1 GiB: a size that
escaped its estimate fails there in the allocator, not in this machine's memory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import processes
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg._checks import machine_memory
from zg.grappa import partition

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "size_cases.py"
LIMIT = 1 << 30  # the child's address space beyond what importing zg took
ALLOCATOR_WORDS = ("DefaultCPUAllocator", "can't allocate memory", "alloc_cpu.cpp")
ERRORS = {"ValueError", "TypeError", "MemoryError"}

# The arguments each call may name when it refuses.
NAMES = {
    "from_edges": ("num_nodes", "src", "dst"),
    "from_pyg": ("data.num_nodes", "num_nodes", "src", "dst", "data.edge_index"),
    "subgraph": ("nodes",),
    "csbm": ("num_nodes", "avg_degree", "feat_dim", "num_classes"),
    "rmat": ("scale", "edge_factor", "feat_dim", "num_classes"),
    "products_like": ("num_nodes", "avg_degree", "feat_dim", "num_classes", "max_degree"),
    "new_marker": ("num_nodes",),
    "new_seen_bitmap": ("num_nodes",),
}


def run_cases(cases: list[dict], timeout: float = 240) -> list[dict]:
    """Run ``cases`` in one limited child; one result per case, checked to have ended."""
    done = processes.run(
        [sys.executable, str(SCRIPT), str(LIMIT)],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    results = [line for line in lines if "case" in line]
    started = [line["start"] for line in lines if "start" in line]
    if done.returncode != 0 or len(results) != len(cases):
        last = cases[started[-1]] if started else None
        pytest.fail(
            f"the child ended with status {done.returncode} (a negative status is a signal) "
            f"after {len(results)} of {len(cases)} cases; the last one started: {last}; "
            f"stderr ends: {done.stderr[-2000:]}"
        )
    return results


def check_endings(cases: list[dict], results: list[dict]) -> None:
    """Each call succeeded, or raised ValueError / TypeError / MemoryError naming one of its
    arguments, never the allocator's own error."""
    for case, result in zip(cases, results):
        if result["ended"] == "ok":
            continue
        shown = f"{case['call']}({case['args']}) -> {result['ended']}: {result['message']}"
        assert result["ended"] in ERRORS, shown
        assert not any(w in result["message"] for w in ALLOCATOR_WORDS), shown
        assert "\n" not in result["message"].strip(), shown
        assert any(name in result["message"] for name in NAMES[case["call"]]), shown
        assert "/site-packages/" not in result["raised_in"], shown


# ----------------------------------------------------------------------------- strategies


def log_int(low: int, high_bits: int) -> st.SearchStrategy[int]:
    """Ints from ``low`` to ``2**high_bits - 1``, every bit length about equally likely."""
    return st.integers(max(low.bit_length(), 1), high_bits).flatmap(
        lambda bits: st.integers(max(low, 2 ** (bits - 1) - 1), 2**bits - 1)
    )


def small_or_huge(small_high: int, huge_low_bits: int, huge_high_bits: int):
    """A size that builds in a moment, or one past the child's limit (the generators take
    seconds at sizes in between, which the cheaper constructors cover)."""
    return st.one_of(
        st.integers(2, small_high),
        st.integers(huge_low_bits, huge_high_bits).map(lambda b: 2**b + 1),
    )


@st.composite
def edge_lists(draw, call: str):
    ids = log_int(0, 62 if call == "from_edges" else 40)
    count = draw(st.integers(0, 4) if call == "from_pyg" else st.integers(1, 4))
    src = draw(st.lists(ids, min_size=count, max_size=count))
    dst = draw(st.lists(ids, min_size=count, max_size=count))
    if call == "from_pyg":
        return {"src": src, "dst": dst, "num_nodes": draw(log_int(1, 40))}
    top = max(src + dst, default=0)
    dtypes = ["list", "int64", "tensor"] + (["int32", "uint32"] if top < 2**31 else [])
    return {
        "src": src,
        "dst": dst,
        "num_nodes": draw(st.one_of(st.none(), log_int(1, 45))),
        "dtype": draw(st.sampled_from(dtypes)),
        "symmetrize": draw(st.booleans()),
        "self_loops": draw(st.sampled_from(["keep", "remove", "add"])),
    }


@st.composite
def generator_args(draw, call: str):
    if call == "rmat":
        return {
            "scale": draw(st.one_of(st.integers(-1, 6), st.integers(24, 31))),
            "edge_factor": draw(small_or_huge(8, 20, 40)),
            "feat_dim": draw(small_or_huge(8, 20, 40)),
            "num_classes": draw(st.integers(1, 40)),
        }
    num_nodes = draw(small_or_huge(2000, 25, 40))
    degree = draw(small_or_huge(10, 20, 40))
    args = {
        "num_nodes": num_nodes,
        "avg_degree": float(min(degree, num_nodes - 1)),
        "feat_dim": draw(small_or_huge(8, 20, 40)),
        "num_classes": draw(st.integers(1, 5)),
    }
    if call == "csbm":
        args["homophily"] = 1.0 if args["num_classes"] == 1 else 0.8
    return args


CASES = st.one_of(
    st.builds(lambda a: {"call": "from_edges", "args": a}, edge_lists("from_edges")),
    st.builds(lambda a: {"call": "from_pyg", "args": a}, edge_lists("from_pyg")),
    st.builds(lambda a: {"call": "csbm", "args": a}, generator_args("csbm")),
    st.builds(lambda a: {"call": "rmat", "args": a}, generator_args("rmat")),
    st.builds(lambda a: {"call": "products_like", "args": a}, generator_args("products_like")),
    st.builds(lambda n: {"call": "new_marker", "args": {"num_nodes": n}}, log_int(0, 45)),
    st.builds(lambda n: {"call": "new_seen_bitmap", "args": {"num_nodes": n}}, log_int(0, 50)),
)


# ----------------------------------------------------------------------------- the tests

FIXED = [
    {"call": "from_edges", "args": {"src": [0], "dst": [1], "num_nodes": 2**31}},
    {"call": "from_edges", "args": {"src": [0], "dst": [2**40], "num_nodes": None}},
    {"call": "from_edges", "args": {"src": [0], "dst": [2**31 - 1], "num_nodes": None}},
    {"call": "from_edges", "args": {"src": [2**30], "dst": [0], "num_nodes": None}},
    {"call": "from_pyg", "args": {"src": [0], "dst": [1], "num_nodes": 2**31}},
    {"call": "subgraph", "args": {"n": 10, "nodes": [0, 3, 4]}},
    {
        "call": "csbm",
        "args": {"num_nodes": 2**31, "avg_degree": 0.0, "num_classes": 2, "feat_dim": 1},
    },
    {"call": "rmat", "args": {"scale": 30, "edge_factor": 1, "feat_dim": 1}},
    {"call": "products_like", "args": {"num_nodes": 2**31, "avg_degree": 1.0, "feat_dim": 1}},
    {"call": "new_marker", "args": {"num_nodes": 2**40}},
]
for case in FIXED:
    case["args"] = {"dtype": "list", "symmetrize": False, "self_loops": "keep", **case["args"]}
    if case["call"] != "from_edges":
        for key in ("dtype", "symmetrize", "self_loops"):
            case["args"].pop(key)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_fixed_sizes_from_data_are_refused_naming_them_under_an_address_space_limit():
    """The probe's cases: ``from_edges([0], [1], 2**31)`` and ``from_edges([0], [2**40])``
    (the kernel's out-of-memory killer before), and their kin, in a limited child."""
    results = run_cases(FIXED)
    check_endings(FIXED, results)
    endings = [(r["ended"], r["message"]) for r in results]
    assert endings[0][0] == "MemoryError"
    assert "num_nodes=2147483648" in endings[0][1]
    assert endings[1][0] == "ValueError"
    assert "num_nodes=1099511627777 (inferred from the largest id in dst" in endings[1][1]
    assert endings[2][0] == "MemoryError"
    assert "(inferred from the largest id in dst, 2147483647)" in endings[2][1]
    assert "(inferred from the largest id in src, 1073741824)" in endings[3][1]
    assert "(data.num_nodes)" in endings[4][1]
    assert endings[5][0] == "ok"
    assert all(e == "MemoryError" for e, _ in endings[6:]), endings[6:]


@pytest.mark.slow
@pytest.mark.timeout(600)
@settings(
    max_examples=3,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.lists(CASES, min_size=30, max_size=30))
def test_constructor_sizes_from_data_never_crash_under_an_address_space_limit(cases):
    """Hypothesis draws 30 constructor calls with huge and odd sizes (ids up to 2**62, node
    counts up to 2**45, generator sizes past any machine), run in one child limited to 1 GiB
    of address space: each succeeds or raises ValueError / TypeError / MemoryError naming its
    argument; none ends in a signal or the allocator's error."""
    check_endings(cases, run_cases(cases))


# ----------------------------------------------------------------------------- in this process
# (estimates that refuse far past any machine: nothing large is allocated here)

HUGE_NODES = 2**31


def refused_naming(*words):
    class Check:
        def __enter__(self):
            self.raises = pytest.raises(MemoryError)
            self.info = self.raises.__enter__()
            return self.info

        def __exit__(self, *exc):
            out = self.raises.__exit__(*exc)
            for word in words:
                assert word in str(self.info.value), str(self.info.value)
            return out

    return Check()


@pytest.mark.slow
def test_the_machine_memory_honours_an_address_space_limit():
    """What the estimates compare with: the address space left under RLIMIT_AS, when there
    is one (checked in a child, which sets it)."""
    code = (
        "import resource, zg; from zg._checks import machine_memory, _address_space;"
        "limit, used = _address_space(); assert limit is None;"
        "resource.setrlimit(resource.RLIMIT_AS, (used + (1 << 30), resource.RLIM_INFINITY));"
        "available, total = machine_memory();"
        "assert available <= 1 << 30, available; assert total <= used + (1 << 30);"
        "print('ok')"
    )
    done = processes.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-2000:]


def test_uint_ids_are_widened_and_too_large_ones_named():
    for dtype in (np.uint16, np.uint32):
        g = zg.Graph.from_edges(np.array([0, 1], dtype=dtype), np.array([1, 2], dtype=dtype))
        assert g.num_nodes == 3 and g.num_edges == 2
    g = zg.Graph.from_edges(np.array([0, 7], dtype=np.uint64), np.array([1, 2], dtype=np.uint64))
    assert g.num_nodes == 8
    with pytest.raises(
        ValueError, match=r"src holds the value 18446744073709551615 \(dtype uint64"
    ):
        zg.Graph.from_edges(np.array([2**64 - 1], dtype=np.uint64), np.array([0]))


def test_rmat_at_a_small_scale_names_scale_for_too_many_classes():
    with pytest.raises(ValueError, match=r"num_classes=19 is more than the 2 nodes of scale=1"):
        zg.datasets.rmat(1)
    g = zg.datasets.rmat(1, num_classes=2, feat_dim=2)
    assert g.num_nodes == 2


def test_a_node_count_from_pyg_or_dgl_is_estimated_before_it_is_built(require):
    pyg = require("torch_geometric")
    data = pyg.data.Data(edge_index=torch.tensor([[0], [1]]), num_nodes=HUGE_NODES)
    with refused_naming("num_nodes=2147483648 (data.num_nodes)"):
        zg.Graph.from_pyg(data)
    dgl = require("dgl")
    graph = dgl.graph((torch.tensor([0]), torch.tensor([1])), num_nodes=HUGE_NODES)
    with refused_naming("num_nodes=2147483648 (graph.num_nodes())"):
        zg.Graph.from_dgl(graph)


def test_a_schedule_too_large_for_memory_is_refused_before_it_is_built():
    """partner_sweep holds 2 P (P - 1) chunk ids: P = 2**20 workers of a graph that large
    would be about 10**14 bytes of Python lists."""
    n = 2**20
    g = zg.Graph.from_edges(torch.arange(n - 1), torch.arange(1, n), n)
    with refused_naming("num_parts=1048576", "schedule='partner_sweep'"):
        partition(g, n, schedule="partner_sweep")
    assert partition(g, 4).num_parts == 4


def test_node_indexed_buffers_are_estimated_from_the_graph(monkeypatch):
    """The samplers' marker arrays, full-graph inference and profiling take their sizes from
    the graph: shown by making the machine small, so that a normal graph's arrays no longer
    fit, and reading the refusal's names."""
    g = zg.datasets.csbm(num_nodes=3000, avg_degree=5, num_classes=3, feat_dim=8, seed=0)
    model = zg.models.build("sage", 8, 16, 3, 2)
    tiny = lambda device=None: (1000, 1000)  # noqa: E731
    monkeypatch.setattr(zg._checks, "machine_memory", tiny)
    with refused_naming("DynamicSampler on a graph of 3000 nodes"):
        zg.DynamicSampler(g, [5, 5])
    with refused_naming("EnvelopeSampler on a graph of 3000 nodes"):
        zg.EnvelopeSampler(g, [5, 5], 64)
    with refused_naming("full_neighbour_logits on a graph of 3000 nodes"):
        zg.inference.full_neighbour_logits(model.eval(), g)
    with refused_naming("sampling fanouts [5, 5] at batch_size=64 on a graph of 3000 nodes"):
        zg.Envelope.profile(g, [5, 5], 64)
    with refused_naming("subgraph of 3 nodes (len(nodes)) of a graph of 3000 nodes"):
        g.subgraph([0, 1, 2])
    with refused_naming("num_nodes=3000"):
        zg.Graph.from_edges([0], [1], 3000)
    monkeypatch.undo()
    assert machine_memory()[0] > 1000


# ----------------------------------------------------------------------------- widths the user gave


def test_a_model_too_wide_names_the_argument_that_makes_it_so():
    with pytest.raises(MemoryError, match=r"\[8, 10000000000, 3\] \(hidden_dim=10000000000\)"):
        zg.models.build("sage", 8, 10**10, 3, 2)
    with pytest.raises(MemoryError, match=r"\(num_classes=10000000000\)"):
        zg.models.build("gcn", 8, 16, 10**10, 2)
    with pytest.raises(MemoryError, match=r"\(in_dim=10000000000\)"):
        zg.models.build("gat", 10**10, 16, 3, 2)


def test_zg_train_and_zg_grappa_name_the_hidden_flag(capsys):
    """``zg train --hidden`` names the flag and the dataset's fields that size the model;
    ``zg grappa --hidden-dim`` (or ``--hidden``, argparse's abbreviation) names its flag and
    the config field ``hidden_dim``."""
    from zg.cli import main

    with pytest.raises(SystemExit) as info:
        main(["train", "--hidden", "3000000", "--epochs", "1"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--hidden 3000000" in err and "num_classes=7" in err, err
    assert "(hidden_dim=3000000)" in err and "\n" not in err.strip().splitlines()[-1], err
    with pytest.raises(SystemExit) as info:
        main(["grappa", "--hidden", str(10**12), "--epochs", "1"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("zg grappa: error: --hidden-dim:") and "hidden_dim=10" in err, err
