"""zg.experiments.partitions: partition quality against brute force over the edge list (cut
edges, 1- and 2-hop coverage straight from the definition), and what repartitioning exposes
across super-epochs, against the schedule (notebooks 05, 08)."""

import pytest
import torch
from graphs import tiny

import zg
from zg import experiments as ex
from zg import grappa

pytestmark = pytest.mark.timeout(300)


def brute_force(g, owner):
    """Cut edges, c1 and c2 of every node from the definitions, one edge at a time."""
    indptr, indices = g.indptr.tolist(), g.indices.tolist()
    owner = owner.tolist()
    n = g.num_nodes
    local = [
        [u for u in indices[indptr[v] : indptr[v + 1]] if owner[u] == owner[v]] for v in range(n)
    ]
    degree = [indptr[v + 1] - indptr[v] for v in range(n)]
    cut = sum(len(indices[indptr[v] : indptr[v + 1]]) - len(local[v]) for v in range(n))
    c1 = [1.0 if degree[v] == 0 else len(local[v]) / degree[v] for v in range(n)]
    c2 = [1.0 if degree[v] == 0 else sum(c1[u] for u in local[v]) / degree[v] for v in range(n)]
    return cut, c1, c2


@pytest.mark.parametrize("method,num_parts", [("random", 2), ("random", 3), ("metis", 4)])
def test_partition_quality_matches_brute_force(method, num_parts, require):
    if method == "metis":
        require("pymetis")
    g = tiny()
    q = ex.partition_quality(g, num_parts, method, hops=2, seed=1)
    part = q["partition"]
    assert isinstance(part, grappa.Partition) and part.num_parts == num_parts
    assert part.num_chunks == 2 * num_parts and q["method"] == method
    cut, c1, c2 = brute_force(g, part.owner(0))
    assert q["cut_edges"] == cut
    assert q["edge_cut_fraction"] == pytest.approx(cut / g.num_edges)
    assert torch.allclose(q["coverage"][1], torch.tensor(c1, dtype=torch.float32), atol=1e-6)
    assert torch.allclose(q["coverage"][2], torch.tensor(c2, dtype=torch.float32), atol=1e-6)
    assert q["coverage_1"] == pytest.approx(sum(c1) / len(c1), abs=1e-6)
    assert q["coverage_2"] == pytest.approx(sum(c2) / len(c2), abs=1e-6)
    counts = torch.bincount(part.owner(0), minlength=num_parts)
    assert q["balance"] == pytest.approx(float(counts.max()) / (g.num_nodes / num_parts))
    train = torch.bincount(part.owner(0)[g.train_idx], minlength=num_parts)
    assert q["train_nodes_min"] == int(train.min())


def test_partition_quality_agrees_with_grappa_coverage_and_later_super_epochs():
    g = tiny()
    q = ex.partition_quality(g, 2, "random", hops=3, seed=0, super_epoch=1)
    for h in (1, 2, 3):
        assert torch.allclose(
            q["coverage"][h], grappa.coverage(g, q["partition"], hops=h, super_epoch=1)
        )
    cut, _, _ = brute_force(g, q["partition"].owner(1))
    assert q["cut_edges"] == cut
    assert q["coverage_1"] >= q["coverage_2"] >= q["coverage_3"]


def test_partition_quality_validates():
    g = tiny()
    with pytest.raises(ValueError, match="hops"):
        ex.partition_quality(g, 2, hops=0)
    with pytest.raises(ValueError, match="method"):
        ex.partition_quality(g, 2, "spectral")
    with pytest.raises(ValueError, match="num_parts"):
        ex.partition_quality(g, 0)
    with pytest.raises(TypeError):
        ex.partition_quality("cora", 2)


def test_sweep_partitions_rows():
    g = tiny()
    rows = ex.sweep_partitions(g, [2, 3], ("random",), hops=2, seed=0)
    assert [(r["method"], r["num_parts"]) for r in rows] == [("random", 2), ("random", 3)]
    for r in rows:
        assert "coverage" not in r and "partition" not in r
        q = ex.partition_quality(g, r["num_parts"], "random", hops=2, seed=0)
        assert r == {k: v for k, v in q.items() if k not in ("coverage", "partition")}
    with pytest.raises(TypeError, match="num_parts"):
        ex.sweep_partitions(g, 2)
    with pytest.raises(TypeError, match="methods"):
        ex.sweep_partitions(g, [2], "random")


def test_random_partitions_cut_about_what_chance_predicts():
    g = zg.datasets.csbm(num_nodes=4000, avg_degree=8, num_classes=4, feat_dim=4, seed=0)
    for P in (2, 4):
        q = ex.partition_quality(g, P, "random", hops=1, seed=0)
        assert abs(q["edge_cut_fraction"] - (P - 1) / P) < 0.02
        assert abs(q["coverage_1"] - 1 / P) < 0.02


def brute_pairs(part, upto):
    C = part.num_chunks
    met = set()
    for s in range(upto):
        for p in range(part.num_parts):
            chunks = part.chunks(p, s)
            met |= {(a, b) for a in chunks for b in chunks if a < b}
    return len(met) / (C * (C - 1) // 2)


@pytest.mark.parametrize(
    "schedule,parts,chunks",
    [("round_robin", 2, 4), ("fixed_base", 2, 4), ("round_robin", 3, 9), ("fixed_base", 3, 9)],
)
def test_chunk_pairs_met_against_the_schedule(schedule, parts, chunks):
    g = tiny(200)
    part = grappa.partition(g, parts, num_chunks=chunks, schedule=schedule)
    got = ex.chunk_pairs_met(part, 6)
    assert got == pytest.approx([brute_pairs(part, s) for s in range(1, 7)])
    assert all(b >= a for a, b in zip(got, got[1:]))
    if schedule == "round_robin":
        assert got[part.num_super_epochs - 1] == 1.0
    else:
        assert got[-1] < 1.0  # base chunks never meet
    assert ex.chunk_pairs_met(grappa.partition(g, 2, num_chunks=2), 3) == [0.0] * 3
    with pytest.raises(ValueError, match="super_epochs"):
        ex.chunk_pairs_met(part, 0)


def test_edges_exposed_brute_force():
    g = tiny(150)
    part = grappa.partition(g, 2, schedule="round_robin", seed=3)
    got = ex.edges_exposed(g, part, 4)
    src, dst = g.edges()
    seen = set()
    for s in range(4):
        owner = part.owner(s).tolist()
        seen |= {
            e for e, (a, b) in enumerate(zip(src.tolist(), dst.tolist())) if owner[a] == owner[b]
        }
        assert got[s] == pytest.approx(len(seen) / g.num_edges)
    assert got[0] == pytest.approx(1 - part.stats(g)["edge_cut_fraction"])
    assert got[2] == 1.0  # C - 1 = 3 super-epochs: every pair met
