"""The standard DGL pipeline: ``dgl.dataloading.NeighborSampler`` + ``DataLoader`` + ``dgl.nn``.

Where it sits: the "what a DGL user writes" baseline beside zg's dynamic and envelope
pipelines (:mod:`zg.pipeline`). It shares with them the seed order of every epoch, the batches,
the gather, the loss, the optimizer and the loop; only the sampler (DGL's C++ sampler behind its
DataLoader) and the layers (``dgl.nn``) are DGL's. The model has the same configuration as the
zg model of the same name: same layer widths, activations, dropout and head handling, and the
same parameter names, so ``zg_model.load_state_dict(dgl_model.state_dict())`` works.
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..interop import require_dgl
from ..pipeline import Pipeline
from ..rng import order_seed
from ..sampling import MiniBatch

__all__ = ["DGLModel", "DGLPipeline"]


class DGLModel(nn.Module):
    """``name`` in {"sage", "gcn", "gat"} built from ``dgl.nn`` layers, mirroring zg.models.

    forward(blocks: list of DGL blocks, x [S0, in_dim]) -> [D_last, num_classes].
    """

    def __init__(self, name: str, in_dim: int, hidden_dim: int, num_classes: int,
                 num_layers: int = 3, dropout: float = 0.5, heads: int = 4):
        super().__init__()
        dgl = require_dgl()
        from dgl import nn as dglnn

        if name not in ("sage", "gcn", "gat"):
            raise ValueError(f"unknown model {name!r}; choose one of ['gat', 'gcn', 'sage']")
        self.name = name
        self.heads = heads if name == "gat" else 1
        dims = [in_dim] + [hidden_dim] * (num_layers - 1) + [num_classes]
        layers = []
        for i in range(num_layers):
            if name == "sage":
                layers.append(dglnn.SAGEConv(dims[i], dims[i + 1], "mean"))
            elif name == "gcn":
                layers.append(dglnn.GraphConv(dims[i], dims[i + 1], norm="both", allow_zero_in_degree=True))
            else:
                width_in = dims[i] if i == 0 else dims[i] * heads
                layers.append(dglnn.GATConv(width_in, dims[i + 1], heads, allow_zero_in_degree=True))
        self.layers = nn.ModuleList(layers)
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        last = len(self.layers) - 1
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h_dst = h[: block.num_dst_nodes()]
            h = layer(block, (h, h_dst))
            if self.name == "gat":
                h = self.dropout(F.elu(h.flatten(1))) if i < last else h.mean(1)
            elif i < last:
                h = self.dropout(F.relu(h))
        return h


class DGLPipeline(Pipeline):
    """DGL's NeighborSampler behind DGL's DataLoader, with ``dgl.nn`` layers.

    The DataLoader iterates over this epoch's shared seed order (``shuffle=False`` on an
    already shuffled order), so its batches are exactly the zg pipelines' batches.
    """

    name = "DGL"

    def __init__(self, g, model: nn.Module, fanouts: Sequence[int], batch_size: int, *,
                 replace: bool = False, **kwargs):
        super().__init__(g, model, fanouts, batch_size, **kwargs)
        dgl = require_dgl()
        self.dgl = dgl
        self.dgl_graph = g.to_dgl()
        self.sampler = dgl.dataloading.NeighborSampler(self.fanouts, replace=replace)
        self._iter = None

    def batches(self, epoch):
        dgl = self.dgl
        order = list(super().batches(epoch))
        seeds_all = torch.cat([s for _, s in order]).to(self.device)
        seed = order_seed(self.seed, epoch)
        torch.manual_seed(seed)                              # DGL's sampler draws from torch's RNG
        dgl.seed(seed)
        loader = dgl.dataloading.DataLoader(self.dgl_graph, seeds_all, self.sampler,
                                            batch_size=self.batch_size, shuffle=False,
                                            drop_last=False, num_workers=0)
        self._iter = iter(loader)
        yield from order

    def sample(self, seeds, epoch, batch, clock=None):
        # DGL samples inside its DataLoader's iterator: advancing it *is* DGL's sample stage.
        input_nodes, output_nodes, blocks = next(self._iter)
        if clock is not None:
            clock("sample")
        n = output_nodes.numel()
        return MiniBatch(seeds=output_nodes, num_seeds=torch.tensor(n, device=self.device),
                         blocks=blocks,
                         counts=torch.tensor([b.num_src_nodes() for b in blocks], device=self.device),
                         overflowed=torch.zeros((), dtype=torch.bool, device=self.device),
                         inputs=input_nodes)
