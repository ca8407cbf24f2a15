"""zg.models: SAGE / GCN / GAT on padded blocks against DGL's layers (outputs and gradients),
padding invariance, the kernel choice (the CPU kernels against the torch gather), no host
syncs, argument validation."""

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg.kernels.aggregate as za
import zg.models as zm
from zg.blocks import Block

TOL = dict(atol=1e-5, rtol=0)


# ----------------------------------------------------------------------------- random blocks


def random_block(num_dst, num_src, dst_rows, src_rows, fanout, gen, p_edge=0.7, p_empty=0.2):
    """A padded Block with ``dst_rows`` (D) / ``src_rows`` (S) rows of which ``num_dst`` /
    ``num_src`` are real. Some real rows have no edge, some repeat a neighbour, padding rows
    have an all-False mask and masked slots point at row 0 (the Block contract)."""
    assert num_dst <= num_src and num_dst <= dst_rows <= src_rows and num_src <= src_rows
    mask = torch.rand(dst_rows, fanout, generator=gen) < p_edge
    mask &= torch.rand(dst_rows, 1, generator=gen) >= p_empty  # some real rows empty
    mask[num_dst:] = False  # padding rows
    nbr = torch.randint(0, max(num_src, 1), (dst_rows, fanout), generator=gen)
    if fanout >= 2:  # duplicated neighbours: slot 1 repeats slot 0 in about a third of the rows
        dup = torch.rand(dst_rows, generator=gen) < 0.35
        nbr[:, 1] = torch.where(dup, nbr[:, 0], nbr[:, 1])
    nbr = torch.where(mask, nbr, 0)
    src_nodes = torch.randperm(10 * src_rows + 10, generator=gen)[:src_rows]
    return Block(
        nbr=nbr,
        mask=mask,
        num_src=torch.tensor(num_src),
        num_dst=torch.tensor(num_dst),
        src_nodes=src_nodes,
    )


def random_blocks(num_layers, fanouts, gen, num_seeds=5):
    """Chained blocks, input layer first: block l's D equals block l+1's S, and block l's
    num_dst equals block l+1's num_src. The last block has ``num_seeds`` real destinations;
    every block has at least one padded source row."""
    blocks = []
    num_dst = num_seeds
    dst_rows = num_dst + int(torch.randint(0, 3, (), generator=gen))
    for layer in reversed(range(num_layers)):
        num_src = num_dst + int(torch.randint(0, 2 * fanouts[layer] + 1, (), generator=gen))
        src_rows = max(dst_rows, num_src) + int(torch.randint(1, 4, (), generator=gen))
        blocks.append(random_block(num_dst, num_src, dst_rows, src_rows, fanouts[layer], gen))
        num_dst, dst_rows = num_src, src_rows
    return blocks[::-1]


def perturb_padding(blocks, x, gen):
    """Same real content, different padding: large finite garbage in padded feature rows and
    random targets in masked slots. (NaN / inf padding is outside the contract: see zg.models.)"""
    x = x.detach().clone()
    num_src = int(blocks[0].num_src)
    x[num_src:] = 1e6 * torch.randn(x[num_src:].shape, generator=gen)
    out = []
    for b in blocks:
        junk = torch.randint(0, b.src_nodes.shape[0], b.nbr.shape, generator=gen)
        out.append(
            Block(
                nbr=torch.where(b.mask, b.nbr, junk),
                mask=b.mask,
                num_src=b.num_src,
                num_dst=b.num_dst,
                src_nodes=b.src_nodes,
            )
        )
    return out, x


# ----------------------------------------------------------------------------- DGL references


def dgl_layer(dgl, kind, in_dim, out_dim, heads=2, **kw):
    if kind == "sage":
        return dgl.nn.SAGEConv(in_dim, out_dim, "mean")
    if kind == "gcn":
        return dgl.nn.GraphConv(in_dim, out_dim, norm="both", allow_zero_in_degree=True)
    return dgl.nn.GATConv(in_dim, out_dim, heads, allow_zero_in_degree=True, **kw)


def zg_layer(kind, in_dim, out_dim, heads=2, **kw):
    if kind == "sage":
        return zm.SAGEConv(in_dim, out_dim)
    if kind == "gcn":
        return zm.GCNConv(in_dim, out_dim)
    return zm.GATConv(in_dim, out_dim, heads, **kw)


