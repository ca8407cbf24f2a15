"""Hostile data on disk and from other frameworks (issue 28, items 7, 9 and 13).

* Files that change under a loaded graph folder: an in-place rewrite of the structure files
  (indptr, indices, labels, splits) cannot crash or change a run, because load_folder copies
  them into memory; save_folder over a loaded folder leaves the loaded graph intact.
* Damaged OGB files (a truncated cache or raw file, a missing raw file) end in one error that
  names the dataset, the file and what to do, also through ``zg train``.
* ``Graph.from_pyg`` densifies a sparse ``x`` (as PyG allows one).

Everything that could crash the interpreter (a segfault, a bus error) runs in a subprocess
with a timeout, so a crash fails the test instead of killing pytest.
"""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import processes
import pytest
import torch

import zg
from zg import cli, datasets, ogbn

ROOT = Path(__file__).resolve().parents[2]
STRUCTURE = ("indptr", "indices", "y", "train_idx", "val_idx", "test_idx")


def run_script(code: str, *args: str, timeout: int = 240) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with the repository on its path; a crash is a return code."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DGLBACKEND": "pytorch"}
    return processes.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )


def crashed(run: subprocess.CompletedProcess) -> str:
    signal = f" (signal {-run.returncode})" if run.returncode < 0 else ""
    return f"exit {run.returncode}{signal}\n{run.stdout}\n{run.stderr}"


def saved_graph(folder: Path) -> Path:
    g = datasets.csbm(600, avg_degree=8, num_classes=3, feat_dim=6, seed=1, name="mine")
    datasets.save_folder(g, folder)
    return folder


# What a run of the loaded graph produces: sampled node sets with both sampler kernels, and
# a few training steps and an evaluation of the Engine with each. Printed as one repr line.
RUN = """
    import sys, numpy as np, torch, zg
    from zg.sampling import EnvelopeSampler

    def run(g):
        out = []
        for kernel in ("fused", "torch"):
            sampler = EnvelopeSampler(g, [5, 5], 64, seed=0, kernel=kernel)
            for b in range(3):
                mb = sampler.sample(g.train_idx[b * 64:(b + 1) * 64], 0, b)
                out.append([t.tolist() for t in mb.node_sets()])
            torch.manual_seed(0)
            model = zg.models.build("sage", g.feat_dim, 8, g.num_classes, num_layers=2)
            eng = zg.Engine(g, model, [5, 5], 64, seed=0, kernel=kernel)
            out.append(eng.train_epoch(max_batches=3).loss)
            out.append(eng.evaluate("val"))
            out.append([p.detach().double().sum().item() for p in model.parameters()])
        return out
"""


# ----------------------------------------------------------------------------- item 7: files under a run


@pytest.mark.slow
@pytest.mark.parametrize("rewrite", [("indices",), STRUCTURE], ids=["indices", "all-structure"])
def test_in_place_rewrite_of_structure_files_cannot_crash_or_change_a_run(tmp_path, rewrite):
    """A regenerate-the-data script np.save's out-of-range ids over the files of a loaded folder."""
    folder = saved_graph(tmp_path / "g")
    code = (
        RUN
        + """
    folder, keys = sys.argv[1], sys.argv[2].split(",")
    g = zg.datasets.load_folder(folder)                   # mmap=True, the default
    before = run(g)
    rng = np.random.default_rng(0)
    for key in keys:                                      # in place: same file, same size
        old = np.load(f"{folder}/{key}.npy")
        np.save(f"{folder}/{key}.npy", rng.integers(10**9, 2 * 10**9, old.shape, dtype=old.dtype))
    assert np.load(f"{folder}/indices.npy").min() >= 10**9 or "indices" not in keys
    after = run(g)
    print("same" if after == before else f"changed: {before!r} -> {after!r}")
    """
    )
    result = run_script(code, str(folder), ",".join(rewrite))
    assert result.returncode == 0, crashed(result)
    assert result.stdout.strip().splitlines()[-1] == "same"


@pytest.mark.slow
def test_save_folder_over_a_loaded_folder_leaves_the_loaded_graph_intact(tmp_path):
    folder = saved_graph(tmp_path / "g")
    code = (
        RUN
        + """
    import zg.datasets as d
    folder = sys.argv[1]
    g = d.load_folder(folder)
    copies = {k: getattr(g, k).clone() for k in ("indptr", "indices", "x", "y", "train_idx")}
    before = run(g)
    other = d.csbm(900, avg_degree=5, num_classes=4, feat_dim=3, seed=7)
    d.save_folder(other, folder)                          # a different graph at the same path
    after = run(g)
    assert all(torch.equal(getattr(g, k), v) for k, v in copies.items()), "tensors changed"
    assert d.load_folder(folder).num_nodes == 900
    print("same" if after == before else "changed")
    """
    )
    result = run_script(code, str(folder))
    assert result.returncode == 0, crashed(result)
    assert result.stdout.strip().splitlines()[-1] == "same"


