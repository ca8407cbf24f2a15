"""The standard DGL pipeline: ``dgl.dataloading.NeighborSampler`` + ``DataLoader`` + ``dgl.nn``.

Where it sits: the "what a DGL user writes" baseline, ``zg.Engine(..., mode="dgl")``, beside
zg's own modes. It shares with them the seed order of every epoch, the batches, the gather, the
loss, the optimizer and the loop; only the sampler (DGL's C++ sampler behind its DataLoader,
:class:`DGLSource`) and the layers (``dgl.nn``, :class:`DGLModel`) are DGL's. The model has the same configuration as the
zg model of the same name: same layer widths, activations, dropout and head handling, and the
same parameter names, so ``zg_model.load_state_dict(dgl_model.state_dict())`` works.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..interop import require_dgl
from ..rng import order_seed
from ..sampling import MiniBatch

__all__ = ["DGLModel", "DGLSource"]


class DGLModel(nn.Module):
    """``name`` in {"sage", "gcn", "gat"} built from ``dgl.nn`` layers, mirroring zg.models.

    forward(blocks: list of DGL blocks, x [S0, in_dim]) -> [D_last, num_classes].
    """

    def __init__(
        self,
        name: str,
        in_dim: int,
        hidden_dim: int,
        num_classes: int,
        num_layers: int = 3,
        dropout: float = 0.5,
        heads: int = 4,
    ):
        super().__init__()
        require_dgl()
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
                layers.append(
                    dglnn.GraphConv(dims[i], dims[i + 1], norm="both", allow_zero_in_degree=True)
                )
            else:
                width_in = dims[i] if i == 0 else dims[i] * heads
                layers.append(
                    dglnn.GATConv(width_in, dims[i + 1], heads, allow_zero_in_degree=True)
                )
        self.layers = nn.ModuleList(layers)
        self.dropout = nn.Dropout(dropout)
        # The width entering each layer, then the output width (as zg.models.BlockModel has
        # them): what zg.Engine checks against the graph in every mode, this one included.
        self.feature_dims = [in_dim] + [d * self.heads for d in dims[1:-1]] + [num_classes]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

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


class DGLSource:
    """The "dgl" mode's source: DGL's NeighborSampler behind DGL's DataLoader.

    Each epoch's DataLoader iterates over that epoch's seed order (``shuffle=False`` on the
    Engine's already shuffled batches), so DGL samples exactly the batches every zg mode trains
    on. ``sample(seeds, epoch, batch)`` advances the loader when asked for the batch that comes
    next (the epoch loop), and otherwise starts a loader at that batch (a profiler jumping
    around). DGL draws from its own and torch's generators, seeded from (seed, epoch) when a
    loader starts.

    Args:
        g: the zg graph. fanouts: input layer first (DGL's order too). batch_size: the rows
            of every batch. replace: sample with replacement. seed: the Engine's seed.
        batches: ``batches(epoch) -> list of seed tensors`` (the Engine's).
    """

    def __init__(
        self,
        g,
        fanouts: Sequence[int],
        batch_size: int,
        *,
        replace: bool = False,
        seed: int = 0,
        batches: Callable[[int], list[torch.Tensor]],
    ):
        dgl = require_dgl()
        self.dgl, self.g, self.device = dgl, g, g.device
        self.dgl_graph = g.to_dgl()
        self.batch_size, self.seed, self.batches = batch_size, seed, batches
        self.fanouts = list(fanouts)  # zg.Sampler's attribute
        self.sampler = dgl.dataloading.NeighborSampler(list(fanouts), replace=replace)
        self._at = None  # (epoch, next batch) of the loader
        self._iter = None

    def prepare(self, epoch: int, batch: int) -> None:
        """Start a loader whose next batch is ``batch`` of ``epoch``, unless one already is
        there (so a timed ``sample`` of that batch pays DGL's sampling, not a loader start)."""
        if self._at != (epoch, batch):
            self._start(epoch, batch)

    def _start(self, epoch: int, batch: int) -> None:
        seeds_all = torch.cat(self.batches(epoch)[batch:]).to(self.device)
        seed = order_seed(self.seed, epoch)
        # Starting a loader draws from torch's generator; the batch's dropout seed (set just
        # before) must survive it, so the generator is put back afterwards.
        state = torch.random.get_rng_state()
        torch.manual_seed(seed)
        self.dgl.seed(seed)
        loader = self.dgl.dataloading.DataLoader(
            self.dgl_graph,
            seeds_all,
            self.sampler,
            batch_size=self.batch_size,
            shuffle=False,
            drop_last=False,
            num_workers=0,
        )
        self._iter, self._at = iter(loader), (epoch, batch)
        torch.random.set_rng_state(state)

    def sample(self, seeds, epoch: int = 0, batch: int = 0, clock=None) -> MiniBatch:
        if self._at != (epoch, batch):
            self._start(epoch, batch)
        # DGL samples inside its DataLoader's iterator: advancing it *is* DGL's sample stage.
        input_nodes, output_nodes, blocks = next(self._iter)
        self._at = (epoch, batch + 1)
        if clock is not None:
            clock("sample")
        n = output_nodes.numel()
        return MiniBatch(
            seeds=output_nodes,
            num_seeds=torch.tensor(n, device=self.device),
            blocks=blocks,
            counts=torch.tensor([b.num_src_nodes() for b in blocks], device=self.device),
            overflowed=torch.zeros((), dtype=torch.bool, device=self.device),
            inputs=input_nodes,
        )
