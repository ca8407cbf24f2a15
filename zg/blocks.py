"""Padded blocks: the fixed-shape message-flow graph of one GNN layer.

Where it sits: samplers produce one Block per layer (input layer first, as DGL does); models
consume them; ``to_dgl()`` turns one into an exact DGL block for cross-checking.

A Block with ``D`` destination rows, ``S`` source rows and fanout ``k`` holds

    src_nodes  int64 [S]     global id of each source row (rows >= num_src are padding)
    nbr        int64 [D, k]  local source row of each neighbour slot, always in [0, S)
    mask       bool  [D, k]  True where the slot holds a real sampled edge
    num_src    int64 []      true number of source rows (device tensor, never read on the host
                             by the training path)
    num_dst    int64 []      true number of destination rows

Destination rows are the first rows of the source side (DGL's convention): destination row i
is source row i. Padding destination rows (i >= num_dst) have an all-False mask, and masked
slots point at row 0, so gathers never go out of bounds. Two optional fields let a producer
that keeps these rules by construction (the kit's samplers) save the layers re-applying them:

    dst_valid      bool  [D]     rows < num_dst, when the producer has it at hand
    padding_clean  bool          True: the rules above hold already, so the layers neither
                                 mask padded rows again nor point masked slots at row 0

One optional field says where the block was cut from:

    out_degree     float [S]     each source row's out-degree in the graph the block is part of
                                 (GCN's d_out(j)); None: counted over the block's own edges, as
                                 on a DGL block. A whole-graph block cut at its seeds
                                 (:class:`zg.grappa.fullgraph.WholeGraph`) keeps the whole
                                 graph's, so its last layer is the exact full-graph layer.
 Edge j of destination row i is the
message ``src_nodes[nbr[i, j]] -> src_nodes[i]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["Block"]


@dataclass
class Block:
    nbr: torch.Tensor
    mask: torch.Tensor
    num_src: torch.Tensor
    num_dst: torch.Tensor
    src_nodes: torch.Tensor | None = None
    dst_valid: torch.Tensor | None = None
    padding_clean: bool = False
    out_degree: torch.Tensor | None = None

    @property
    def num_dst_rows(self) -> int:
        """D: the static (padded) number of destination rows."""
        return int(self.nbr.shape[0])

    @property
    def num_src_rows(self) -> int:
        """S: the static (padded) number of source rows."""
        if self.src_nodes is not None:
            return int(self.src_nodes.shape[0])
        return int(self.nbr.shape[0])

    @property
    def fanout(self) -> int:
        return int(self.nbr.shape[1])

    def edges(self):
        """(src_local, dst_local) of the real edges, int64 each. Reads sizes on the host."""
        dst_local = torch.arange(self.nbr.shape[0], device=self.nbr.device)[:, None].expand_as(
            self.nbr
        )
        return self.nbr[self.mask], dst_local[self.mask]

    def to_dgl(self):
        """An exact ``dgl`` block with ``num_src`` / ``num_dst`` nodes (host reads; tests only).

        Edges are listed row by row, slot by slot. ``srcdata[dgl.NID]`` holds the global ids.
        """
        from .interop import require_dgl

        dgl = require_dgl()
        num_src, num_dst = int(self.num_src), int(self.num_dst)
        src, dst = self.edges()
        block = dgl.create_block(
            (src, dst), num_src_nodes=num_src, num_dst_nodes=num_dst, device=self.nbr.device
        )
        if self.src_nodes is not None:
            block.srcdata[dgl.NID] = self.src_nodes[:num_src]
            block.dstdata[dgl.NID] = self.src_nodes[:num_dst]
        return block
