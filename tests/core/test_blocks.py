"""zg.blocks.Block: the padded-block contract, its sizes and edges, and ``to_dgl()`` (and
``MiniBatch.to_dgl_blocks()``) against DGL's own blocks built from the same edges."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg.blocks import Block
from zg.sampling import DynamicSampler, EnvelopeSampler


def contract_block(num_dst, num_src, pad_dst, pad_src, fanout, seed, p_edge=0.6, ids=True):
    """A Block that keeps the contract of zg/blocks.py: D = num_dst + pad_dst destination rows,
    S >= D source rows, padding destination rows all-False, masked slots pointing at row 0."""
    gen = torch.Generator().manual_seed(seed)
    dst_rows = num_dst + pad_dst
    src_rows = max(num_src, dst_rows) + pad_src
    mask = torch.rand(dst_rows, fanout, generator=gen) < p_edge  # [D, k]
    mask[num_dst:] = False
    nbr = torch.randint(0, max(num_src, 1), (dst_rows, fanout), generator=gen)
    nbr = torch.where(mask, nbr, 0)  # [D, k]
    src_nodes = torch.randperm(3 * src_rows + 5, generator=gen)[:src_rows] if ids else None
    return Block(
        nbr=nbr,
        mask=mask,
        num_src=torch.tensor(num_src),
        num_dst=torch.tensor(num_dst),
        src_nodes=src_nodes,
    )


def slot_by_slot_edges(block):
    """The real edges (src_local, dst_local) by two plain loops: row by row, slot by slot."""
    out = []
    for i in range(block.nbr.shape[0]):
        for j in range(block.nbr.shape[1]):
            if block.mask[i, j]:
                out.append((int(block.nbr[i, j]), i))
    return out


block_shapes = {
    "num_dst": st.integers(0, 7),
    "extra_src": st.integers(0, 9),
    "pad_dst": st.integers(0, 3),
    "pad_src": st.integers(0, 3),
    "fanout": st.integers(1, 5),
    "seed": st.integers(0, 2**16),
    "p_edge": st.floats(0.0, 1.0),
}


# ----------------------------------------------------------------------------- sizes and edges


def test_static_sizes_are_the_tensor_shapes_not_the_true_counts():
    b = contract_block(num_dst=3, num_src=5, pad_dst=2, pad_src=4, fanout=4, seed=0)
    assert (b.num_dst_rows, b.num_src_rows, b.fanout) == (5, 9, 4)
    assert (int(b.num_dst), int(b.num_src)) == (3, 5)
    assert all(isinstance(v, int) for v in (b.num_dst_rows, b.num_src_rows, b.fanout))
    bare = contract_block(num_dst=3, num_src=3, pad_dst=2, pad_src=0, fanout=2, seed=0, ids=False)
    assert bare.src_nodes is None and bare.num_src_rows == bare.num_dst_rows == 5


@given(**block_shapes)
@settings(max_examples=60, deadline=None)
def test_edges_are_the_real_slots_row_by_row_slot_by_slot(
    num_dst, extra_src, pad_dst, pad_src, fanout, seed, p_edge
):
    b = contract_block(num_dst, num_dst + extra_src, pad_dst, pad_src, fanout, seed, p_edge)
    src, dst = b.edges()
    assert src.dtype == dst.dtype == torch.int64
    assert list(zip(src.tolist(), dst.tolist())) == slot_by_slot_edges(b)
    assert src.numel() == int(b.mask.sum())
    if src.numel():
        assert int(dst.max()) < int(b.num_dst) and int(src.max()) < int(b.num_src)


def test_a_neighbour_in_two_slots_is_two_edges():
    b = Block(
        nbr=torch.tensor([[1, 1, 0], [0, 2, 0]]),
        mask=torch.tensor([[1, 1, 0], [1, 1, 0]]).bool(),
        num_src=torch.tensor(3),
        num_dst=torch.tensor(2),
        src_nodes=torch.tensor([10, 11, 12]),
    )
    src, dst = b.edges()
    assert src.tolist() == [1, 1, 0, 2] and dst.tolist() == [0, 0, 1, 1]


# ----------------------------------------------------------------------------- to_dgl


@pytest.mark.dgl
@given(**block_shapes)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_to_dgl_is_the_dgl_block_of_the_same_edges(
    dgl, num_dst, extra_src, pad_dst, pad_src, fanout, seed, p_edge
):
    b = contract_block(num_dst, num_dst + extra_src, pad_dst, pad_src, fanout, seed, p_edge)
    num_src = num_dst + extra_src
    edges = slot_by_slot_edges(b)
    ref = dgl.create_block(
        (
            torch.tensor([s for s, _ in edges], dtype=torch.int64),
            torch.tensor([d for _, d in edges], dtype=torch.int64),
        ),
        num_src_nodes=num_src,
        num_dst_nodes=num_dst,
    )
    got = b.to_dgl()
    assert got.is_block
    assert (got.num_src_nodes(), got.num_dst_nodes(), got.num_edges()) == (
        ref.num_src_nodes(),
        ref.num_dst_nodes(),
        ref.num_edges(),
    )
    for mine, theirs in zip(got.edges(order="eid"), ref.edges(order="eid")):
        assert torch.equal(mine, theirs)
    assert torch.equal(got.in_degrees(), b.mask[:num_dst].sum(1))
    assert torch.equal(got.srcdata[dgl.NID], b.src_nodes[:num_src])
    assert torch.equal(got.dstdata[dgl.NID], b.src_nodes[:num_dst])  # dst rows = first src rows


@pytest.mark.dgl
def test_to_dgl_message_passing_sums_the_real_slots(dgl):
    """DGL's copy_u + sum over the converted block equals the masked sum over the padded slots."""
    import dgl.function as fn

    b = contract_block(num_dst=6, num_src=11, pad_dst=2, pad_src=3, fanout=5, seed=7)
    h = torch.randn(b.num_src_rows, 4, dtype=torch.float64)  # [S, 4]
    graph = b.to_dgl()
    graph.srcdata["h"] = h[: int(b.num_src)]
    graph.update_all(fn.copy_u("h", "m"), fn.sum("m", "s"))
    padded = (h[b.nbr] * b.mask[..., None]).sum(1)  # [D, 4]
    assert torch.allclose(graph.dstdata["s"], padded[: int(b.num_dst)])
    assert torch.all(padded[int(b.num_dst) :] == 0), "padding rows receive nothing"


