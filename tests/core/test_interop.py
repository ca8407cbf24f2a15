"""zg.interop: lazy access to DGL and PyG. ``import zg`` imports neither; require_dgl /
require_pyg hand out the modules (or an ImportError saying how to get them); blocked_imports
hides a module for one block only; and graphs round-trip through both frameworks exactly."""

import importlib
import importlib.util
import os
import sys

import processes
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zg import Graph
from zg.interop import (
    VERSION_CHECK,
    blocked_imports,
    dgl_or_skip,
    has_dgl,
    has_pyg,
    require_dgl,
    require_pyg,
)


def run_python(code):
    """``code`` in a fresh interpreter (nothing imported yet); its stdout."""
    env = {k: v for k, v in os.environ.items() if k != "DGLBACKEND"}
    out = processes.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


# ----------------------------------------------------------------------------- lazy imports


@pytest.mark.slow
def test_import_zg_imports_neither_dgl_nor_pyg():
    assert (
        run_python(
            "import sys, zg; print(sorted({'dgl', 'torch_geometric', 'ogb'} & set(sys.modules)))"
        )
        == "[]"
    )


@pytest.mark.slow
def test_has_pyg_answers_without_importing_pyg():
    answer = run_python(
        "import sys, zg.interop as i; print(i.has_pyg(), 'torch_geometric' in sys.modules)"
    )
    assert answer == f"{importlib.util.find_spec('torch_geometric') is not None} False"
    assert has_pyg() == (importlib.util.find_spec("torch_geometric") is not None)


@pytest.mark.slow
def test_require_dgl_skips_ogbs_version_check_and_sets_the_backend(require):
    """DGL imports ogb when it is installed, and ogb starts a PyPI check through "outdated":
    require_dgl blocks it, and defaults DGLBACKEND to pytorch."""
    require("dgl")
    answer = run_python(
        "import os, sys, zg.interop as i; d = i.require_dgl(); "
        "print(d.__name__, 'outdated' in sys.modules, os.environ['DGLBACKEND'])"
    )
    assert answer == "dgl False pytorch"
    assert VERSION_CHECK == ("outdated",)


def test_require_dgl_and_pyg_return_the_modules(require):
    dgl, pyg = require("dgl"), require("torch_geometric")  # skips where one is not installed
    assert require_dgl() is dgl
    assert require_pyg() is pyg and hasattr(pyg, "data")


@pytest.mark.parametrize(
    "name, require_fn, advice",
    [
        (
            "dgl",
            require_dgl,
            r"needs DGL, which is not installed.*make env.*DGL 2.1.0 works only with torch 2.2.1",
        ),
        (
            "torch_geometric",
            require_pyg,
            r"needs PyTorch Geometric, which is not installed: `pip install -e .\[pyg\]`",
        ),
    ],
)
def test_a_missing_framework_is_an_import_error_saying_how_to_get_it(
    monkeypatch, name, require_fn, advice
):
    monkeypatch.setitem(sys.modules, name, None)  # as if it were not installed
    with pytest.raises(ImportError, match=advice) as info:
        require_fn()
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_without_dgl_the_notebooks_dgl_rows_are_skipped_with_one_printed_line(monkeypatch, capsys):
    """What notebooks 01 and 04 ask before their DGL rows: True where DGL is installed (silently),
    else one line naming what is skipped and why; in the reference env a missing DGL raises."""
    assert has_dgl() == (importlib.util.find_spec("dgl") is not None)
    if has_dgl():
        assert dgl_or_skip("the DGL row") and capsys.readouterr().out == ""
    monkeypatch.setitem(sys.modules, "dgl", None)  # as if it were not installed
    monkeypatch.delenv("ZG_REFERENCE_ENV", raising=False)
    assert not has_dgl() and dgl_or_skip("the DGL row of this timeline") is False
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("skipped: the DGL row of this timeline, because DGL is not installed")
    monkeypatch.setenv("ZG_REFERENCE_ENV", "1")
    with pytest.raises(ImportError, match="needs DGL, which is not installed"):
        dgl_or_skip("the DGL row")


# ----------------------------------------------------------------------------- blocked_imports


