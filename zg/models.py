"""GNN layers and models over padded sampled blocks: SAGE, GCN and GAT.

Where it sits: a sampler turns seeds into a list of padded :class:`~zg.blocks.Block` s (input
layer first); features are gathered for the first block's source rows; the models below map
``(blocks, x)`` to logits for the last block's destination rows; loss, backward and the
optimizer step follow.

Every layer computes exactly what its DGL counterpart computes on ``block.to_dgl()`` (same
formula, same parameter names and shapes, so ``layer.load_state_dict(dgl_layer.state_dict())``
works), but on fixed shapes:

* each ``forward`` reads as the formula in its class docstring; the neighbour aggregations
  (SAGE's mean, GCN's normalised sum, GAT's attention-weighted sum) are calls into
  :mod:`zg.kernels.aggregate` named for what they compute. Its torch reference reads the
  neighbours with one gather ``h[nbr]`` of shape ``[D, k, F]`` and sums over the ``k`` fanout
  slots, masked slots carrying weight 0 or selected away (``torch.where``, never a multiply
  alone, so even ``inf`` / ``NaN`` behind a masked slot cannot leak in): what CUDA runs (known
  sync-free and capturable), and what ``kernel="torch"`` (default) runs everywhere. With
  ``kernel="auto"`` or ``"fused"`` the CPU runs one ``embedding_bag`` per sum
  instead, backward a parallel CSR pass over the real slots (numba; no sort, deterministic):
  the ``[D, k, F]`` gather is never materialised. Every layer and model takes ``kernel``
  (:data:`zg.kernels.KERNELS`); ``model.set_kernel(kernel)`` sets it on every layer;
* degrees and counts are tensors made with ``sum`` / ``index_add_`` into fixed-size buffers;
* nothing is read on the host and no op has a data-dependent output shape (no ``.item()``,
  ``nonzero``, boolean-mask indexing or ``unique``), so forward and backward can be captured
  in a CUDA Graph.

Padding is ignored exactly. Slots whose mask is False and destination rows ``>= num_dst``
carry no edge, masked slots are redirected to row 0 before any gather-sum, and output rows
``>= num_dst`` are zero. Padded source rows (``>= num_src``) are never read by a real edge and
receive exactly zero gradient. So the real output rows (and the gradients of the real input
rows and of every parameter) do not depend on what the padding holds, bit for bit, as long as
the padding is finite: the samplers guarantee that (padded source ids are real node ids and
every layer zeroes its padded output rows). The layers do not spend a pass over ``[S, F]``
zeroing padded rows: 0 * NaN would still be NaN in a weight gradient, so NaN or inf padding is
the one thing they do not absorb.

A slot is one edge: if the same neighbour fills two slots of a row (sampling with replacement,
duplicate edges), it is counted twice, as DGL counts parallel edges twice.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from . import kernels
from ._checks import int_arg, memory_arg, real_arg
from .blocks import Block
from .kernels.aggregate import (
    attention_sum,
    destination_rows_and_projected_mean,
    gather,
    projected_neighbour_sum,
)

__all__ = [
    "BlockModel",
    "SAGEConv",
    "GCNConv",
    "GATConv",
    "SAGE",
    "GCN",
    "GAT",
    "build",
    "build_seeded",
    "MODELS",
    "masked_softmax",
    "zero_padded_rows",
    "relu_zeroing_padded_rows",
]


# ----------------------------------------------------------------------------- validation


def _positive_int(value, name: str) -> int:
    return int_arg(value, name, low=1)


def _dropout_rate(value, name: str = "dropout") -> float:
    return real_arg(value, name, low=0.0, high=1.0, high_open=True)


def _check_layer_inputs(layer: str, block: Block, h_src: torch.Tensor, in_dim: int) -> None:
    """Static checks only (shapes, dtypes): they read no tensor values, so they cost no sync."""
    if not isinstance(block, Block):
        raise TypeError(f"{layer}: block must be a zg.Block, got {type(block).__name__}")
    if not isinstance(h_src, torch.Tensor):
        raise TypeError(f"{layer}: h_src must be a tensor, got {type(h_src).__name__}")
    nbr, mask = block.nbr, block.mask
    if nbr.dim() != 2 or mask.shape != nbr.shape:
        raise ValueError(
            f"{layer}: block.nbr and block.mask must both be [D, k], got "
            f"{tuple(nbr.shape)} and {tuple(mask.shape)}"
        )
    if mask.dtype != torch.bool:
        raise TypeError(f"{layer}: block.mask must be a bool tensor, got {mask.dtype}")
    if nbr.dtype not in (torch.int64, torch.int32):
        raise TypeError(f"{layer}: block.nbr must hold int64 row indices, got {nbr.dtype}")
    if h_src.dim() != 2 or h_src.shape[1] != in_dim:
        raise ValueError(f"{layer}: h_src must be [S, {in_dim}], got {tuple(h_src.shape)}")
    num_rows = h_src.shape[0]
    if block.src_nodes is not None and num_rows != block.src_nodes.shape[0]:
        raise ValueError(
            f"{layer}: h_src has {num_rows} rows but the block has "
            f"S = {block.src_nodes.shape[0]} source rows"
        )
    if num_rows < nbr.shape[0]:
        raise ValueError(
            f"{layer}: h_src has {num_rows} rows, fewer than the block's "
            f"D = {nbr.shape[0]} destination rows (destinations are the first "
            "source rows)"
        )


def _real_edges(block: Block, device: torch.device):
    """The block's edges without those of padded destination rows (padded source rows are
    never read by a real edge; see the module docstring): ``edge_mask`` bool [D, k] (True for
    real edges only) and ``dst_real`` bool [D, 1] (True for rows < num_dst). All on device.
    A block that says its padding is clean (``padding_clean``, ``dst_valid``: the kit's
    samplers) gives both without a launch.
    """
    if block.dst_valid is not None:
        dst_real = block.dst_valid.unsqueeze(1)  # [D, 1]
    else:
        rows = torch.arange(block.nbr.shape[0], device=device)
        dst_real = (rows < block.num_dst).unsqueeze(1)  # [D, 1]
    edge_mask = block.mask if block.padding_clean else block.mask & dst_real  # [D, k]
    return edge_mask, dst_real


def zero_padded_rows(out: torch.Tensor, dst_real: torch.Tensor) -> torch.Tensor:
    """Rows ``>= num_dst`` of ``out`` [D, ...] become zero, in place (``dst_real`` bool [D, 1]).

    A multiply by the 0/1 mask rather than a ``where``: it writes into ``out`` instead of
    allocating a second [D, out] buffer, which on the CPU costs more than the arithmetic
    (fresh large buffers are page-faulted in on every iteration). Padded rows hold finite
    values (see the module docstring), so they become exactly zero (possibly -0.0).
    """
    mask = dst_real.view(dst_real.shape[0], *([1] * (out.dim() - 1)))  # bool: 1.0 / 0.0
    return out.mul_(mask)


class _ZeroPaddedRowsThenReLU(torch.autograd.Function):
    """``relu(out)`` with rows ``>= num_dst`` zeroed, in place on ``out`` [D, ...], as one
    autograd node: its backward is ReLU's own (``grad`` where the result is > 0), which already
    zeroes the padded rows, so the separate row-mask multiply (a fresh [D, out] buffer in
    backward) and the out-of-place ReLU (another in forward) are both saved. Same values and
    gradients, bit for bit, as ``F.relu(zero_padded_rows(out, dst_real))``."""

    @staticmethod
    def forward(ctx, out, dst_real):
        mask = dst_real.view(dst_real.shape[0], *([1] * (out.dim() - 1)))  # bool: 1.0 / 0.0
        out.mul_(mask).clamp_(min=0)
        ctx.mark_dirty(out)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad):
        (result,) = ctx.saved_tensors
        return torch.ops.aten.threshold_backward(grad, result, 0), None


def relu_zeroing_padded_rows(out: torch.Tensor, dst_real: torch.Tensor) -> torch.Tensor:
    """``relu(out)`` with rows ``>= num_dst`` zeroed (``dst_real`` bool [D, 1]), in place on
    ``out`` [D, ...]: one autograd node, bit for bit ``F.relu(zero_padded_rows(out, dst_real))``
    (the hidden SAGE / GCN layers' last step)."""
    return _ZeroPaddedRowsThenReLU.apply(out, dst_real)


def _zero_padded_rows_then(activation, out: torch.Tensor, dst_real: torch.Tensor) -> torch.Tensor:
    """A SAGE / GCN layer's last step: padded rows to zero, then ``activation`` (None or "relu")."""
    if activation == "relu":
        return relu_zeroing_padded_rows(out, dst_real)
    return zero_padded_rows(out, dst_real)


_ACTIVATIONS = (None, "relu")


def _activation(value) -> str | None:
    if value not in _ACTIVATIONS:
        raise ValueError(f"activation must be None or 'relu', got {value!r}")
    return value


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax of ``scores`` [D, k, *] over dim 1, restricted to the slots where ``mask`` [D, k].

    Masked slots get exactly 0 and do not influence the real ones; a row with no real slot is
    all zeros (not NaN). Equals DGL's ``edge_softmax`` over each destination's in-edges.
    """
    if mask.dtype != torch.bool or scores.dim() < 2 or mask.shape != scores.shape[:2]:
        raise ValueError(
            f"masked_softmax: mask must be bool [D, k] matching scores [D, k, *]; "
            f"got mask {mask.dtype} {tuple(mask.shape)}, scores {tuple(scores.shape)}"
        )
    if scores.shape[1] == 0:
        return scores
    mask = mask.view(*mask.shape, *([1] * (scores.dim() - 2)))  # [D, k, 1...]
    # Subtracting the row max keeps exp() finite. Softmax does not depend on the shift, so its
    # gradient through the max is exactly zero: detach it rather than route noise through amax.
    row_max = scores.masked_fill(~mask, -math.inf).amax(1, keepdim=True)  # [D, 1, *]
    row_max = torch.where(mask.any(1, keepdim=True), row_max, 0.0).detach()  # empty row: 0
    # -inf (not a multiply by 0) on masked slots: exp(-inf) = 0 with gradient 0, whereas an
    # overflowing exp() hidden behind a where would give 0 * inf = NaN in backward.
    weights = torch.exp(torch.where(mask, scores - row_max, -math.inf))  # [D, k, *]
    total = weights.sum(1, keepdim=True)  # [D, 1, *]
    # total >= 1 on rows with a real slot (the max contributes exp(0)); 0 only on empty rows.
    return weights / torch.where(total > 0, total, 1.0)


# ----------------------------------------------------------------------------- layers


class SAGEConv(nn.Module):
    r"""GraphSAGE with the mean aggregator, on a padded block.

        h'_i = W_self h_i + b + W_neigh mean_{j in N(i)} h_j

    where N(i) are the real slots of destination row i (a neighbour in two slots counts twice)
    and the mean is 0 when row i has no real slot.

    Shapes: ``h_src`` [S, in_dim] (destination rows are its first D rows) -> [D, out_dim].
    Parameters: ``fc_self`` (Linear with bias), ``fc_neigh`` (Linear, no bias).
    ``activation``: None or ``"relu"`` (applied last, as DGL's ``activation=F.relu``; the
    models use it between layers: one fused step with the padded-row zeroing).
    ``kernel``: how the mean is computed (:data:`zg.kernels.KERNELS`; the same values).

    DGL equivalent: ``dgl.nn.SAGEConv(in_dim, out_dim, 'mean')`` (feat_drop=0, no norm, no
    activation); same parameter names, and like DGL it projects before gathering when
    ``in_dim > out_dim`` (the mean commutes with the linear map; gather the narrower width).
    """

    def __init__(
        self, in_dim: int, out_dim: int, bias: bool = True, activation=None, kernel: str = "torch"
    ):
        super().__init__()
        self.in_dim = _positive_int(in_dim, "in_dim")
        self.out_dim = _positive_int(out_dim, "out_dim")
        self.activation = _activation(activation)
        self.kernel = kernels.check(kernel)
        self.fc_neigh = nn.Linear(in_dim, out_dim, bias=False)
        self.fc_self = nn.Linear(in_dim, out_dim, bias=bool(bias))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As DGL: Glorot-uniform weights (ReLU gain), nn.Linear's default bias."""
        gain = nn.init.calculate_gain("relu")
        self.fc_self.reset_parameters()
        nn.init.xavier_uniform_(self.fc_self.weight, gain=gain)
        nn.init.xavier_uniform_(self.fc_neigh.weight, gain=gain)

    def forward(self, block: Block, h_src: torch.Tensor) -> torch.Tensor:
        _check_layer_inputs("SAGEConv", block, h_src, self.in_dim)
        edge_mask, dst_real = _real_edges(block, h_src.device)  # [D, k], [D, 1]
        # h_i (the first D rows) and W_neigh mean_j h_j, both read from h_src (the projection
        # comes first when it narrows; otherwise one backward pass gives h_src its gradient).
        h_dst, h_neigh = destination_rows_and_projected_mean(
            h_src, block.nbr, edge_mask, self.fc_neigh, self.kernel, block.padding_clean
        )  # [D, in], [D, out]
        h_self = self.fc_self(h_dst)  # W_self h_i + b  [D, out]
        return _zero_padded_rows_then(self.activation, h_self + h_neigh, dst_real)  # [D, out]

    def extra_repr(self) -> str:
        act = f", activation={self.activation}" if self.activation else ""
        return f"{self.in_dim}, {self.out_dim}, aggregator=mean{act}"


class GCNConv(nn.Module):
    r"""Graph convolution (Kipf & Welling) with symmetric ("both") normalisation, on a block.

        h'_i = b + d_in(i)^{-1/2} sum_{j in N(i)} d_out(j)^{-1/2} h_j W

    where, as in DGL on a block, d_out(j) is the number of real edges leaving source row j
    *within this block* (``block.out_degree`` instead when the block carries its graph's) and
    d_in(i) the number of real edges entering destination row i, both clamped to >= 1; each
    slot is one edge (duplicates count). No self-loop is added: a row with no real slot gets
    just the bias.

    Shapes: ``h_src`` [S, in_dim] -> [D, out_dim]. Parameters: ``weight`` [in_dim, out_dim]
    (DGL's layout, applied as ``h @ weight``), ``bias`` [out_dim]. ``activation``: None or
    ``"relu"``, applied last (as SAGEConv's). ``kernel``: how the sum is computed
    (:data:`zg.kernels.KERNELS`; the same values).

    DGL equivalent: ``dgl.nn.GraphConv(in_dim, out_dim, norm='both', allow_zero_in_degree=True)``;
    like DGL it multiplies by ``weight`` before aggregating when ``in_dim > out_dim``.
    """

    def __init__(
        self, in_dim: int, out_dim: int, bias: bool = True, activation=None, kernel: str = "torch"
    ):
        super().__init__()
        self.in_dim = _positive_int(in_dim, "in_dim")
        self.out_dim = _positive_int(out_dim, "out_dim")
        self.activation = _activation(activation)
        self.kernel = kernels.check(kernel)
        self.weight = nn.Parameter(torch.empty(in_dim, out_dim))
        self.bias = nn.Parameter(torch.empty(out_dim)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As DGL (and Kipf's code): Glorot-uniform weight, zero bias."""
        nn.init.xavier_uniform_(self.weight)
        if self.bias is not None:
            nn.init.zeros_(self.bias)

    def forward(self, block: Block, h_src: torch.Tensor) -> torch.Tensor:
        _check_layer_inputs("GCNConv", block, h_src, self.in_dim)
        edge_mask, dst_real = _real_edges(block, h_src.device)  # [D, k], [D, 1]
        edge_count = edge_mask.to(h_src.dtype)  # [D, k] 1.0 per edge
        if block.out_degree is not None:  # the graph's, not the block's (Block.out_degree)
            out_degree = block.out_degree.to(h_src.dtype)  # [S] d_out(j)
        else:
            out_degree = torch.zeros(h_src.shape[0], dtype=h_src.dtype, device=h_src.device)
            out_degree.index_add_(0, block.nbr.reshape(-1), edge_count.reshape(-1))  # [S]
        in_degree = edge_count.sum(1)  # [D] d_in(i)
        h = h_src * out_degree.clamp(min=1).pow(-0.5).unsqueeze(1)  # d_out(j)^-1/2 h_j  [S, in]
        # sum_j (...) W (W first when it narrows: the sum commutes with it)
        out = projected_neighbour_sum(
            h, block.nbr, edge_count, edge_mask, self.weight, self.kernel, block.padding_clean
        )  # [D, out]
        out = out * in_degree.clamp(min=1).pow(-0.5).unsqueeze(1)  # d_in(i)^-1/2 (...)  [D, out]
        if self.bias is not None:
            out = out + self.bias
        return _zero_padded_rows_then(self.activation, out, dst_real)  # [D, out]

    def extra_repr(self) -> str:
        act = f", activation={self.activation}" if self.activation else ""
        return f"{self.in_dim}, {self.out_dim}, norm=both{act}"


class GATConv(nn.Module):
    r"""Multi-head graph attention (Velickovic et al.), on a padded block.

    For each head h (W shared by source and destination rows, as DGL does on a block):

        z_j = W h_j                                                   (split into heads)
        e_ij = LeakyReLU_{0.2}( a_l . z_j + a_r . z_i )               for each real slot j of i
        alpha_ij = softmax_j(e_ij)        over the real slots of row i (0 if it has none)
        h'_i = sum_j alpha_ij z_j + b     (+ residual: z'_i = W_res h_i, or h_i itself)

    Shapes: ``h_src`` [S, in_dim] -> [D, num_heads, out_dim].
    Parameters: ``fc`` (Linear in_dim -> num_heads * out_dim, no bias), ``attn_l`` and
    ``attn_r`` [1, num_heads, out_dim], ``bias`` [num_heads * out_dim]; with ``residual=True``
    also ``res_fc`` (a Linear when in_dim != num_heads * out_dim, else the identity).

    DGL equivalent: ``dgl.nn.GATConv(in_dim, out_dim, num_heads, allow_zero_in_degree=True)``
    with feat_drop = attn_drop = 0. As in DGL, residual is off by default, and when the
    residual is a Linear it carries the bias (the layer then has no separate ``bias``).
    A destination with no real in-edge gets just the bias (plus its residual). ``kernel``: how
    the attention-weighted sum is computed (:data:`zg.kernels.KERNELS`; the same values).
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_heads: int,
        negative_slope: float = 0.2,
        residual: bool = False,
        bias: bool = True,
        kernel: str = "torch",
    ):
        super().__init__()
        self.kernel = kernels.check(kernel)
        self.in_dim = _positive_int(in_dim, "in_dim")
        self.out_dim = _positive_int(out_dim, "out_dim")
        self.num_heads = _positive_int(num_heads, "num_heads")
        self.negative_slope = real_arg(negative_slope, "negative_slope")
        width = num_heads * out_dim
        self.fc = nn.Linear(in_dim, width, bias=False)
        self.attn_l = nn.Parameter(torch.empty(1, num_heads, out_dim))
        self.attn_r = nn.Parameter(torch.empty(1, num_heads, out_dim))
        self.res_fc = None
        if residual:
            self.res_fc = nn.Linear(in_dim, width, bias=bias) if in_dim != width else nn.Identity()
        has_linear_residual = isinstance(self.res_fc, nn.Linear)
        self.bias = nn.Parameter(torch.empty(width)) if bias and not has_linear_residual else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """As DGL: Glorot-normal weights and attention vectors (ReLU gain), zero biases."""
        gain = nn.init.calculate_gain("relu")
        nn.init.xavier_normal_(self.fc.weight, gain=gain)
        nn.init.xavier_normal_(self.attn_l, gain=gain)
        nn.init.xavier_normal_(self.attn_r, gain=gain)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        if isinstance(self.res_fc, nn.Linear):
            nn.init.xavier_normal_(self.res_fc.weight, gain=gain)
            if self.res_fc.bias is not None:
                nn.init.zeros_(self.res_fc.bias)

    def forward(self, block: Block, h_src: torch.Tensor) -> torch.Tensor:
        _check_layer_inputs("GATConv", block, h_src, self.in_dim)
        edge_mask, dst_real = _real_edges(block, h_src.device)  # [D, k], [D, 1]
        nbr, num_dst_rows = block.nbr, block.nbr.shape[0]
        heads, out_dim = self.num_heads, self.out_dim
        z = self.fc(h_src).view(-1, heads, out_dim)  # z_j = W h_j  [S, H, out]
        score_src = (z * self.attn_l).sum(-1)  # a_l . z_j  [S, H]
        score_dst = (z[:num_dst_rows] * self.attn_r).sum(-1)  # a_r . z_i  [D, H]
        scores = gather(score_src, nbr) + score_dst.unsqueeze(1)  # [D, k, H]
        scores = F.leaky_relu(scores, self.negative_slope)  # e_ij
        alpha = masked_softmax(scores, edge_mask)  # alpha_ij  [D, k, H]
        out = attention_sum(
            z, nbr, alpha, edge_mask, self.kernel, block.padding_clean
        )  # sum_j alpha_ij z_j  [D, H, out]
        if self.res_fc is not None:
            out = out + self.res_fc(h_src[:num_dst_rows]).view(-1, heads, out_dim)
        if self.bias is not None:
            out = out + self.bias.view(heads, out_dim)
        return zero_padded_rows(out, dst_real)  # [D, H, out]

    def extra_repr(self) -> str:
        return (
            f"{self.in_dim}, {self.out_dim}, num_heads={self.num_heads}, "
            f"residual={self.res_fc is not None}"
        )


# ----------------------------------------------------------------------------- models


class BlockModel(nn.Module):
    """The base of every zg model: a stack of layers, one per sampled block.

    ``forward(blocks, x) -> logits [D_last, C]``: ``blocks`` is a list of :class:`zg.Block`
    (one per layer, input layer first) and ``x`` the features of the first block's source
    rows, ``[S_0, feature_dims[0]]``. Subclass it to add a model the kit does not have; the
    Engine (every mode but "dgl"), full-neighbour evaluation and the memory model then use it
    like SAGE, GCN and GAT. The contract a subclass keeps:

    * ``layers``: an ``nn.ModuleList``, one layer per block. Layer ``i`` is called as
      ``layers[i](block, h)`` with ``h`` ``[S_i, feature_dims[i]]`` (the block's source rows,
      destination rows first) and returns ``[D_i, ...]`` for its ``D_i`` destination rows;
      each layer has ``in_dim`` (= ``feature_dims[i]``). It reads a neighbour only through a
      slot whose ``block.mask`` is True (padding slots hold row 0, padded destination rows
      ``>= block.num_dst`` have no real slot), and its output rows ``>= num_dst`` are zero
      (:func:`zero_padded_rows`), so padding never reaches a real row or a gradient.
    * ``feature_dims``: the width entering each layer, then the output width
      (``num_layers + 1`` ints): what the Engine checks against the graph and the memory model
      sizes activations with. The last must be at least the graph's number of classes.
    * ``after_layer(i, h)``: what follows layer ``i`` (default: nothing); the default
      :meth:`forward` is ``h = after_layer(i, layers[i](blocks[i], h))`` over the layers, and
      full-neighbour evaluation (:func:`zg.inference.full_neighbour_logits`) runs the same
      layers and ``after_layer`` on blocks holding every in-edge.
    * For capture (modes "static" and "graph") the forward must make no host read and no
      data-dependent shape (no ``.item()``, ``nonzero``, boolean indexing, ``unique``):
      ``zg.audit.SyncAudit`` checks it.

    ``set_kernel(kernel)`` sets ``kernel`` on every layer (a layer may ignore it); the Engine
    calls it with its own. ``tests/core/test_extension_points.py`` writes a GIN model on it
    from outside the package.
    """

    layers: nn.ModuleList
    feature_dims: list[int]

    def forward(self, blocks: Sequence[Block], x: torch.Tensor) -> torch.Tensor:
        self._check_blocks(blocks, x)
        h = x  # [S0, in_dim]
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = self.after_layer(i, layer(block, h))  # [D_i, feature_dims[i + 1]]
        return h  # [D_last, num_classes]

    def after_layer(self, i: int, h: torch.Tensor) -> torch.Tensor:
        """What follows layer ``i`` (default: nothing)."""
        return h

    def set_kernel(self, kernel: str) -> BlockModel:
        """How every layer aggregates (:data:`zg.kernels.KERNELS`): "auto", "fused" (the CPU's
        embedding_bag + CSR backward) or "torch" (the explicit gather, as CUDA runs it).
        The Engine calls it with its own ``kernel``. Returns the model."""
        return self._use_kernel(kernels.check(kernel))

    def _use_kernel(self, kernel: str) -> BlockModel:
        """:meth:`set_kernel` of a checked choice (the Engine has checked its ``kernel``)."""
        self.kernel = kernel
        for layer in self.layers:
            layer.kernel = kernel
        return self

    def _check_blocks(self, blocks: Sequence[Block], x: torch.Tensor) -> None:
        name = type(self).__name__
        if isinstance(blocks, Block) or not isinstance(blocks, (list, tuple)):
            raise TypeError(
                f"{name}: blocks must be a list of zg.Block (input layer first), "
                f"got {type(blocks).__name__}"
            )
        if len(blocks) != len(self.layers):
            raise ValueError(
                f"{name}: got {len(blocks)} blocks for a model with "
                f"{len(self.layers)} layers (one block per layer)"
            )
        if not isinstance(x, torch.Tensor) or x.dim() != 2:
            raise ValueError(f"{name}: x must be a [S0, {self.feature_dims[0]}] tensor")

    def reset_parameters(self) -> None:
        for layer in self.layers:
            layer.reset_parameters()

    @property
    def num_layers(self) -> int:
        return len(self.layers)


class _Seeded:
    """Draw from torch's CPU generator seeded with ``seed`` inside the block and put the
    generator back as it was afterwards (``seed=None``: draw from it as it stands)."""

    def __init__(self, seed: int | None):
        self.seed = None if seed is None else int_arg(seed, "seed", low=0, high=2**63 - 1)

    def __enter__(self):
        if self.seed is not None:
            self.state = torch.random.get_rng_state()
            # The CPU generator alone (torch.manual_seed would reseed every CUDA generator too,
            # which __exit__ does not put back); the same stream torch.manual_seed gives it.
            torch.default_generator.manual_seed(self.seed)

    def __exit__(self, *exc):
        if self.seed is not None:
            torch.random.set_rng_state(self.state)


def _layer_dims(in_dim, hidden_dim, num_classes, num_layers) -> list[int]:
    in_dim = _positive_int(in_dim, "in_dim")
    hidden_dim = _positive_int(hidden_dim, "hidden_dim")
    num_classes = _positive_int(num_classes, "num_classes")
    num_layers = _positive_int(num_layers, "num_layers")
    return [in_dim] + [hidden_dim] * (num_layers - 1) + [num_classes]


def _check_weights_fit(
    model: str, widths: Sequence[tuple[int, int]], matrices: int, dims: Sequence[int]
) -> None:
    """Refuse widths whose weights cannot be allocated here (one check before any layer is
    built, instead of the allocator's traceback in the middle of the list): ``matrices`` weight
    matrices of ``in x out`` float32 per layer. The message names the widest of the arguments
    ``dims`` came from (in_dim, hidden_dim, num_classes), the one to make smaller."""
    nbytes = 4 * matrices * sum(a * b for a, b in widths)
    named = [("hidden_dim", dims[1])] if len(dims) > 2 else []
    named += [("num_classes", dims[-1]), ("in_dim", dims[0])]
    name, value = max(named, key=lambda item: item[1])  # ties: the first listed
    memory_arg(
        nbytes,
        f"{model} with layer widths {[a for a, _ in widths] + [widths[-1][1]]} ({name}={value})",
    )


class _PlainModel(BlockModel):
    """SAGE and GCN: conv -> ReLU -> dropout between layers, no activation after the last
    (the ReLU is the hidden convs' ``activation="relu"``).

    ``seed``: draw the initial parameters from torch's generator seeded with it (the caller's
    random state is left as it was), so one seed builds one model; ``None`` (the default)
    draws them from torch's generator as it stands."""

    conv: type  # the layer class, set by each subclass
    matrices: int  # weight matrices per layer, set by each subclass

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int,
        num_classes: int,
        num_layers: int = 3,
        dropout: float = 0.5,
        kernel: str = "torch",
        *,
        seed: int | None = None,
    ):
        super().__init__()
        seeded = _Seeded(seed)
        dims = _layer_dims(in_dim, hidden_dim, num_classes, num_layers)
        _check_weights_fit(type(self).__name__, list(zip(dims[:-1], dims[1:])), self.matrices, dims)
        self.feature_dims = dims
        self.kernel = kernels.check(kernel)
        # Hidden layers apply their ReLU themselves (fused with zeroing their padded rows).
        last = len(dims) - 2
        with seeded:
            self.layers = nn.ModuleList(
                self.conv(a, b, activation="relu" if i < last else None, kernel=self.kernel)
                for i, (a, b) in enumerate(zip(dims[:-1], dims[1:]))
            )
            self.dropout = nn.Dropout(_dropout_rate(dropout))
            self.reset_parameters()

    def after_layer(self, i: int, h: torch.Tensor) -> torch.Tensor:
        """What follows layer ``i``: dropout between layers (the hidden layers' ReLU is their
        own last step), nothing after the last."""
        return self.dropout(h) if i < len(self.layers) - 1 else h  # [D_i, feature_dims[i + 1]]


class SAGE(_PlainModel):
    """GraphSAGE-mean: ``num_layers`` :class:`SAGEConv` s (in -> hidden -> ... -> classes) with
    ReLU and dropout between layers; the DGL minibatch GraphSAGE example, on padded blocks."""

    conv = SAGEConv
    matrices = 2  # fc_self, fc_neigh


class GCN(_PlainModel):
    """GCN: ``num_layers`` :class:`GCNConv` s (symmetric norm) with ReLU and dropout between
    layers."""

    conv = GCNConv
    matrices = 1


class GAT(BlockModel):
    """GAT: ``num_layers`` :class:`GATConv` s with ``heads`` heads each.

    Hidden layers have ``hidden_dim`` features *per head* and concatenate their heads (the
    next layer reads ``hidden_dim * heads`` features), followed by ELU and dropout; the last
    layer has ``num_classes`` features per head and averages its heads. This is DGL's GAT
    example; ``feature_dims`` records the concatenated widths. ``seed`` as for :class:`SAGE`.
    """

    def __init__(
        self,
        in_dim: int,
        hidden_dim: int,
        num_classes: int,
        num_layers: int = 3,
        heads: int = 4,
        dropout: float = 0.5,
        kernel: str = "torch",
        *,
        seed: int | None = None,
    ):
        super().__init__()
        seeded = _Seeded(seed)
        dims = _layer_dims(in_dim, hidden_dim, num_classes, num_layers)
        self.heads = _positive_int(heads, "heads")
        self.kernel = kernels.check(kernel)
        self.feature_dims = [in_dim] + [hidden_dim * heads] * (num_layers - 1) + [num_classes]
        # fc and the residual fc, each in -> heads x out.
        widths = [(self.feature_dims[i], dims[i + 1] * self.heads) for i in range(num_layers)]
        _check_weights_fit("GAT", widths, 2, dims)
        with seeded:
            self.layers = nn.ModuleList(
                GATConv(self.feature_dims[i], dims[i + 1], heads, kernel=self.kernel)
                for i in range(num_layers)
            )
            self.dropout = nn.Dropout(_dropout_rate(dropout))
            self.reset_parameters()

    def after_layer(self, i: int, h: torch.Tensor) -> torch.Tensor:
        """Hidden layers: concatenate heads, ELU, dropout. Last layer: average the heads."""
        if i < len(self.layers) - 1:
            return self.dropout(F.elu(h.flatten(1)))  # [D_i, heads * hidden_dim]
        return h.mean(1)  # [D_last, num_classes]


MODELS = {"sage": SAGE, "gcn": GCN, "gat": GAT}
_BlockModel = BlockModel  # the old private name (zg 0.x), kept for code written against it


def build_seeded(
    name: str,
    in_dim: int,
    hidden_dim: int,
    num_classes: int,
    num_layers: int = 3,
    *,
    seed: int,
    **kwargs,
) -> BlockModel:
    """:func:`build` with ``seed=seed``: the parameters drawn from torch's generator seeded with
    ``seed``, and that generator put back as it was afterwards: every process of a run that
    calls it with one seed holds the same initial parameters (no broadcast needed), and the
    caller's random state is left alone."""
    return build(name, in_dim, hidden_dim, num_classes, num_layers, seed=seed, **kwargs)


def build(
    name: str, in_dim: int, hidden_dim: int, num_classes: int, num_layers: int = 3, **kwargs
) -> BlockModel:
    """Build a model by name: ``"sage"``, ``"gcn"`` or ``"gat"``.

    ``kwargs`` are the model's own options: ``dropout``, ``kernel`` and ``seed`` for all, ``heads``
    for GAT.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, one of {sorted(MODELS)}, got {name!r}")
    key = name.lower()
    if key not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    cls = MODELS[key]
    accepted = [
        p
        for p in inspect.signature(cls.__init__).parameters
        if p not in ("self", "in_dim", "hidden_dim", "num_classes", "num_layers")
    ]
    unknown = sorted(set(kwargs) - set(accepted))
    if unknown:
        raise ValueError(f"model {key!r} does not take option(s) {unknown}; it accepts {accepted}")
    return cls(in_dim, hidden_dim, num_classes, num_layers, **kwargs)