@pytest.mark.dgl
def test_to_dgl_without_global_ids_carries_no_nid(dgl):
    b = contract_block(num_dst=3, num_src=3, pad_dst=1, pad_src=0, fanout=2, seed=1, ids=False)
    graph = b.to_dgl()
    assert graph.num_src_nodes() == graph.num_dst_nodes() == 3
    assert dgl.NID not in graph.srcdata and dgl.NID not in graph.dstdata


# ----------------------------------------------------------------------------- MiniBatch.to_dgl_blocks


def _graph():
    gen = torch.Generator().manual_seed(2)
    n = 300
    src, dst = (
        torch.randint(0, n, (2400,), generator=gen),
        torch.randint(0, n, (2400,), generator=gen),
    )
    return zg.Graph.from_edges(src, dst, n, duplicates="remove")


def _global_edges(dgl, block):
    s, d = block.edges(order="eid")
    return sorted(zip(block.srcdata[dgl.NID][s].tolist(), block.dstdata[dgl.NID][d].tolist()))


@pytest.mark.dgl
@pytest.mark.parametrize("make", ["envelope", "dynamic"])
def test_to_dgl_blocks_equal_dgl_to_block_of_the_same_edges(dgl, make):
    """Each converted block is what ``dgl.to_block`` builds from the same global edges and
    destination nodes: the same destinations in order, the same source set (destinations first),
    the same edges; and the blocks chain as DGL's do (block l's dst = block l+1's src)."""
    g = _graph()
    seeds = torch.arange(0, 300, 11)  # 28 seeds
    sampler = (
        EnvelopeSampler(g, [4, 3], 32, seed=5)
        if make == "envelope"
        else DynamicSampler(g, [4, 3], seed=5)
    )
    mb = sampler.sample(seeds, epoch=1, batch=2)
    mine = mb.to_dgl_blocks()
    assert len(mine) == len(mb.blocks) == 2
    assert torch.equal(mine[-1].dstdata[dgl.NID], seeds)
    for ours, zb in zip(mine, mb.blocks):
        dst_ids = ours.dstdata[dgl.NID]
        s, d = zb.edges()
        whole = dgl.graph((zb.src_nodes[s], zb.src_nodes[d]), num_nodes=g.num_nodes)
        theirs = dgl.to_block(whole, dst_nodes=dst_ids)
        assert torch.equal(theirs.dstdata[dgl.NID], dst_ids)
        assert ours.num_src_nodes() == theirs.num_src_nodes() == int(zb.num_src)
        assert set(ours.srcdata[dgl.NID].tolist()) == set(theirs.srcdata[dgl.NID].tolist())
        for blk in (ours, theirs):
            assert torch.equal(blk.srcdata[dgl.NID][: blk.num_dst_nodes()], dst_ids)
        assert _global_edges(dgl, ours) == _global_edges(dgl, theirs)
        # Every edge is a real edge of g.
        adjacency = set(zip(*(t.tolist() for t in g.edges())))
        assert set(_global_edges(dgl, ours)) <= adjacency
    assert torch.equal(mine[0].dstdata[dgl.NID], mine[1].srcdata[dgl.NID])


@pytest.mark.dgl
def test_to_dgl_blocks_run_dgl_layers_as_dgl_blocks_do(dgl):
    """A dgl.nn.SAGEConv gives the same output on our converted blocks as on DGL's to_block of
    the same edges (the source rows reordered by global id)."""
    g = _graph()
    seeds = torch.arange(5, 300, 13)
    mb = EnvelopeSampler(g, [5, 5], 32, seed=1).sample(seeds)
    x = torch.randn(g.num_nodes, 6)
    conv = dgl.nn.SAGEConv(6, 3, "mean")
    for ours, zb in zip(mb.to_dgl_blocks(), mb.blocks):
        s, d = zb.edges()
        theirs = dgl.to_block(
            dgl.graph((zb.src_nodes[s], zb.src_nodes[d]), num_nodes=g.num_nodes),
            dst_nodes=ours.dstdata[dgl.NID],
        )
        out_ours = conv(ours, x[ours.srcdata[dgl.NID]])
        out_theirs = conv(theirs, x[theirs.srcdata[dgl.NID]])
        assert torch.allclose(out_ours, out_theirs, atol=1e-6)


def test_to_dgl_blocks_refuses_an_overflowed_batch():
    g = _graph()
    mb = EnvelopeSampler(g, [5, 5], 32, envelope=zg.Envelope([40, 32])).sample(torch.arange(32))
    assert bool(mb.overflowed)
    with pytest.raises(ValueError, match="overflowed its envelope"):
        mb.to_dgl_blocks()
