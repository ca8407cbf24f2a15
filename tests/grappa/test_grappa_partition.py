"""zg.grappa.partition: ownership, chunk balance, the sweeping schedule, local graphs and halos."""

import collections
import itertools

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg import grappa
from zg.grappa.partition import _greedy_cover, _round_robin


def random_graph(n, e, seed, *, train_frac=0.5):
    gen = torch.Generator().manual_seed(seed)
    src = torch.randint(n, (e,), generator=gen)
    dst = torch.randint(n, (e,), generator=gen)  # self-loops and duplicates included
    train = torch.randperm(n, generator=gen)[: max(1, int(n * train_frac))]
    return zg.Graph.from_edges(
        src,
        dst,
        num_nodes=n,
        x=torch.randn(n, 3, generator=gen),
        y=torch.randint(2, (n,), generator=gen),
        train_idx=train,
    )


def edge_counter(src, dst):
    return collections.Counter(zip(src.tolist(), dst.tolist()))


# ----------------------------------------------------------------------------- ownership


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(8, 40),
    e=st.integers(0, 120),
    parts=st.integers(1, 4),
    k=st.integers(1, 3),
    seed=st.integers(0, 10_000),
    halo=st.booleans(),
)
def test_every_node_owned_exactly_once_every_super_epoch(n, e, parts, k, seed, halo):
    g = random_graph(n, e, seed)
    k = min(k, n // parts)  # C <= N
    part = grappa.partition(g, parts, "random", seed, num_chunks=parts * k, halo=halo)
    sizes = part.chunk_sizes
    assert int(sizes.max() - sizes.min()) <= 1  # balanced chunks
    for s in range(part.num_super_epochs + 1):  # + 1: wraps around
        owner = part.owner(s)
        assert owner.shape == (n,) and int(owner.min()) >= 0 and int(owner.max()) < parts
        owned = torch.cat([part.owned_nodes(p, s) for p in range(parts)])
        assert sorted(owned.tolist()) == list(range(n))  # once, and only once
        for p in range(parts):
            assert torch.equal(part.owned_nodes(p, s), torch.nonzero(owner == p).flatten())
            assert len(part.chunks(p, s)) == k


def test_metis_chunks_are_balanced_and_cut_fewer_edges(require):
    require("pymetis")
    g = zg.datasets.load("cora")
    metis = grappa.partition(g, 4, "metis", seed=0)
    rand = grappa.partition(g, 4, "random", seed=0)
    sizes = metis.chunk_sizes.double()
    assert sizes.sum() == g.num_nodes and float(sizes.max() / sizes.mean()) <= 1.05
    for s in range(metis.num_super_epochs):
        owned = torch.cat([metis.owned_nodes(p, s) for p in range(4)])
        assert sorted(owned.tolist()) == list(range(g.num_nodes))
    assert metis.stats(g)["cut_edges"] < rand.stats(g)["cut_edges"] / 3
    # Deterministic: the same seed gives the same chunks.
    assert torch.equal(metis.chunk_of, grappa.partition(g, 4, "metis", seed=0).chunk_of)


def test_random_partition_is_seeded():
    g = random_graph(50, 100, 1)
    a, b = grappa.partition(g, 3, seed=5), grappa.partition(g, 3, seed=5)
    assert torch.equal(a.chunk_of, b.chunk_of)
    assert not torch.equal(a.chunk_of, grappa.partition(g, 3, seed=6).chunk_of)


# ----------------------------------------------------------------------------- the schedule


@pytest.mark.parametrize("parts", [1, 2, 3, 4, 5])
def test_round_robin_meets_every_pair_exactly_once(parts):
    rounds = _round_robin(2 * parts, parts, seed=0)
    assert len(rounds) == max(1, 2 * parts - 1)
    met = collections.Counter()
    for groups in rounds:
        assert sorted(c for grp in groups for c in grp) == list(range(2 * parts))  # a partition
        for grp in groups:
            met[tuple(sorted(grp))] += 1
    assert set(met) == set(itertools.combinations(range(2 * parts), 2))
    assert set(met.values()) == {1}
    assert all(groups[0][0] == 0 for groups in rounds)  # the anchor chunk


@pytest.mark.parametrize("parts,k", [(2, 3), (3, 3), (2, 4), (4, 3)])
def test_greedy_schedule_covers_every_pair(parts, k):
    rounds = _greedy_cover(parts * k, parts, seed=0)
    met = set()
    for groups in rounds:
        assert sorted(c for grp in groups for c in grp) == list(range(parts * k))
        assert all(len(grp) == k for grp in groups)
        for grp in groups:
            met.update(itertools.combinations(sorted(grp), 2))
    assert met == set(itertools.combinations(range(parts * k), 2))


def test_partition_pair_coverage_and_the_fixed_base_contrast():
    g = random_graph(64, 200, 0)
    rr = grappa.partition(g, 4)
    assert rr.num_chunks == 8 and rr.num_super_epochs == 7
    assert bool(rr.pair_coverage().all())
    assert not bool(rr.pair_coverage(super_epochs=3).all())  # not after 3 rounds
    fixed = grappa.partition(g, 4, schedule="fixed_base")
    met = fixed.pair_coverage()
    assert all(fixed.chunks(p, s)[0] == p for p in range(4) for s in range(6))  # base never moves
    assert not bool(met[:4, :4].fill_diagonal_(False).any())  # base chunks never meet
    assert bool(met[:4, 4:].all())  # every (base, variable)
    static = grappa.partition(g, 4, num_chunks=4)
    assert static.num_super_epochs == 1 and torch.equal(static.owner(0), static.owner(5))


# ----------------------------------------------------------------------------- local graphs


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(4, 30),
    e=st.integers(0, 90),
    parts=st.integers(1, 3),
    seed=st.integers(0, 10_000),
    halo=st.booleans(),
    s=st.integers(0, 6),
)
def test_local_graph_holds_exactly_the_local_edges_and_the_halo(n, e, parts, seed, halo, s):
    g = random_graph(n, e, seed)
    part = grappa.partition(g, parts, seed=seed, halo=halo)
    src, dst = g.edges()
    for p in range(parts):
        local = part.local_graph(g, p, s)
        owned = set(part.owned_nodes(p, s).tolist())
        gid = local.global_ids
        assert gid[: local.num_owned].tolist() == sorted(owned)
        in_nbrs = {u for u, v in zip(src.tolist(), dst.tolist()) if v in owned}
        expected_halo = sorted(in_nbrs - owned) if halo else []
        assert gid[local.num_owned :].tolist() == expected_halo
        kept = set(gid.tolist())
        expected = collections.Counter(
            (u, v) for u, v in zip(src.tolist(), dst.tolist()) if v in owned and u in kept
        )
        ls, ld = local.graph.edges()
        assert edge_counter(gid[ls], gid[ld]) == expected
        assert int(local.graph.in_degrees()[local.num_owned :].sum()) == 0  # halo: no in-edges
        assert torch.equal(local.graph.x, g.x[gid]) and torch.equal(local.graph.y, g.y[gid])
        assert torch.equal(local.global_in_degree, g.in_degrees()[gid])
        train = set(g.train_idx.tolist()) & owned
        assert sorted(gid[local.graph.train_idx].tolist()) == sorted(train)
        if not halo:  # = the induced subgraph
            sub, _ = g.subgraph(part.owned_nodes(p, s))
            assert edge_counter(*sub.edges()) == edge_counter(ls, ld)


