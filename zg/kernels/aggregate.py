"""The CPU neighbour aggregation with a CSR backward: one weighted sum per destination row.

Where it sits: inside the layers of :mod:`zg.models` (... -> **forward** -> loss ->
**backward** -> ...), on the CPU only. A layer's aggregation is

    out[i, h] = sum_j weight[i, j, h] * table[nbr[i, j], h]          (real slots j of row i)

for ``table`` [S, H, F], ``nbr`` [D, k] and ``weight`` [D, k, H] (H = 1 for SAGE's mean and
GCN's normalised sum, H = heads for GAT's attention). The forward is torch's ``embedding_bag``
(fixed bags of k slots, per-slot weights), which never materialises the [D, k, H, F] gather.
Its backward is where torch and DGL part ways: torch's CPU ``embedding_bag`` backward sorts
all D * k slot indices by value and accumulates the sorted runs, padded slots included; DGL
runs a sparse-dense product over the transposed graph. This module's backward does the latter
on the padded block:

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
hands buffers above 32 MiB back to the kernel on free; see the README) cost as much as the
arithmetic, so the fewer and the smaller, the better.

The kernels compile on first use (numba, ``cache=True``: later processes load them from the
on-disk cache); numba's thread count follows torch's (:func:`zg._fused.set_threads`).

numba is optional (as for :mod:`zg._fused`): without it :func:`neighbour_sum` falls back to
plain ``embedding_bag`` (torch's own backward); :func:`available` says which runs.
The functions are once differentiable (no double backward), like the training step needs.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from . import sampling as _fused

__all__ = ["available", "neighbour_sum", "transpose_slots", "BACKWARDS"]

numba = _fused.numba

# "csr": this module's backward (needs numba); "torch": embedding_bag's own backward.
BACKWARDS = ("csr", "torch")
_backward = {"name": "csr"}


def available() -> bool:
    """True when numba imported, so the CSR backward can run."""
    return numba is not None


def set_backward(name: str) -> str:
    """Choose the CPU aggregation backward: ``"csr"`` (default; falls back to ``"torch"`` when
    numba is absent) or ``"torch"``. Returns the previous choice (benchmarks A/B with it)."""
    if name not in BACKWARDS:
        raise ValueError(f"backward must be one of {BACKWARDS}, got {name!r}")
    previous = _backward["name"]
    _backward["name"] = name
    return previous


if numba is not None:
    from numba import njit, prange

    @njit(parallel=True, cache=True, nogil=True)
    def _transpose(nbr, mask, num_rows, chunks):
        """CSR of the real slots by source row. nbr int64 [N], mask bool [N] (flat [D * k]);
        returns offsets int64 [num_rows + 1] and slots int64 [E], the slot ids of row s being
        slots[offsets[s]:offsets[s + 1]] in increasing order."""
        n = nbr.shape[0]
        step = (n + chunks - 1) // chunks
        counts = np.zeros((chunks, num_rows), dtype=np.int64)          # [C, S]
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
                    counts[c, s] = running                              # chunk c's write cursor
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
    return _fused.set_threads()


def transpose_slots(nbr: torch.Tensor, edge_mask: torch.Tensor, num_rows: int):
    """The CSR of the real slots of ``nbr`` [D, k] (``edge_mask`` [D, k]) by source row:
    ``(offsets int64 [num_rows + 1], slots int64 [E])``; the slots ``e = i * k + j`` reading
    row s are ``slots[offsets[s]:offsets[s + 1]]``, in increasing order. Needs numba."""
    if numba is None:
        raise RuntimeError(f"transpose_slots needs numba, which did not import: {_fused.import_error()}")
    nbr_np = nbr.detach().contiguous().view(-1).to(torch.int64).numpy()
    mask_np = edge_mask.contiguous().view(-1).numpy()
    offsets, slots = _transpose(nbr_np, mask_np, int(num_rows), _chunks())
    return torch.from_numpy(offsets), torch.from_numpy(slots)


def _bag_sum(table, nbr, weight):
    """The forward: embedding_bag over the [S * H, F] per-head rows -> [D, H, F]."""
    num_rows, heads, width = table.shape
    num_dst, fanout = nbr.shape
    if heads == 1:
        out = F.embedding_bag(nbr, table.reshape(num_rows, width),
                              per_sample_weights=weight.reshape(num_dst, fanout), mode="sum")
    else:
        head = torch.arange(heads, device=nbr.device)
        rows = nbr.unsqueeze(1) * heads + head.view(1, heads, 1)                  # [D, H, k]
        out = F.embedding_bag(rows.reshape(num_dst * heads, fanout), table.reshape(-1, width),
                              per_sample_weights=weight.transpose(1, 2).reshape(-1, fanout),
                              mode="sum")                                         # [D * H, F]
    return out.view(num_dst, heads, width)


def _csr_backward(ctx, grad_out, grad_self):
    """Gradients of table and weight (see the module docstring); grad_self [R, H, F] (or
    None) is the gradient of table[:R] through another path, added into the same pass."""
    table, nbr, weight, edge_mask = ctx.saved_tensors
    grad_out = grad_out.contiguous()                                              # [D, H, F]
    num_dst, fanout = nbr.shape
    heads, width = grad_out.shape[1], grad_out.shape[2]
    grad_table = grad_weight = None
    if ctx.needs_input_grad[0]:
        offsets, slots = transpose_slots(nbr, edge_mask, ctx.num_rows)
        grad_table = torch.empty(ctx.num_rows, heads, width, dtype=grad_out.dtype)
        grad_self = grad_out[:0] if grad_self is None else grad_self.contiguous()
        _chunks()
        _grad_table(offsets.numpy(), slots.numpy(), weight.view(num_dst * fanout, heads).numpy(),
                    grad_out.numpy(), fanout, grad_self.numpy(), grad_table.numpy())
    if ctx.needs_input_grad[2]:
        grad_weight = torch.empty(num_dst, fanout, heads, dtype=grad_out.dtype)
        _chunks()
        _grad_weight(nbr.numpy(), edge_mask.numpy(), table.contiguous().numpy(),
                     grad_out.numpy(), grad_weight.numpy())
    return grad_table, grad_weight


class _NeighbourSum(torch.autograd.Function):
    """embedding_bag forward, CSR backward (see the module docstring)."""

    @staticmethod
    def forward(ctx, table, nbr, weight, edge_mask):
        # table [S, H, F]; nbr [D, k] int64 with masked slots at row 0; weight [D, k, H] with
        # exact zeros on masked slots; edge_mask [D, k] bool (all contiguous).
        ctx.save_for_backward(table if ctx.needs_input_grad[2] else None, nbr, weight, edge_mask)
        ctx.num_rows = table.shape[0]
        return _bag_sum(table, nbr, weight)                                       # [D, H, F]

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
        return _bag_sum(table, nbr, weight), table[:self_rows].clone()            # [D, H, F], [R, H, F]

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out, grad_self):
        grad_table, grad_weight = _csr_backward(ctx, grad_out, grad_self)
        return grad_table, None, grad_weight, None, None


def neighbour_sum(table: torch.Tensor, nbr: torch.Tensor, weight: torch.Tensor,
                  edge_mask: torch.Tensor, backward: Optional[str] = None,
                  self_rows: Optional[int] = None):
    """``out[i, h] = sum_j weight[i, j, h] * table[nbr[i, j], h]`` over the real slots, on the CPU.

    ``table`` [S, H, F] float; ``nbr`` [D, k] int64 row ids into ``table``; ``weight``
    [D, k, H] of ``table``'s dtype; ``edge_mask`` [D, k] bool. Masked slots must have been
    pointed at row 0 and given weight exactly 0 (the caller's ``where``), so the forward's
    ``embedding_bag`` adds nothing for them (and checks every id is in [0, S) before the
    backward, which does not, reads them); the backward never visits them. Returns [D, H, F].

    ``self_rows``: if given (R), returns ``(out, table[:R])``, the second a copy whose
    gradient the CSR backward adds in its own pass (SAGE's self term).

    ``backward``: ``"csr"`` or ``"torch"`` (default: the module's choice, :func:`set_backward`;
    ``"csr"`` needs numba and falls back to ``"torch"`` without it). k = 0 gives zeros.
    """
    num_dst, fanout = nbr.shape
    heads, width = table.shape[1], table.shape[2]
    choice = _backward["name"] if backward is None else backward
    if choice not in BACKWARDS:
        raise ValueError(f"backward must be one of {BACKWARDS}, got {choice!r}")
    if self_rows is not None and not 0 <= self_rows <= table.shape[0]:
        raise ValueError(f"self_rows must be in [0, {table.shape[0]}] (the table's rows), got {self_rows}")
    if fanout == 0:
        out = table.new_zeros(num_dst, heads, width)
    elif choice == "csr" and numba is not None and table.device.type == "cpu":
        args = (table, nbr.to(torch.int64).contiguous(), weight.contiguous(), edge_mask.contiguous())
        if self_rows is not None:
            return _NeighbourSumAndSelf.apply(*args, int(self_rows))
        return _NeighbourSum.apply(*args)
    else:
        out = _bag_sum(table, nbr, weight)
    return out if self_rows is None else (out, table[:self_rows])