def randomize(module, gen):
    """Non-trivial values everywhere (DGL and zg both start biases at 0)."""
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.5)


def compare(run_zg, run_dgl, zg_module, dgl_module, blocks, x, gen):
    """Outputs on the real rows and gradients (input rows < num_src, every parameter)."""
    num_src, num_dst = int(blocks[0].num_src), int(blocks[-1].num_dst)
    x_zg = x.clone().requires_grad_(True)
    x_ref = x[:num_src].clone().requires_grad_(True)
    out_zg = run_zg(x_zg)
    out_ref = run_dgl(x_ref)
    assert out_zg.shape[0] == blocks[-1].nbr.shape[0]
    assert out_ref.shape[0] == num_dst
    torch.testing.assert_close(out_zg[:num_dst], out_ref, **TOL)
    assert torch.all(out_zg[num_dst:] == 0), "padded output rows are zero"

    weight = torch.randn(out_ref.shape, generator=gen)
    (out_zg[:num_dst] * weight).sum().backward()
    (out_ref * weight).sum().backward()
    torch.testing.assert_close(x_zg.grad[:num_src], x_ref.grad, **TOL)
    assert torch.all(x_zg.grad[num_src:] == 0), "padded input rows get no gradient"
    ref_params = dict(dgl_module.named_parameters())
    zg_params = dict(zg_module.named_parameters())
    assert zg_params.keys() == ref_params.keys()
    for name, p in zg_params.items():
        torch.testing.assert_close(p.grad, ref_params[name].grad, **TOL, msg=name)


# ----------------------------------------------------------------------------- layers vs DGL


LAYER_CASES = [
    ("sage", 6, 4, {}),
    ("sage", 3, 7, {}),  # project-then-gather and gather-then-project
    ("gcn", 6, 4, {}),
    ("gcn", 3, 7, {}),
    ("gat", 5, 3, {}),
    ("gat", 5, 3, {"residual": True}),
    ("gat", 6, 3, {"residual": True}),
]


@pytest.mark.dgl
@pytest.mark.parametrize("kind, in_dim, out_dim, kw", LAYER_CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layer_matches_dgl(dgl, kind, in_dim, out_dim, kw, seed):
    gen = torch.Generator().manual_seed(seed)
    block = random_block(num_dst=9, num_src=14, dst_rows=12, src_rows=17, fanout=4, gen=gen)
    x = torch.randn(17, in_dim, generator=gen)
    ref = dgl_layer(dgl, kind, in_dim, out_dim, **kw)
    randomize(ref, gen)
    layer = zg_layer(kind, in_dim, out_dim, **kw)
    layer.load_state_dict(ref.state_dict())  # same parameter names and shapes
    graph = block.to_dgl()
    compare(lambda h: layer(block, h), lambda h: ref(graph, h), layer, ref, [block], x, gen)


@pytest.mark.dgl
@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_layer_matches_dgl_on_a_block_without_edges(dgl, kind):
    gen = torch.Generator().manual_seed(3)
    block = random_block(
        num_dst=4, num_src=6, dst_rows=5, src_rows=8, fanout=3, gen=gen, p_edge=0.0
    )
    x = torch.randn(8, 5, generator=gen)
    ref = dgl_layer(dgl, kind, 5, 3)
    randomize(ref, gen)
    layer = zg_layer(kind, 5, 3)
    layer.load_state_dict(ref.state_dict())
    graph = block.to_dgl()
    compare(lambda h: layer(block, h), lambda h: ref(graph, h), layer, ref, [block], x, gen)


@pytest.mark.dgl
@given(
    num_dst=st.integers(1, 8),
    extra_src=st.integers(0, 10),
    pad_dst=st.integers(0, 3),
    pad_src=st.integers(0, 3),
    fanout=st.integers(1, 6),
    in_dim=st.integers(1, 6),
    out_dim=st.integers(1, 6),
    p_edge=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**16),
)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_sage_matches_dgl_on_random_shapes(
    dgl, num_dst, extra_src, pad_dst, pad_src, fanout, in_dim, out_dim, p_edge, seed
):
    gen = torch.Generator().manual_seed(seed)
    num_src, dst_rows = num_dst + extra_src, num_dst + pad_dst
    src_rows = max(num_src, dst_rows) + pad_src
    block = random_block(num_dst, num_src, dst_rows, src_rows, fanout, gen, p_edge=p_edge)
    x = torch.randn(src_rows, in_dim, generator=gen)
    ref = dgl.nn.SAGEConv(in_dim, out_dim, "mean")
    randomize(ref, gen)
    layer = zm.SAGEConv(in_dim, out_dim)
    layer.load_state_dict(ref.state_dict())
    graph = block.to_dgl()
    compare(lambda h: layer(block, h), lambda h: ref(graph, h), layer, ref, [block], x, gen)