def test_stats_agree_with_the_local_graphs():
    g = random_graph(60, 240, 3)
    for halo in (False, True):
        part = grappa.partition(g, 3, halo=halo)
        stats = part.stats(g, 1)
        assert sum(p["nodes"] for p in stats["parts"]) == g.num_nodes
        src, dst = g.edges()
        owner = part.owner(1)
        assert stats["cut_edges"] == int((owner[src] != owner[dst]).sum())
        assert stats["edge_cut_fraction"] == pytest.approx(stats["cut_edges"] / g.num_edges)
        stored = 0
        for p, row in enumerate(stats["parts"]):
            local = part.local_graph(g, p, 1)
            assert row["edges"] == local.graph.num_edges
            assert row["nodes"] == local.num_owned
            assert row["train_nodes"] == local.graph.train_idx.numel()
            if halo:
                assert row["halo"] == local.num_halo
            assert row["replication"] == pytest.approx(local.graph.num_nodes / local.num_owned)
            stored += local.graph.num_nodes
        assert stats["replication_factor"] == pytest.approx(stored / g.num_nodes)


# ----------------------------------------------------------------------------- bad input


def test_bad_arguments_name_the_argument():
    g = random_graph(6, 10, 0)
    with pytest.raises(ValueError, match="num_parts"):
        grappa.partition(g, 7)  # P > nodes
    with pytest.raises(ValueError, match="num_parts"):
        grappa.partition(g, 0)
    with pytest.raises(TypeError, match="num_parts"):
        grappa.partition(g, 2.0)
    with pytest.raises(ValueError, match="method"):
        grappa.partition(g, 2, method="spectral")
    with pytest.raises(ValueError, match="num_chunks"):
        grappa.partition(g, 2, num_chunks=3)
    with pytest.raises(ValueError, match="num_chunks"):
        grappa.partition(g, 2, num_chunks=8)  # more chunks than nodes
    with pytest.raises(ValueError, match="schedule"):
        grappa.partition(g, 2, schedule="spiral")
    with pytest.raises(TypeError, match="halo"):
        grappa.partition(g, 2, halo=1)
    with pytest.raises(TypeError, match="g must be a zg.Graph"):
        grappa.partition("cora", 2)
    part = grappa.partition(g, 2)
    with pytest.raises(ValueError, match="worker"):
        part.local_graph(g, 2)
    with pytest.raises(ValueError, match="super_epoch"):
        part.owner(-1)
    with pytest.raises(ValueError, match="nodes"):
        part.local_graph(random_graph(7, 10, 0), 0)  # another graph
