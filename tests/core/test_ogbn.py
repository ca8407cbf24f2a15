"""zg.ogbn / zg.datasets.load("ogbn-*"): OGB graphs through ogb's own loader, offline.

Each test writes a small graph in OGB's on-disk layout (what ogb downloads and unpacks: see
ogb/nodeproppred/dataset.py, ogb/io/read_graph_raw.py and master.csv) under a temporary root
and loads it through ``zg.datasets.load(name, root=...)``; nothing is ever downloaded.
"""

import gzip
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import processes
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import zg
from zg import datasets, ogbn

ROOT = Path(__file__).resolve().parents[2]
N, F = 60, 5


@pytest.fixture
def ogb(require):
    """ogb, imported as zg imports it (without its PyPI version check, a network call)."""
    with ogbn._importing_ogb():
        return require("ogb.nodeproppred")


def write_csv_gz(path: Path, rows: np.ndarray, fmt: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        np.savetxt(f, rows, fmt=fmt, delimiter=",")


def small_graph(seed: int):
    """Edges (with a reciprocal pair, a repeated edge and a self-loop), features, labels, split."""
    rng = np.random.default_rng(seed)
    src = rng.integers(0, N, 200)
    dst = rng.integers(0, N, 200)
    src = np.concatenate([src, [1, 2, 3, 3, 7]])
    dst = np.concatenate([dst, [2, 1, 4, 4, 7]])  # 1<->2, 3->4 twice, 7->7
    x = rng.standard_normal((N, F)).astype(np.float32)
    y = rng.integers(0, 4, N)
    perm = rng.permutation(N)
    split = {
        "train": np.sort(perm[:30]),
        "valid": np.sort(perm[30:40]),
        "test": np.sort(perm[40:55]),
    }
    return src.astype(np.int64), dst.astype(np.int64), x, y.astype(np.int64), split


def write_split(folder: Path, split_name: str, split: dict) -> None:
    for key, ids in split.items():
        write_csv_gz(folder / "split" / split_name / f"{key}.csv.gz", ids, "%d")


def write_csv_dataset(root: Path, name: str, split_name: str, seed: int = 0, years: bool = False):
    """ogbn-arxiv / ogbn-products layout: raw/*.csv.gz, split/<split_name>/*.csv.gz, RELEASE_v1.txt."""
    src, dst, x, y, split = small_graph(seed)
    folder = root / name.replace("-", "_")
    raw = folder / "raw"
    write_csv_gz(raw / "edge.csv.gz", np.stack([src, dst], 1), "%d")
    write_csv_gz(raw / "num-node-list.csv.gz", np.array([N]), "%d")
    write_csv_gz(raw / "num-edge-list.csv.gz", np.array([src.size]), "%d")
    write_csv_gz(raw / "node-feat.csv.gz", x, "%.9g")  # %.9g: float32 round trip
    write_csv_gz(raw / "node-label.csv.gz", y[:, None], "%d")
    if years:  # master.csv: node_year
        write_csv_gz(raw / "node_year.csv.gz", np.full((N, 1), 2020), "%d")
    write_split(folder, split_name, split)
    (folder / "processed").mkdir()  # shipped empty in ogb's zip
    (folder / "RELEASE_v1.txt").write_text("test release\n")
    return src, dst, x, y, split


def write_papers(root: Path, seed: int = 0):
    """ogbn-papers100M layout (binary): raw/data.npz, raw/node-label.npz with NaN labels."""
    src, dst, x, y, split = small_graph(seed)
    labels = y.astype(np.float64)
    unlabelled = np.setdiff1d(np.arange(N), np.concatenate(list(split.values())))
    labels[unlabelled] = np.nan
    folder = root / "ogbn_papers100M"
    (folder / "raw").mkdir(parents=True)
    np.savez(
        folder / "raw" / "data.npz",
        edge_index=np.stack([src, dst]),
        num_nodes_list=np.array([N]),
        num_edges_list=np.array([src.size]),
        node_feat=x,
        node_year=np.full((N, 1), 2020),
    )
    np.savez(folder / "raw" / "node-label.npz", node_label=labels[:, None])
    write_split(folder, "time", split)
    (folder / "RELEASE_v1.txt").write_text("test release\n")
    return src, dst, x, labels, split, unlabelled


def edge_counter(g):
    src, dst = g.edges()
    return Counter(zip(src.tolist(), dst.tolist()))


def check_features_labels_split(g, x, y, split, name):
    assert isinstance(g, zg.Graph) and g.name == name and g.num_nodes == N
    assert g.x.dtype == torch.float32 and torch.equal(g.x, torch.from_numpy(x))
    assert torch.equal(g.y, torch.from_numpy(y))
    assert torch.equal(g.train_idx, torch.from_numpy(split["train"]))
    assert torch.equal(g.val_idx, torch.from_numpy(split["valid"]))
    assert torch.equal(g.test_idx, torch.from_numpy(split["test"]))


@pytest.fixture
def no_network(monkeypatch):
    """Fail the test if the loader so much as probes the network."""

    def forbidden(*args, **kwargs):
        raise AssertionError("the network was probed although the files are present")

    monkeypatch.setattr(ogbn, "reachable", forbidden)


# ----------------------------------------------------------------------------- loading


def test_arxiv_symmetrised_by_default(ogb, tmp_path, no_network):
    src, dst, x, y, split = write_csv_dataset(tmp_path, "ogbn-arxiv", "time", years=True)
    g = datasets.load("ogbn-arxiv", root=tmp_path)
    check_features_labels_split(g, x, y, split, "ogbn-arxiv")
    assert g.num_classes == 40  # from ogb's master.csv
    # Every citation in both directions, each pair once; the self-loop 7 -> 7 once.
    pairs = {(int(u), int(v)) for u, v in zip(src, dst)} | {
        (int(v), int(u)) for u, v in zip(src, dst)
    }
    assert edge_counter(g) == Counter(pairs)
    assert edge_counter(g)[(7, 7)] == 1 and edge_counter(g)[(4, 3)] == 1
    assert (tmp_path / "ogbn_arxiv" / "processed" / "data_processed").is_file()  # ogb's cache
    again = datasets.load("OGBN-ARXIV", root=str(tmp_path))  # now from ogb's processed cache
    for field in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        assert torch.equal(getattr(again, field), getattr(g, field)), field


def test_arxiv_directed_keeps_ogbs_edges(ogb, tmp_path, no_network):
    src, dst, x, y, split = write_csv_dataset(tmp_path, "ogbn-arxiv", "time", years=True)
    # The trusted reference: ogb's loader itself, parsing the raw files (and caching them).
    from ogb.nodeproppred import NodePropPredDataset

    ref = NodePropPredDataset("ogbn-arxiv", root=str(tmp_path)).graph["edge_index"]
    g = datasets.load("ogbn-arxiv", root=tmp_path, symmetrize=False)  # reads ogb's cache
    check_features_labels_split(g, x, y, split, "ogbn-arxiv")
    assert edge_counter(g) == Counter(zip(src.tolist(), dst.tolist()))  # repeats kept
    assert g.num_edges == src.size
    assert edge_counter(g) == Counter(zip(ref[0].tolist(), ref[1].tolist()))


def test_products_gets_ogbs_inverse_edges(ogb, tmp_path, no_network):
    src, dst, x, y, split = write_csv_dataset(tmp_path, "ogbn-products", "sales_ranking")
    g = datasets.load("ogbn-products", root=tmp_path)
    check_features_labels_split(g, x, y, split, "ogbn-products")
    assert g.num_classes == 47
    # ogb adds the inverse of every edge (add_inverse_edge=True); nothing is added or dropped here.
    expected = Counter(zip(src.tolist(), dst.tolist())) + Counter(zip(dst.tolist(), src.tolist()))
    assert edge_counter(g) == expected and g.num_edges == 2 * src.size
    directed = datasets.load("ogbn-products", root=tmp_path, symmetrize=False)
    assert edge_counter(directed) == expected


def test_papers100m_nan_labels_are_unlabelled(ogb, tmp_path, no_network):
    src, dst, x, labels, split, unlabelled = write_papers(tmp_path)
    g = datasets.load("ogbn-papers100M", root=tmp_path)
    assert g.name == "ogbn-papers100M" and g.num_nodes == N and g.num_classes == 172
    assert torch.equal(g.x, torch.from_numpy(x))
    assert torch.equal(g.y[torch.from_numpy(unlabelled)], torch.full((unlabelled.size,), -1))
    known = ~np.isnan(labels)
    assert torch.equal(
        g.y[torch.from_numpy(known)], torch.from_numpy(labels[known].astype(np.int64))
    )
    assert torch.equal(g.train_idx, torch.from_numpy(split["train"]))
    assert torch.equal(g.val_idx, torch.from_numpy(split["valid"]))
    assert torch.equal(g.test_idx, torch.from_numpy(split["test"]))
    pairs = {(int(u), int(v)) for u, v in zip(src, dst)} | {
        (int(v), int(u)) for u, v in zip(src, dst)
    }
    assert edge_counter(g) == Counter(pairs)
    directed = datasets.load("ogbn-papers100m", root=tmp_path, symmetrize=False)
    assert edge_counter(directed) == Counter(zip(src.tolist(), dst.tolist()))


def test_default_root_comes_from_the_environment(ogb, tmp_path, monkeypatch, no_network):
    monkeypatch.setenv("ZG_OGB_ROOT", str(tmp_path / "cache"))
    assert ogbn.default_root() == tmp_path / "cache"
    write_csv_dataset(tmp_path / "cache", "ogbn-arxiv", "time", years=True)
    assert datasets.load("ogbn-arxiv").name == "ogbn-arxiv"
    monkeypatch.delenv("ZG_OGB_ROOT")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ogbn.default_root() == tmp_path / "xdg" / "zg" / "ogb"
    assert (
        ogbn.dataset_dir("ogbn-papers100m") == tmp_path / "xdg" / "zg" / "ogb" / "ogbn_papers100M"
    )


def test_ogb_module_is_left_as_found(ogb, tmp_path, no_network):
    from ogb.nodeproppred import dataset as ogb_dataset
    from ogb.utils.url import decide_download

    write_csv_dataset(tmp_path, "ogbn-products", "sales_ranking")
    datasets.load("ogbn-products", root=tmp_path)
    assert ogb_dataset.decide_download is decide_download and "input" not in vars(ogb_dataset)
    assert ogb_dataset.torch is torch


# ----------------------------------------------------------------------------- offline, no prompt


def test_missing_files_without_download_fail_at_once(ogb, tmp_path, no_network):
    start = time.perf_counter()
    with pytest.raises(FileNotFoundError, match=r"ogbn-arxiv.*" + str(tmp_path / "ogbn_arxiv")):
        datasets.load("ogbn-arxiv", root=tmp_path, download=False)
    assert time.perf_counter() - start < 5
    assert list(tmp_path.iterdir()) == []  # nothing written


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return (
            processes.run(["unshare", "-rn", "true"], capture_output=True, timeout=10).returncode
            == 0
        )
    except (OSError, subprocess.SubprocessError):
        return False


@pytest.mark.slow
@pytest.mark.skipif(
    not unshare_works(), reason="needs `unshare -rn` (a network namespace) to be offline"
)
def test_missing_files_without_network_fail_within_seconds(ogb, tmp_path):
    """A real offline machine: a new network namespace has no route anywhere."""
    code = (
        "import sys, time, zg\n"
        "start = time.perf_counter()\n"
        "try:\n"
        "    zg.datasets.load('ogbn-products', root=sys.argv[1])\n"
        "except FileNotFoundError as exc:\n"
        "    print(f'{time.perf_counter() - start:.2f}'); print(exc); sys.exit(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # stdin is a pipe nobody writes to: a prompt would hang until the timeout.
    run = processes.run(
        ["unshare", "-rn", sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.PIPE,
    )
    assert run.returncode == 3, run.stdout + run.stderr
    seconds, message = run.stdout.split("\n", 1)
    assert float(seconds) < ogbn.NETWORK_TIMEOUT + 3
    assert "ogbn-products" in message and str(tmp_path / "ogbn_products") in message
    assert "products.zip" in message and "no network" in message


def test_folder_from_another_release_is_an_error_not_a_prompt(ogb, tmp_path, no_network):
    write_csv_dataset(tmp_path, "ogbn-arxiv", "time", years=True)
    (tmp_path / "ogbn_arxiv" / "RELEASE_v1.txt").unlink()
    with pytest.raises(ValueError, match=r"ogbn-arxiv.*no RELEASE_v1.txt.*Delete"):
        datasets.load("ogbn-arxiv", root=tmp_path)
    assert (tmp_path / "ogbn_arxiv" / "raw" / "edge.csv.gz").is_file()  # nothing deleted


def test_incomplete_folder_names_what_is_missing(ogb, tmp_path, no_network):
    write_csv_dataset(tmp_path, "ogbn-arxiv", "time", years=True)
    shutil.rmtree(tmp_path / "ogbn_arxiv" / "split")
    with pytest.raises(FileNotFoundError, match=r"split.*time.*incomplete"):
        datasets.load("ogbn-arxiv", root=tmp_path)


def test_empty_folder_is_treated_as_missing(ogb, tmp_path, no_network):
    (tmp_path / "ogbn_arxiv").mkdir()
    with pytest.raises(FileNotFoundError, match="download=False"):
        datasets.load("ogbn-arxiv", root=tmp_path, download=False)


def test_reachable_gives_up_on_time():
    start = time.perf_counter()
    # 192.0.2.0/24 is TEST-NET-1 (RFC 5737): never routed, so the connection cannot open.
    assert ogbn.reachable("http://192.0.2.1/data.zip", timeout=0.5) is False
    assert time.perf_counter() - start < 2


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset 'ogbn-mag'.*ogbn-arxiv"):
        datasets.load("ogbn-mag")
    with pytest.raises(ValueError, match="unknown OGB dataset"):
        ogbn.load("cora")
    with pytest.raises(TypeError, match="name"):
        ogbn.load(7)
    with pytest.raises(TypeError, match="root"):
        ogbn.load("ogbn-arxiv", root=7)
    with pytest.raises(TypeError, match="symmetrize"):
        ogbn.load("ogbn-arxiv", root=tmp_path, symmetrize=None)
    with pytest.raises(TypeError, match="download"):
        ogbn.load("ogbn-arxiv", root=tmp_path, download="no")


class _RunsCode:
    """What a crafted cache file pickles: a call, run by a plain unpickler."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        import os

        return (os.makedirs, (self.marker,))


def test_a_crafted_cache_file_is_refused_and_runs_nothing(ogb, tmp_path, no_network):
    """ogb's cache (processed/data_processed) is a pickle; the kit used to read it with
    weights_only=False, so a crafted file ran its pickled call on load. Now an allow-list of
    numpy arrays and plain containers reads it: the crafted call never runs, and the error
    says to delete the processed folder."""
    write_csv_dataset(tmp_path, "ogbn-arxiv", "time", years=True)
    g = datasets.load("ogbn-arxiv", root=tmp_path)  # writes ogb's cache
    cache = tmp_path / "ogbn_arxiv" / "processed" / "data_processed"
    good = torch.load(cache, weights_only=False)
    marker = tmp_path / "pwned"
    torch.save({**good, "extra": _RunsCode(marker)}, cache)
    with pytest.raises(ValueError, match="not loaded") as caught:
        datasets.load("ogbn-arxiv", root=tmp_path)
    assert "Delete the folder" in str(caught.value) and "processed" in str(caught.value)
    assert not marker.exists(), "the crafted call ran"
    torch.save(good, cache)  # an honest cache still loads
    again = datasets.load("ogbn-arxiv", root=tmp_path)
    assert torch.equal(again.indices, g.indices)


# ----------------------------------------------------------------------------- sizes read from files


@pytest.fixture
def nothing_sized(monkeypatch):
    """Fail the test if the CSC arrays (sized by num_nodes) are built at all."""
    import zg.graph

    def forbidden(*args, **kwargs):
        raise AssertionError("arrays sized by num_nodes were built before num_nodes was checked")

    monkeypatch.setattr(zg.graph, "csc_from_pairs", forbidden)


@pytest.mark.parametrize("claimed", [N - 1, N + 1, 3 * 10**8, 10**11])
def test_arxiv_num_node_list_is_checked_before_any_allocation(
    ogb, tmp_path, no_network, nothing_sized, claimed
):
    """A folder whose raw/num-node-list.csv.gz claims another node count (the probe: 4 nodes
    claiming 10^11 allocated gigabytes, then failed in alloc_cpu) is refused, naming the field,
    before anything is sized by the count."""
    write_csv_dataset(tmp_path, "ogbn-arxiv", "time", years=True)
    write_csv_gz(
        tmp_path / "ogbn_arxiv" / "raw" / "num-node-list.csv.gz", np.array([claimed]), "%d"
    )
    with pytest.raises(ValueError, match=rf"num-node-list.*{claimed:,}.*{N} rows") as caught:
        datasets.load("ogbn-arxiv", root=tmp_path, download=False)
    assert "\n" not in str(caught.value)


def test_arxiv_edge_id_beyond_the_node_count_is_refused(ogb, tmp_path, no_network, nothing_sized):
    src, dst, *_ = write_csv_dataset(tmp_path, "ogbn-arxiv", "time", years=True)
    edges = np.stack([src, dst], 1)
    edges[5, 1] = N + 7
    write_csv_gz(tmp_path / "ogbn_arxiv" / "raw" / "edge.csv.gz", edges, "%d")
    with pytest.raises(
        ValueError, match=rf"destination id \({N + 7}\).*0\.\.{N - 1}.*num-node-list"
    ):
        datasets.load("ogbn-arxiv", root=tmp_path, download=False)


@pytest.mark.parametrize("claimed", [N + 1, 10**11])
def test_papers100m_num_nodes_list_is_checked_before_any_allocation(
    ogb, tmp_path, no_network, nothing_sized, claimed
):
    """papers100M's binary raw/data.npz: num_nodes_list claiming more nodes than the feature and
    label rows present is refused, naming the field."""
    write_papers(tmp_path)
    path = tmp_path / "ogbn_papers100M" / "raw" / "data.npz"
    arrays = dict(np.load(path))
    arrays["num_nodes_list"] = np.array([claimed])
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match=rf"data\.npz's num_nodes_list.*{claimed:,} nodes"):
        datasets.load("ogbn-papers100M", root=tmp_path, download=False)


def _dict_graph(num_nodes, n_rows, n_feat, edges):
    return (
        {
            "num_nodes": num_nodes,
            "edge_index": np.asarray(edges, dtype=np.int64).reshape(2, -1),
            "node_feat": np.zeros((n_feat, 2), np.float32),
        },
        np.zeros((n_rows, 1), np.int64),
        {"train": np.array([0]), "valid": np.array([], np.int64), "test": np.array([], np.int64)},
    )


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 12),
    claimed=st.one_of(st.integers(-3, 15), st.integers(10**9, 10**15)),
    feat_rows=st.integers(1, 12),
    edge=st.integers(0, 20),
)
def test_to_graph_node_count_matches_the_data_or_is_refused(rows, claimed, feat_rows, edge):
    """Property: _to_graph builds a graph exactly when the claimed count equals the label rows
    and the feature rows and exceeds every edge id; otherwise a ValueError naming num_nodes
    (or the edge id), and nothing sized by the claim is allocated (10^15 would not fit)."""
    graph, labels, split = _dict_graph(claimed, rows, feat_rows, [[0], [edge]])
    good = claimed == rows == feat_rows and edge < claimed
    if good:
        g = ogbn._to_graph("ogbn-arxiv", graph, labels, split, 2, symmetrize=True)
        assert g.num_nodes == rows
    else:
        with pytest.raises(ValueError, match=r"num-node-list|num_nodes"):
            ogbn._to_graph("ogbn-arxiv", graph, labels, split, 2, symmetrize=True)
