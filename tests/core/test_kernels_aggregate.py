"""zg.kernels.aggregate: the CPU neighbour sum with the CSR backward, against the explicit
gather (its torch reference, what CUDA and kernel="torch" run) and float64 autograd; the
transpose against a plain loop; padding, empty rows, repeated neighbours, k = 0; bit-identical
gradients run to run and for 1 and 2 threads; the kernel choice as an argument (no module
switch); without numba."""

import pytest
import torch

import zg.kernels
import zg.kernels.aggregate as za
import zg.models as zm

needs_numba = pytest.mark.skipif(not za.available(), reason="the CSR backward needs numba")
TOL = dict(atol=1e-5, rtol=0)


def random_case(num_dst, real_dst, num_rows, fanout, heads, width, gen, dtype=torch.float32):
    """Masked slots point at row 0 with weight 0 (the caller's contract); rows >= real_dst are
    padding (no real slot); row 1 is a real row without an edge; slot 1 repeats slot 0 in some
    rows (a neighbour counted twice)."""
    mask = torch.rand(num_dst, fanout, generator=gen) < 0.7
    mask[real_dst:] = False
    if num_dst > 1:
        mask[1] = False
    nbr = torch.randint(0, num_rows, (num_dst, fanout), generator=gen)
    if fanout >= 2:
        dup = torch.rand(num_dst, generator=gen) < 0.4
        nbr[:, 1] = torch.where(dup & mask[:, 0], nbr[:, 0], nbr[:, 1])
        mask[:, 1] |= dup & mask[:, 0]
    nbr = torch.where(mask, nbr, 0)
    table = torch.randn(num_rows, heads, width, generator=gen, dtype=dtype)
    alpha = torch.rand(num_dst, fanout, heads, generator=gen, dtype=dtype)
    grad_out = torch.randn(num_dst, heads, width, generator=gen, dtype=dtype)
    return nbr, mask, table, alpha, grad_out


def gather_reference(table, nbr, weight, mask):
    """The explicit [D, k, H, F] gather, product and masked sum (what CUDA runs)."""
    return za.masked_sum(weight.unsqueeze(-1) * za.gather(table, nbr), mask)


def run(fn, table, nbr, alpha, mask, grad_out, weight_grad=True):
    table = table.clone().requires_grad_(True)
    alpha = alpha.clone().requires_grad_(weight_grad)
    weight = torch.where(mask.unsqueeze(-1), alpha, 0.0)
    out = fn(table, nbr, weight, mask)
    out.backward(grad_out)
    return out.detach(), table.grad, alpha.grad


CASES = [  # num_dst, real_dst, num_rows, fanout, heads, width
    (12, 9, 17, 4, 1, 6),
    (12, 9, 17, 5, 3, 7),
    (30, 30, 5, 6, 2, 3),  # many slots on few rows: long lists per row
    (8, 0, 10, 3, 1, 4),  # every row padded: zero output, zero gradient
    (7, 5, 9, 1, 4, 5),
    (40, 33, 300, 10, 1, 33),  # most source rows read by no edge
]


@needs_numba
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_csr_backward_matches_the_gather_reference(case, seed):
    gen = torch.Generator().manual_seed(seed)
    nbr, mask, table, alpha, grad_out = random_case(*case, gen)
    csr = run(lambda *a: za.neighbour_sum(*a, backward="csr"), table, nbr, alpha, mask, grad_out)
    ref = run(gather_reference, table, nbr, alpha, mask, grad_out)
    for got, want, what in zip(csr, ref, ("out", "grad table", "grad weight")):
        torch.testing.assert_close(got, want, **TOL, msg=what)
    out, grad_table, grad_alpha = csr
    assert torch.all(out[~mask.any(1)] == 0), "rows without a real edge sum to zero"
    assert torch.all(grad_alpha[~mask] == 0), "no gradient reaches a masked slot's weight"
    read = torch.zeros(case[2], dtype=torch.bool)
    read[nbr[mask]] = True
    assert torch.all(grad_table[~read] == 0), "rows no real edge reads get exactly zero gradient"


