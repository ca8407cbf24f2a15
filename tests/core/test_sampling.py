"""Samplers: exactness against torch.unique and DGL, uniformity (chi-square), fixed shapes,
reproducibility, overflow, and errors."""

import itertools

import pytest
import torch
from graphs import mixed_degree_graph, random_graph
from hypothesis import given, settings
from hypothesis import strategies as st

import zg
from zg.envelope import Envelope
from zg.sampling import DynamicSampler, EnvelopeSampler, batch_key, sample_neighbors


def chi2_sf(stat, dof):
    """Survival function of the chi-square distribution."""
    return float(
        torch.special.gammaincc(
            torch.tensor(dof / 2.0, dtype=torch.float64),
            torch.tensor(stat / 2.0, dtype=torch.float64),
        )
    )


def draw(g, node, k, replace, trials):
    """The sampled neighbour offsets (0..d-1) of `node` over `trials` independent keys: [trials, k]."""
    nodes = torch.tensor([node])
    rows, masks = [], []
    for t in range(trials):
        nb, mask = sample_neighbors(
            g.indptr,
            g.indices,
            nodes,
            torch.tensor([True]),
            k,
            replace,
            torch.tensor(batch_key(7, 0, t)),
        )
        rows.append(nb[0])
        masks.append(mask[0])
    first_neighbour = int(g.indices[g.indptr[node]]) if g.in_degrees()[node] > 0 else 0
    return torch.stack(rows) - first_neighbour, torch.stack(masks)  # neighbours are consecutive ids


def global_edges(mb):
    out = []
    for b in mb.blocks:
        s, d = b.edges()
        out.append(sorted(zip(b.src_nodes[s].tolist(), b.src_nodes[d].tolist())))
    return out


# ----------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("replace", [False, True])
def test_node_sets_are_torch_unique_of_the_sampled_neighbours(replace):
    g = random_graph()
    seeds = torch.randperm(g.num_nodes)[:64]
    for sampler in (
        DynamicSampler(g, [5, 4, 3], replace=replace),
        EnvelopeSampler(g, [5, 4, 3], 64, replace=replace),
    ):
        mb = sampler.sample(seeds, epoch=1, batch=2)
        dst = seeds
        for b in reversed(mb.blocks):  # seeds outward
            num_src, num_dst = int(b.num_src), int(b.num_dst)
            assert num_dst == dst.numel()
            assert torch.equal(b.src_nodes[:num_dst], dst), "destination nodes come first"
            rows = b.nbr[:num_dst]
            nbr_global = b.src_nodes[rows][b.mask[:num_dst]]
            expect = torch.unique(torch.cat([dst, nbr_global]))
            assert torch.equal(torch.sort(b.src_nodes[:num_src]).values, expect)
            assert not b.mask[num_dst:].any(), "padding rows carry no edges"
            dst = b.src_nodes[:num_src]


@pytest.mark.parametrize("replace", [False, True])
def test_envelope_sampler_reproduces_the_dynamic_sampler_exactly(replace):
    g = random_graph(seed=1)
    dyn = DynamicSampler(g, [6, 3, 2], replace=replace, seed=3)
    env = EnvelopeSampler(g, [6, 3, 2], 100, replace=replace, seed=3)
    for batch in range(3):
        seeds = torch.randperm(g.num_nodes)[: 100 - 20 * batch]  # also shorter, padded batches
        a, b = dyn.sample(seeds, 0, batch), env.sample(seeds, 0, batch)
        assert torch.equal(a.counts, b.counts)
        assert global_edges(a) == global_edges(b)


def test_sampled_edges_exist_and_fanout_rules_hold():
    g = random_graph(n=300, e=1500, seed=2)
    deg = g.in_degrees()
    mb = EnvelopeSampler(g, [4, 4], 50).sample(torch.arange(50))
    adjacency = set(zip(*(t.tolist() for t in g.edges())))
    for b in mb.blocks:
        num_dst = int(b.num_dst)
        dst_nodes = b.src_nodes[:num_dst]
        taken = b.mask[:num_dst].sum(1)
        assert torch.equal(taken, torch.minimum(deg[dst_nodes], torch.tensor(b.fanout)))
        s, d = b.edges()
        pairs = list(zip(b.src_nodes[s].tolist(), b.src_nodes[d].tolist()))
        assert all(p in adjacency for p in pairs)
        assert len(pairs) == len(set(pairs)), "without replacement no edge appears twice"


