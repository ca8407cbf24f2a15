"""Tests for zg.datasets: bundled Cora, the cSBM and R-MAT generators, and the .npz format."""

import json
import os

import numpy as np
import pytest
import torch

import zg
from zg import datasets


def assert_simple_undirected(g):
    """Every edge has its reverse, and there are no self-loops or duplicate edges."""
    src, dst = g.edges()
    n = g.num_nodes
    assert not bool((src == dst).any()), "self-loop"
    forward = dst * n + src
    assert torch.unique(forward).numel() == g.num_edges, "duplicate edge"
    assert torch.equal(torch.sort(forward).values, torch.sort(src * n + dst).values), "asymmetric"


def assert_graphs_equal(a, b):
    assert a.name == b.name and a.num_classes == b.num_classes
    for field in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        ta, tb = getattr(a, field), getattr(b, field)
        if ta is None or tb is None:
            assert ta is None and tb is None, field
        else:
            assert ta.dtype == tb.dtype and torch.equal(ta, tb), field


def top_share(g, fraction=0.01):
    """Share of all edge endpoints held by the top ``fraction`` of nodes by degree."""
    deg = torch.sort(g.in_degrees(), descending=True).values
    top = max(1, int(fraction * g.num_nodes))
    return float(deg[:top].sum()) / float(deg.sum())


# ----------------------------------------------------------------------------- Cora


@pytest.fixture(scope="module")
def cora():
    return datasets.load("cora")


def test_cora_counts(cora):
    assert isinstance(cora, zg.Graph) and cora.name == "cora"
    assert cora.num_nodes == 2708 and cora.num_edges == 10556
    assert cora.x.shape == (2708, 1433) and cora.x.dtype == torch.float32
    assert set(torch.unique(cora.x).tolist()) == {0.0, 1.0}
    assert cora.y.dtype == torch.int64 and cora.num_classes == 7
    assert sorted(torch.unique(cora.y).tolist()) == list(range(7))
    assert cora.indptr.dtype == cora.indices.dtype == torch.int64
    assert_simple_undirected(cora)


def test_cora_split(cora):
    train, val, test = cora.train_idx, cora.val_idx, cora.test_idx
    assert (train.numel(), val.numel(), test.numel()) == (140, 500, 1000)
    assert torch.bincount(cora.y[train], minlength=7).tolist() == [20] * 7
    assert torch.unique(torch.cat([train, val, test])).numel() == 1640


def test_cora_file_keeps_paper_ids_and_subjects():
    with np.load(datasets.data_dir() / "cora.npz", allow_pickle=False) as f:
        assert f["paper_id"].shape == (2708,) and len(np.unique(f["paper_id"])) == 2708
        assert f["paper_id"][0] == 31336  # row 0 of graphdatascience's cora_nodes.parquet
        assert tuple(f["subjects"]) == datasets.CORA_SUBJECTS


