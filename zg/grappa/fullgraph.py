"""Full-neighbourhood computation on a whole graph, with autograd: the exact reference.

Where it sits: Grappa's "full-graph mode" trains each worker on its whole local graph
(:class:`WholeGraph`, a sampler whose one batch is the whole graph, its last block ending at
the seeds), and :func:`zg.grappa.gradient_error` needs the exact full-graph gradient. Both run a
zg model on one block that holds *every* in-edge of *every* node, used for every layer:

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

from .._checks import node_ids_arg, returned_logits
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
    """A :class:`zg.Sampler` whose one batch is the whole graph, kept to the sampler contract:
    every layer's block holds every in-edge of every node, and the last one ends at the seeds
    (its destination rows are the seeds, in order). What a worker's Engine runs with
    ``batching="full"`` (one iteration per epoch, in the same loop, step and loss as
    mini-batches).

    ``block``: :func:`whole_graph_block` of the graph (built once). For ``seeds`` [B] the source
    rows are put in the order ``[seeds, the other nodes in id order]`` (destinations are the
    first source rows), so the blocks are

        inner layers: nbr [N, d_max], mask [N, d_max], src_nodes = that order (N -> N rows)
        last layer:   the first B rows of those (N -> B rows: the seeds' logits only)

    each carrying the graph's out-degrees (:attr:`zg.Block.out_degree`), so every layer,
    GCN's included, is the exact full-graph layer. The blocks are built once per set of seeds
    (a worker's seeds stay the same for its whole super-epoch) and reused.
    """

    def __init__(self, block: Block, fanouts: list[int]):
        if not isinstance(block, Block):
            raise TypeError(
                f"block must be a zg.Block (whole_graph_block(g)), got {type(block).__name__}"
            )
        self.block, self.fanouts = block, list(fanouts)
        self.device = block.nbr.device
        self.num_nodes = block.nbr.shape[0]
        nbr, mask = block.nbr, block.mask  # [N, k]
        self._out_degree = torch.zeros(self.num_nodes, dtype=torch.float32, device=self.device)
        self._out_degree.index_add_(0, nbr[mask], torch.ones_like(nbr[mask], dtype=torch.float32))
        self._built: tuple[torch.Tensor, list[Block]] | None = None  # (seeds, their blocks)

    def sample(self, seeds, epoch: int = 0, batch: int = 0, *, clock=None) -> MiniBatch:
        seeds = torch.as_tensor(seeds, dtype=torch.int64).to(self.device)  # [B]
        if self._built is None or not torch.equal(self._built[0], seeds):
            seeds = node_ids_arg(seeds, "seeds", self.num_nodes, device=self.device)
            self._built = (seeds.clone(), self._blocks_ending_at(seeds))
        blocks = self._built[1]
        return MiniBatch(
            seeds=seeds,
            num_seeds=torch.tensor(seeds.numel(), device=self.device),
            blocks=blocks,
            counts=torch.stack([b.num_src for b in blocks]),
            overflowed=torch.zeros((), dtype=torch.bool, device=self.device),
        )

    def _blocks_ending_at(self, seeds: torch.Tensor) -> list[Block]:
        """The whole graph's blocks with the source rows ordered seeds first (see the class)."""
        n, dev = self.num_nodes, self.device
        others = torch.ones(n, dtype=torch.bool, device=dev)
        others[seeds] = False
        order = torch.cat([seeds, torch.arange(n, device=dev)[others]])  # [N] node of each row
        row_of = torch.empty_like(order)
        row_of[order] = torch.arange(n, device=dev)  # [N] row of each node
        mask = self.block.mask.index_select(0, order)  # [N, k]
        nbr = torch.where(mask, row_of[self.block.nbr.index_select(0, order)], 0)  # [N, k] rows
        out_degree = self._out_degree.index_select(0, order)  # [N] d_out of each row
        whole = self.block.num_src
        inner = Block(nbr, mask, whole, whole, order, out_degree=out_degree)
        b = seeds.numel()
        last = Block(
            nbr[:b], mask[:b], whole, torch.tensor(b, device=dev), order, out_degree=out_degree
        )  # [B, k]: the seeds' rows
        return [inner] * (len(self.fanouts) - 1) + [last]


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