def test_matches_dgl_neighbor_sampler_structure(dgl):
    """DGL's NeighborSampler and ours take min(degree, fanout) edges per destination node and
    produce blocks with the same destination nodes; ours converts to exact DGL blocks."""
    g = random_graph(n=400, e=3000, seed=4)
    seeds = torch.arange(0, 400, 7)
    ours = EnvelopeSampler(g, [5, 3], 64).sample(seeds)
    theirs = dgl.dataloading.NeighborSampler([5, 3]).sample_blocks(g.to_dgl(), seeds)[2]
    mine = ours.to_dgl_blocks()
    deg = g.in_degrees()
    assert torch.equal(mine[-1].dstdata[dgl.NID], seeds) and torch.equal(
        theirs[-1].dstdata[dgl.NID], seeds
    )
    for ob, tb, k in zip(mine, theirs, [5, 3]):
        for b in (ob, tb):
            assert torch.equal(b.in_degrees(), torch.clamp(deg[b.dstdata[dgl.NID]], max=k))
            assert torch.equal(b.srcdata[dgl.NID][: b.num_dst_nodes()], b.dstdata[dgl.NID])
    # And the DGL blocks we produce are exact: their edges are ours.
    assert global_edges(ours) == [
        sorted(
            zip(
                b.srcdata[dgl.NID][b.edges()[0]].tolist(), b.dstdata[dgl.NID][b.edges()[1]].tolist()
            )
        )
        for b in mine
    ]


# ----------------------------------------------------------------------------- uniformity


@pytest.mark.parametrize("node, k", [(1, 2), (2, 2), (2, 4), (3, 5), (3, 19)])
def test_without_replacement_inclusion_is_k_over_d(node, k):
    g, degrees = mixed_degree_graph()
    d = degrees[node]
    trials = 3000
    offsets, mask = draw(g, node, k, False, trials)
    assert bool(mask.all())
    offsets = offsets[mask].view(trials, k)
    assert all(len(set(r)) == k for r in offsets.tolist()), "no neighbour twice"
    counts = torch.bincount(offsets.flatten(), minlength=d).double()
    p = k / d
    expected = trials * p
    stat = float(((counts - expected) ** 2 / (expected * (1 - p))).sum())
    assert chi2_sf(stat, d - 1) > 1e-3, f"inclusion counts {counts.tolist()} vs {expected}"


@pytest.mark.slow
def test_without_replacement_every_subset_is_equally_likely():
    g, _ = mixed_degree_graph()
    trials = 4000
    offsets, _ = draw(g, 2, 2, False, trials)  # degree 5, k = 2: 10 subsets
    subsets = list(itertools.combinations(range(5), 2))
    index = {s: i for i, s in enumerate(subsets)}
    counts = torch.zeros(len(subsets), dtype=torch.float64)
    for row in offsets.tolist():
        counts[index[tuple(sorted(row))]] += 1
    expected = trials / len(subsets)
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert chi2_sf(stat, len(subsets) - 1) > 1e-3, counts.tolist()


