"""The layers' neighbour aggregation: a weighted sum per destination row, and its CSR backward.

Its torch reference: the explicit gather and weighted sum, ``(h[nbr] * weight).sum(1)``
(:func:`gather_sum`, :func:`attention_gather_sum`), what CUDA runs and what ``kernel="torch"``
runs everywhere. ``tests/core/test_kernels_aggregate.py`` checks the kernel against it (and against
float64 autograd): the same sum up to floating-point summation order.

Where it sits: inside the layers of :mod:`zg.models` (... -> **forward** -> loss ->
**backward** -> ...). A layer's aggregation is

    out[i, h] = sum_j weight[i, j, h] * table[nbr[i, j], h]          (real slots j of row i)

for ``table`` [S, H, F], ``nbr`` [D, k] and ``weight`` [D, k, H] (H = 1 for SAGE's mean and
GCN's normalised sum, H = heads for GAT's attention). The layers call it by what it computes
(:func:`destination_rows_and_projected_mean`, :func:`projected_neighbour_sum`,
:func:`attention_sum`), with their ``kernel`` choice (:func:`zg.kernels.resolve`): "torch" is
the gather reference (the default); "fused" (opt-in on the CPU, with numba) is
:func:`neighbour_sum`.

:func:`neighbour_sum`'s forward is torch's ``embedding_bag`` (fixed bags of k slots, per-slot
weights), which never materialises the [D, k, H, F] gather. Its backward is where torch and
DGL part ways: torch's CPU ``embedding_bag`` backward sorts all D * k slot indices by value
and accumulates the sorted runs, padded slots included; DGL runs a sparse-dense product over
the transposed graph. This module's backward (``backward="csr"``, numba) does the latter on
the padded block:

1. **transpose** (a stable, parallel counting sort of the real slots by their source row):
   per chunk of slots a histogram of source rows, a prefix sum over (row, chunk), then each
   chunk writes its slots in order. Only slots whose mask is set are counted or moved; no
   sort by value, no atomics. Result: for each source row s the slots ``e = i * k + j`` that
   read it, in row-major order (CSR: ``offsets`` [S + 1], ``slots`` [E]).
2. **grad_table** (parallel over source rows, contiguous in the features):
   ``grad_table[s, h] = sum over e in slots(s) of weight[e, h] * grad_out[e // k, h]``,
   summed in row-major slot order. Each row is written by one thread in a fixed order, so the
   gradient is bit-identical run to run and for every thread count.
3. **grad_weight** (only when the weights need a gradient, GAT's attention): per real slot
   ``dot(grad_out[i, h], table[nbr[i, j], h])``, exactly 0 on masked slots.

SAGE's hidden layer also reads the first D rows of the same table (its self term). Through a
plain slice, autograd would zero-fill a second [S, F] gradient buffer for the slice and then
add the two; with ``self_rows`` the CSR pass adds that gradient itself, so the table's
gradient is one fresh buffer written once. On a CPU the fresh pages of such a buffer (glibc
hands buffers above 32 MiB back to the kernel on free; see docs/cpu_performance.md) cost as much as the
arithmetic, so the fewer and the smaller, the better.

The kernels compile on first use (numba, ``cache=True``: later processes load them from the
on-disk cache); numba's thread count follows torch's (:func:`zg.kernels.set_threads`).
``neighbour_sum(..., backward="torch")`` keeps ``embedding_bag``'s own backward (an A/B for
``bench/aggregation.py``). numba is optional: without it ``kernel="auto"`` runs the gather
reference, and ``backward="csr"`` is a RuntimeError. The functions are once differentiable
(no double backward), like the training step needs.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from .choice import import_error, numba, resolve, set_threads

__all__ = [
    "available",
    "neighbour_sum",
    "transpose_slots",
    "BACKWARDS",
    "gather",
    "masked_sum",
    "gather_sum",
    "attention_gather_sum",
    "weighted_neighbour_sum",
    "destination_rows_and_projected_mean",
    "projected_neighbour_sum",
    "attention_sum",
]

# neighbour_sum's backward: "csr", this module's (needs numba); "torch", embedding_bag's own.
BACKWARDS = ("csr", "torch")


def available() -> bool:
    """True when numba imported, so the CSR backward can run."""
    return numba is not None


if numba is not None:
    from numba import njit, prange

    @njit(parallel=True, cache=True, nogil=True)
    def _transpose(nbr, mask, num_rows, chunks):
        """CSR of the real slots by source row. nbr int64 [N], mask bool [N] (flat [D * k]);
        returns offsets int64 [num_rows + 1] and slots int64 [E], the slot ids of row s being
        slots[offsets[s]:offsets[s + 1]] in increasing order."""
        n = nbr.shape[0]
        step = (n + chunks - 1) // chunks
        counts = np.zeros((chunks, num_rows), dtype=np.int64)  # [C, S]
        for c in prange(chunks):
            for e in range(c * step, min(n, (c + 1) * step)):
                if mask[e]:
                    counts[c, nbr[e]] += 1
        # Exclusive prefix over (row, chunk), row-major: blocks of rows in parallel, then one
        # short sequential pass over the block totals.
        blocks = chunks * 4
        block_rows = (num_rows + blocks - 1) // blocks
        block_total = np.zeros(blocks + 1, dtype=np.int64)
        for b in prange(blocks):
            total = 0
            for s in range(b * block_rows, min(num_rows, (b + 1) * block_rows)):
                for c in range(chunks):
                    total += counts[c, s]
            block_total[b + 1] = total
        for b in range(blocks):
            block_total[b + 1] += block_total[b]
        offsets = np.empty(num_rows + 1, dtype=np.int64)
        offsets[num_rows] = block_total[blocks]
        for b in prange(blocks):
            running = block_total[b]
            for s in range(b * block_rows, min(num_rows, (b + 1) * block_rows)):
                offsets[s] = running
                for c in range(chunks):
                    count = counts[c, s]
                    counts[c, s] = running  # chunk c's write cursor
                    running += count
        slots = np.empty(block_total[blocks], dtype=np.int64)
        for c in prange(chunks):
            for e in range(c * step, min(n, (c + 1) * step)):
                if mask[e]:
                    s = nbr[e]
                    slots[counts[c, s]] = e
                    counts[c, s] += 1
        return offsets, slots

    @njit(parallel=True, cache=True, nogil=True)
    def _grad_table(offsets, slots, weight, grad_out, k, grad_self, grad_table):
        """grad_table [S, H, F] = sum over the slots e of row s of weight[e, h] * grad_out[e // k, h],
        plus grad_self[s] for the first grad_self.shape[0] rows (added last).

        weight [N, H] (N = D * k), grad_out [D, H, F]; rows are independent, one thread each,
        slots summed in their (row-major) order. Every row is written once: no zero-filled
        buffer first, no second pass to add grad_self."""
        num_rows, heads, width = grad_table.shape
        self_rows = grad_self.shape[0]
        for s in prange(num_rows):
            row = grad_table[s]
            row[:, :] = 0
            for p in range(offsets[s], offsets[s + 1]):
                e = slots[p]
                i = e // k
                for h in range(heads):
                    w = weight[e, h]
                    src = grad_out[i, h]
                    dst = row[h]
                    for f in range(width):
                        dst[f] += w * src[f]
            if s < self_rows:
                for h in range(heads):
                    src = grad_self[s, h]
                    dst = row[h]
                    for f in range(width):
                        dst[f] += src[f]

    @njit(parallel=True, cache=True, nogil=True, fastmath={"reassoc", "contract"})
    def _grad_weight(nbr, mask, table, grad_out, grad_weight):
        """grad_weight [D, k, H] = dot(grad_out[i, h], table[nbr[i, j], h]) on real slots, else 0.
        The dot may be reassociated (vectorised); each entry is one thread's, so it is still
        the same bits run to run."""
        rows, fanout = nbr.shape
        heads, width = table.shape[1], table.shape[2]
        for i in prange(rows):
            for j in range(fanout):
                for h in range(heads):
                    if not mask[i, j]:
                        grad_weight[i, j, h] = 0
                        continue
                    a = grad_out[i, h]
                    b = table[nbr[i, j], h]
                    total = a.dtype.type(0)
                    for f in range(width):
                        total += a[f] * b[f]
                    grad_weight[i, j, h] = total


def _chunks() -> int:
    return set_threads()


def transpose_slots(nbr: torch.Tensor, edge_mask: torch.Tensor, num_rows: int):
    """The CSR of the real slots of ``nbr`` [D, k] (``edge_mask`` [D, k]) by source row:
    ``(offsets int64 [num_rows + 1], slots int64 [E])``; the slots ``e = i * k + j`` reading
    row s are ``slots[offsets[s]:offsets[s + 1]]``, in increasing order. Needs numba."""
    if numba is None:
        raise RuntimeError(f"transpose_slots needs numba, which did not import: {import_error()}")
    nbr_np = nbr.detach().contiguous().view(-1).to(torch.int64).numpy()
    mask_np = edge_mask.contiguous().view(-1).numpy()
    offsets, slots = _transpose(nbr_np, mask_np, int(num_rows), _chunks())
    return torch.from_numpy(offsets), torch.from_numpy(slots)


def _bag_sum(table, nbr, weight):
    """The forward: embedding_bag over the [S * H, F] per-head rows -> [D, H, F]."""
    num_rows, heads, width = table.shape
    num_dst, fanout = nbr.shape
    if heads == 1:
        out = F.embedding_bag(
            nbr,
            table.reshape(num_rows, width),
            per_sample_weights=weight.reshape(num_dst, fanout),
            mode="sum",
        )
    else:
        head = torch.arange(heads, device=nbr.device)
        rows = nbr.unsqueeze(1) * heads + head.view(1, heads, 1)  # [D, H, k]
        out = F.embedding_bag(
            rows.reshape(num_dst * heads, fanout),
            table.reshape(-1, width),
            per_sample_weights=weight.transpose(1, 2).reshape(-1, fanout),
            mode="sum",
        )  # [D * H, F]
    return out.view(num_dst, heads, width)


def _csr_backward(ctx, grad_out, grad_self):
    """Gradients of table and weight (see the module docstring); grad_self [R, H, F] (or
    None) is the gradient of table[:R] through another path, added into the same pass."""
    table, nbr, weight, edge_mask = ctx.saved_tensors
    grad_out = grad_out.contiguous()  # [D, H, F]
    num_dst, fanout = nbr.shape
    heads, width = grad_out.shape[1], grad_out.shape[2]
    grad_table = grad_weight = None
    if ctx.needs_input_grad[0]:
        offsets, slots = transpose_slots(nbr, edge_mask, ctx.num_rows)
        grad_table = torch.empty(ctx.num_rows, heads, width, dtype=grad_out.dtype)
        grad_self = grad_out[:0] if grad_self is None else grad_self.contiguous()
        _chunks()
        _grad_table(
            offsets.numpy(),
            slots.numpy(),
            weight.view(num_dst * fanout, heads).numpy(),
            grad_out.numpy(),
            fanout,
            grad_self.numpy(),
            grad_table.numpy(),
        )
    if ctx.needs_input_grad[2]:
        grad_weight = torch.empty(num_dst, fanout, heads, dtype=grad_out.dtype)
        _chunks()
        _grad_weight(
            nbr.numpy(),
            edge_mask.numpy(),
            table.contiguous().numpy(),
            grad_out.numpy(),
            grad_weight.numpy(),
        )
    return grad_table, grad_weight


class _NeighbourSum(torch.autograd.Function):
    """embedding_bag forward, CSR backward (see the module docstring)."""

    @staticmethod
    def forward(ctx, table, nbr, weight, edge_mask):
        # table [S, H, F]; nbr [D, k] int64 with masked slots at row 0; weight [D, k, H] with
        # exact zeros on masked slots; edge_mask [D, k] bool (all contiguous).
        ctx.save_for_backward(table if ctx.needs_input_grad[2] else None, nbr, weight, edge_mask)
        ctx.num_rows = table.shape[0]
        return _bag_sum(table, nbr, weight)  # [D, H, F]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out):
        grad_table, grad_weight = _csr_backward(ctx, grad_out, None)
        return grad_table, None, grad_weight, None


class _NeighbourSumAndSelf(torch.autograd.Function):
    """The same, also returning ``table[:self_rows]`` (SAGE's self term reads the destination
    rows of the same table): its gradient is added in the CSR pass, so the table's gradient
    is one buffer written once, instead of a zero-filled copy for the slice plus a sum."""

    @staticmethod
    def forward(ctx, table, nbr, weight, edge_mask, self_rows):
        ctx.save_for_backward(table if ctx.needs_input_grad[2] else None, nbr, weight, edge_mask)
        ctx.num_rows = table.shape[0]
        return _bag_sum(table, nbr, weight), table[:self_rows].clone()  # [D, H, F], [R, H, F]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, grad_self):
        grad_table, grad_weight = _csr_backward(ctx, grad_out, grad_self)
        return grad_table, None, grad_weight, None, None


def neighbour_sum(
    table: torch.Tensor,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    edge_mask: torch.Tensor,
    backward: str = "csr",
    self_rows: int | None = None,
):
    """``out[i, h] = sum_j weight[i, j, h] * table[nbr[i, j], h]`` over the real slots, on the CPU.

    ``table`` [S, H, F] float; ``nbr`` [D, k] int64 row ids into ``table``; ``weight``
    [D, k, H] of ``table``'s dtype; ``edge_mask`` [D, k] bool. Masked slots must have been
    pointed at row 0 and given weight exactly 0 (the caller's ``where``), so the forward's
    ``embedding_bag`` adds nothing for them (and checks every id is in [0, S) before the
    backward, which does not, reads them); the backward never visits them. Returns [D, H, F].

    ``self_rows``: if given (R), returns ``(out, table[:R])``, the second a copy whose
    gradient the CSR backward adds in its own pass (SAGE's self term).

    ``backward``: ``"csr"`` (this module's, needs numba and a CPU table) or ``"torch"``
    (``embedding_bag``'s own). k = 0 gives zeros.
    """
    num_dst, fanout = nbr.shape
    heads, width = table.shape[1], table.shape[2]
    if backward not in BACKWARDS:
        raise ValueError(f"backward must be one of {BACKWARDS}, got {backward!r}")
    if backward == "csr" and (numba is None or table.device.type != "cpu"):
        raise RuntimeError(
            "neighbour_sum(backward='csr') runs on the CPU with numba "
            f"(table on {table.device}; numba: {import_error() or 'imported'})"
        )
    if self_rows is not None and not 0 <= self_rows <= table.shape[0]:
        raise ValueError(
            f"self_rows must be in [0, {table.shape[0]}] (the table's rows), got {self_rows}"
        )
    if fanout == 0:
        out = table.new_zeros(num_dst, heads, width)
    elif backward == "csr":
        args = (
            table,
            nbr.to(torch.int64).contiguous(),
            weight.contiguous(),
            edge_mask.contiguous(),
        )
        if self_rows is not None:
            return _NeighbourSumAndSelf.apply(*args, int(self_rows))
        return _NeighbourSum.apply(*args)
    else:
        out = _bag_sum(table, nbr, weight)
    return out if self_rows is None else (out, table[:self_rows])


# ----------------------------------------------------------------------------- the torch reference


def gather(h: torch.Tensor, nbr: torch.Tensor) -> torch.Tensor:
    """``h[nbr]`` for ``h`` [S, *F] and ``nbr`` [D, k] -> [D, k, *F] (backward: index_add)."""
    return h.index_select(0, nbr.reshape(-1)).view(*nbr.shape, *h.shape[1:])


def masked_sum(messages: torch.Tensor, edge_mask: torch.Tensor) -> torch.Tensor:
    """Sum of ``messages`` [D, k, *F] over the real slots (``edge_mask`` [D, k]) -> [D, *F]."""
    mask = edge_mask.view(*edge_mask.shape, *([1] * (messages.dim() - 2)))
    return torch.where(mask, messages, 0.0).sum(1)


def gather_sum(h: torch.Tensor, nbr: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The reference of the weighted sum: ``(h[nbr] * weight).sum(1)`` for ``h`` [S, F],
    ``nbr`` / ``weight`` [D, k] -> [D, F] (the explicit [D, k, F] gather; sync-free and
    capturable in a CUDA Graph). Masked slots must point at a real row with weight 0.

    The weighting and the sum are one batched product, ``[1, k] @ [k, F]`` per row: no
    weighted [D, k, F] copy in the forward pass, and a contiguous gradient for the gather in
    the backward (one product instead of a multiply and a copy)."""
    return torch.bmm(weight.to(h.dtype).unsqueeze(1), gather(h, nbr)).squeeze(1)


def attention_gather_sum(
    z: torch.Tensor, nbr: torch.Tensor, alpha: torch.Tensor, edge_mask: torch.Tensor
) -> torch.Tensor:
    """The reference of the attention sum: ``sum_j alpha[i, j, h] * z[nbr[i, j], h]`` over the
    real slots, through the explicit [D, k, H, F] gather -> [D, H, F]. Masked slots are
    selected away (so the result does not rest on 0 * z being 0)."""
    return masked_sum(alpha.unsqueeze(-1) * gather(z, nbr), edge_mask)


# ----------------------------------------------------------------------------- what the layers call


def weighted_neighbour_sum(
    h: torch.Tensor,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    edge_mask: torch.Tensor,
    kernel: str = "torch",
    self_rows=None,
    nbr_clean: bool = False,
):
    """``sum_j weight[i, j] * h[nbr[i, j]]`` for ``h`` [S, F], ``nbr`` / ``weight`` [D, k] -> [D, F].

    ``kernel`` (:func:`zg.kernels.resolve` on ``h``'s device): "fused" is :func:`neighbour_sum`
    (``embedding_bag`` forward, CSR backward: neither the [D, k, F] gather nor its gradient is
    materialised, which is where the CPU's time goes at training sizes); "torch" is
    :func:`gather_sum`. Masked slots (``edge_mask`` False) must carry weight 0; they are
    pointed at row 0, so what the padding holds cannot change even the order of the backward
    accumulation.

    With ``self_rows`` (R) it returns ``(sum, h[:R])``: with "fused" the backward then adds the
    gradient of ``h[:R]`` in the same pass that writes ``h``'s gradient (one [S, F] buffer
    written once, instead of a zero-filled one for the slice, another for the sum, and their
    addition).

    ``nbr_clean``: masked slots point at row 0 already (a :class:`zg.blocks.Block` with
    ``padding_clean``), so the ``where`` that does it is skipped.
    """
    if not nbr_clean:
        nbr = torch.where(edge_mask, nbr, 0)  # [D, k]
    if resolve(kernel, h.device) == "fused" and nbr.shape[1] > 0:
        out = neighbour_sum(
            h.unsqueeze(1), nbr, weight.to(h.dtype).unsqueeze(-1), edge_mask, self_rows=self_rows
        )  # [D, 1, F] (, [R, 1, F])
        if self_rows is None:
            return out.squeeze(1)
        return out[0].squeeze(1), out[1].squeeze(1)
    out = gather_sum(h, nbr, weight)  # [D, F]
    return out if self_rows is None else (out, h[:self_rows])


def _as_projection(project):
    """(function, output width) of a linear map: an ``nn.Linear`` or a weight [in, out]."""
    if isinstance(project, torch.Tensor):
        return (lambda t: t @ project), project.shape[1]
    return project, project.out_features


def destination_rows_and_projected_mean(
    h_src: torch.Tensor,
    nbr: torch.Tensor,
    edge_mask: torch.Tensor,
    project,
    kernel: str = "torch",
    nbr_clean: bool = False,
):
    """SAGE's two reads of ``h_src`` [S, F]: ``(h_src[:D], project(mean_j h_src[nbr[i, j]]))``
    -> ([D, F], [D, out]); the mean is over the real slots of row i (0 if none).

    ``project``: the linear map (an ``nn.Linear``, e.g. SAGE's ``fc_neigh``). The mean commutes
    with it, so when it narrows (out < F) it is applied first and the narrower rows are
    gathered (as DGL does); otherwise the mean comes first and, with "fused", the gradient of
    ``h_src[:D]`` is added in the aggregation's own backward pass (``self_rows``).
    """
    apply, out_dim = _as_projection(project)
    num_dst = nbr.shape[0]
    project_first = out_dim < h_src.shape[1]
    h = apply(h_src) if project_first else h_src  # [S, F']
    degree = edge_mask.sum(1, keepdim=True, dtype=h.dtype)  # [D, 1]
    weight = edge_mask / degree.clamp(min=1)  # [D, k] 1/deg per edge (bool / float: float)
    if project_first:
        return h_src[:num_dst], weighted_neighbour_sum(
            h, nbr, weight, edge_mask, kernel, nbr_clean=nbr_clean
        )
    mean, h_dst = weighted_neighbour_sum(
        h, nbr, weight, edge_mask, kernel, self_rows=num_dst, nbr_clean=nbr_clean
    )
    return h_dst, apply(mean)  # [D, F], [D, out]


def projected_neighbour_sum(
    h: torch.Tensor,
    nbr: torch.Tensor,
    weight: torch.Tensor,
    edge_mask: torch.Tensor,
    project,
    kernel: str = "torch",
    nbr_clean: bool = False,
) -> torch.Tensor:
    """``project(sum_j weight[i, j] * h[nbr[i, j]])`` for ``h`` [S, F] -> [D, out].

    ``project``: a linear map (an ``nn.Linear`` or a weight [F, out], applied as ``t @ W``);
    it commutes with the sum, so it is applied first when it narrows (out < F), after otherwise.
    """
    apply, out_dim = _as_projection(project)
    if out_dim < h.shape[1]:
        return weighted_neighbour_sum(
            apply(h), nbr, weight, edge_mask, kernel, nbr_clean=nbr_clean
        )  # [D, out]
    return apply(
        weighted_neighbour_sum(h, nbr, weight, edge_mask, kernel, nbr_clean=nbr_clean)
    )  # [D, out]


def attention_sum(
    z: torch.Tensor,
    nbr: torch.Tensor,
    alpha: torch.Tensor,
    edge_mask: torch.Tensor,
    kernel: str = "torch",
    nbr_clean: bool = False,
) -> torch.Tensor:
    """``sum_j alpha[i, j, h] * z[nbr[i, j], h]`` for ``z`` [S, H, F], ``nbr`` [D, k] and
    ``alpha`` [D, k, H] -> [D, H, F], over the real slots only (``edge_mask`` [D, k]).

    "fused": :func:`neighbour_sum`, one ``embedding_bag`` over the ``[S * H, F]`` table of
    per-head rows (bag ``(i, h)`` holds the ``k`` rows ``nbr[i, j] * H + h`` with weights
    ``alpha[i, j, h]``): neither the ``[D, k, H, F]`` gather nor its gradient is materialised;
    the backward is a CSR pass into ``z`` plus a dot product per real slot for ``alpha``.
    "torch": :func:`attention_gather_sum`. Masked slots are pointed at row 0 and given weight
    exactly 0 (a ``where``, so no gradient reaches their ``alpha`` either).
    """
    if resolve(kernel, z.device) == "fused" and nbr.shape[1] > 0:
        if not nbr_clean:  # masked slots at row 0 (already so for a padding_clean block)
            nbr = torch.where(edge_mask, nbr, 0)  # [D, k]
        weight = torch.where(edge_mask.unsqueeze(-1), alpha, 0.0)  # [D, k, H]
        return neighbour_sum(z, nbr, weight, edge_mask)  # [D, H, F]
    return attention_gather_sum(z, nbr, alpha, edge_mask)  # [D, H, F]
