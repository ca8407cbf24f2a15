"""Full-neighbourhood computation on a whole graph, with autograd: the exact reference.

Where it sits: Grappa's "full-graph mode" trains each worker on its whole local graph, and
:func:`zg.grappa.gradient_error` needs the exact full-graph gradient. Both run a zg model on one
block that holds *every* in-edge of *every* node, used for every layer:

    whole_graph_block(g): nbr int64 [N, d_max], mask bool [N, d_max], src_nodes = 0 .. N-1

Row v lists v's in-neighbours (CSC order), padded to the largest in-degree ``d_max``; since
destination rows are the first source rows and here they are *all* rows, layer l maps the
[N, F_l] node states to [N, F_{l+1}], i.e. ``model([block] * L, g.x)`` is the exact
full-graph forward of a SAGE / GCN / GAT. Memory: the layers gather a [N, d_max, F] tensor,
so this suits graphs with moderate maximum degree (the csbm and Cora graphs of the kit).

Evaluation (rank 0's accuracy after each epoch) is not here: it is the kit's one full-graph
evaluator, :func:`zg.inference.evaluate` (re-exported as ``evaluate``), which computes the same
logits without autograd and without the padded block (SAGE and GCN layers as sparse products
over the in-edges, GAT layers in memory-bounded chunks).
"""

from __future__ import annotations

import torch

from .._checks import returned_logits
from ..blocks import Block
from ..graph import Graph
from ..inference import MAX_BLOCK_SLOTS, accuracy, evaluate
from ..sampling import MiniBatch

__all__ = [
    "whole_graph_block",
    "WholeGraph",
    "full_forward",
    "accuracy",
    "evaluate",
    "MAX_BLOCK_SLOTS",
]


class WholeGraph:
    """A :class:`zg.Sampler` whose one batch is the whole graph: every layer's block is
    :func:`whole_graph_block` (built once), the seeds are the batch's nodes. What a worker's
    Engine runs with ``batching="full"`` (one iteration per epoch, in the same loop and step as
    mini-batches); the loss keeps the seeds' rows of the whole graph's logits."""

    def __init__(self, block: Block, fanouts: list[int]):
        self.block, self.fanouts = block, list(fanouts)
        self.device = block.nbr.device

    def sample(self, seeds, epoch: int = 0, batch: int = 0, *, clock=None) -> MiniBatch:
        seeds = torch.as_tensor(seeds, dtype=torch.int64).to(self.device)  # [B]
        layers = len(self.fanouts)
        return MiniBatch(
            seeds=seeds,
            num_seeds=torch.tensor(seeds.numel(), device=self.device),
            blocks=[self.block] * layers,
            counts=torch.zeros(layers, dtype=torch.int64, device=self.device),
            overflowed=torch.zeros((), dtype=torch.bool, device=self.device),
        )


def whole_graph_block(g: Graph) -> Block:
    """One Block with every in-edge of every node (see the module docstring)."""
    if not isinstance(g, Graph):
        raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
    deg = g.in_degrees()  # [N]
    width = max(1, int(deg.max()))
    if g.num_nodes * width > MAX_BLOCK_SLOTS:
        raise ValueError(
            f"g has {g.num_nodes:,} nodes and maximum in-degree {width:,}: the padded "
            f"whole-graph block would hold {g.num_nodes * width:,} slots (limit "
            f"{MAX_BLOCK_SLOTS:,}); use mini-batch mode for this graph"
        )
    slots = torch.arange(width, device=g.device)  # [k]
    mask = slots[None, :] < deg[:, None]  # [N, k]
    edge = (g.indptr[:-1, None] + slots[None, :]).clamp(max=max(g.num_edges - 1, 0))
    nbr = torch.where(
        mask, g.indices[edge] if g.num_edges else edge, 0
    )  # [N, k] global = local ids
    n = torch.tensor(g.num_nodes, device=g.device)
    return Block(
        nbr=nbr,
        mask=mask,
        num_src=n,
        num_dst=n,
        src_nodes=torch.arange(g.num_nodes, device=g.device),
    )


def full_forward(model: torch.nn.Module, g: Graph, block: Block = None) -> torch.Tensor:
    """Logits [N, num_classes] of every node with full neighbourhoods (autograd as usual),
    checked where they come back (:func:`zg._checks.returned_logits`: ``[N, C >=
    num_classes]``, floating, on the features' device)."""
    if block is None:
        block = whole_graph_block(g)
    num_layers = len(model.layers)
    logits = model([block] * num_layers, g.x)
    classes = max(int(g.num_classes), 1) if g.y is not None else 1
    who = f"{type(model).__name__}.forward(blocks, x)"
    return returned_logits(logits, who, g.num_nodes, classes, g.x.device)