def test_hub_of_degree_100k_is_sampled_uniformly():
    g, degrees = mixed_degree_graph()
    trials, k, bins = 1500, 10, 20
    offsets, mask = draw(g, 4, k, False, trials)
    assert bool(mask.all())
    assert all(len(set(r)) == k for r in offsets.tolist())
    assert int(offsets.min()) >= 0 and int(offsets.max()) < degrees[4]
    counts = torch.bincount(offsets.flatten() * bins // degrees[4], minlength=bins).double()
    expected = trials * k / bins
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert chi2_sf(stat, bins - 1) > 1e-3


def test_small_and_zero_degrees_take_everything_or_nothing():
    g, degrees = mixed_degree_graph()
    for node, d in enumerate(degrees):
        offsets, mask = draw(g, node, 8, False, 3)
        assert mask.sum(1).tolist() == [min(d, 8)] * 3
        if d <= 8:
            assert sorted(offsets[0][mask[0]].tolist()) == list(range(d))


def test_with_replacement_draws_are_uniform():
    g, _ = mixed_degree_graph()
    trials, k, d = 2000, 4, 20
    offsets, mask = draw(g, 3, k, True, trials)
    assert bool(mask.all())
    counts = torch.bincount(offsets.flatten(), minlength=d).double()
    expected = trials * k / d
    stat = float(((counts - expected) ** 2 / expected).sum())
    assert chi2_sf(stat, d - 1) > 1e-3


# ----------------------------------------------------------------------------- fixed shape


def test_shapes_are_fixed_by_batch_size_fanouts_and_envelope():
    g = random_graph()
    env = Envelope.worst_case(g, [5, 4, 3], 32)
    sampler = EnvelopeSampler(g, [5, 4, 3], 32, envelope=env)
    shapes = None
    for batch, size in enumerate([32, 17, 1]):
        mb = sampler.sample(torch.randperm(g.num_nodes)[:size], batch=batch)
        got = [
            (tuple(b.nbr.shape), tuple(b.mask.shape), tuple(b.src_nodes.shape)) for b in mb.blocks
        ]
        assert shapes is None or got == shapes
        shapes = got
    rows = [env.sizes[1], env.sizes[2], 32]
    assert shapes == [((r, k), (r, k), (s,)) for r, k, s in zip(rows, [5, 4, 3], env.sizes)]


def test_reproducible_per_seed_epoch_batch_and_independent_of_history():
    g = random_graph()
    seeds = torch.arange(40)
    first = EnvelopeSampler(g, [4, 4], 40, seed=5)
    other = EnvelopeSampler(g, [4, 4], 40, seed=5)
    a = first.sample(seeds, epoch=2, batch=9)
    other.sample(torch.arange(100, 140), epoch=0, batch=0)  # different history
    b = other.sample(seeds, epoch=2, batch=9)
    assert global_edges(a) == global_edges(b)
    assert global_edges(a) == global_edges(first.sample(seeds, epoch=2, batch=9))
    assert global_edges(a) != global_edges(first.sample(seeds, epoch=2, batch=10))
    assert global_edges(a) != global_edges(first.sample(seeds, epoch=3, batch=9))
    assert global_edges(a) != global_edges(
        EnvelopeSampler(g, [4, 4], 40, seed=6).sample(seeds, 2, 9)
    )


def test_overflow_is_flagged_and_nothing_is_written_out_of_bounds():
    g = random_graph()
    seeds = torch.randperm(g.num_nodes)[:64]
    tiny = Envelope([100, 70, 64])
    mb = EnvelopeSampler(g, [5, 4, 3], 64, envelope=tiny).sample(seeds)
    assert bool(mb.overflowed)
    for b, size in zip(mb.blocks, tiny.sizes):
        assert b.src_nodes.shape == (size,)
        assert int(b.nbr.min()) >= 0 and int(b.nbr.max()) < size
        assert int(b.src_nodes.min()) >= 0 and int(b.src_nodes.max()) < g.num_nodes
        assert int(b.num_src) <= size
    with pytest.raises(ValueError, match="overflowed"):
        mb.to_dgl_blocks()
    # The sampler is unharmed: the next batch is exactly what a fresh sampler gives.
    roomy = EnvelopeSampler(g, [5, 4, 3], 64)
    assert not bool(roomy.sample(seeds).overflowed)


def test_overflowing_sampler_recovers_marker_state():
    g = random_graph()
    s1, s2 = torch.arange(64), torch.arange(64, 128)
    sampler = EnvelopeSampler(g, [5, 4, 3], 64, envelope=Envelope([100, 70, 64]))
    sampler.sample(s1, batch=0)
    again = sampler.sample(s2, batch=1)
    fresh = EnvelopeSampler(g, [5, 4, 3], 64, envelope=Envelope([100, 70, 64])).sample(s2, batch=1)
    for x, y in zip(again.blocks, fresh.blocks):
        assert torch.equal(x.src_nodes, y.src_nodes) and torch.equal(x.nbr, y.nbr)


def test_graph_without_edges():
    g = zg.Graph.from_edges([], [], num_nodes=10)
    mb = EnvelopeSampler(g, [3, 2], 4).sample(torch.tensor([1, 2]))
    assert mb.counts.tolist() == [2, 2] and not bool(mb.overflowed)
    assert not any(b.mask.any() for b in mb.blocks)


# ----------------------------------------------------------------------------- host syncs


def test_envelope_sampler_has_zero_host_syncs_and_dynamic_has_many():
    from zg.audit import SyncAudit

    g = random_graph()
    seeds = torch.randperm(g.num_nodes)[:64]
    env = EnvelopeSampler(g, [5, 4, 3], 64)
    dyn = DynamicSampler(g, [5, 4, 3])
    with SyncAudit() as audit:
        env.sample(seeds, batch=1)
    assert audit.host_syncs == 0 and audit.dynamic_shape_ops == 0, audit.report()
    with SyncAudit() as audit:
        dyn.sample(seeds, batch=1)
    assert audit.host_syncs >= 3 and audit.dynamic_shape_ops >= 3, audit.report()


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "fanouts, error, match",
    [
        ([5, 0], ValueError, r"fanouts\[1\] must be >= 1"),
        ([5, -1], ValueError, r"fanouts\[1\] must be >= 1"),
        ([], ValueError, "fanouts is empty"),
        (5, TypeError, "fanouts must be a list"),
        ([5, 2.5], TypeError, r"fanouts\[1\] must be an int"),
    ],
)
def test_bad_fanouts(fanouts, error, match):
    g = random_graph()
    with pytest.raises(error, match=match):
        EnvelopeSampler(g, fanouts, 8)
    with pytest.raises(error, match=match):
        DynamicSampler(g, fanouts)