@pytest.mark.slow
def test_mmap_false_survives_a_truncated_feature_file(tmp_path):
    """The documented way to let files change under a run: mmap=False reads everything."""
    folder = saved_graph(tmp_path / "g")
    code = (
        RUN
        + """
    folder = sys.argv[1]
    g = zg.datasets.load_folder(folder, mmap=False)
    before = run(g)
    with open(f"{folder}/x.npy", "r+b") as f:
        f.truncate(64)
    print("same" if run(g) == before else "changed")
    """
    )
    result = run_script(code, str(folder))
    assert result.returncode == 0, crashed(result)
    assert result.stdout.strip().splitlines()[-1] == "same"


def mapped_file(tensor):
    """The file a tensor's memory is mapped from (Linux /proc/self/maps), or None."""
    address = tensor.data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            start, end = (int(v, 16) for v in fields[0].split("-"))
            if start <= address < end:
                return fields[5] if len(fields) > 5 else None
    return None


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc/self/maps")
def test_only_the_features_stay_memory_mapped(tmp_path):
    folder = saved_graph(tmp_path / "g")
    g = datasets.load_folder(folder)
    assert mapped_file(g.x) == str(folder / "x.npy")
    for key in STRUCTURE:
        assert mapped_file(getattr(g, key)) != str(folder / f"{key}.npy"), key
        assert getattr(g, key).numpy().base is None or not isinstance(
            getattr(g, key).numpy().base, np.memmap
        ), key
    eager = datasets.load_folder(folder, mmap=False)
    assert mapped_file(eager.x) != str(folder / "x.npy")


def test_load_folder_docstring_says_what_not_to_do():
    doc = datasets.load_folder.__doc__
    assert "copied" in doc and "SIGBUS" in doc and "save_folder" in doc and "mmap=False" in doc
    # mmap="all" gives the structure back to the files, and with it the rule for every file.
    doc = " ".join(doc.split())
    assert (
        'mmap="all"' in doc
        and "no file of the folder may be rewritten or truncated in place" in doc
    )
    files = " ".join((ROOT / "docs" / "files.md").read_text().split())
    assert 'With `mmap="all"`, do not rewrite or truncate any file of the folder in place' in files


# ----------------------------------------------------------------------------- item 9: damaged OGB files


@pytest.fixture
def arxiv(require, tmp_path, monkeypatch):
    """An ogbn-arxiv folder in OGB's layout under tmp_path / "ogb" (offline)."""
    with ogbn._importing_ogb():
        require("ogb.nodeproppred")
    from test_ogbn import write_csv_dataset

    def forbidden(*args, **kwargs):
        raise AssertionError("the network was probed although the files are present")

    monkeypatch.setattr(ogbn, "reachable", forbidden)
    write_csv_dataset(tmp_path / "ogb", "ogbn-arxiv", "time", years=True)
    return tmp_path / "ogb"


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_truncated_ogb_cache_names_the_file_and_the_fix(arxiv):
    datasets.load("ogbn-arxiv", root=arxiv)  # ogb writes its cache
    cache = arxiv / "ogbn_arxiv" / "processed" / "data_processed"
    truncate(cache)
    with pytest.raises(ValueError) as info:
        datasets.load("ogbn-arxiv", root=arxiv)
    message = str(info.value)
    assert message.startswith("ogbn-arxiv: ") and str(cache) in message
    assert "damaged" in message and "Delete" in message
    assert cache.is_file()  # nothing of the user's deleted


def test_truncated_ogb_raw_file_names_the_file_and_the_fix(arxiv):
    edges = arxiv / "ogbn_arxiv" / "raw" / "edge.csv.gz"
    truncate(edges)
    with pytest.raises(ValueError) as info:
        datasets.load("ogbn-arxiv", root=arxiv)
    message = str(info.value)
    assert message.startswith("ogbn-arxiv: ") and str(edges) in message
    assert "damaged" in message and str(arxiv / "ogbn_arxiv") in message and "download" in message
    assert edges.is_file()


def test_missing_ogb_raw_file_names_the_file_and_the_fix(arxiv):
    lost = arxiv / "ogbn_arxiv" / "raw" / "num-node-list.csv.gz"
    lost.unlink()
    with pytest.raises(FileNotFoundError) as info:
        datasets.load("ogbn-arxiv", root=arxiv)
    message = str(info.value)
    assert message.startswith("ogbn-arxiv: ") and str(lost) in message and "missing" in message
    assert str(arxiv / "ogbn_arxiv") in message and "download" in message
    assert (arxiv / "ogbn_arxiv" / "raw" / "edge.csv.gz").is_file()