# ----------------------------------------------------------------------------- models vs DGL


def dgl_stack_forward(kind, layers, graphs, x):
    """DGL's minibatch example models, dropout off."""
    h = x
    for i, (layer, graph) in enumerate(zip(layers, graphs)):
        h = layer(graph, h)
        if kind == "gat":
            h = h.flatten(1) if i < len(layers) - 1 else h.mean(1)
        if i < len(layers) - 1:
            h = torch.nn.functional.elu(h) if kind == "gat" else torch.relu(h)
    return h


@pytest.mark.dgl
@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
@pytest.mark.parametrize("num_layers", [2, 3])
def test_model_matches_dgl_stack(dgl, kind, num_layers):
    gen = torch.Generator().manual_seed(10 + num_layers)
    in_dim, hidden, classes, heads = 7, 5, 3, 2
    fanouts = [4, 3, 2][-num_layers:]
    blocks = random_blocks(num_layers, fanouts, gen)
    x = torch.randn(blocks[0].src_nodes.shape[0], in_dim, generator=gen)
    kw = {"heads": heads} if kind == "gat" else {}
    model = zm.build(kind, in_dim, hidden, classes, num_layers, dropout=0.0, **kw)
    widths = model.feature_dims
    ref = torch.nn.Module()
    if kind == "gat":
        outs = [hidden] * (num_layers - 1) + [classes]
        ref.layers = torch.nn.ModuleList(
            dgl_layer(dgl, kind, widths[i], outs[i], heads) for i in range(num_layers)
        )
    else:
        ref.layers = torch.nn.ModuleList(
            dgl_layer(dgl, kind, a, b) for a, b in zip(widths[:-1], widths[1:])
        )
    randomize(ref, gen)
    model.load_state_dict(ref.state_dict())
    graphs = [b.to_dgl() for b in blocks]
    compare(
        lambda h: model(blocks, h),
        lambda h: dgl_stack_forward(kind, ref.layers, graphs, h),
        model,
        ref,
        blocks,
        x,
        gen,
    )


def test_feature_dims_and_shapes():
    gen = torch.Generator().manual_seed(0)
    blocks = random_blocks(3, [4, 3, 2], gen)
    x = torch.randn(blocks[0].src_nodes.shape[0], 6, generator=gen)
    assert zm.SAGE(6, 8, 3).feature_dims == [6, 8, 8, 3]
    assert zm.GAT(6, 8, 3, heads=4).feature_dims == [6, 32, 32, 3]
    for name in ("sage", "gcn", "gat"):
        out = zm.build(name, 6, 8, 3, 3)(blocks, x)
        assert out.shape == (blocks[-1].nbr.shape[0], 3)
    single = zm.build("gat", 6, 8, 3, num_layers=1, heads=3)
    assert single(blocks[-1:], torch.randn(blocks[-1].src_nodes.shape[0], 6)).shape[1] == 3


# ----------------------------------------------------------------------------- padding


def num_src_rows(blocks):
    return int(blocks[0].num_src)


def run_with_grads(model, blocks, x):
    x = x.clone().requires_grad_(True)
    model.zero_grad(set_to_none=True)
    out = model(blocks, x)
    num_dst = int(blocks[-1].num_dst)
    (
        out[:num_dst] * torch.arange(out[:num_dst].numel()).view_as(out[:num_dst]).sin()
    ).sum().backward()
    return out, x.grad, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_padding_does_not_influence_real_rows_bitwise(kind):
    gen = torch.Generator().manual_seed(5)
    blocks = random_blocks(3, [4, 3, 2], gen)
    x = torch.randn(blocks[0].src_nodes.shape[0], 6, generator=gen)
    model = zm.build(kind, 6, 8, 3, 3, dropout=0.0)
    out, x_grad, grads = run_with_grads(model, blocks, x)
    blocks2, x2 = perturb_padding(blocks, x, gen)
    assert all(not torch.equal(b.nbr, b2.nbr) for b, b2 in zip(blocks, blocks2))
    assert (x2[num_src_rows(blocks) :] != x[num_src_rows(blocks) :]).any()
    out2, x_grad2, grads2 = run_with_grads(model, blocks2, x2)
    num_src, num_dst = int(blocks[0].num_src), int(blocks[-1].num_dst)
    assert torch.equal(out[:num_dst], out2[:num_dst])
    assert torch.isfinite(out2).all() and torch.all(out2[num_dst:] == 0)
    assert torch.equal(x_grad[:num_src], x_grad2[:num_src])
    for name in grads:
        assert torch.equal(grads[name], grads2[name]), name


