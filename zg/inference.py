"""Full-neighbour inference: every layer applied to every node with *all* its in-neighbours.

Where it sits: the one full-graph evaluator of the kit, single process and Grappa alike:
``Engine.evaluate(split)`` and Grappa's rank-0 evaluation after each epoch
(:func:`evaluate`) both run :func:`full_neighbour_logits`. It
reuses the training layers unchanged by presenting each chunk of nodes as a padded Block whose
fanout is the chunk's largest in-degree, layer by layer, as DGL's examples do. Nodes are
processed in order of in-degree and a chunk holds nodes of in-degrees within a factor of four,
so a hub does not force a huge fanout on its neighbours; each chunk holds at most ``budget`` neighbour slots. A chunk's source rows are its
own nodes, then its in-neighbours, each once, so a layer reads only those. A SAGE layer whose
neighbour projection narrows (it projects before gathering) projects every node once for the
whole layer, and each chunk gathers its sources' projected rows.

Memory: the chunks' blocks (about twice the edges in slots, kept for every layer), one
``[chunk + its in-neighbours, F]`` source buffer at a time (a GCN: one chunk of all N nodes over
all N nodes, see :func:`full_neighbour_logits`).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from .blocks import Block
from .graph import Graph
from .rng import batch_ranges
from .sampling import DynamicSampler

__all__ = ["full_neighbour_logits", "sampled_logits", "evaluate", "accuracy", "MAX_BLOCK_SLOTS"]


# N * d_max above this would make one whole-graph block larger than a laptop's memory.
MAX_BLOCK_SLOTS = 400_000_000


def _needs_every_edge(model) -> bool:
    """Whether a layer of ``model`` reads its sources' out-degree (GCN's symmetric
    normalisation): a chunk's block would count only the edges into that chunk."""
    from .models import GCNConv

    return any(isinstance(layer, GCNConv) for layer in model.layers)