@pytest.mark.slow
@needs_numba
@pytest.mark.parametrize("case", CASES)
def test_csr_backward_matches_autograd_in_float64(case):
    gen = torch.Generator().manual_seed(3)
    nbr, mask, table, alpha, grad_out = random_case(*case, gen, dtype=torch.float64)
    csr = run(lambda *a: za.neighbour_sum(*a, backward="csr"), table, nbr, alpha, mask, grad_out)
    ref = run(gather_reference, table, nbr, alpha, mask, grad_out)
    for got, want in zip(csr, ref):
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


@needs_numba
def test_csr_backward_equals_embedding_bags_own_backward():
    gen = torch.Generator().manual_seed(4)
    nbr, mask, table, alpha, grad_out = random_case(50, 44, 60, 8, 3, 16, gen)
    csr = run(lambda *a: za.neighbour_sum(*a, backward="csr"), table, nbr, alpha, mask, grad_out)
    old = run(lambda *a: za.neighbour_sum(*a, backward="torch"), table, nbr, alpha, mask, grad_out)
    for got, want in zip(csr, old):
        torch.testing.assert_close(got, want, **TOL)
    assert torch.equal(csr[0], old[0]), "the forward is the same embedding_bag"


@needs_numba
def test_without_a_weight_gradient_only_the_table_gets_one():
    """SAGE and GCN: the weights are constants (1/degree, 1.0); the backward skips their dot."""
    gen = torch.Generator().manual_seed(5)
    nbr, mask, table, alpha, grad_out = random_case(20, 15, 25, 4, 1, 8, gen)
    out, grad_table, grad_alpha = run(
        za.neighbour_sum, table, nbr, alpha, mask, grad_out, weight_grad=False
    )
    ref = run(gather_reference, table, nbr, alpha, mask, grad_out, weight_grad=False)
    assert grad_alpha is None
    torch.testing.assert_close(grad_table, ref[1], **TOL)


def test_fanout_zero_gives_zeros():
    table = torch.randn(4, 2, 3, requires_grad=True)
    nbr = torch.zeros(3, 0, dtype=torch.long)
    out = za.neighbour_sum(table, nbr, torch.zeros(3, 0, 2), torch.zeros(3, 0, dtype=torch.bool))
    assert out.shape == (3, 2, 3) and torch.all(out == 0)


@needs_numba
def test_gradients_are_bit_identical_run_to_run_and_across_thread_counts():
    gen = torch.Generator().manual_seed(6)
    nbr, mask, table, alpha, grad_out = random_case(3000, 2900, 500, 10, 2, 24, gen)
    threads = torch.get_num_threads()
    results = []
    try:
        for count in (1, 2, 1, 2):
            torch.set_num_threads(count)
            results.append(run(za.neighbour_sum, table, nbr, alpha, mask, grad_out))
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for got, want in zip(other, results[0]):
            assert torch.equal(got, want)


@needs_numba
@pytest.mark.parametrize("chunks", [1, 2, 3, 7])
def test_transpose_lists_each_rows_real_slots_in_order(chunks, monkeypatch):
    gen = torch.Generator().manual_seed(7)
    nbr, mask, *_ = random_case(25, 20, 11, 5, 1, 1, gen)
    nbr = torch.where(
        mask, nbr, torch.randint(0, 11, nbr.shape, generator=gen)
    )  # junk behind masks
    offsets, slots = za.transpose_slots(nbr, mask, 13)  # rows 11 and 12: read by nothing
    flat_nbr, flat_mask = nbr.reshape(-1), mask.reshape(-1)
    want = [
        [e for e in range(flat_nbr.numel()) if flat_mask[e] and flat_nbr[e] == s] for s in range(13)
    ]
    assert offsets.shape == (14,) and int(offsets[-1]) == int(mask.sum())
    for s in range(13):
        assert slots[offsets[s] : offsets[s + 1]].tolist() == want[s]
    # The chunk count (the thread count) changes how the work is split, never the result.
    got = za._transpose(flat_nbr.numpy(), flat_mask.numpy(), 13, chunks)
    assert torch.equal(torch.from_numpy(got[0]), offsets) and torch.equal(
        torch.from_numpy(got[1]), slots
    )