@pytest.mark.parametrize("damage", ["cache", "raw", "missing"])
def test_zg_train_reports_damaged_ogb_files_in_one_line(arxiv, capsys, damage):
    folder = arxiv / "ogbn_arxiv"
    if damage == "cache":
        datasets.load("ogbn-arxiv", root=arxiv)
        bad = folder / "processed" / "data_processed"
        truncate(bad)
    elif damage == "raw":
        bad = folder / "raw" / "edge.csv.gz"
        truncate(bad)
    else:
        bad = folder / "raw" / "num-node-list.csv.gz"
        bad.unlink()
    capsys.readouterr()
    status = cli.main(
        [
            "train",
            "--dataset",
            "ogbn-arxiv",
            "--root",
            str(arxiv),
            "--epochs",
            "1",
            "--fanouts",
            "5,5",
            "--hidden",
            "16",
            "--batch-size",
            "70",
            "--no-progress",
        ]
    )
    err = capsys.readouterr().err
    assert status != 0
    assert err.startswith("zg train: error: --dataset ogbn-arxiv: ogbn-arxiv: "), err
    assert str(bad) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


@pytest.mark.slow
def test_python_m_zg_grappa_reports_a_damaged_ogb_file_without_a_traceback(arxiv, tmp_path):
    edges = arxiv / "ogbn_arxiv" / "raw" / "edge.csv.gz"
    truncate(edges)
    config = tmp_path / "cfg.json"
    config.write_text(
        '{"dataset": {"name": "ogbn-arxiv", "root": "%s"}, "workers": 2, "epochs": 1}' % arxiv
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DGLBACKEND": "pytorch"}
    result = processes.run(
        [
            sys.executable,
            "-m",
            "zg.grappa",
            "--config",
            str(config),
            "--out",
            str(tmp_path / "history.json"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2, crashed(result)
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith(f"python -m zg.grappa: error: --config {config}: dataset ")
    assert f"ogbn-arxiv: the file {edges} could not be read" in last
    assert not (tmp_path / "history.json").exists()


def test_ogb_modules_are_left_as_found_after_a_damaged_load(arxiv):
    import pandas
    from ogb.io import read_graph_raw
    from ogb.nodeproppred import dataset as ogb_dataset

    (arxiv / "ogbn_arxiv" / "raw" / "num-node-list.csv.gz").unlink()
    with pytest.raises(FileNotFoundError):
        datasets.load("ogbn-arxiv", root=arxiv)
    for module in (ogb_dataset, read_graph_raw):
        assert module.pd is pandas and module.np is np, module.__name__
    assert ogb_dataset.torch is torch and "input" not in vars(ogb_dataset)


# ----------------------------------------------------------------------------- item 13: sparse PyG features


@pytest.mark.parametrize("layout", ["coo", "csr"])
def test_from_pyg_densifies_a_sparse_x(require, layout):
    pyg = require("torch_geometric")
    dense = torch.zeros(5, 3)
    dense[0, 1], dense[3, 2], dense[4, 0] = 1.0, 2.5, -1.0
    sparse = dense.to_sparse() if layout == "coo" else dense.to_sparse_csr()
    data = pyg.data.Data(
        x=sparse, edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]), y=torch.tensor([0, 1, 0, 1, 1])
    )
    g = zg.Graph.from_pyg(data)
    assert g.x.layout == torch.strided and g.x.dtype == torch.float32 and torch.equal(g.x, dense)
    assert g.num_nodes == 5 and torch.equal(g.to_pyg().x, dense)


def test_from_pyg_sparse_x_of_the_wrong_shape_is_a_clear_error(require):
    pyg = require("torch_geometric")
    data = pyg.data.Data(
        x=torch.eye(4).to_sparse(), edge_index=torch.tensor([[0, 1], [1, 2]]), num_nodes=6
    )
    with pytest.raises(ValueError, match=r"data\.x .*4 rows.*num_nodes=6"):
        zg.Graph.from_pyg(data)
    data = pyg.data.Data(
        x=torch.ones(2, 2, 2).to_sparse(), edge_index=torch.tensor([[0], [1]]), num_nodes=2
    )
    with pytest.raises(TypeError, match=r"data\.x"):
        zg.Graph.from_pyg(data)


def test_from_pyg_sparse_labels_and_masks(require):
    pyg = require("torch_geometric")
    y = torch.tensor([0, 2, 0, 1])
    train = torch.tensor([True, False, False, True])
    data = pyg.data.Data(
        x=torch.ones(4, 2),
        edge_index=torch.tensor([[0, 1], [1, 2]]),
        y=y.to_sparse(),
        train_mask=train.to_sparse(),
    )
    g = zg.Graph.from_pyg(data)
    assert torch.equal(g.y, y) and torch.equal(g.train_idx, torch.tensor([0, 3]))