def _chunk_blocks(
    g: Graph, every_edge: bool, budget: int
) -> list[tuple[torch.Tensor, Block, torch.Tensor]]:
    """The chunks of a full-neighbour pass, each ``(nodes [D], block, src_nodes [S])``: a
    padded Block over the chunk's nodes (its own rows first, then the nodes its in-edges come
    from, each once), the same for every layer.

    Nodes go in order of in-degree; a chunk holds nodes whose in-degree is within a factor of
    four of its smallest (a few chunks, so few rows are read twice; at most three quarters of a
    chunk's slots are padding) and at most ``budget`` slots. ``every_edge`` (GCN): one chunk of every node over every node, as the
    normalisation needs."""
    n, dev = g.num_nodes, g.device
    degree = g.in_degrees()
    order = torch.argsort(degree, stable=True)  # low degree first
    sorted_degree = degree[order]
    bounds = []  # (start, end, fanout)
    if every_edge:
        width = max(1, int(sorted_degree[-1])) if n else 1
        if n * width > MAX_BLOCK_SLOTS:
            raise ValueError(
                f"g has {n:,} nodes and maximum in-degree {width:,}: a GCN's "
                f"normalisation needs one block with every edge ({n * width:,} slots, "
                f"limit {MAX_BLOCK_SLOTS:,}); evaluate on sampled neighbourhoods instead"
            )
        bounds.append((0, n, width))
    start = n if every_edge else 0
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
        if every_edge:  # every node a source, in id order
            src_nodes, nbr = torch.cat([nodes, torch.arange(n, device=dev)]), sources + rows
        else:  # only the chunk's in-neighbours, each once
            unique, inverse = torch.unique(sources[mask], return_inverse=True)
            src_nodes = torch.cat([nodes, unique])  # [D + U]
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

    Layer by layer over every node (no node is left out of a hidden layer): each chunk of
    nodes of similar in-degree reads its in-neighbours' rows of the layer below, at most
    ``budget`` neighbour slots per chunk. Exact for every layer: SAGE and GAT rows depend only
    on their own in-edges, so chunks are exact; GCN also weighs each source by its out-degree,
    so a GCN runs as one chunk holding every edge (at most ``MAX_BLOCK_SLOTS`` slots, else a
    ValueError).
    """
    if g.x is None:
        raise ValueError("full_neighbour_logits needs node features (g.x)")
    chunks = _chunk_blocks(g, _needs_every_edge(model), budget)
    h = g.x
    for i, layer in enumerate(model.layers):
        projected = _projected_once(layer, h)  # [N, out] or None
        out = None
        for nodes, block, src_nodes in chunks:
            if projected is None:
                piece = layer(block, h.index_select(0, src_nodes))  # [D, out]
            else:
                piece = _sage_from_projected(layer, block, h, projected, nodes, src_nodes)
            piece = model.after_layer(i, piece)
            if out is None:
                out = torch.empty(g.num_nodes, *piece.shape[1:], dtype=piece.dtype, device=h.device)
            out[nodes] = piece
        h = out
    return h


def _projected_once(layer, h: torch.Tensor) -> torch.Tensor | None:
    """A SAGE layer whose neighbour projection narrows (``fc_neigh`` maps F to fewer columns,
    so the layer projects its source rows before gathering them): ``fc_neigh`` of every node,
    once for the whole layer [N, out], instead of once per chunk for each chunk's sources (a
    node is a source of several chunks; on Cora the first layer's 1,433-wide rows made that
    most of an evaluation). None for any other layer."""
    from .models import SAGEConv

    if not isinstance(layer, SAGEConv) or layer.fc_neigh.out_features >= h.shape[1]:
        return None
    return layer.fc_neigh(h)


def _sage_from_projected(layer, block: Block, h, projected, nodes, src_nodes) -> torch.Tensor:
    """What ``layer(block, h[src_nodes])`` computes (``SAGEConv.forward`` with its projection
    first), reading the chunk's rows of ``projected`` = ``layer.fc_neigh(h)`` [N, out]: the
    mean over each row's real slots of its sources' projected rows, plus ``fc_self`` of its own
    row, then the layer's activation. Every row of a chunk is real."""
    from .kernels.aggregate import weighted_neighbour_sum
    from .models import _zero_padded_rows_then

    edge_mask = block.mask  # [D, k]
    degree = edge_mask.sum(1, keepdim=True, dtype=projected.dtype)  # [D, 1]
    weight = edge_mask / degree.clamp(min=1)  # [D, k]
    neigh = weighted_neighbour_sum(
        projected.index_select(0, src_nodes), block.nbr, weight, edge_mask, layer.kernel
    )  # [D, out]
    rows = torch.ones(nodes.numel(), 1, dtype=torch.bool, device=h.device)  # [D, 1]
    return _zero_padded_rows_then(
        layer.activation, layer.fc_self(h.index_select(0, nodes)) + neigh, rows
    )


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
    pieces = []
    for b, (start, end) in enumerate(batch_ranges(nodes.numel(), size)):
        mb = sampler.sample(nodes[start:end].cpu(), epoch=epoch, batch=b)
        pieces.append(model(mb.blocks, g.x.index_select(0, mb.input_nodes)))  # [B, C]
    return torch.cat(pieces) if pieces else torch.empty(0, 0)


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of rows whose arg-max is the label (logits float [n, C], labels int [n]); NaN if n = 0."""
    if labels.numel() == 0:
        return float("nan")
    return float((logits.argmax(1) == labels).double().mean())


@torch.no_grad()
def evaluate(
    model, g: Graph, splits: Iterable[str] = ("val", "test"), *, sampled: dict | None = None
) -> dict[str, float]:
    """Accuracy of ``model`` on each split (eval mode; the model's training mode is restored
    afterwards): ``{"val": ..., "test": ...}``, NaN for a split ``g`` does not have.

    ``sampled``: None (default) for full neighbourhoods (:func:`full_neighbour_logits`: no
    sampling noise, what DGL's examples report), or the keywords of :func:`sampled_logits`
    (``fanouts``, ``batch_size``, ``seed``, ``epoch``, ``replace``) for sampled ones. Non-finite
    logits raise FloatingPointError: an accuracy read from NaN is not a measurement.
    """
    was_training = model.training
    model.eval()
    try:
        full = full_neighbour_logits(model, g) if sampled is None else None  # [N, C]
        out = {}
        for split in splits:
            idx = getattr(g, f"{split}_idx")
            if idx is None or idx.numel() == 0:
                out[split] = float("nan")
                continue
            logits = full[idx] if full is not None else sampled_logits(model, g, idx, **sampled)
            if not bool(torch.isfinite(logits).all()):
                raise FloatingPointError(
                    f"evaluate({split!r}): the model's logits hold NaN or inf (non-finite "
                    "parameters or features); no accuracy is reported"
                )
            out[split] = accuracy(logits, g.y[idx])
    finally:
        model.train(was_training)
    return out