def test_load_errors(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown dataset 'pubmed'.*cora"):
        datasets.load("pubmed")
    with pytest.raises(TypeError, match="name"):
        datasets.load(3)
    monkeypatch.setenv("ZG_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="make_cora.py"):
        datasets.load("cora")
    (tmp_path / "cora.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="truncated or corrupt"):
        datasets.load("cora")


# ----------------------------------------------------------------------------- cSBM


@pytest.mark.parametrize("homophily", [0.1, 0.5, 0.9])
def test_csbm_homophily_and_degree(homophily):
    g = datasets.csbm(20_000, avg_degree=10, num_classes=5, feat_dim=8, homophily=homophily, seed=1)
    assert abs(g.edge_homophily() - homophily) < 0.03
    assert abs(g.num_edges / g.num_nodes - 10) < 0.2
    assert_simple_undirected(g)


def test_csbm_shapes_classes_and_split():
    g = datasets.csbm(1001, avg_degree=6, num_classes=4, feat_dim=16, train_frac=0.5, val_frac=0.25)
    assert g.x.shape == (1001, 16) and g.x.dtype == torch.float32
    assert g.num_classes == 4
    sizes = torch.bincount(g.y, minlength=4)
    assert int(sizes.max() - sizes.min()) <= 1  # balanced
    assert (g.train_idx.numel(), g.val_idx.numel(), g.test_idx.numel()) == (500, 250, 251)
    assert torch.unique(torch.cat([g.train_idx, g.val_idx, g.test_idx])).numel() == 1001
    # Features are class-correlated: each class's mean feature vector is closest to its own.
    means = torch.stack([g.x[g.y == c].mean(0) for c in range(4)])
    nearest = torch.cdist(g.x, means).argmin(1)
    assert float((nearest == g.y).float().mean()) > 0.4  # chance is 0.25


def test_csbm_powerlaw_is_more_skewed():
    uniform = datasets.csbm(20_000, avg_degree=10, num_classes=5, feat_dim=4)
    power = datasets.csbm(20_000, avg_degree=10, num_classes=5, feat_dim=4, degree="powerlaw")
    assert top_share(power) > 2 * top_share(uniform)
    assert int(power.in_degrees().max()) > 5 * int(uniform.in_degrees().max())
    assert abs(power.edge_homophily() - 0.8) < 0.05
    assert_simple_undirected(power)


@pytest.mark.parametrize("degree", ["uniform", "powerlaw"])
def test_csbm_is_seeded(degree):
    make = lambda seed: datasets.csbm(3000, 8, 3, 5, seed=seed, degree=degree)  # noqa: E731
    assert_graphs_equal(make(7), make(7))
    a, b = make(7), make(8)
    assert a.num_edges != b.num_edges or not torch.equal(a.indices, b.indices)
    assert not torch.equal(a.x, b.x) and not torch.equal(a.y, b.y)


def test_csbm_homophily_one_and_single_class():
    g = datasets.csbm(500, avg_degree=4, num_classes=1, feat_dim=2, homophily=1.0)
    assert g.edge_homophily() == 1.0
    empty = datasets.csbm(10, avg_degree=0, num_classes=2, feat_dim=2)
    assert empty.num_edges == 0


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(num_nodes=1), ValueError, "num_nodes"),
        (dict(num_nodes=10.0), TypeError, "num_nodes"),
        (dict(num_nodes=True), TypeError, "num_nodes"),
        (dict(avg_degree=-1), ValueError, "avg_degree"),
        (dict(avg_degree=200), ValueError, "avg_degree"),
        (dict(avg_degree=float("nan")), ValueError, "avg_degree"),
        (dict(avg_degree="5"), TypeError, "avg_degree"),
        (dict(num_classes=0), ValueError, "num_classes"),
        (dict(num_classes=101), ValueError, "num_classes"),
        (dict(num_classes=1, homophily=0.5), ValueError, "num_classes"),
        (dict(feat_dim=0), ValueError, "feat_dim"),
        (dict(homophily=1.5), ValueError, "homophily"),
        (dict(homophily=-0.1), ValueError, "homophily"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(seed=1.5), TypeError, "seed"),
        (dict(degree="zipf"), ValueError, "degree"),
        (dict(degree="powerlaw", power=2.0), ValueError, "power"),
        (dict(feature_snr=-1.0), ValueError, "feature_snr"),
        (dict(train_frac=1.2), ValueError, "train_frac"),
        (dict(train_frac=0.7, val_frac=0.5), ValueError, "train_frac \\+ val_frac"),
        (dict(name=3), TypeError, "name"),
    ],
)
def test_csbm_rejects_bad_arguments(kwargs, error, match):
    args = dict(num_nodes=100, avg_degree=4, num_classes=3, feat_dim=4)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        datasets.csbm(**args)


# ----------------------------------------------------------------------------- R-MAT


