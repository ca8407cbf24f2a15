"""Tests for zg.datasets.products_like: the ogbn-products-shaped synthetic graph and its cache."""

import json
import re

import numpy as np
import pytest
import torch
from test_datasets import assert_graphs_equal, assert_simple_undirected, top_share

from zg import datasets


@pytest.fixture(scope="module")
def g30k():
    return datasets.products_like(
        30_000, avg_degree=30, feat_dim=16, num_classes=10, seed=3, cache=False
    )


def test_shape_dtypes_and_split(g30k):
    g = g30k
    assert g.num_nodes == 30_000 and g.name == "products_like"
    assert g.x.dtype == torch.float32 and g.x.shape == (30_000, 16)
    assert g.y.dtype == torch.int64 and g.num_classes == 10
    assert torch.equal(torch.bincount(g.y, minlength=10), torch.full((10,), 3_000))  # balanced
    assert g.indptr.dtype == torch.int64 and g.indices.dtype == torch.int64
    assert_simple_undirected(g)
    # ogbn-products' split: 8% train, 1.6% val, the rest test; disjoint and covering.
    assert g.train_idx.numel() == int(0.08 * 30_000) and g.val_idx.numel() == int(0.016 * 30_000)
    every = torch.cat([g.train_idx, g.val_idx, g.test_idx])
    assert torch.equal(torch.sort(every).values, torch.arange(30_000))


@pytest.mark.parametrize("avg_degree", [8, 30, 50])
def test_mean_degree_is_the_requested_one(avg_degree):
    g = datasets.products_like(
        20_000, avg_degree=avg_degree, feat_dim=4, num_classes=5, seed=1, cache=False
    )
    assert abs(g.num_edges / g.num_nodes - avg_degree) <= 0.005 * avg_degree


def test_degrees_are_power_law_like(g30k):
    deg = g30k.in_degrees().double()
    # Heavy tail: the top 1% of nodes hold far more than 1% of the edge ends (a Poisson graph of
    # this mean degree gives them about 1.6%), and the largest degree is many times the mean.
    assert top_share(g30k, 0.01) > 0.08
    assert float(deg.max()) > 20 * float(deg.mean())
    # Hill estimator of the tail index over the top 2%: the complementary CDF of a density
    # exponent ``power`` = 2.5 falls with slope power - 1 = 1.5 (finite size and the cap bend it).
    top = torch.sort(deg, descending=True).values[: int(0.02 * deg.numel()) + 1]
    hill = 1.0 / float(torch.log(top[:-1] / top[-1]).mean())
    assert 1.1 < hill < 2.0, hill
    # A steeper exponent gives a lighter tail.
    light = datasets.products_like(
        30_000, avg_degree=30, feat_dim=4, num_classes=10, seed=3, power=4.0, cache=False
    )
    assert top_share(light, 0.01) < top_share(g30k, 0.01)


def test_max_degree_caps_the_hubs():
    g = datasets.products_like(
        30_000, avg_degree=20, feat_dim=4, num_classes=5, seed=0, max_degree=200, cache=False
    )
    deg = g.in_degrees()
    # Capped in expectation: a realised degree exceeds the cap only by Poisson noise.
    assert int(deg.max()) <= 200 + 5 * 200**0.5
    assert abs(g.num_edges / g.num_nodes - 20) <= 0.1


@pytest.mark.parametrize("homophily", [0.2, 0.5, 0.8, 1.0])
def test_edge_homophily_is_near_the_requested_one(homophily):
    g = datasets.products_like(
        40_000, avg_degree=20, feat_dim=4, num_classes=10, seed=2, homophily=homophily, cache=False
    )
    # Chance level here is 1/10; dropping duplicate pairs (most common inside a class, among
    # hubs) pulls the measure a little below the request.
    assert homophily - 0.05 <= g.edge_homophily() <= homophily + 0.01


def test_features_are_class_correlated(g30k):
    g = g30k
    means = torch.stack([g.x[g.y == c].mean(0) for c in range(g.num_classes)])  # [C, F]
    nearest = torch.cdist(g.x, means).argmin(1)
    accuracy = float((nearest == g.y).double().mean())
    # Chance is 0.1 (standard error ~0.002 over 30,000 nodes); feature_snr=1 puts two class
    # means one noise standard deviation apart, so features alone are weak but informative.
    assert 0.18 < accuracy < 0.5
    assert abs(float(g.x.std()) - 1.0) < 0.05  # unit noise around means of small norm


def test_same_seed_same_graph_other_seed_other_graph():
    a = datasets.products_like(5_000, avg_degree=12, feat_dim=8, num_classes=4, seed=7, cache=False)
    b = datasets.products_like(5_000, avg_degree=12, feat_dim=8, num_classes=4, seed=7, cache=False)
    c = datasets.products_like(5_000, avg_degree=12, feat_dim=8, num_classes=4, seed=8, cache=False)
    assert_graphs_equal(a, b)
    assert not torch.equal(a.indices[:1000], c.indices[:1000]) or a.num_edges != c.num_edges
    assert not torch.equal(a.x, c.x)