@pytest.fixture
def fresh_module(tmp_path, monkeypatch):
    """The name of an importable module no one has imported, and one that imports it optionally."""
    (tmp_path / "zg_probe_optional.py").write_text("VALUE = 42\n")
    (tmp_path / "zg_probe_user.py").write_text(
        "try:\n    import zg_probe_optional\n    HAVE = True\nexcept ImportError:\n    HAVE = False\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "zg_probe_optional"
    for name in ("zg_probe_optional", "zg_probe_user"):
        sys.modules.pop(name, None)


def test_blocked_imports_hides_a_module_for_the_block_only(fresh_module):
    with blocked_imports(fresh_module):
        with pytest.raises(ImportError):
            importlib.import_module(fresh_module)
        user = importlib.import_module("zg_probe_user")  # skips it, as if not installed
        assert user.HAVE is False
    assert fresh_module not in sys.modules, "the block's entry is removed afterwards"
    assert importlib.import_module(fresh_module).VALUE == 42


def test_blocked_imports_leaves_imported_modules_alone(fresh_module):
    module = importlib.import_module(fresh_module)
    with blocked_imports(fresh_module, "json"):
        assert importlib.import_module(fresh_module) is module
        import json

        assert json.dumps([1]) == "[1]"
    assert sys.modules[fresh_module] is module


def test_blocked_imports_cleans_up_after_an_exception(fresh_module):
    with pytest.raises(RuntimeError, match="inside"), blocked_imports(fresh_module):
        raise RuntimeError("inside")
    assert fresh_module not in sys.modules
    assert importlib.import_module(fresh_module).VALUE == 42


def test_a_module_imported_inside_the_block_is_kept(fresh_module):
    """The block removes only its own None entries: a module someone put in sys.modules in the
    meantime stays."""
    with blocked_imports(fresh_module):
        sys.modules.pop(fresh_module)
        module = importlib.import_module(fresh_module)
    assert sys.modules[fresh_module] is module


# ----------------------------------------------------------------------------- round trips


def _same_graph(a, b):
    for field in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        mine, theirs = getattr(a, field), getattr(b, field)
        if mine is None or theirs is None:
            assert mine is None and theirs is None, field
        else:
            assert torch.equal(mine, theirs), field


@st.composite
def graphs(draw):
    """Random graphs with self-loops, repeated edges, isolated nodes, unlabelled nodes, no edges."""
    n = draw(st.integers(1, 30))
    e = draw(st.integers(0, 80))
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    y = torch.randint(-1, 3, (n,), generator=gen)
    # Disjoint splits of labelled nodes (zg's rule), each present or not.
    part = torch.randint(0, 4, (n,), generator=gen).masked_fill(y < 0, 3)
    splits = {
        split: torch.nonzero(part == k).flatten()
        for k, split in enumerate(("train_idx", "val_idx", "test_idx"))
        if draw(st.booleans())
    }
    x = torch.randn(n, 3, generator=gen) if draw(st.booleans()) else None
    return Graph.from_edges(src, dst, n, x=x, y=y, **splits)


@pytest.mark.dgl
@given(g=graphs())
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_graphs_round_trip_through_dgl_exactly(dgl, g):
    d = g.to_dgl()
    assert isinstance(d, require_dgl().DGLGraph)
    assert (d.num_nodes(), d.num_edges()) == (g.num_nodes, g.num_edges)
    assert torch.equal(d.in_degrees(), g.in_degrees()) and torch.equal(
        d.out_degrees(), g.out_degrees()
    )
    _same_graph(Graph.from_dgl(d), g)


@given(g=graphs())
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_graphs_round_trip_through_pyg_exactly(require, g):
    pyg = require("torch_geometric")
    data = g.to_pyg()
    assert isinstance(data, require_pyg().data.Data) and data.num_nodes == g.num_nodes
    degree = pyg.utils.degree(data.edge_index[1], g.num_nodes, dtype=torch.int64)
    assert torch.equal(degree, g.in_degrees())
    _same_graph(Graph.from_pyg(data), g)


@pytest.mark.dgl
@given(g=graphs())
@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_dgl_and_pyg_see_the_same_graph(dgl, require, g):
    """zg -> DGL -> zg -> PyG -> zg is still the graph, and DGL and PyG list the same edges."""
    require("torch_geometric")
    d, data = g.to_dgl(), g.to_pyg()
    assert torch.equal(torch.stack(d.edges(order="eid")), data.edge_index)
    _same_graph(Graph.from_pyg(Graph.from_dgl(d).to_pyg()), g)