def test_without_numba_auto_runs_the_gather_and_csr_is_an_error(monkeypatch):
    gen = torch.Generator().manual_seed(8)
    nbr, mask, table, alpha, grad_out = random_case(12, 9, 17, 4, 2, 6, gen)
    monkeypatch.setattr(za, "numba", None)
    monkeypatch.setattr(zg.kernels.choice, "numba", None)
    monkeypatch.setattr(zg.kernels.choice, "_notice", {"given": False})
    assert not za.available() and not zg.kernels.available()
    with pytest.warns(RuntimeWarning, match="numba is not installed"):
        got = run(
            lambda t, n, w, m: za.attention_sum(t, n, w, m, kernel="auto"),
            table,
            nbr,
            alpha,
            mask,
            grad_out,
        )
    ref = run(gather_reference, table, nbr, alpha, mask, grad_out)
    for a, b in zip(got, ref):
        assert torch.equal(a, b)  # the very same ops: the gather reference
    old = run(lambda *a: za.neighbour_sum(*a, backward="torch"), table, nbr, alpha, mask, grad_out)
    for a, b in zip(old, ref):
        torch.testing.assert_close(a, b, **TOL)
    with pytest.raises(RuntimeError, match="numba"):
        za.neighbour_sum(table, nbr, alpha, mask, backward="csr")
    with pytest.raises(RuntimeError, match="needs numba"):
        za.transpose_slots(nbr, mask, 17)
    with pytest.raises(RuntimeError, match="numba"):
        zm.SAGEConv(4, 3, kernel="fused")


def test_backward_choice_is_validated_and_there_is_no_module_switch():
    table, nbr = torch.randn(3, 1, 2), torch.zeros(2, 1, dtype=torch.long)
    with pytest.raises(ValueError, match="backward must be one of"):
        za.neighbour_sum(
            table, nbr, torch.zeros(2, 1, 1), torch.zeros(2, 1, dtype=torch.bool), backward="fast"
        )
    with pytest.raises(ValueError, match="kernel must be one of"):
        za.weighted_neighbour_sum(
            table[:, 0], nbr, torch.zeros(2, 1), torch.zeros(2, 1, dtype=torch.bool), kernel="csr"
        )
    assert not hasattr(za, "set_backward") and not hasattr(za, "_backward")


@needs_numba
@pytest.mark.parametrize("self_rows", [None, 4])
def test_kernel_torch_is_the_gather_and_fused_is_the_csr_kernel(self_rows):
    """weighted_neighbour_sum / attention_sum: kernel="torch" runs exactly the gather reference
    (same bits; no embedding_bag in the graph), "fused" the CSR kernel, equal within tolerance."""
    gen = torch.Generator().manual_seed(9)
    nbr, mask, table, alpha, grad_out = random_case(12, 9, 17, 4, 1, 6, gen)
    weight = torch.where(mask, alpha[..., 0], 0.0)  # [D, k]
    results = {}
    for kernel in ("torch", "fused"):
        h = table[:, 0].clone().requires_grad_(True)  # [S, F]
        out = za.weighted_neighbour_sum(h, nbr, weight, mask, kernel, self_rows=self_rows)
        first = out if self_rows is None else out[0]
        node = type(first.grad_fn).__name__ + type(first.grad_fn.next_functions[0][0]).__name__
        assert ("NeighbourSum" in node) == (kernel == "fused"), node
        assert "EmbeddingBag" not in node
        outs = [out] if self_rows is None else list(out)
        grads = [grad_out[:, 0]] + ([grad_out[:self_rows, 0]] if self_rows else [])
        torch.autograd.backward(outs, grads)
        results[kernel] = (outs[0].detach(), h.grad)
    want = za.gather_sum(table[:, 0], torch.where(mask, nbr, 0), weight)
    assert torch.equal(results["torch"][0], want)
    for got, ref in zip(results["fused"], results["torch"]):
        torch.testing.assert_close(got, ref, **TOL)
    z = table.clone()
    assert torch.equal(
        za.attention_sum(z, nbr, alpha, mask, "torch"), za.attention_gather_sum(z, nbr, alpha, mask)
    )
    torch.testing.assert_close(
        za.attention_sum(z, nbr, alpha, mask, "fused"),
        za.attention_gather_sum(z, nbr, alpha, mask),
        **TOL,
    )