def test_cache_writes_once_and_a_hit_returns_the_same_tensors(tmp_path):
    kwargs = dict(num_nodes=6_000, avg_degree=10, feat_dim=8, num_classes=6, seed=4)
    folder = datasets.products_like_path(**kwargs, cache_dir=tmp_path)
    assert not folder.exists()
    first = datasets.products_like(**kwargs, cache_dir=tmp_path)
    assert (folder / "meta.json").is_file()
    note = json.loads((folder / "products_like.json").read_text())
    assert note["generation_seconds"] > 0 and note["num_edges"] == first.num_edges
    assert note["arguments"]["seed"] == 4
    stamp = (folder / "indices.npy").stat().st_mtime_ns
    hit = datasets.products_like(**kwargs, cache_dir=tmp_path)
    assert (folder / "indices.npy").stat().st_mtime_ns == stamp  # read, not rewritten
    in_memory = datasets.products_like(**kwargs, cache_dir=tmp_path, mmap=False)
    fresh = datasets.products_like(**kwargs, cache=False)
    for other in (hit, in_memory, fresh):
        assert_graphs_equal(first, other)
    # Any other argument is another folder.
    assert datasets.products_like_path(**{**kwargs, "seed": 5}, cache_dir=tmp_path) != folder
    assert datasets.products_like_path(**kwargs, homophily=0.7, cache_dir=tmp_path) != folder
    assert len(list(tmp_path.iterdir())) == 1


def test_default_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ZG_CACHE_DIR", str(tmp_path))
    assert datasets.default_cache_dir() == tmp_path
    assert datasets.products_like_path(1_000, 5, 4, 2).parent == tmp_path


def test_tiny_and_single_class_graphs():
    g = datasets.products_like(10, avg_degree=2, feat_dim=3, num_classes=2, seed=0, cache=False)
    assert_simple_undirected(g)
    assert g.num_edges == 20
    one = datasets.products_like(
        500, avg_degree=6, feat_dim=3, num_classes=1, homophily=1.0, seed=0, cache=False
    )
    assert_simple_undirected(one)
    assert one.edge_homophily() == 1.0


@pytest.mark.parametrize(
    "kwargs, exc, names",
    [
        (dict(num_nodes=1), ValueError, "num_nodes"),
        (dict(num_nodes=2.5), TypeError, "num_nodes"),
        (dict(avg_degree=0), ValueError, "avg_degree"),
        (dict(avg_degree=float("nan")), ValueError, "avg_degree"),
        (dict(avg_degree=1000), ValueError, "avg_degree"),
        (dict(feat_dim=0), ValueError, "feat_dim"),
        (dict(num_classes=0), ValueError, "num_classes"),
        (dict(num_classes=1), ValueError, "homophily"),
        (dict(seed=-1), ValueError, "seed"),
        (dict(homophily=1.5), ValueError, "homophily"),
        (dict(power=2.0), ValueError, "power"),
        (dict(max_degree=5), ValueError, "max_degree"),
        (dict(max_degree=1000), ValueError, "max_degree"),
        (dict(feature_snr=-1), ValueError, "feature_snr"),
        (dict(train_frac=0.9, val_frac=0.2), ValueError, "train_frac + val_frac"),
        (dict(cache="yes"), TypeError, "cache"),
        (dict(cache_dir=5), TypeError, "cache_dir"),
        (dict(mmap=1), TypeError, "mmap"),
        (dict(name=3), TypeError, "name"),
    ],
)
def test_bad_arguments_name_themselves(kwargs, exc, names, tmp_path):
    base = dict(num_nodes=100, avg_degree=10, feat_dim=4, num_classes=4, cache_dir=tmp_path)
    with pytest.raises(exc, match=re.escape(names)):
        datasets.products_like(**{**base, **kwargs})
    assert not any(tmp_path.iterdir())  # nothing written


def test_guided_search_equals_searchsorted():
    rng = np.random.default_rng(0)
    for n in (1, 2, 7, 1000, 50_000):
        weight = (1.0 - rng.random(n)) ** (-1 / 1.5)
        weight[rng.random(n) < 0.1] *= 1000.0  # hubs
        weight[rng.random(n) < 0.05] = 0.0  # ties in the CDF
        weight[-1] += 1.0
        cum = np.cumsum(weight)
        guide = datasets._guide_table(cum)
        query = np.concatenate(
            [
                rng.random(20_000) * cum[-1],
                cum,
                np.nextafter(cum, 0),
                [0.0, cum[-1], np.nextafter(cum[-1], np.inf)],
            ]
        )
        assert np.array_equal(
            datasets._guided_search(cum, guide, query), np.searchsorted(cum, query, side="right")
        ), n