def test_padded_destination_edges_are_ignored():
    """A mask bit set on a padding row (a broken sampler) still adds no edge."""
    gen = torch.Generator().manual_seed(6)
    block = random_block(num_dst=4, num_src=7, dst_rows=6, src_rows=8, fanout=3, gen=gen)
    bad = Block(
        nbr=block.nbr,
        mask=block.mask.clone(),
        num_src=block.num_src,
        num_dst=block.num_dst,
        src_nodes=block.src_nodes,
    )
    bad.mask[4:] = True
    x = torch.randn(8, 5, generator=gen)
    for layer in (zm.SAGEConv(5, 3), zm.GCNConv(5, 3), zm.GATConv(5, 3, 2)):
        assert torch.equal(layer(block, x), layer(bad, x))


def test_empty_blocks_give_zeros_not_nan():
    x = torch.randn(4, 5, requires_grad=True)
    no_dst = Block(
        nbr=torch.zeros(3, 2, dtype=torch.long),
        mask=torch.zeros(3, 2, dtype=torch.bool),
        num_src=torch.tensor(2),
        num_dst=torch.tensor(0),
    )
    no_fanout = Block(
        nbr=torch.zeros(3, 0, dtype=torch.long),
        mask=torch.zeros(3, 0, dtype=torch.bool),
        num_src=torch.tensor(4),
        num_dst=torch.tensor(3),
    )
    for layer in (zm.SAGEConv(5, 3), zm.GCNConv(5, 3), zm.GATConv(5, 3, 2)):
        out = layer(no_dst, x)
        assert torch.all(out == 0)
        out = layer(no_fanout, x)
        assert torch.isfinite(out).all() and out.shape[0] == 3
        out.sum().backward()
        assert torch.isfinite(x.grad).all()
        x.grad = None


def test_masked_softmax():
    scores = torch.randn(5, 4, 3, requires_grad=True)
    with torch.no_grad():
        scores[:, 3] = 1e30  # huge scores behind masked slots
    mask = torch.tensor(
        [[1, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 0], [0, 1, 0, 0]]
    ).bool()
    alpha = zm.masked_softmax(scores, mask)
    assert torch.isfinite(alpha).all()
    assert torch.all(alpha[~mask] == 0) and torch.all(alpha[2] == 0)
    for row in (0, 1, 3, 4):
        real = mask[row]
        torch.testing.assert_close(alpha[row][real], torch.softmax(scores[row][real], 0))
    (alpha * torch.randn(alpha.shape)).sum().backward()
    assert torch.isfinite(scores.grad).all() and torch.all(scores.grad[~mask] == 0)
    with pytest.raises(ValueError, match="mask must be bool"):
        zm.masked_softmax(scores, mask.float())


@pytest.mark.dgl
@pytest.mark.parametrize("kind", ["sage", "gcn"])
@pytest.mark.parametrize("in_dim, out_dim", [(6, 4), (3, 7)])
def test_layer_with_relu_matches_dgl_with_activation(dgl, kind, in_dim, out_dim):
    """activation="relu" (the fused padded-row zeroing + ReLU) against DGL's activation=F.relu."""
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(21)
    block = random_block(num_dst=9, num_src=14, dst_rows=12, src_rows=17, fanout=4, gen=gen)
    x = torch.randn(17, in_dim, generator=gen)
    if kind == "sage":
        ref = dgl.nn.SAGEConv(in_dim, out_dim, "mean", activation=F.relu)
        layer = zm.SAGEConv(in_dim, out_dim, activation="relu")
    else:
        ref = dgl.nn.GraphConv(
            in_dim, out_dim, norm="both", allow_zero_in_degree=True, activation=F.relu
        )
        layer = zm.GCNConv(in_dim, out_dim, activation="relu")
    randomize(ref, gen)
    layer.load_state_dict(ref.state_dict())
    graph = block.to_dgl()
    compare(lambda h: layer(block, h), lambda h: ref(graph, h), layer, ref, [block], x, gen)