@needs_numba
@pytest.mark.parametrize("kind", ["sage", "gcn", "gat"])
def test_whole_model_gradients_equal_with_either_backward(kind, monkeypatch):
    """The CSR backward against embedding_bag's own in a 3-layer model: the layers' calls
    into neighbour_sum, with backward="torch" passed explicitly to every one."""
    from test_models import random_blocks, run_with_grads

    gen = torch.Generator().manual_seed(9)
    blocks = random_blocks(3, [4, 3, 2], gen)
    x = torch.randn(blocks[0].src_nodes.shape[0], 6, generator=gen)
    model = zm.build(kind, 6, 8, 3, 3, dropout=0.0, kernel="fused")
    out, x_grad, grads = run_with_grads(model, blocks, x)
    csr = za.neighbour_sum
    monkeypatch.setattr(za, "neighbour_sum", lambda *a, **k: csr(*a, **{**k, "backward": "torch"}))
    ref, x_ref, grads_ref = run_with_grads(model, blocks, x)
    assert torch.equal(out, ref)
    torch.testing.assert_close(x_grad, x_ref, **TOL)
    for name in grads:
        torch.testing.assert_close(grads[name], grads_ref[name], **TOL, msg=name)


@needs_numba
@pytest.mark.parametrize("self_rows", [0, 5, 12])
@pytest.mark.parametrize("backward", ["csr", "torch"])
def test_self_rows_gradient_is_added_in_the_same_pass(self_rows, backward):
    """neighbour_sum(..., self_rows=R) returns (out, table[:R]); a loss on both gives the
    table the sum of both gradients, as autograd through a plain slice does."""
    gen = torch.Generator().manual_seed(10)
    nbr, mask, table, alpha, grad_out = random_case(12, 9, 17, 4, 1, 6, gen, dtype=torch.float64)
    grad_self = torch.randn(self_rows, 1, 6, generator=gen, dtype=torch.float64)
    results = []
    for fused in (True, False):
        t = table.clone().requires_grad_(True)
        weight = torch.where(mask.unsqueeze(-1), alpha, 0.0)
        if fused:
            out, rows = za.neighbour_sum(
                t, nbr, weight, mask, backward=backward, self_rows=self_rows
            )
        else:
            out, rows = gather_reference(t, nbr, weight, mask), t[:self_rows]
        torch.autograd.backward([out, rows], [grad_out, grad_self])
        results.append((out.detach(), rows.detach(), t.grad))
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="self_rows must be in"):
        za.neighbour_sum(table, nbr, alpha, mask, self_rows=18)


@needs_numba
def test_the_grad_fn_is_the_csr_backward():
    gen = torch.Generator().manual_seed(11)
    nbr, mask, table, alpha, _ = random_case(6, 5, 7, 3, 1, 4, gen)
    t = table.clone().requires_grad_(True)
    assert "_NeighbourSum" in type(za.neighbour_sum(t, nbr, alpha, mask).grad_fn).__name__
    assert (
        "_NeighbourSumAndSelf"
        in type(za.neighbour_sum(t, nbr, alpha, mask, self_rows=2)[0].grad_fn).__name__
    )
    view = za.neighbour_sum(t, nbr, alpha, mask, backward="torch").grad_fn
    assert "EmbeddingBag" in type(view.next_functions[0][0]).__name__


@needs_numba
@pytest.mark.parametrize("num_rows", [0, 3])
def test_no_destination_rows(num_rows):
    table = torch.randn(num_rows, 2, 4, requires_grad=True)
    alpha = torch.zeros(0, 3, 2, requires_grad=True)
    out = za.neighbour_sum(
        table,
        torch.zeros(0, 3, dtype=torch.long),
        alpha,
        torch.zeros(0, 3, dtype=torch.bool),
        backward="csr",
    )
    out.sum().backward()
    assert out.shape == (0, 2, 4)
    assert table.grad.shape == (num_rows, 2, 4) and torch.all(table.grad == 0)
    assert alpha.grad.shape == (0, 3, 2)
