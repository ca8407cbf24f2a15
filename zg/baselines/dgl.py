"""The standard DGL pipeline: ``dgl.dataloading.NeighborSampler`` + ``DataLoader`` + ``dgl.nn``.

Where it sits: the "what a DGL user writes" baseline, ``zg.Engine(..., mode="dgl")`` (the
shorthand of ``mode="eager", sampler=zg.DGLSampler(g, fanouts, seed=seed)``), beside zg's own
modes. It shares with them the seed order of every epoch, the batches, the gather, the loss,
the optimizer and the loop; only the sampler (DGL's C++ sampler behind its DataLoader,
:class:`DGLSampler`, a :class:`zg.Sampler` like any other) and the layers (``dgl.nn``,
:class:`DGLModel`) are DGL's. The model has the same configuration as the
zg model of the same name: same layer widths, activations, dropout and head handling, and the
same parameter names, so ``zg_model.load_state_dict(dgl_model.state_dict())`` works.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .._checks import bool_arg, seed_arg
from ..graph import Graph, graph_arg
from ..interop import require_dgl
from ..rng import order_seed
from ..sampling import MiniBatch, check_fanouts

__all__ = ["DGLModel", "DGLSampler"]


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


class DGLSampler:
    """DGL's ``NeighborSampler`` behind DGL's ``DataLoader``: the standard DGL recipe's sampling,
    a :class:`zg.Sampler` passed like any other::

        zg.Engine(g, DGLModel("sage", ...), fanouts, batch_size, mode="eager",
                  sampler=zg.DGLSampler(g, fanouts, seed=seed))

    is what ``mode="dgl"`` (its shorthand) builds and trains, bit for bit.

    Two things set it apart from zg's own samplers, and the Engine reads both from the sampler,
    not from a mode name:

    * **It draws an epoch as one stream.** DGL's loader is built per epoch over that epoch's
      seed order (``shuffle=False`` on the Engine's already shuffled batches, cut into batches
      of the epoch's rows), DGL's and torch's generators seeded from (seed, epoch) when it
      starts; each batch advances it. A batch's neighbours therefore depend on the draws of the
      batches before it in the epoch, not on (seed, epoch, batch) alone as zg's samplers'
      keyed draws do, and the loader needs the epoch's batches before the first is sampled:
      :meth:`prepare` (the optional method of :class:`zg.Sampler`; the Engine calls it at the
      start of every epoch, before its clock starts, and before a batch sampled outside the
      loop). Asked for a batch out of order (a profiler jumping around), it starts a loader at
      that batch, as DGL would.

      What this costs, and why no zg sampler pays it: the protocol's promise that (seed, epoch,
      batch) fix the MiniBatch holds here only for an epoch drawn in order from its first
      batch. Batch ``b`` drawn alone, or first after a rewind or a checkpoint resumed inside
      the epoch, comes from a loader started at ``b`` (seeded from (seed, epoch)), not from the
      stream that drew batches ``0 .. b - 1`` first: other neighbours. DGL's generator cannot
      be read back or keyed per batch from outside (docs/reliability.md), so this cannot be
      closed in a sampler; it is the baseline's behaviour, kept as DGL users meet it. Nor can
      it be a :class:`zg.StaticSampler`: its sizes are read on the host (no static launch).
      And even in order, DGL samples a batch's rows on its OpenMP threads, each drawing from
      its own generator: with more than one thread (``dgl.utils.get_num_threads()``) the same
      seed gives other neighbours from run to run. Only with one sampling thread
      (``dgl.utils.set_num_threads(1)``) do two runs draw the same samples.
    * **Its blocks are DGL's** (``block_format = "dgl"``): a ``dgl.nn`` model reads them
      (:class:`DGLModel`), a zg model does not; the Engine records ``kernel="dgl"``.

    Args:
        g: the zg graph (on the CPU: the reference environment's DGL has no CUDA build).
        fanouts: input layer first (DGL's order too). replace: sample with replacement.
        seed: seeds each epoch's loader (with the epoch).

    DGL is imported when one is built (``import zg`` never needs it): without DGL, an
    ImportError saying how to get it.
    """

    block_format = "dgl"  # the blocks it hands the model: DGL's, not zg's padded ones

    def __init__(self, g: Graph, fanouts: Sequence[int], replace: bool = False, seed: int = 0):
        g = graph_arg(g)
        fanouts = check_fanouts(fanouts)
        replace, seed = bool_arg(replace, "replace"), seed_arg(seed)
        if g.device.type != "cpu":
            raise ValueError(
                f"DGLSampler samples on the CPU here (the reference environment's DGL has no "
                f"CUDA build); g is on {g.device}: give g.to('cpu')"
            )
        self._build(g, fanouts, replace, seed)

    @classmethod
    def _checked(cls, g: Graph, fanouts: list[int], replace: bool, seed: int) -> DGLSampler:
        """Build from values the caller has checked (the Engine's ``mode="dgl"``)."""
        self = cls.__new__(cls)
        self._build(g, fanouts, replace, seed)
        return self

    def _build(self, g: Graph, fanouts: list[int], replace: bool, seed: int) -> None:
        dgl = require_dgl()
        self.dgl, self.g, self.device = dgl, g, g.device
        self.fanouts, self.replace, self.seed = list(fanouts), replace, seed
        self.dgl_graph = g.to_dgl()
        self.sampler = dgl.dataloading.NeighborSampler(list(fanouts), replace=replace)
        self._batches: tuple[int, list[torch.Tensor]] | None = None  # (epoch, its batches)
        self._at: tuple[int, int] | None = None  # (epoch, next batch) of the loader
        self._iter = None

    def prepare(self, epoch: int, batch: int, batches: list[torch.Tensor]) -> None:
        """The next batch to sample is ``batch`` of ``epoch``, whose batches (seed tensors, in
        order) are ``batches``: start a loader there, unless one already is (so a timed
        :meth:`sample` of that batch pays DGL's sampling, not a loader start). Every batch
        but the epoch's last must have the rows of its first: DGL's loader cuts the epoch's
        seed order into equal batches (a ValueError otherwise)."""
        rows = max(int(b.numel()) for b in batches)
        uneven = [i for i, b in enumerate(batches[:-1]) if int(b.numel()) != rows]
        if uneven:
            raise ValueError(
                f"DGLSampler: batch {uneven[0]} of epoch {epoch} has "
                f"{int(batches[uneven[0]].numel())} seeds, not {rows}: DGL's DataLoader cuts an "
                "epoch's seed order into equal batches (only the last may be shorter)"
            )
        self._batches = (epoch, batches)
        if self._at != (epoch, batch):
            self._start(epoch, batch)

    def _start(self, epoch: int, batch: int) -> None:
        batches = self._batches[1]
        seeds_all = torch.cat(batches[batch:]).to(self.device)
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
            batch_size=max(int(b.numel()) for b in batches),
            shuffle=False,
            drop_last=False,
            num_workers=0,
        )
        self._iter, self._at = iter(loader), (epoch, batch)
        torch.random.set_rng_state(state)

    def sample(self, seeds, epoch: int = 0, batch: int = 0, clock=None) -> MiniBatch:
        """Batch ``batch`` of ``epoch`` (``seeds``: its seed tensor, as :meth:`prepare` was
        given it), from DGL's loader: advancing it *is* DGL's sample stage."""
        if self._batches is None or self._batches[0] != epoch:
            raise ValueError(
                f"DGLSampler.sample: epoch {epoch} was not prepared; call "
                "prepare(epoch, batch, batches) first (zg.Engine does)"
            )
        if self._at != (epoch, batch):
            self._start(epoch, batch)
        input_nodes, output_nodes, blocks = next(self._iter)
        self._at = (epoch, batch + 1)
        if clock is not None:
            clock("sample")
        if not torch.equal(torch.as_tensor(seeds).to(output_nodes.device), output_nodes):
            raise ValueError(
                f"DGLSampler.sample: seeds are not batch {batch} of epoch {epoch} as prepare() "
                "was given it (DGL's loader samples the epoch's batches in their order)"
            )
        n = output_nodes.numel()
        return MiniBatch(
            seeds=output_nodes,
            num_seeds=torch.tensor(n, device=self.device),
            blocks=blocks,
            counts=torch.tensor([b.num_src_nodes() for b in blocks], device=self.device),
            overflowed=torch.zeros((), dtype=torch.bool, device=self.device),
            inputs=input_nodes,
        )