@pytest.mark.parametrize(
    "seeds, error, match",
    [
        (torch.tensor([], dtype=torch.int64), ValueError, "seeds is empty"),
        (torch.tensor([0, 600]), ValueError, "node id 600, out of range"),
        (torch.tensor([-1, 3]), ValueError, "node id -1, out of range"),
        (torch.tensor([1.0, 2.0]), TypeError, "seeds must hold integer"),
        (torch.tensor([[1, 2]]), ValueError, "seeds must be 1-dimensional"),
        (torch.tensor([3, 3]), ValueError, "repeated"),
        (torch.arange(9), ValueError, "batch_size is 8"),
        (torch.tensor([1, 2], device="meta"), ValueError, "seeds is on meta"),
    ],
)
def test_bad_seeds(seeds, error, match):
    sampler = EnvelopeSampler(random_graph(), [3, 2], 8)
    with pytest.raises(error, match=match):
        sampler.sample(seeds)


def test_bad_sampler_arguments():
    g = random_graph()
    with pytest.raises(TypeError, match="g must be a zg.Graph"):
        EnvelopeSampler("cora", [3], 8)
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        EnvelopeSampler(g, [3], 0)
    with pytest.raises(TypeError, match="replace must be a bool"):
        EnvelopeSampler(g, [3], 8, replace="no")
    with pytest.raises(ValueError, match="smaller than its"):
        EnvelopeSampler(g, [3, 2], 8, envelope=Envelope([20, 4]))
    with pytest.raises(ValueError, match="2 sizes but there are 3 fanouts"):
        EnvelopeSampler(g, [3, 2, 2], 8, envelope=Envelope([20, 10]))
    with pytest.raises(TypeError, match="envelope must be"):
        EnvelopeSampler(g, [3, 2], 8, envelope=[20, 10])


# ----------------------------------------------------------------------------- fanouts above the degree


def assert_same_minibatch(a, b):
    assert torch.equal(a.seeds, b.seeds) and torch.equal(a.counts, b.counts)
    assert torch.equal(a.overflowed, b.overflowed) and len(a.blocks) == len(b.blocks)
    for x, y in zip(a.blocks, b.blocks):
        for name in ("nbr", "mask", "src_nodes", "num_src", "num_dst"):
            assert torch.equal(getattr(x, name), getattr(y, name)), name


@pytest.mark.timeout(120)
@pytest.mark.parametrize("make", ["dynamic", "envelope"])
def test_a_fanout_above_the_largest_in_degree_means_every_neighbour(make):
    """Issue 16: fanout 10**6 on a graph whose largest in-degree is 13 used to run for hours
    (Floyd's k rounds, O(k^2)). It now gives exactly the sample of fanout = the largest
    in-degree, in bounded time and memory."""
    g = zg.datasets.csbm(300, 6, 3, 8, seed=0)
    top = int(g.in_degrees().max())
    seeds = torch.arange(0, 300, 7)

    def sampler(fanouts):
        if make == "dynamic":
            return DynamicSampler(g, fanouts, seed=3)
        return EnvelopeSampler(g, fanouts, seeds.numel(), seed=3)

    for huge in (top, top + 1, 10**6, 10**18):
        assert sampler([huge, huge]).effective_fanouts == [top, top]
        assert_same_minibatch(
            sampler([top, top]).sample(seeds, 2, 5), sampler([huge, huge]).sample(seeds, 2, 5)
        )
    # Every neighbour, each once: the blocks hold the exact in-neighbourhoods.
    mb = sampler([10**6]).sample(seeds)
    block = mb.blocks[0]
    for row, v in enumerate(seeds.tolist()):
        taken = block.src_nodes[block.nbr[row][block.mask[row]]].sort().values
        assert torch.equal(taken, g.indices[g.indptr[v] : g.indptr[v + 1]].sort().values)