@pytest.mark.parametrize("kind", ["sage", "gcn"])
def test_fused_relu_equals_relu_after_the_layer_bitwise(kind):
    """The fused step (one autograd node) gives the very bits of zeroing padded rows and then
    F.relu: output, input gradient and every parameter gradient, with a gradient on the padded
    output rows too (which must not leak)."""
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(22)
    block = random_block(num_dst=9, num_src=14, dst_rows=12, src_rows=17, fanout=4, gen=gen)
    x = torch.randn(17, 6, generator=gen)
    cls = zm.SAGEConv if kind == "sage" else zm.GCNConv
    fused, plain = cls(6, 5, activation="relu"), cls(6, 5)
    randomize(fused, gen)
    plain.load_state_dict(fused.state_dict())
    weight = torch.randn(12, 5, generator=gen)
    results = []
    for run in (lambda h: fused(block, h), lambda h: F.relu(plain(block, h))):
        h = x.clone().requires_grad_(True)
        out = run(h)
        (out * weight).sum().backward()
        results.append((out.detach(), h.grad))
    assert torch.equal(results[0][0], results[1][0])
    assert torch.equal(results[0][1], results[1][1])
    for (name, p), q in zip(fused.named_parameters(), plain.parameters()):
        assert torch.equal(p.grad, q.grad), name
    assert torch.all(results[0][0][9:] == 0)
    with pytest.raises(ValueError, match="activation must be None or 'relu'"):
        cls(6, 5, activation="tanh")


# ----------------------------------------------------------------------------- CPU aggregation paths


def gather_reference_attention_sum(z, nbr, alpha, mask):
    """The explicit [D, k, H, F] gather, product and masked sum (the CUDA path, kept as the
    readable reference), written out here rather than taken from the module under test."""
    gathered = z.index_select(0, nbr.reshape(-1)).view(*nbr.shape, *z.shape[1:])
    return torch.where(mask.view(*mask.shape, 1, 1), alpha.unsqueeze(-1) * gathered, 0.0).sum(1)


@pytest.mark.parametrize("heads, fanout", [(1, 4), (3, 5), (4, 1), (2, 0)])
@pytest.mark.parametrize("seed", [0, 1])
def test_attention_sum_on_the_cpu_equals_the_gather_reference(heads, fanout, seed):
    """The embedding_bag path (CPU) against the gather path: outputs and the gradients of
    ``z`` and of the attention scores, with padded rows, rows without an edge, repeated
    neighbours and junk behind masked slots."""
    gen = torch.Generator().manual_seed(seed)
    block = random_block(num_dst=9, num_src=13, dst_rows=12, src_rows=16, fanout=fanout, gen=gen)
    mask = block.mask & (torch.arange(12) < 9).unsqueeze(1)
    mask[2] = False  # a real row without an edge
    junk = torch.randint(0, 16, block.nbr.shape, generator=gen)
    nbr = torch.where(mask, block.nbr, junk)  # masked slots point anywhere
    nbr = torch.cat([nbr, nbr], 1)[:, :fanout]  # a strided view, as engines pass
    z = torch.randn(16, heads, 6, generator=gen)
    scores = torch.randn(12, fanout, heads, generator=gen)
    weight = torch.randn(12, heads, 6, generator=gen)
    results = []
    for fn in (za.attention_sum, gather_reference_attention_sum):
        z_ = z.clone().requires_grad_(True)
        scores_ = scores.clone().requires_grad_(True)
        alpha = zm.masked_softmax(scores_, mask)
        out = fn(z_, nbr, alpha, mask)
        (out * weight).sum().backward()
        results.append((out, z_.grad, scores_.grad))
    (out, z_grad, s_grad), (ref, z_ref, s_ref) = results
    assert out.shape == (12, heads, 6)
    torch.testing.assert_close(out, ref, **TOL)
    torch.testing.assert_close(z_grad, z_ref, **TOL)
    torch.testing.assert_close(s_grad, s_ref, **TOL)
    assert torch.all(out[~mask.any(1)] == 0), "rows without a real edge sum to zero"
    assert torch.all(s_grad[~mask] == 0), "no gradient reaches a masked slot's score"
    untouched = torch.ones(16, dtype=torch.bool)
    untouched[nbr[mask]] = False
    assert torch.all(z_grad[untouched] == 0), "rows no real edge reads get exactly zero gradient"


