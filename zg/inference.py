"""Full-neighbour inference: every layer applied to every node with *all* its in-neighbours.

Where it sits: evaluation (``Engine.evaluate(mode="full")``, Grappa's rank-0 evaluation). It
reuses the training layers unchanged by presenting each chunk of nodes as a padded Block whose
fanout is the chunk's largest in-degree, layer by layer, as DGL's examples do. Nodes are
processed in order of in-degree, so a hub does not force a huge fanout on its neighbours in
the chunk; each chunk holds at most ``budget`` neighbour slots.

Memory: one ``[chunk + N, F]`` source buffer per layer (the chunk's own rows first, as the
Block convention asks, then every node), and ``[chunk, k]`` slot arrays.
"""

from __future__ import annotations

import torch

from .blocks import Block
from .graph import Graph

__all__ = ["full_neighbour_logits"]


@torch.no_grad()
def full_neighbour_logits(model, g: Graph, budget: int = 1 << 22) -> torch.Tensor:
    """Logits ``[N, num_classes]`` of ``model`` (a zg model, in eval mode) on every node of ``g``."""
    if g.x is None:
        raise ValueError("full_neighbour_logits needs node features (g.x)")
    n, dev = g.num_nodes, g.device
    degree = g.in_degrees()
    order = torch.argsort(degree, stable=True)                     # low degree first
    sorted_degree = degree[order]
    chunks = []                                                     # (start, end, fanout)
    start = 0
    while start < n:
        end = start + 1
        # Grow the chunk while (rows * largest degree) stays within the budget.
        step = max(1, budget // max(1, int(sorted_degree[start])))
        end = min(n, start + step)
        while end > start + 1 and (end - start) * max(1, int(sorted_degree[end - 1])) > budget:
            end = start + max(1, (end - start) // 2)
        chunks.append((start, end, max(1, int(sorted_degree[end - 1]))))
        start = end
    max_rows = max(e - s for s, e, _ in chunks)
    h = g.x
    for i, layer in enumerate(model.layers):
        width = h.shape[1]
        src = torch.empty(max_rows + n, width, dtype=h.dtype, device=dev)   # [Dmax + N, F]
        src[max_rows:] = h
        out = None
        for s, e, k in chunks:
            nodes = order[s:e]                                      # [D]
            rows = nodes.numel()
            src[:rows] = h[nodes]
            slots = torch.arange(k, device=dev)
            first = g.indptr[nodes]
            deg = degree[nodes]
            mask = slots[None, :] < deg[:, None]                    # [D, k]
            edge = torch.where(mask, first[:, None] + slots[None, :], 0)
            nbr = torch.where(mask, g.indices[edge.clamp(max=max(g.num_edges - 1, 0))] + max_rows, 0) \
                if g.num_edges else torch.zeros_like(edge)
            block = Block(nbr=nbr, mask=mask,
                          num_src=torch.tensor(max_rows + n, device=dev),
                          num_dst=torch.tensor(rows, device=dev), src_nodes=None)
            piece = model.after_layer(i, layer(block, src))         # [D, out]
            if out is None:
                out = torch.empty(n, *piece.shape[1:], dtype=piece.dtype, device=dev)
            out[nodes] = piece
        h = out
    return h