def test_the_clamp_changes_no_sample():
    """The kernel without the clamp (k = largest degree + 5, Floyd's rounds) and with it
    (k = largest degree, no rounds) pick the same neighbours; the extra slots are all masked."""
    sub = random_graph()
    top = int(sub.in_degrees().max())
    indices = torch.cat([sub.indices, sub.indices.new_zeros(1)])
    nodes = torch.arange(sub.num_nodes)
    valid = torch.ones(sub.num_nodes, dtype=torch.bool)
    key = torch.tensor(batch_key(1, 2, 3))
    wide, wide_mask = sample_neighbors(sub.indptr, indices, nodes, valid, top + 5, False, key)
    tight, tight_mask = sample_neighbors(
        sub.indptr, indices, nodes, valid, top, False, key, max_degree=top
    )
    assert not wide_mask[:, top:].any()
    assert torch.equal(wide_mask[:, :top], tight_mask)
    assert torch.equal(
        torch.where(tight_mask, wide[:, :top], -1), torch.where(tight_mask, tight, -1)
    )


def test_with_replacement_a_large_fanout_is_kept_up_to_a_bound():
    g = random_graph()
    top = int(g.in_degrees().max())
    assert DynamicSampler(g, [top + 50], replace=True).effective_fanouts == [top + 50]
    assert EnvelopeSampler(g, [1024, 3], 8, replace=True).effective_fanouts == [1024, 3]
    for make in (
        lambda: DynamicSampler(g, [3, 10**6], replace=True),
        lambda: EnvelopeSampler(g, [3, 10**6], 8, replace=True),
    ):
        with pytest.raises(
            ValueError, match=r"fanouts\[1\] = 1000000 with replace=True.*at most 1024"
        ):
            make()


def test_samplers_read_the_graph_in_place():
    """No edge-sized copy of the graph (a memory-mapped graph must stay on disk)."""
    g = zg.datasets.load("cora")
    for sampler in (DynamicSampler(g, [5, 5]), EnvelopeSampler(g, [5, 5], 64)):
        own = [v for v in vars(sampler).values() if isinstance(v, torch.Tensor)]
        # node-sized state only (at most a few entries a node), never edge-sized
        assert own and all(t.numel() <= 3 * (g.num_nodes + 1) < g.num_edges for t in own), type(
            sampler
        ).__name__
        sampler.sample(g.train_idx[:64])
    empty = zg.Graph.from_edges([], [], num_nodes=3)  # no edges: every slot masked
    mb = EnvelopeSampler(empty, [2], 2).sample(torch.tensor([0, 1]))
    assert not bool(mb.blocks[0].mask.any())
    assert DynamicSampler(empty, [2]).sample(torch.tensor([0, 2])).blocks[0].num_src.item() == 2


# ----------------------------------------------------------------------------- Floyd in closed form


@pytest.mark.slow
@given(st.integers(1, 24), st.integers(1, 40), st.integers(0, 2**31 - 1))
@settings(max_examples=200, deadline=None)
def test_floyd_closed_form_equals_the_round_by_round_loop(k, rows, seed):
    from zg.sampling import _floyd_rounds

    gen = torch.Generator().manual_seed(seed)
    degree = torch.randint(k, k + 30, (rows,), generator=gen)  # d >= k
    j = degree[None, :] - k + torch.arange(k)[:, None]  # [k, R]
    t = (torch.rand(k, rows, generator=gen) * (j + 1)).floor().to(torch.int64)  # t in [0, j]
    t = torch.minimum(t, j)
    loop = t.clone()
    for i in range(1, k):
        taken = (loop[:i] == t[i]).any(dim=0)
        loop[i] = torch.where(taken, j[i], t[i])
    got = _floyd_rounds(t, j, k)
    assert torch.equal(got, loop)
    # Floyd's result: k distinct offsets in [0, d) per row.
    assert all(len(set(loop[:, r].tolist())) == k for r in range(rows))