@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_kernel_torch_runs_the_gather_and_equals_the_cpu_kernel_in_a_whole_model(kind, require):
    """kernel="torch" (the explicit gather, what CUDA runs) against kernel="fused" (the CPU's
    embedding_bag + CSR backward) in the same model: logits and every gradient, dropout off;
    set_kernel reaches every layer, and the autograd graph shows which aggregation ran."""
    require("numba")
    gen = torch.Generator().manual_seed(12)
    blocks = random_blocks(3, [4, 3, 2], gen)
    x = torch.randn(blocks[0].src_nodes.shape[0], 6, generator=gen)
    model = zm.build(kind, 6, 8, 3, 3, dropout=0.0, kernel="fused")
    assert model.kernel == "fused" and all(layer.kernel == "fused" for layer in model.layers)
    out, x_grad, grads = run_with_grads(model, blocks, x)
    assert any("_NeighbourSum" in n for n in autograd_node_names(model(blocks, x)))
    assert model.set_kernel("torch") is model
    assert model.kernel == "torch" and all(layer.kernel == "torch" for layer in model.layers)
    ref, x_ref, grads_ref = run_with_grads(model, blocks, x)
    assert not any(
        "NeighbourSum" in n or "EmbeddingBag" in n for n in autograd_node_names(model(blocks, x))
    )
    torch.testing.assert_close(out, ref, **TOL)
    torch.testing.assert_close(x_grad, x_ref, **TOL)
    for name in grads:
        torch.testing.assert_close(grads[name], grads_ref[name], **TOL, msg=name)
    # "auto" on the CPU with numba is "fused": the very same bits.
    model.set_kernel("auto")
    auto, x_auto, grads_auto = run_with_grads(model, blocks, x)
    assert torch.equal(auto, out) and torch.equal(x_auto, x_grad)
    assert all(torch.equal(grads_auto[n], grads[n]) for n in grads)


def autograd_node_names(out):
    """The class names of every node in ``out``'s autograd graph."""
    names, stack, seen = set(), [out.grad_fn], []
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.append(node)  # held, so no id is reused while walking
        names.add(type(node).__name__)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return names


def test_the_kernel_choice_is_validated_by_every_model_and_layer():
    for make in (
        lambda k: zm.SAGE(4, 8, 3, kernel=k),
        lambda k: zm.GCN(4, 8, 3, kernel=k),
        lambda k: zm.GAT(4, 8, 3, kernel=k),
        lambda k: zm.SAGEConv(4, 3, kernel=k),
        lambda k: zm.GCNConv(4, 3, kernel=k),
        lambda k: zm.GATConv(4, 3, 2, kernel=k),
    ):
        assert make("torch").kernel == "torch"
        with pytest.raises(ValueError, match="kernel must be one of"):
            make("numba")
    with pytest.raises(ValueError, match="kernel must be one of"):
        zm.SAGE(4, 8, 3).set_kernel("cuda")
    assert zm.build("gcn", 4, 8, 3, 2, kernel="torch").layers[0].kernel == "torch"


# ----------------------------------------------------------------------------- host syncs