def test_rmat_shape_and_skew():
    g = datasets.rmat(13, edge_factor=8, feat_dim=8, num_classes=5)
    assert g.num_nodes == 2**13 and g.name == "rmat"
    assert g.x.shape == (2**13, 8) and g.y.max() < 5
    assert 0 < g.num_edges <= 2 * 8 * 2**13
    assert_simple_undirected(g)
    # Against a uniform-degree graph of the same size and mean degree.
    flat = datasets.csbm(2**13, avg_degree=g.num_edges / g.num_nodes, num_classes=5, feat_dim=2)
    deg = g.in_degrees().float()
    assert top_share(g) > 0.10 and top_share(g) > 3 * top_share(flat)
    assert float(deg.max()) > 20 * float(deg.mean())
    assert int(g.in_degrees().max()) > 5 * int(flat.in_degrees().max())
    assert int((g.in_degrees() == 0).sum()) > 0  # isolated nodes, as in Graph500


def test_rmat_is_seeded():
    assert_graphs_equal(
        datasets.rmat(10, feat_dim=4, seed=3), datasets.rmat(10, feat_dim=4, seed=3)
    )
    assert not torch.equal(
        datasets.rmat(10, feat_dim=4, seed=3).indptr, datasets.rmat(10, feat_dim=4, seed=4).indptr
    )


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(scale=0), ValueError, "scale"),
        (dict(scale=31), ValueError, "scale"),
        (dict(scale=8.0), TypeError, "scale"),
        (dict(edge_factor=0), ValueError, "edge_factor"),
        (dict(num_classes=0), ValueError, "num_classes"),
        (dict(feat_dim=-1), ValueError, "feat_dim"),
        (dict(a=1.2), ValueError, "a must"),
        (dict(a=0.5, b=0.3, c=0.3), ValueError, "a \\+ b \\+ c"),
        (dict(seed="0"), TypeError, "seed"),
        (dict(val_frac=-0.1), ValueError, "val_frac"),
    ],
)
def test_rmat_rejects_bad_arguments(kwargs, error, match):
    args = dict(scale=6)
    args.update(kwargs)
    with pytest.raises(error, match=match):
        datasets.rmat(**args)


# ----------------------------------------------------------------------------- .npz files


@pytest.mark.parametrize("compress", [False, True])
def test_npz_round_trip(tmp_path, compress):
    g = datasets.csbm(300, avg_degree=5, num_classes=3, feat_dim=6, name="mine")
    path = tmp_path / "mine"  # no ".npz": kept as given
    datasets.save_npz(g, path, compress=compress)
    assert path.is_file() and not (tmp_path / "mine.npz").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temp file left behind
    assert_graphs_equal(datasets.load_npz(path), g)


def test_npz_round_trip_with_absent_fields(tmp_path):
    bare = zg.Graph.from_edges([0, 1, 2], [1, 2, 0], num_nodes=4)  # no x, y or splits
    datasets.save_npz(bare, tmp_path / "bare.npz")
    back = datasets.load_npz(str(tmp_path / "bare.npz"))
    assert_graphs_equal(back, bare)
    partial = zg.Graph.from_edges(
        [0, 1], [1, 0], num_nodes=3, y=[0, 1, -1], train_idx=[0], num_classes=4
    )
    datasets.save_npz(partial, tmp_path / "partial.npz")
    assert_graphs_equal(datasets.load_npz(tmp_path / "partial.npz"), partial)


