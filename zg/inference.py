"""Full-neighbour inference: every layer applied to every node with *all* its in-neighbours.

Where it sits: the one full-graph evaluator of the kit, single process and Grappa alike:
``Engine.evaluate(split)`` and Grappa's rank-0 evaluation after each epoch
(:func:`evaluate`) both run :func:`full_neighbour_logits`, layer by layer over every node (no
node is left out of a hidden layer).

* **SAGE and GCN layers** run on the whole graph at once, as DGL's full-graph layers do (a
  sparse-dense product over the in-edges): the neighbour sum or mean of every node is one
  ``embedding_bag`` over the graph's CSC arrays (``indices`` are the bags' members,
  ``indptr`` their offsets; a duplicate edge counts twice, a node without in-edges gets 0),
  so no ``[N, k, F]`` gather is ever formed. The layer's linear maps come first when they
  narrow (the sum commutes with them), SAGE's two maps as one product.
* **Sparse input features** (a bag-of-words graph such as Cora: at most
  ``SPARSE_FEATURES_BELOW`` of the entries non-zero) enter the first layer's product as a
  sparse matrix: the product reads only the non-zero entries (an ``embedding_bag`` over the
  weight's rows), rebuilt from ``g.x`` at every call, so features changed in place are read
  as they are.
* **GAT layers** (attention needs each edge's score) reuse the training layer unchanged on
  chunks of nodes, each presented as a padded Block whose fanout is the chunk's largest
  in-degree, as DGL's examples do. Nodes go in order of in-degree and a chunk holds nodes of
  in-degrees within a factor of four, so a hub does not force a huge fanout on its
  neighbours; each chunk holds at most ``budget`` neighbour slots. A chunk's source rows are
  its own nodes, then its in-neighbours, each once.

The results equal the training layers' forward on one block holding the whole graph
(``zg.grappa.fullgraph.full_forward``) and DGL's full-graph layers, up to floating-point
summation order (tests/core/test_inference.py).

Memory: two ``[N, width]`` activations per layer (SAGE: ``[N, 2 out]`` when it projects
first); GAT: the chunks' blocks (about twice the edges in slots) and one
``[chunk + its in-neighbours, F]`` source buffer at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F

from ._checks import int_arg, memory_arg, returned_logits
from .blocks import Block
from .graph import Graph
from .rng import batch_ranges
from .sampling import DynamicSampler

__all__ = [
    "full_neighbour_logits",
    "sampled_logits",
    "evaluate",
    "accuracy",
    "MAX_BLOCK_SLOTS",
    "SPARSE_FEATURES_BELOW",
    "SPLIT_NAMES",
]


# N * d_max above this would make one whole-graph block larger than a laptop's memory.
MAX_BLOCK_SLOTS = 400_000_000

# Input features with at most this fraction of non-zero entries enter the first layer as a
# sparse matrix. Measured once, one CPU thread, against a [1,433, 256] weight, on Cora's
# 2,708 x 1,433 features and on random ones of that shape at densities from 2 to 20 %: the
# dense product takes about as long at any density; the sparse one (finding the non-zeros
# included) grows with the density and is about half the dense one's time at 5 %.
SPARSE_FEATURES_BELOW = 0.05


def _chunk_blocks(g: Graph, budget: int) -> list[tuple[torch.Tensor, Block, torch.Tensor]]:
    """The chunks of a chunked full-neighbour pass (GAT), each ``(nodes [D], block,
    src_nodes [S])``: a padded Block over the chunk's nodes (its own rows first, then the nodes
    its in-edges come from, each once), the same for every layer.

    Nodes go in order of in-degree; a chunk holds nodes whose in-degree is within a factor of
    four of its smallest (a few chunks, so few rows are read twice; at most three quarters of a
    chunk's slots are padding) and at most ``budget`` slots."""
    n, dev = g.num_nodes, g.device
    degree = g.in_degrees()
    order = torch.argsort(degree, stable=True)  # low degree first
    sorted_degree = degree[order]
    bounds = []  # (start, end, fanout)
    start = 0
    while start < n:
        low = max(1, int(sorted_degree[start]))
        end = int(torch.searchsorted(sorted_degree, 4 * low, right=True))  # degree <= 4 low
        end = max(start + 1, min(end, start + max(1, budget // (4 * low))))
        while end > start + 1 and (end - start) * max(1, int(sorted_degree[end - 1])) > budget:
            end = start + max(1, (end - start) // 2)
        bounds.append((start, end, max(1, int(sorted_degree[end - 1]))))
        start = end
    chunks = []
    for s, e, k in bounds:
        nodes = order[s:e]  # [D]
        rows = nodes.numel()
        slots = torch.arange(k, device=dev)
        mask = slots[None, :] < degree[nodes][:, None]  # [D, k]
        edge = torch.where(mask, g.indptr[nodes][:, None] + slots[None, :], 0)
        sources = (
            torch.where(mask, g.indices[edge.clamp(max=max(g.num_edges - 1, 0))], 0)
            if g.num_edges
            else torch.zeros_like(edge)
        )  # [D, k] global ids
        unique, inverse = torch.unique(sources[mask], return_inverse=True)
        src_nodes = torch.cat([nodes, unique])  # [D + U]: only the chunk's in-neighbours
        nbr = torch.zeros_like(sources)
        nbr[mask] = inverse + rows
        block = Block(
            nbr=torch.where(mask, nbr, 0),
            mask=mask,
            num_src=torch.tensor(src_nodes.numel(), device=dev),
            num_dst=torch.tensor(rows, device=dev),
            src_nodes=None,
        )
        chunks.append((nodes, block, src_nodes))
    return chunks


@torch.no_grad()
def full_neighbour_logits(model, g: Graph, budget: int = 1 << 22) -> torch.Tensor:
    """Logits ``[N, num_classes]`` of ``model`` (a zg model, in eval mode) on every node of ``g``.

    Layer by layer over every node (no node is left out of a hidden layer), each node reading
    all its in-neighbours' rows of the layer below. SAGE and GCN layers run on the whole graph
    at once (GCN's normalisation reads every node's whole out-degree, as on one block holding
    every edge); GAT layers run on chunks of nodes of similar in-degree, at most ``budget``
    neighbour slots per chunk. Sparse input features (at most ``SPARSE_FEATURES_BELOW``
    non-zero) are read as a sparse matrix. See the module docstring.
    """
    from .models import GCNConv, SAGEConv

    budget = int_arg(budget, "budget", low=1)
    if g.x is None:
        raise ValueError("full_neighbour_logits needs node features (g.x)")
    want = model.layers[0].in_dim
    if g.x.dim() != 2 or g.x.shape[1] != want:
        raise ValueError(
            f"full_neighbour_logits: g.x has shape {tuple(g.x.shape)}, the model's first layer "
            f"takes [N, {want}]"
        )
    _whole_graph_fits(model, g, budget)
    h, chunks = g.x, None
    for i, layer in enumerate(model.layers):
        if isinstance(layer, SAGEConv):
            out = _sage_whole_graph(layer, g, h, _sparse_rows(h) if i == 0 else None)
        elif isinstance(layer, GCNConv):
            out = _gcn_whole_graph(layer, g, h, _sparse_rows(h) if i == 0 else None)
        else:
            chunks = _chunk_blocks(g, budget) if chunks is None else chunks
            out = _chunked(layer, h, chunks, g.num_nodes)
        h = model.after_layer(i, out)
    # What the model's last after_layer hands back: one row per node, the labels' classes.
    who = f"{type(model).__name__}.after_layer({len(model.layers) - 1}, out)"
    return returned_logits(h, who, g.num_nodes, _classes(g), g.x.device)


def _classes(g: Graph) -> int:
    """The fewest logit columns an evaluation of ``g`` reads: its labels' classes (1 without)."""
    return max(int(g.num_classes), 1) if g.y is not None else 1


def _whole_graph_fits(model, g: Graph, budget: int) -> None:
    """Refuse, before the first layer runs, a full-neighbour pass whose buffers cannot fit (an
    estimate only; the arithmetic is the functions' below): per layer the input rows, the
    projected rows (up to twice the output width) and the output, N rows each (N read from the
    graph); the degrees; and a chunked (GAT) pass's blocks, about 4 slots an edge of 26 bytes."""
    from .models import GCNConv, SAGEConv

    widths = [int(w) for w in model.feature_dims]  # entering each layer, then the output
    dims, outs = widths[:-1], widths[1:]
    rows = max(4 * g.num_nodes * (a + 3 * b) for a, b in zip(dims, outs)) + 32 * g.num_nodes
    if not all(isinstance(layer, (SAGEConv, GCNConv)) for layer in model.layers):
        rows += 104 * g.num_edges + 4 * budget
    memory_arg(
        rows,
        f"full_neighbour_logits on a graph of {g.num_nodes} nodes and {g.num_edges} edges "
        f"with layer widths {widths}",
        g.device if g.device.type == "cuda" else None,
    )


def _chunked(layer, h: torch.Tensor, chunks, num_nodes: int) -> torch.Tensor:
    """``layer`` (any block layer) on every node, one padded block per chunk: [N, out]."""
    out = None
    for nodes, block, src_nodes in chunks:
        piece = layer(block, h.index_select(0, src_nodes))  # [D, out]
        if out is None:
            out = torch.empty(num_nodes, *piece.shape[1:], dtype=piece.dtype, device=h.device)
        out[nodes] = piece
    return out


def _sparse_rows(x: torch.Tensor):
    """``x`` [N, F] as the sparse rows of a product (:func:`_times`): ``(columns [nnz],
    values [nnz], row offsets [N])`` in row-major order, or None when more than
    ``SPARSE_FEATURES_BELOW`` of its entries are non-zero (then the dense product is faster)."""
    if not x.is_floating_point() or x.numel() == 0:
        return None
    if int(torch.count_nonzero(x)) > SPARSE_FEATURES_BELOW * x.numel():
        return None
    flat = x.reshape(-1)
    where = flat.nonzero().squeeze(1)  # [nnz] ascending: row-major
    rows, columns = where // x.shape[1], where % x.shape[1]
    counts = torch.bincount(rows, minlength=x.shape[0])  # [N]
    return columns, flat[where], torch.cumsum(counts, 0) - counts


def _times(h: torch.Tensor, weight_t: torch.Tensor, sparse) -> torch.Tensor:
    """``h @ weight_t`` ([N, F] x [F, O] -> [N, O]); with ``sparse`` (``h``'s
    :func:`_sparse_rows`) only ``h``'s non-zero entries are read: row i is the sum of
    ``value * weight_t[column]`` over its entries, one ``embedding_bag``."""
    if sparse is None:
        return h @ weight_t
    columns, values, offsets = sparse
    return F.embedding_bag(
        columns,
        weight_t.contiguous(),
        offsets,
        mode="sum",
        per_sample_weights=values.to(weight_t.dtype),
    )


def _in_neighbours(g: Graph, table: torch.Tensor, mode: str) -> torch.Tensor:
    """For every node, the ``mode`` ("mean" or "sum") of its in-neighbours' rows of ``table``
    [N, F] -> [N, F]: one ``embedding_bag`` with the CSC ``indices`` as members and ``indptr``
    as offsets (a duplicate edge counts twice; a node without in-edges gets 0)."""
    return F.embedding_bag(g.indices, table.contiguous(), g.indptr[:-1], mode=mode)


def _activated(layer, out: torch.Tensor) -> torch.Tensor:
    return out.clamp_(min=0) if layer.activation == "relu" else out


def _sage_whole_graph(layer, g: Graph, h: torch.Tensor, sparse) -> torch.Tensor:
    """What ``SAGEConv`` computes on one block holding the whole graph: ``fc_self(h_i) +
    fc_neigh(mean_j h_j)`` for every node, then the activation [N, out]. When the projection
    narrows, or the input is sparse, both maps come first as one product [N, 2 out] and the
    mean is taken of the projected rows."""
    out_dim = layer.fc_self.out_features
    if sparse is None and out_dim >= h.shape[1]:
        out = layer.fc_self(h).add_(layer.fc_neigh(_in_neighbours(g, h, "mean")))
        return _activated(layer, out)
    weight_t = torch.cat([layer.fc_neigh.weight, layer.fc_self.weight]).t()  # [F, 2 out]
    both = _times(h, weight_t, sparse)  # [N, 2 out]
    out = _in_neighbours(g, both[:, :out_dim], "mean").add_(both[:, out_dim:])  # [N, out]
    if layer.fc_self.bias is not None:
        out.add_(layer.fc_self.bias)
    return _activated(layer, out)


def _gcn_whole_graph(layer, g: Graph, h: torch.Tensor, sparse) -> torch.Tensor:
    """What ``GCNConv`` computes on one block holding the whole graph: ``b + d_in(i)^-1/2
    sum_j d_out(j)^-1/2 h_j W`` with every node's whole in- and out-degree (clamped to >= 1),
    then the activation [N, out]. ``W`` comes first when it narrows or the input is sparse."""
    scale_out = g.out_degrees().clamp(min=1).to(h.dtype).pow(-0.5).unsqueeze(1)  # [N, 1]
    scale_in = g.in_degrees().clamp(min=1).to(h.dtype).pow(-0.5).unsqueeze(1)  # [N, 1]
    if sparse is not None or layer.weight.shape[1] < h.shape[1]:
        table = _times(h, layer.weight, sparse).mul_(scale_out)  # [N, out]
        out = _in_neighbours(g, table, "sum")
    else:
        out = _in_neighbours(g, h * scale_out, "sum") @ layer.weight  # [N, out]
    out.mul_(scale_in)
    if layer.bias is not None:
        out.add_(layer.bias)
    return _activated(layer, out)


@torch.no_grad()
def sampled_logits(
    model,
    g: Graph,
    nodes: torch.Tensor,
    fanouts,
    *,
    batch_size: int | None = None,
    seed: int = 0,
    epoch: int = 0,
    replace: bool = False,
) -> torch.Tensor:
    """Logits float [n, C] of ``nodes`` (int64 [n]) on neighbourhoods *sampled* with ``fanouts``
    (the training fanouts: what a sampled evaluation reports, with its sampling noise).

    The one sampled evaluation of the kit (``Engine.evaluate(split, sampled=True)`` and the
    benches call it): :class:`zg.DynamicSampler` keyed by (``seed``, ``epoch``, batch), in
    batches of ``batch_size`` nodes (None: one batch), in the order of ``nodes``. The model runs
    as it is (call ``model.eval()`` first for evaluation).
    """
    sampler = DynamicSampler(g, fanouts, replace=replace, seed=seed)
    nodes = nodes.to(torch.int64)
    size = max(nodes.numel(), 1) if batch_size is None else batch_size
    pieces, who, classes = [], f"{type(model).__name__}.forward(blocks, x)", _classes(g)
    for b, (start, end) in enumerate(batch_ranges(nodes.numel(), size)):
        mb = sampler.sample(nodes[start:end].cpu(), epoch=epoch, batch=b)
        logits = model(mb.blocks, g.x.index_select(0, mb.input_nodes))  # [B, C]
        # Checked as the Engine's step checks a batch's logits (host metadata, no device read).
        pieces.append(returned_logits(logits, who, end - start, classes, g.x.device))
    return torch.cat(pieces) if pieces else torch.empty(0, 0)


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of rows whose arg-max is the label (logits float [n, C], labels int [n]); NaN if n = 0."""
    if labels.numel() == 0:
        return float("nan")
    return float((logits.argmax(1) == labels).double().mean())


SPLIT_NAMES = ("train", "val", "test")


def _split_names(splits: Any) -> list[str]:
    """``splits`` as a list of split names: a str is one split (``"val"`` is ``["val"]``, never
    its letters); anything else must be an iterable of "train", "val" and "test"."""
    if isinstance(splits, str):
        splits = [splits]
    try:
        names = list(splits)
    except TypeError:
        raise TypeError(
            f"splits must be a split name or a list of them ({list(SPLIT_NAMES)}), got "
            f"{type(splits).__name__}"
        ) from None
    for name in names:
        if not isinstance(name, str) or name not in SPLIT_NAMES:
            raise ValueError(f"splits holds {name!r}; each split is one of {list(SPLIT_NAMES)}")
    return names


@torch.no_grad()
def evaluate(
    model, g: Graph, splits: Iterable[str] | str = ("val", "test"), *, sampled: dict | None = None
) -> dict[str, float]:
    """Accuracy of ``model`` on each split (eval mode; the model's training mode is restored
    afterwards): ``{"val": ..., "test": ...}``, NaN for a split ``g`` does not have.

    ``splits``: a list of "train", "val", "test", or one of them as a str (``"val"`` is
    ``["val"]``). ``sampled``: None (default) for full neighbourhoods
    (:func:`full_neighbour_logits`: no sampling noise, what DGL's examples report), or the
    keywords of :func:`sampled_logits` (``fanouts``, ``batch_size``, ``seed``, ``epoch``,
    ``replace``) for sampled ones. Non-finite logits raise FloatingPointError: an accuracy
    read from NaN is not a measurement.

    Labels are read as training reads them: a node labelled -1 (unlabelled) is skipped, not
    counted as a wrong prediction (a split with no labelled node gives NaN), and a label
    outside ``[-1, num_classes)`` (``g.y`` changed in place after the graph was built) is
    refused with a ValueError naming the split, as :meth:`zg.Engine.train_epoch` refuses it.
    On a graph as built (every split node labelled) the accuracies are those of every node.
    """
    names = _split_names(splits)
    if g.y is None and names:
        raise ValueError("evaluate needs labels (g.y)")
    num_classes = max(int(g.num_classes), 1)
    was_training = model.training
    model.eval()
    try:
        full = full_neighbour_logits(model, g) if sampled is None else None  # [N, C]
        out = {}
        for split in names:
            idx = getattr(g, f"{split}_idx")
            if idx is None or idx.numel() == 0:
                out[split] = float("nan")
                continue
            logits = full[idx] if full is not None else sampled_logits(model, g, idx, **sampled)
            labels = g.y[idx]
            # One host read: finite logits, labels in range, any unlabelled node.
            finite, in_range, unlabelled = torch.stack(
                [
                    torch.isfinite(logits).all(),
                    ((labels >= -1) & (labels < num_classes)).all(),
                    (labels == -1).any(),
                ]
            ).tolist()
            if not finite:
                raise FloatingPointError(
                    f"evaluate({split!r}): the model's logits hold NaN or inf (non-finite "
                    "parameters or features); no accuracy is reported"
                )
            if not in_range:
                bad = labels[(labels < -1) | (labels >= num_classes)]
                raise ValueError(
                    f"evaluate({split!r}): g.y holds label {int(bad[0])} for a {split} node, "
                    f"outside [-1, {num_classes}) (changed in place after the graph was "
                    "built?); an accuracy against it is not a measurement. Fix g.y (-1 marks "
                    "an unlabelled node)"
                )
            if unlabelled:  # skipped, as the loss skips them
                known = labels >= 0
                logits, labels = logits[known], labels[known]
            out[split] = accuracy(logits, labels)
    finally:
        model.train(was_training)
    return out
