"""zg.grappa.coverage against brute-force enumeration of backward random walks."""

from fractions import Fraction

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_grappa_partition import random_graph

from zg import grappa


def brute_force(g, part, worker, super_epoch, node, hops):
    """Probability that a ``hops``-step backward walk from ``node`` stays in the worker's local
    graph, by enumerating every walk; exact rational arithmetic, from the definitions only
    (the chunks a worker stores, the halo rule), never from the local graph the code builds."""
    src, dst = g.edges()
    in_edges = {v: [] for v in range(g.num_nodes)}
    for u, v in zip(src.tolist(), dst.tolist()):
        in_edges[v].append(u)
    stored = set(part.chunks(worker, super_epoch))  # partner_sweep: own chunk and partner
    owned = {v for v in range(g.num_nodes) if int(part.chunk_of[v]) in stored}
    local_nodes = set(owned)
    if part.halo:
        local_nodes |= {u for v in owned for u in in_edges[v]}

    def edge_is_local(u, v):  # in-edges of owned nodes from local sources, nothing else
        return v in owned and u in local_nodes

    def walk(v, steps):
        if steps == 0 or not in_edges[v]:
            return Fraction(1)  # done, or nowhere to go: the walk stayed
        total = Fraction(0)
        for u in in_edges[v]:  # one entry per edge: duplicates count twice
            if edge_is_local(u, v):
                total += walk(u, steps - 1)
        return total / len(in_edges[v])

    return walk(node, hops)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(3, 14),
    e=st.integers(0, 40),
    parts=st.integers(1, 3),
    hops=st.integers(0, 3),
    seed=st.integers(0, 10_000),
    halo=st.booleans(),
    s=st.integers(0, 4),
)
def test_coverage_matches_brute_force_walks(n, e, parts, hops, seed, halo, s):
    g = random_graph(n, e, seed)
    part = grappa.partition(g, parts, seed=seed, halo=halo)
    cov = grappa.coverage(g, part, hops=hops, super_epoch=s)
    owner = part.owner(s)
    for v in range(n):
        expected = float(brute_force(g, part, int(owner[v]), s, v, hops))
        assert float(cov[v]) == pytest.approx(expected, abs=1e-6), (v, hops)
    # The per-worker view covers halo nodes too, and agrees with the walks from them.
    for p in range(parts):
        local = part.local_graph(g, p, s)
        lc = grappa.local_coverage(local, hops)
        for i, v in enumerate(local.global_ids.tolist()):
            assert float(lc[i]) == pytest.approx(
                float(brute_force(g, part, p, s, v, hops)), abs=1e-6
            )


def test_one_hop_coverage_is_the_local_share_of_in_edges():
    g = random_graph(40, 160, 7)
    part = grappa.partition(g, 4, seed=2)
    owner = part.owner(0)
    src, dst = g.edges()
    local_in = torch.bincount(dst[owner[src] == owner[dst]], minlength=g.num_nodes).float()
    deg = g.in_degrees().float()
    expected = torch.where(deg > 0, local_in / deg.clamp(min=1), 1.0)
    assert torch.allclose(grappa.coverage(g, part, hops=1), expected)


def test_coverage_bounds_and_special_cases():
    g = random_graph(30, 60, 4)
    part = grappa.partition(g, 3, seed=1)
    for hops in range(5):
        c = grappa.coverage(g, part, hops=hops)
        assert c.dtype == torch.float32 and float(c.min()) >= 0 and float(c.max()) <= 1 + 1e-6
    assert torch.equal(grappa.coverage(g, part, hops=0), torch.ones(30))
    no_in_edges = g.in_degrees() == 0
    assert bool((grappa.coverage(g, part, hops=3)[no_in_edges] == 1).all())
    whole = grappa.partition(g, 1)  # one worker sees it all
    assert torch.allclose(grappa.coverage(g, whole, hops=3), torch.ones(30))
    # Deeper walks can only leave more often.
    c1, c2 = grappa.coverage(g, part, hops=1), grappa.coverage(g, part, hops=2)
    assert float(c2.mean()) <= float(c1.mean()) + 1e-6


def test_coverage_bad_arguments():
    g = random_graph(10, 20, 0)
    part = grappa.partition(g, 2)
    with pytest.raises(ValueError, match="hops"):
        grappa.coverage(g, part, hops=-1)
    with pytest.raises(TypeError, match="part"):
        grappa.coverage(g, "random", hops=1)
    with pytest.raises(TypeError, match="local"):
        grappa.local_coverage(g, 1)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(4, 14),
    e=st.integers(0, 40),
    parts=st.integers(2, 4),
    hops=st.integers(0, 3),
    seed=st.integers(0, 10_000),
    halo=st.booleans(),
    s=st.integers(0, 4),
)
def test_under_partner_sweep_a_node_has_its_own_chunks_coverage(n, e, parts, hops, seed, halo, s):
    """Two workers store each node under partner_sweep; its coverage is the walk's in the worker
    of its own chunk (whose seeds it is among), not whichever worker came last."""
    g = random_graph(n, e, seed)
    if parts > n:
        return
    part = grappa.partition(g, parts, seed=seed, halo=halo, schedule="partner_sweep")
    cov = grappa.coverage(g, part, hops=hops, super_epoch=s)
    for v in range(n):
        base = int(part.chunk_of[v])  # chunk p is worker p's own chunk
        assert part.chunks(base, s)[0] == base
        expected = float(brute_force(g, part, base, s, v, hops))
        assert float(cov[v]) == pytest.approx(expected, abs=1e-6), (v, hops)