def test_npz_errors(tmp_path):
    g = datasets.csbm(200, avg_degree=4, num_classes=2, feat_dim=3)
    good = tmp_path / "good.npz"
    datasets.save_npz(g, good)

    with pytest.raises(FileNotFoundError, match="missing.npz"):
        datasets.load_npz(tmp_path / "missing.npz")

    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(b"\x00garbage" * 100)
    with pytest.raises(ValueError, match="truncated or corrupt"):
        datasets.load_npz(corrupt)

    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    with pytest.raises(ValueError, match="truncated or corrupt"):
        datasets.load_npz(truncated)

    # A corrupt member inside an intact zip directory: flip bytes in the middle.
    data = bytearray(good.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = bytes(64)
    flipped = tmp_path / "flipped.npz"
    flipped.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="truncated or corrupt.*CRC"):
        datasets.load_npz(flipped)

    other = tmp_path / "other.npz"
    np.savez(other, format=np.array("something.else"), version=np.array(1))
    with pytest.raises(ValueError, match="not a 'zg.graph' file"):
        datasets.load_npz(other)
    np.savez(other, indptr=g.indptr.numpy())
    with pytest.raises(ValueError, match="no format marker"):
        datasets.load_npz(other)

    newer = tmp_path / "newer.npz"
    np.savez(newer, format=np.array("zg.graph"), version=np.array(2))
    with pytest.raises(ValueError, match="version 2"):
        datasets.load_npz(newer)

    missing_key = tmp_path / "missing_key.npz"
    np.savez(
        missing_key,
        format=np.array("zg.graph"),
        version=np.array(1),
        indptr=g.indptr.numpy(),
        name=np.array("x"),
    )
    with pytest.raises(ValueError, match="'indices'"):
        datasets.load_npz(missing_key)

    invalid = tmp_path / "invalid.npz"
    with np.load(good) as f:
        arrays = dict(f)
    arrays["indices"] = arrays["indices"] + 10_000  # ids out of range
    np.savez(invalid, **arrays)
    with pytest.raises(ValueError, match="does not hold a valid graph.*indices"):
        datasets.load_npz(invalid)

    npy = tmp_path / "array.npy"
    np.save(npy, np.arange(3))
    with pytest.raises(ValueError, match="single .npy array"):
        datasets.load_npz(npy)
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(ValueError, match="truncated or corrupt"):
        datasets.load_npz(tmp_path / "empty.npz")
    npy = tmp_path / "array-named.npz"  # .npy bytes, .npz name
    with open(npy, "wb") as f:
        np.save(f, np.arange(3))
    with pytest.raises(ValueError, match="single .npy array"):
        datasets.load_npz(npy)

    with pytest.raises(TypeError, match="g must be a zg.Graph"):
        datasets.save_npz("not a graph", tmp_path / "x.npz")


def test_load_npz_keeps_labels_without_known_classes(tmp_path):
    unlabelled = zg.Graph.from_edges([0, 1], [1, 0], num_nodes=2, y=[-1, -1])  # num_classes 0
    datasets.save_npz(unlabelled, tmp_path / "u.npz")
    assert_graphs_equal(datasets.load_npz(tmp_path / "u.npz"), unlabelled)


# ----------------------------------------------------------------------------- Cora options


def test_cora_root_and_direction(tmp_path):
    directed = datasets.load("cora", symmetrize=False)
    assert directed.num_edges == 5429  # the citations as given
    assert 2 * directed.num_edges > datasets.load("cora").num_edges  # some pairs cite both ways
    (tmp_path / "cora.npz").write_bytes((datasets.data_dir() / "cora.npz").read_bytes())
    assert_graphs_equal(datasets.load("CORA", root=tmp_path), datasets.load("cora"))
    with pytest.raises(FileNotFoundError, match="cora.npz"):
        datasets.load("cora", root=tmp_path / "elsewhere")
    with pytest.raises(TypeError, match="root"):
        datasets.load("cora", root=3)
    with pytest.raises(TypeError, match="symmetrize"):
        datasets.load("cora", symmetrize="yes")
    with pytest.raises(TypeError, match="download"):
        datasets.load("cora", download=1)


# ----------------------------------------------------------------------------- graph folders (mmap)


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