# Today's launches per steady static step (torch path, 3 layers, h=256, fanouts [15, 10, 5]);
# SAGE is the configuration of the launch target (at most 300). Before this round: 449 / 457
# / 583; when the count was first taken, 942 (SAGE).
LAUNCH_BOUNDS = {"sage": 299, "gcn": 316, "gat": 450}


@pytest.mark.slow
@pytest.mark.parametrize("model", sorted(LAUNCH_BOUNDS))
def test_the_static_step_launches_the_same_ops_at_every_batch_size(model):
    """A fixed launch structure: the count does not depend on the batch size (torch path, the
    configuration of the launch target: 3-layer SAGE h=256, fanouts [15, 10, 5], at most 300
    launches). The bound is today's count, a guard against regressions (see
    zg.audit.launches_op for what counts). Since the count was first taken (942): Adam on flat
    buffers with its state gated in place; Floyd in closed form; one splitmix64 hash per draw
    (stream + s * golden, the golden step folded into the slot steps, the floor modulo of
    the signed draw); the batch row (seeds, count, keys) from the epoch's table in one
    gather; each node's first edge, degree and hash in one gather; compaction through first
    positions into one candidate buffer (no local-id array, no concatenation, no "is it
    real?" test); the overflow flag from the counts once; blocks that say their padding is
    clean; the weighted sum as one batched product; fresh gradients (no zero fill, no
    accumulation); the loss through ignore_index; the guard's state updated in place."""
    import zg
    from zg import models
    from zg.audit import LaunchCount

    g = zg.datasets.csbm(num_nodes=3000, avg_degree=15, num_classes=5, feat_dim=16, seed=0)
    counts = {}
    for batch_size in (256, 1024):
        torch.manual_seed(0)
        eng = zg.Engine(
            g,
            models.build(model, g.feat_dim, 256, g.num_classes, 3, dropout=0.0),
            [15, 10, 5],
            batch_size,
            kernel="torch",
        )
        eng.run_batch(0, 0)
        with LaunchCount() as count:
            eng.run_batch(1, 0)
        counts[batch_size] = count.launches
    assert counts[256] == counts[1024] <= LAUNCH_BOUNDS[model], counts


@pytest.mark.parametrize("replace", [False, True])
def test_without_the_node_table_the_samples_are_the_same(monkeypatch, replace):
    """Above NODE_HASH_MAX_NODES the envelope sampler looks each node's first edge, degree and
    hash up per hop instead of keeping the [N + 1, 3] table (and its padding rows repeat the
    first row's node instead of reading the table's empty row): the blocks are the same, bit
    for bit, padding included, and so is the overflow record."""
    import zg.sampling as zs

    g = zg.datasets.csbm(num_nodes=2000, avg_degree=12, num_classes=4, feat_dim=8, seed=1)
    seeds = g.train_idx[:100]  # fewer seeds than the batch size: padding rows in every hop
    small = Envelope([900, 500, 200])  # overflows: the clamped path as well
    samplers = {}
    for name, limit in (("table", zs.NODE_HASH_MAX_NODES), ("lookup", 0)):
        monkeypatch.setattr(zs, "NODE_HASH_MAX_NODES", limit)
        for env in (None, small):
            samplers[name, env is None] = zs.EnvelopeSampler(
                g, [6, 4, 3], 128, envelope=env, replace=replace, kernel="torch"
            )
    assert samplers["table", True]._node_table is not None
    assert samplers["lookup", True]._node_table is None
    for worst in (True, False):
        a = samplers["table", worst].sample(seeds, 3, 1)
        b = samplers["lookup", worst].sample(seeds, 3, 1)
        assert bool(a.overflowed) == bool(b.overflowed) == (not worst)
        assert torch.equal(a.wanted, b.wanted) and torch.equal(a.counts, b.counts)
        for x, y in zip(a.blocks, b.blocks):
            for field in ("nbr", "mask", "src_nodes", "num_src", "num_dst"):
                assert torch.equal(getattr(x, field), getattr(y, field)), field