@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_no_host_syncs_or_dynamic_shapes_in_forward_and_backward(kind):
    from zg.audit import SyncAudit

    gen = torch.Generator().manual_seed(8)
    blocks = random_blocks(3, [4, 3, 2], gen)
    x = torch.randn(blocks[0].src_nodes.shape[0], 6, generator=gen, requires_grad=True)
    model = zm.build(kind, 6, 8, 3, 3)  # train mode: dropout on
    with SyncAudit() as a:
        loss = model(blocks, x).sum()
        loss.backward()
    assert a.allocations > 0, "the audit saw the ops"
    assert a.host_syncs == 0 and a.dynamic_shape_ops == 0, a.report()


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_forward_backward_capture_in_a_cuda_graph(kind):
    gen = torch.Generator().manual_seed(9)
    cpu_blocks = random_blocks(3, [4, 3, 2], gen)
    blocks = [
        Block(
            nbr=b.nbr.cuda(),
            mask=b.mask.cuda(),
            num_src=b.num_src.cuda(),
            num_dst=b.num_dst.cuda(),
            src_nodes=b.src_nodes.cuda(),
        )
        for b in cpu_blocks
    ]
    x = torch.randn(cpu_blocks[0].src_nodes.shape[0], 6, generator=gen).cuda()
    model = zm.build(kind, 6, 8, 3, 3, dropout=0.0).cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the capture
        for _ in range(2):
            model.zero_grad(set_to_none=False)
            model(blocks, x).square().sum().backward()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=False)
    with torch.cuda.graph(graph):
        static_out = model(blocks, x)
        static_out.square().sum().backward()
    graph.replay()
    torch.cuda.synchronize()
    captured = static_out.clone()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    eager = model(blocks, x)
    eager.square().sum().backward()
    torch.testing.assert_close(captured, eager, **TOL)
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, **TOL)


# ----------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize(
    "args, kw, error, match",
    [
        (("mlp", 4, 8, 3, 2), {}, ValueError, "unknown model"),
        ((3, 4, 8, 3, 2), {}, TypeError, "name"),
        (("sage", 0, 8, 3, 2), {}, ValueError, "in_dim"),
        (("gcn", 4, -1, 3, 2), {}, ValueError, "hidden_dim"),
        (("gat", 4, 8, 0, 2), {}, ValueError, "num_classes"),
        (("sage", 4, 8, 3, 0), {}, ValueError, "num_layers"),
        (("sage", 4.0, 8, 3, 2), {}, TypeError, "in_dim"),
        (("sage", True, 8, 3, 2), {}, TypeError, "in_dim"),
        (("sage", 4, 8, 3, 2), {"dropout": 1.0}, ValueError, "dropout"),
        (("sage", 4, 8, 3, 2), {"dropout": -0.1}, ValueError, "dropout"),
        (("sage", 4, 8, 3, 2), {"dropout": float("nan")}, ValueError, "dropout"),
        (("sage", 4, 8, 3, 2), {"dropout": "0.5"}, TypeError, "dropout"),
        (("sage", 4, 8, 3, 2), {"heads": 2}, ValueError, "heads"),
        (("gat", 4, 8, 3, 2), {"heads": 0}, ValueError, "heads"),
    ],
)
def test_build_rejects_bad_arguments(args, kw, error, match):
    with pytest.raises(error, match=match):
        zm.build(*args, **kw)


def test_build_names_are_case_insensitive():
    assert isinstance(zm.build("SAGE", 4, 8, 3, 2), zm.SAGE)
    assert isinstance(zm.build("gat", 4, 8, 3, 2, heads=2), zm.GAT)


def test_layers_reject_bad_arguments():
    with pytest.raises(ValueError, match="num_heads"):
        zm.GATConv(4, 3, 0)
    with pytest.raises(ValueError, match="out_dim"):
        zm.SAGEConv(4, 0)
    gen = torch.Generator().manual_seed(0)
    block = random_block(num_dst=3, num_src=5, dst_rows=4, src_rows=6, fanout=2, gen=gen)
    layer = zm.GCNConv(5, 3)
    with pytest.raises(ValueError, match=r"h_src must be \[S, 5\]"):
        layer(block, torch.randn(6, 4))
    with pytest.raises(ValueError, match="source rows"):
        layer(block, torch.randn(5, 5))
    with pytest.raises(TypeError, match="mask"):
        layer(Block(block.nbr, block.mask.long(), block.num_src, block.num_dst), torch.randn(6, 5))
    with pytest.raises(TypeError, match="zg.Block"):
        layer((block.nbr, block.mask), torch.randn(6, 5))


def test_models_reject_mismatched_blocks():
    gen = torch.Generator().manual_seed(0)
    blocks = random_blocks(2, [3, 2], gen)
    x = torch.randn(blocks[0].src_nodes.shape[0], 4)
    model = zm.SAGE(4, 8, 3, num_layers=3)
    with pytest.raises(ValueError, match="2 blocks for a model with 3 layers"):
        model(blocks, x)
    with pytest.raises(TypeError, match="list of zg.Block"):
        model(blocks[0], x)
    with pytest.raises(ValueError, match="rows"):
        zm.SAGE(4, 8, 3, num_layers=2)(blocks[::-1], x)