@pytest.mark.parametrize("mmap", [True, "all", False])
def test_folder_round_trip(tmp_path, mmap):
    g = datasets.csbm(300, avg_degree=5, num_classes=3, feat_dim=6, name="mine")
    path = tmp_path / "mine"
    datasets.save_folder(g, path)
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]  # no temp folder left behind
    assert sorted(p.name for p in path.iterdir()) == sorted(
        [
            "meta.json",
            "indptr.npy",
            "indices.npy",
            "x.npy",
            "y.npy",
            "train_idx.npy",
            "val_idx.npy",
            "test_idx.npy",
        ]
    )
    assert_graphs_equal(datasets.load_folder(path, mmap=mmap), g)
    assert np.array_equal(np.load(path / "indices.npy"), g.indices.numpy())  # plain .npy files
    bare = zg.Graph.from_edges([0, 1, 2], [1, 2, 0], num_nodes=4)
    datasets.save_folder(bare, str(path))  # replaces a graph folder
    assert_graphs_equal(datasets.load_folder(str(path), mmap=mmap), bare)
    assert sorted(p.name for p in path.iterdir()) == ["indices.npy", "indptr.npy", "meta.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]
    partial = zg.Graph.from_edges(
        [0, 1], [1, 0], num_nodes=3, y=[0, 1, -1], train_idx=[0], num_classes=4
    )
    datasets.save_folder(partial, path)
    assert_graphs_equal(datasets.load_folder(path, mmap=mmap), partial)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc/self/maps")
def test_folder_mmap_keeps_tensors_as_file_views(tmp_path):
    g = datasets.load("cora")
    datasets.save_folder(g, tmp_path / "cora")
    fields = ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx")

    def file_of(field):
        return str(tmp_path / "cora" / f"{field}.npy")

    default = datasets.load_folder(tmp_path / "cora")  # mmap=True: only x is a file view
    assert mapped_file(default.x) == file_of("x")
    for field in fields:
        if field != "x":  # copied, then validated
            assert mapped_file(getattr(default, field)) != file_of(field), field
    mapped = datasets.load_folder(tmp_path / "cora", mmap="all")  # every array a file view
    for field in fields:
        assert mapped_file(getattr(mapped, field)) == file_of(field), field
    assert_graphs_equal(mapped, g)
    assert_graphs_equal(default, g)
    eager = datasets.load_folder(tmp_path / "cora", mmap=False)
    for field in fields:
        assert mapped_file(getattr(eager, field)) != file_of(field), field
    # Sampling and training read the maps in place: no copy, and the files stay unchanged.
    before = (tmp_path / "cora" / "indices.npy").read_bytes()
    model = zg.models.build("sage", mapped.feat_dim, 16, mapped.num_classes, num_layers=2)
    eng = zg.Engine(mapped, model, fanouts=[5, 5], batch_size=70, seed=0)
    stats = eng.train_epoch()
    assert stats.iterations == 2 and stats.overflows == 0
    assert 0.0 <= eng.evaluate("val") <= 1.0
    assert mapped_file(mapped.indices) == str(tmp_path / "cora" / "indices.npy")
    assert mapped_file(eng.g.indices) == str(tmp_path / "cora" / "indices.npy")
    assert (tmp_path / "cora" / "indices.npy").read_bytes() == before


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc/self/maps")
def test_mmap_all_maps_every_array_and_products_like_passes_it_through(tmp_path):
    """mmap="all": a structure larger than RAM stays on disk; products_like's cache takes it too."""
    kwargs = dict(
        num_nodes=2_000, avg_degree=6, feat_dim=4, num_classes=3, seed=1, cache_dir=tmp_path
    )
    folder = datasets.products_like_path(**kwargs)
    first = datasets.products_like(**kwargs, mmap="all")  # generates, saves, maps back
    hit = datasets.products_like(**kwargs, mmap="all")  # a cache hit
    default = datasets.products_like(**kwargs)
    for g in (first, hit):
        for field in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
            assert mapped_file(getattr(g, field)) == str(folder / f"{field}.npy"), field
        assert_graphs_equal(g, default)
    assert mapped_file(default.indices) != str(folder / "indices.npy")
    assert mapped_file(default.x) == str(folder / "x.npy")
    for bad, error in [("everything", ValueError), (0, TypeError)]:
        with pytest.raises(error, match=r"mmap must be True .*'all' .*False"):
            datasets.products_like(**{**kwargs, "seed": 2}, mmap=bad)
    assert sorted(p.name for p in tmp_path.iterdir()) == [folder.name]  # nothing written


def test_folder_errors(tmp_path):
    g = datasets.csbm(200, avg_degree=4, num_classes=2, feat_dim=3)
    good = tmp_path / "good"
    datasets.save_folder(g, good)

    def broken(name):
        """A fresh copy of the good folder to damage."""
        folder = tmp_path / name
        folder.mkdir()
        for p in good.iterdir():
            (folder / p.name).write_bytes(p.read_bytes())
        return folder

    with pytest.raises(FileNotFoundError, match="missing"):
        datasets.load_folder(tmp_path / "missing")
    with pytest.raises(ValueError, match="is a file.*load_npz"):
        datasets.load_folder(good / "meta.json")
    with pytest.raises(ValueError, match="no meta.json"):
        datasets.load_folder(tmp_path.joinpath("empty").mkdir() or tmp_path / "empty")

    folder = broken("truncated")
    data = (folder / "indices.npy").read_bytes()
    (folder / "indices.npy").write_bytes(data[: len(data) // 2])
    for mmap in (True, False):
        with pytest.raises(
            ValueError, match=r"truncated.*indices\.npy.*truncated|indices\.npy is truncated"
        ):
            datasets.load_folder(folder, mmap=mmap)

    folder = broken("header")
    (folder / "x.npy").write_bytes(b"\x93NUMPY\x01\x00\xff\xff garbage")
    with pytest.raises(ValueError, match=r"x\.npy is not a readable \.npy file"):
        datasets.load_folder(folder)

    folder = broken("longer")
    (folder / "y.npy").write_bytes((folder / "y.npy").read_bytes() + b"extra")
    with pytest.raises(ValueError, match=r"y\.npy is longer than its header says"):
        datasets.load_folder(folder)

    folder = broken("swapped")
    (folder / "train_idx.npy").write_bytes((good / "val_idx.npy").read_bytes())
    with pytest.raises(ValueError, match=r"train_idx\.npy holds int64 \[\d+\], but meta.json says"):
        datasets.load_folder(folder)

    folder = broken("lost")
    (folder / "x.npy").unlink()
    with pytest.raises(ValueError, match=r"x\.npy is missing"):
        datasets.load_folder(folder)

    folder = broken("meta")
    (folder / "meta.json").write_text('{"format": "zg.graph.folder", "vers')
    with pytest.raises(ValueError, match=r"meta\.json could not be read as JSON"):
        datasets.load_folder(folder)
    meta = json.loads((good / "meta.json").read_text())
    for change, match in [
        ({"format": "other"}, "not a 'zg.graph.folder' file"),
        ({"version": 2}, "version 2"),
        ({"arrays": {"indptr": meta["arrays"]["indptr"]}}, "indptr and indices"),
        ({"arrays": {**meta["arrays"], "z": {}}}, "unknown array 'z'"),
        (
            {"arrays": {**meta["arrays"], "x": {"dtype": "float64", "shape": [1]}}},
            "array 'x' must be described",
        ),
        ({"num_classes": "2"}, "num_classes"),
    ]:
        (folder / "meta.json").write_text(json.dumps({**meta, **change}))
        with pytest.raises(ValueError, match=match):
            datasets.load_folder(folder)

    folder = broken("invalid")
    indices = np.load(folder / "indices.npy") + 10_000  # ids out of range
    np.save(folder / "indices.npy", indices)
    with pytest.raises(ValueError, match="does not hold a valid graph.*indices"):
        datasets.load_folder(folder)

    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not a zg graph folder"):
        datasets.save_folder(g, tmp_path / "precious")
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"
    with pytest.raises(FileNotFoundError, match="parent folder"):
        datasets.save_folder(g, tmp_path / "no" / "such" / "folder")
    with pytest.raises(TypeError, match="g must be a zg.Graph"):
        datasets.save_folder("not a graph", tmp_path / "x")
    with pytest.raises(TypeError, match="path"):
        datasets.load_folder(3)
    for bad, error in [("yes", ValueError), ("All", ValueError), (1, TypeError), (None, TypeError)]:
        with pytest.raises(error, match=r"mmap must be True .*'all' .*False"):
            datasets.load_folder(good, mmap=bad)
