"""Neighbour sampling: the host-mediated reference and the fixed-shape envelope sampler.

Where it sits: seeds -> **sample hop by hop -> compact into the envelope** -> gather features
-> model -> loss -> backward -> step. Both samplers return a :class:`MiniBatch` whose blocks
(input layer first, as DGL lists them) the models in :mod:`zg.models` consume.

Both samplers pick neighbours with the same kernel, :func:`sample_neighbors`: per destination
node ``v`` with in-degree ``d`` and fanout ``k``

* without replacement (default): all ``d`` neighbours if ``d <= k``, otherwise a uniform
  ``k``-subset drawn with Floyd's algorithm in ``k`` vectorised rounds (every neighbour is
  included with probability ``k / d``; no edge twice);
* with replacement: ``k`` independent uniform draws (``d > 0``).

A fanout at or above the graph's largest in-degree therefore means "every neighbour" without
replacement; both samplers clamp it to that degree when they are built
(:func:`effective_fanouts`: the same sample, bounded work and memory), so ``[10**6]`` is a
cheap way to ask for full neighbourhoods. With replacement the fanout is kept (``k`` draws
with repeats are another distribution), up to :data:`MAX_REPLACE_FANOUT` or the largest
in-degree.

Randomness is a counter-based hash (splitmix64) of ``(seed, epoch, batch, hop, node, round)``
computed on the device, so the same ``(seed, epoch, batch)`` gives the same sample whenever and
however often it runs, in any row order, captured in a CUDA Graph or not. Each row's stream is
``key ^ mix64(node)`` and round ``s`` draws ``mix64(stream + s * golden)``: splitmix64's own
way of walking a stream, one hash per draw (the node's hash is a table lookup).

What differs is what happens to the metadata, the point of the whole kit:

* :class:`DynamicSampler` does what DGL and PyG do: boolean-mask the valid slots, ``unique``
  and relabel with data-dependent output sizes, so every hop asks the host how many nodes it
  found before it can allocate the next one (host syncs > 0 per call; see ``zg.audit``).
* :class:`EnvelopeSampler` keeps every shape fixed before the call: per hop a ``[rows, fanout]``
  slot array with a validity mask, deduplication through a node-indexed marker array into a
  buffer of envelope size ``E_h``, the true count as a 0-d device tensor and a sticky
  ``overflowed`` device flag. It never reads a device value on the host (0 host syncs).

``EnvelopeSampler`` has two implementations of that fixed-shape core, chosen by its ``kernel``
argument (:func:`zg.kernels.resolve`): the torch ops of :meth:`EnvelopeSampler.sample_static`
(the readable reference, the capturable CUDA path, and the default everywhere) and, on the CPU
when asked for (``kernel="auto"`` or ``"fused"``), the fused numba kernel
(:mod:`zg.kernels.sampling`) that does every hop in one compiled, multithreaded call and
returns the same tensors bit for bit.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from . import kernels
from ._checks import (
    batch_size_arg,
    bool_arg,
    fanouts_arg,
    key_arg,
    memory_arg,
    node_ids_arg,
    seed_arg,
)
from .blocks import Block
from .graph import Graph, graph_arg
from .kernels import sampling as fused_sampling
from .rng import (
    _GOLDEN,
    HOP_GOLDEN,
    _signed,
    batch_key,
    device_scalar,
    finalise64,
    mix64,
)

__all__ = [
    "sample_neighbors",
    "DynamicSampler",
    "EnvelopeSampler",
    "MiniBatch",
    "batch_key",
    "check_fanouts",
    "check_seeds",
    "effective_fanouts",
    "max_in_degree",
    "worst_case_sizes",
    "MAX_REPLACE_FANOUT",
]


# ----------------------------------------------------------------------------- validation


def compiling() -> bool:
    """True while ``torch.compile`` traces the code (the compiled launch, :mod:`zg.compiled`);
    the compiler folds the call to a constant."""
    return _is_compiling()


# torch >= 2.3 names it torch.compiler.is_compiling; torch 2.2 has torch._utils.is_compiling.
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._utils.is_compiling


# With replacement a fanout k draws k neighbours per node, repeats allowed, so k above the
# largest in-degree is a real (different) distribution, not "all neighbours"; it costs [rows, k]
# slots of memory per hop. Up to this many draws per node (or the largest in-degree, if more)
# are allowed; a larger k is a ValueError rather than an allocation that never finishes.
MAX_REPLACE_FANOUT = 1024


def check_fanouts(fanouts: Any) -> list[int]:
    """Fanouts as a list of ints >= 1, input layer first (TypeError / ValueError naming them)."""
    return fanouts_arg(fanouts, "fanouts")


def max_in_degree(g: Graph) -> int:
    """The graph's largest in-degree (one host read; done when a sampler is built, never per batch)."""
    return int((g.indptr[1:] - g.indptr[:-1]).max())


def worst_case_sizes(
    num_nodes: int, fanouts: Sequence[int], batch_size: int, max_degree: int | None = None
) -> list[int]:
    """Worst-case source rows per block (input layer first).

    ``max_degree``: the graph's largest in-degree, if known; a row then contributes at most
    ``min(k, max_degree)`` new nodes (the samplers clamp larger fanouts to it).
    """
    rows, sizes = batch_size, []
    for k in reversed(list(fanouts)):
        if max_degree is not None:
            k = min(k, max_degree)
        rows = max(rows, min(num_nodes, rows * (k + 1)))
        sizes.append(rows)
    return sizes[::-1]


def effective_fanouts(fanouts: Sequence[int], max_degree: int, replace: bool) -> list[int]:
    """The number of neighbour slots each hop really samples (input layer first).

    Without replacement a node with in-degree ``d <= k`` contributes all ``d`` neighbours, so a
    fanout at or above the largest in-degree ``D`` means "every neighbour": it is clamped to
    ``D`` (at least 1), which gives exactly the same sample with bounded work and memory
    (Floyd's rounds cost ``O(k^2)`` per row). With replacement ``k`` independent draws are kept
    as asked (a different distribution from ``min(k, D)`` draws), up to
    ``max(MAX_REPLACE_FANOUT, D)``; above that it is a ValueError naming the fanout.
    """
    out = []
    for i, k in enumerate(fanouts):
        if not replace:
            out.append(min(int(k), max(int(max_degree), 1)))
            continue
        limit = max(MAX_REPLACE_FANOUT, int(max_degree))
        if k > limit:
            raise ValueError(
                f"fanouts[{i}] = {k} with replace=True draws {k} neighbours per node (repeats "
                f"allowed), [rows, {k}] slots per hop; zg allows at most {limit} (the larger of "
                f"{MAX_REPLACE_FANOUT} and the graph's largest in-degree {max_degree}). For every "
                f"neighbour use replace=False, where any fanout >= {max_degree} means all of them"
            )
        out.append(int(k))
    return out


def check_seeds(
    seeds: Any,
    num_nodes: int,
    device: torch.device,
    max_len: int | None = None,
    name: str = "seeds",
) -> torch.Tensor:
    """Validate user seeds on the host and return them as int64 on ``device``.

    A non-empty 1-d integer tensor, array or list of distinct node ids in ``[0, num_nodes)``,
    at most ``max_len`` of them; errors name ``name``. Seeds that already live on an
    accelerator are checked for dtype, shape and device only: reading their values would be a
    host sync (the engine validates its seed order once, on the host, before the epoch).
    """
    return node_ids_arg(seeds, name, num_nodes, device=device, max_len=max_len)


def _node_arrays_fit(sampler: str, g: Graph, bytes_per_node: int) -> None:
    """Refuse a sampler whose node-indexed arrays (markers, id maps, node tables: sized by the
    graph's node count, a size read from data) cannot fit on its device, before any is made."""
    memory_arg(
        bytes_per_node * (g.num_nodes + 1),
        f"{sampler} on a graph of {g.num_nodes} nodes ({bytes_per_node} bytes a node)",
        g.device if g.device.type == "cuda" else None,
    )


def _check_clock(clock: Any) -> None:
    if clock is not None and not callable(clock):
        raise TypeError(f"clock must be callable or None, got {type(clock).__name__}")


# ----------------------------------------------------------------------------- the kernel


def sample_neighbors(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    nodes: torch.Tensor,
    valid_rows: torch.Tensor,
    fanout: int,
    replace: bool,
    key: torch.Tensor,
    max_degree: int | None = None,
    pad: Any = 0,
    node_table: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    constants: SlotConstants | None = None,
):
    """Pick up to ``fanout`` in-neighbours of each node, in fixed shape.

    Args:
        indptr: int64 [N + 1]; indices: int64 [E], the graph's own arrays, read in place (never
            copied, so a memory-mapped graph stays on disk but for the rows sampled).
        nodes: int64 [R] destination node ids (rows >= the true count hold any valid id).
        valid_rows: bool [R] which rows are real, or None when the rows that are not real
            already point at a node without in-edges (the node table's empty last row).
        key: int64 0-d device tensor, this hop's random key.
        max_degree: the graph's largest in-degree, if known (a host int). Without replacement
            and ``fanout >= max_degree`` every row takes all its neighbours, so Floyd's ``k``
            rounds (``O(k^2)`` per row) are skipped; the result is the same.
        pad: what masked slots hold: an int, or an int64 device tensor that broadcasts to
            [R, k] (a 0-d scalar, or [R, 1]: one value per row).
        node_table: optional int64 [N + 1, 3], each node's (first edge, in-degree, ``mix64(node)``),
            built once (:func:`node_table`): one gather per hop instead of four; the same bits.
        out: optional int64 [R, k] the neighbours are written into (and returned).
        constants: the caller's :class:`SlotConstants` (a sampler's, made when it was built);
            None makes fresh ones.
    Returns:
        (neighbours int64 [R, k] global ids, mask bool [R, k]). Masked slots hold ``pad``.
    """
    k = fanout
    rows = nodes.shape[0]
    dev = nodes.device
    constants = SlotConstants(dev) if constants is None else constants
    if node_table is not None:
        row = node_table.index_select(0, nodes)  # [R, 3]
        start, degree, hashed = row[:, 0], row[:, 1], row[:, 2]  # [R] each (views)
    else:
        start = _gather(indptr, nodes)  # [R]
        degree = _gather(indptr, nodes + 1) - start  # [R]
        hashed = mix64(nodes)
    stream = key ^ hashed  # [R] the row's splitmix64 stream; draw s hashes stream + s * golden
    # Slot-major [k, R] layout: round i of Floyd reads and writes one contiguous row.
    slots = constants.ids(k)  # [k, 1]
    if not replace and max_degree is not None and k >= max_degree:
        offset = slots.expand(k, rows)  # every row: all neighbours
        mask = slots < degree[None, :]  # [k, R]
    elif replace:
        draws = finalise64(stream[None, :] + constants.steps(k))  # [k, R] int64
        offset = torch.remainder(draws, degree.clamp(min=1)[None, :])  # floor mod: in [0, d)
        mask = (degree > 0)[None, :].expand(k, -1)
    else:
        draws = finalise64(stream[None, :] + constants.steps(k))  # [k, R] int64
        # Floyd: for j = d-k .. d-1 draw t in [0, j]; take t unless already taken, else j.
        # The draws do not depend on earlier rounds, so all k are hashed at once; only the
        # "already taken?" test runs round by round.
        # Rows with d <= k take every neighbour (below), whatever Floyd picks for them; their
        # j starts at 0 instead of d - k < 0, so every draw and pointer stays in range.
        base = (degree - k).clamp(min=0)[None, :]  # [1, R] j of round 0
        j = base + slots  # [k, R]
        t = torch.remainder(draws, j + 1)  # [k, R] in [0, j]
        chosen = _floyd_rounds(t, j, k, base, constants)  # [k, R]
        small = degree <= k  # take every neighbour
        offset = torch.where(small[None, :], slots, chosen)  # [k, R]
        mask = slots < degree[None, :]  # [k, R]
    mask_kr = mask if valid_rows is None else mask & valid_rows[None, :]  # [k, R]
    mask = mask_kr.t()  # [R, k] (a view)
    if indices.numel() == 0:  # no edges: every slot masked
        filled = torch.zeros(mask.shape, dtype=torch.int64, device=dev) if out is None else out
        if isinstance(pad, torch.Tensor):
            return filled.copy_(pad.expand(mask.shape)), mask
        return filled.fill_(int(pad)), mask
    # Masked slots read edge 0 (always in bounds: times a False mask is 0) and are then
    # overwritten with pad. The edges are gathered in the slot-major layout they were made in
    # (contiguous, so no copy), then read as [R, k].
    edge = (start[None, :] + offset) * mask_kr  # [k, R]
    if out is not None and not compiling():
        return torch.where(mask, _gather(indices, edge).t(), pad, out=out), mask
    picked = torch.where(mask, _gather(indices, edge).t(), pad)  # [R, k]
    # (Traced by torch.compile, an out= of strides other than its inputs' fails to compile;
    # a copy into it is fused into the same loop.)
    return (picked if out is None else out.copy_(picked)), mask


# Above this many nodes the static sampler looks each node's first edge, degree and hash up
# per hop instead of keeping a [N, 3] table of them.
NODE_HASH_MAX_NODES = 1 << 26

# Up to this many rounds Floyd's loop (4 ops a round) launches no more ops than the closed form.
_FLOYD_LOOP_MAX_K = 4


def node_table(indptr: torch.Tensor) -> torch.Tensor:
    """int64 [N + 1, 3]: each node's first in-edge, in-degree and ``mix64(node)``, the three
    per-row values :func:`sample_neighbors` reads, so one gather fetches them; row N is an
    empty node (degree 0), what the envelope sampler's padding rows read."""
    n = indptr.shape[0] - 1
    first = indptr[:-1].to(torch.int64)
    degree = indptr[1:].to(torch.int64) - first
    table = torch.stack([first, degree, mix64(torch.arange(n, device=indptr.device))], dim=1)
    return torch.cat([table, torch.zeros(1, 3, dtype=torch.int64, device=indptr.device)])


def _floyd_rounds(
    t: torch.Tensor,
    j: torch.Tensor,
    k: int,
    base: torch.Tensor | None = None,
    constants: SlotConstants | None = None,
) -> torch.Tensor:
    """Floyd's choices for every row at once: ``chosen[i] = j[i] if t[i] is already taken else
    t[i]`` (t, j: int64 [k, R], ``0 <= t[i] <= j[i] = base + i``; ``base`` [1, R] is ``d - k
    >= 0``, derived from ``j`` when not given), the same values as the round-by-round loop, in
    a fixed number of ops.

    Round ``i`` finds ``t[i]`` taken exactly when (a) some earlier round drew the same ``t``
    (whatever that round then chose, the value was in the set after it), or (b) ``t[i]``
    equals ``j[m]`` of an earlier round ``m = t[i] - (d - k)`` that was itself taken (only then
    did round ``m`` add ``j[m]``; if it added ``t[m] == j[m]``, (a) holds). So ``taken`` is (a)
    OR-ed along a chain of pointers to earlier rounds, which ``ceil(log2 k)`` pointer-doubling
    steps resolve. For small ``k`` the loop is shorter and runs instead. ``constants``: the
    caller's :class:`SlotConstants` (made fresh when None).
    """
    if k <= _FLOYD_LOOP_MAX_K:
        chosen = t.clone()  # [k, R]
        for i in range(1, k):
            taken = (chosen[:i] == t[i]).any(dim=0)  # [R]
            chosen[i] = torch.where(taken, j[i], t[i])
        return chosen
    constants = SlotConstants(t.device) if constants is None else constants
    below = constants.strictly_below(k)  # [k, k, 1] m < i
    # (a) an earlier round drew the same t: [k, k, R] -> [k, R]
    taken = ((t[:, None, :] == t[None, :, :]) & below).any(dim=1)
    # (b) the pointer to round m = t[i] - (d - k) (m <= i; m == i only when t[i] == j[i]: a
    # pointer to itself). When m < 0, t[i] is below every j, so no earlier round can have
    # added it: the pointer goes to round 0, which is never taken (no round precedes it) and
    # points at itself, so following it adds nothing.
    m = t - (j[:1] if base is None else base)  # [k, R]
    ptr = m.clamp(min=0)  # [k, R] int64
    steps = 1  # ceil(log2 k) rounds of doubling, at least one (int ops torch.compile folds)
    while (1 << steps) < k:
        steps += 1
    for step in range(steps):
        taken = taken | torch.gather(taken, 0, ptr)
        if step + 1 < steps:
            ptr = torch.gather(ptr, 0, ptr)
    return torch.where(taken, j, t)


class SlotConstants:
    """The fixed constants of :func:`sample_neighbors` for each fanout ``k``, on one device.

    Each sampler owns one and fills it when it is built (:meth:`prepare`), so a (captured)
    iteration only reads them; nothing is kept at module level.
    """

    def __init__(self, device: Any):
        self.device = torch.device(device)
        self._ids: dict[int, torch.Tensor] = {}
        self._steps: dict[int, torch.Tensor] = {}
        self._below: dict[int, torch.Tensor] = {}

    def prepare(self, fanouts: Sequence[int]) -> SlotConstants:
        """Make the constants of every fanout now (never inside a captured iteration)."""
        for k in fanouts:
            self.ids(k)
            self.steps(k)
            if k > _FLOYD_LOOP_MAX_K:
                self.strictly_below(k)
        return self

    def ids(self, k: int) -> torch.Tensor:
        """int64 [k, 1]: ``arange(k)``."""
        if k not in self._ids:
            self._ids[k] = torch.arange(k, dtype=torch.int64, device=self.device)[:, None]
        return self._ids[k]

    def steps(self, k: int) -> torch.Tensor:
        """int64 [k, 1]: ``(s + 1) * golden`` (wrapping int64 arithmetic) for s < k: the steps of
        a splitmix64 stream with mix64's own ``+ golden`` folded in, so draw ``s`` is
        ``finalise64(stream + steps[s]) == mix64(stream + s * golden)`` at one add and one
        finaliser."""
        if k not in self._steps:
            s = torch.arange(k, dtype=torch.int64, device=self.device)[:, None]
            self._steps[k] = s * _GOLDEN + _GOLDEN
        return self._steps[k]

    def strictly_below(self, k: int) -> torch.Tensor:
        """bool [k, k, 1]: round m precedes round i (m < i)."""
        if k not in self._below:
            ones = torch.ones(k, k, dtype=torch.bool, device=self.device)
            self._below[k] = ones.tril(-1)[:, :, None]
        return self._below[k]


def _gather(src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``src[index]`` for a 1-d ``src``, shaped like ``index``: ``torch.gather`` on the flat
    index, which the CPU runs faster than advanced indexing, and the same on a GPU."""
    return torch.gather(src, 0, index.reshape(-1)).view(index.shape)


def _hop_key(key: torch.Tensor, hop: int) -> torch.Tensor:
    """:func:`zg.rng.hop_key` on a device key."""
    return mix64(key + _signed(((hop + 1) * HOP_GOLDEN) % (1 << 64)))


def _hop_constants(hops: int, device: torch.device) -> torch.Tensor:
    """int64 [hops]: the constants :func:`_hop_key` adds, for all hops at once."""
    return torch.tensor(
        [_signed(((hop + 1) * HOP_GOLDEN) % (1 << 64)) for hop in range(hops)],
        dtype=torch.int64,
        device=device,
    )


# ----------------------------------------------------------------------------- mini-batch


@dataclass
class MiniBatch:
    """One sampled mini-batch.

    Attributes:
        seeds: int64 [B] the output nodes (padded to ``batch_size``; rows >= num_seeds are padding).
        num_seeds: int64 [] true number of seeds.
        blocks: one :class:`~zg.blocks.Block` per layer, input layer first.
        counts: int64 [L] true source-node count of each block (``blocks[i].num_src``), on device.
        overflowed: bool [] True if some count exceeded its envelope size (then the batch's
            sample is truncated and must not be applied; nothing was written out of bounds).
        wanted: int64 [L] (envelope sampler) the count each block asked for before clamping to
            its envelope size; exact up to the first overflowing hop, a lower bound after it.
    """

    seeds: torch.Tensor
    num_seeds: torch.Tensor
    blocks: list[Block]
    counts: torch.Tensor
    overflowed: torch.Tensor
    envelope_sizes: list[int] | None = None
    wanted: torch.Tensor | None = None
    inputs: torch.Tensor | None = None

    @property
    def input_nodes(self) -> torch.Tensor:
        """int64 [S_0]: global ids of the input layer's source rows (gather features of these).
        ``inputs`` when the source gave them (DGL's blocks), else the first block's rows."""
        return self.inputs if self.inputs is not None else self.blocks[0].src_nodes

    @property
    def valid(self) -> torch.Tensor:
        """bool [B]: which seed rows are real (padding rows False); no host read. The last
        block's ``dst_valid`` when its sampler kept it (the same tensor, no launch)."""
        valid = getattr(self.blocks[-1], "dst_valid", None) if self.blocks else None
        if valid is not None:  # (DGL's blocks have no such field)
            return valid
        return torch.arange(self.seeds.shape[0], device=self.seeds.device) < self.num_seeds

    def to_dgl_blocks(self):
        """Exact DGL blocks, input layer first (reads metadata on the host; tests only)."""
        if bool(self.overflowed):
            raise ValueError("this mini-batch overflowed its envelope; its blocks are truncated")
        return [b.to_dgl() for b in self.blocks]

    def node_sets(self) -> list[torch.Tensor]:
        """Sorted global ids of each block's true source nodes (host reads; tests and hashes)."""
        return [torch.sort(b.src_nodes[: int(b.num_src)]).values for b in self.blocks]


# ----------------------------------------------------------------------------- the protocol


@runtime_checkable
class Sampler(Protocol):
    """What :class:`zg.Engine` calls to turn a batch of seeds into a :class:`MiniBatch`
    (the chain's "sample -> compact" stages): what ``Engine(..., sampler=...)`` takes.

    ``fanouts`` (list of int, input layer first) is the number of neighbours per hop; the
    Engine checks that it equals its own ``fanouts`` (one block per model layer).
    ``sample(seeds, epoch, batch, clock=None)`` samples one batch: ``seeds`` int64 [n <= B]
    distinct node ids of the sampler's graph (host or device); ``epoch``, ``batch`` and the
    sampler's own seed fix every random choice (the same three give the same MiniBatch);
    ``clock`` (None, or a :class:`zg.step.StageClock`) is called with ``"sample"`` after each
    hop's neighbour picking and ``"compact"`` after its relabelling. It returns a MiniBatch
    whose ``blocks`` (one :class:`zg.Block` per layer, input layer first) end at the seeds:
    the last block's destination rows are the seeds, in order.

    An eager launch (``mode="eager"``) needs only this. The built-in samplers implement it:
    :class:`DynamicSampler` (exact sizes, host reads), :class:`EnvelopeSampler` (fixed shapes)
    and :class:`zg.DGLSampler` (DGL's own). CONTRIBUTING.md "Add a sampler" shows one written
    outside the package (``tests/core/test_extension_points.py``).

    Two optional members, read by the Engine from the sampler (never from a mode's name):

    * ``prepare(epoch, batch, batches)``: for a sampler that draws an epoch as one stream
      (:class:`zg.DGLSampler`: DGL's DataLoader, built per epoch over the epoch's seed order,
      whose batches depend on the draws before them). The Engine calls it with the epoch's
      batches (host seed tensors, in order) before it samples batch ``batch`` of ``epoch``:
      at the start of every :meth:`zg.Engine.train_epoch` call (before its clock starts), and
      in :meth:`zg.Engine.run_batch` / :meth:`zg.Engine.sample`. Such a sampler keeps the
      promise above (the same three give the same MiniBatch) only for an epoch drawn in order
      from its start (see :class:`zg.DGLSampler`).
    * ``block_format``: ``"dgl"`` when the MiniBatch carries DGL's blocks (read by a ``dgl.nn``
      model, recorded as ``kernel="dgl"``); zg's padded blocks otherwise (the default).
    """

    fanouts: list[int]

    def sample(
        self, seeds: Any, epoch: int = 0, batch: int = 0, *, clock: Any = None
    ) -> MiniBatch: ...


@runtime_checkable
class StaticSampler(Sampler, Protocol):
    """A :class:`Sampler` that can also run on fixed buffers: what the static launches
    (``mode="static"``, ``"graph"``) call, once per iteration, inside the captured step.

    ``batch_size`` (int, B) is the padded seed rows; ``sizes`` (list of int, input layer first)
    each block's source-row buffer (the envelope). ``sample_static(seeds, num_seeds, key,
    clock=None, hop_keys=None)`` reads ``seeds`` int64 [B] (rows ``>= num_seeds`` are padding),
    ``num_seeds`` int64 [] and ``key`` int64 [] (the batch's random key, derived on the device
    by the Engine; ``hop_keys`` int64 [hops] optionally each hop's key), all on the sampler's
    device, and returns a MiniBatch of fixed shapes with its counts and ``overflowed`` flag on
    the device. No host read and no data-dependent shape may happen inside it (0 host syncs:
    ``zg.audit.SyncAudit`` is the check), or the step cannot be captured. :class:`EnvelopeSampler`
    implements it.
    """

    batch_size: int
    sizes: list[int]

    def sample_static(
        self,
        seeds: torch.Tensor,
        num_seeds: torch.Tensor,
        key: torch.Tensor,
        clock: Any = None,
        hop_keys: torch.Tensor | None = None,
    ) -> MiniBatch: ...


# ----------------------------------------------------------------------------- dynamic


class DynamicSampler:
    """Host-mediated neighbour sampler: what DGL's ``NeighborSampler`` does, step by step.

    Per hop: pick neighbours (:func:`sample_neighbors`), boolean-mask the real ones, ``unique``
    them, relabel. Every size is data-dependent and read on the host; blocks have exactly the
    sampled size (no padding). The exactness reference and the "what frameworks do" baseline.

    Args:
        g: the graph. fanouts: per layer, input layer first (see :func:`effective_fanouts` for
            fanouts above the largest in-degree). replace: sample with replacement.
        seed: base random seed (any int64); ``sample(seeds, epoch, batch)`` derives its key
            from all three.
    """

    def __init__(self, g: Graph, fanouts: Sequence[int], replace: bool = False, seed: int = 0):
        g = graph_arg(g)
        self._build(g, check_fanouts(fanouts), bool_arg(replace, "replace"), seed_arg(seed))

    @classmethod
    def _checked(cls, g: Graph, fanouts: list[int], replace: bool, seed: int, max_degree=None):
        """Build from values the caller has checked (the Engine: each argument once)."""
        self = cls.__new__(cls)
        self._build(g, fanouts, replace, seed, max_degree)
        return self

    def _build(self, g: Graph, fanouts, replace: bool, seed: int, max_degree=None) -> None:
        self.g, self.fanouts, self.replace, self.seed = g, fanouts, replace, seed
        self.max_degree = max_in_degree(g) if max_degree is None else max_degree
        self.effective_fanouts = effective_fanouts(self.fanouts, self.max_degree, self.replace)
        self.device = g.device
        _node_arrays_fit("DynamicSampler", g, 8)  # _local
        self._local = torch.zeros(g.num_nodes, dtype=torch.int64, device=self.device)
        self._constants = SlotConstants(self.device).prepare(self.effective_fanouts)

    def sample(
        self, seeds: Any, epoch: int = 0, batch: int = 0, clock: Any | None = None
    ) -> MiniBatch:
        """Sample one mini-batch; ``clock`` (profiling) is called with "sample" / "compact"."""
        seeds = check_seeds(seeds, self.g.num_nodes, self.device)
        key = device_scalar(
            batch_key(self.seed, key_arg(epoch, "epoch"), key_arg(batch, "batch")), self.device
        )
        _check_clock(clock)
        indptr = self.g.indptr
        dst = seeds  # exact frontier
        blocks: list[Block] = []
        for hop, k in enumerate(reversed(self.effective_fanouts)):
            n_dst = dst.numel()  # host-known size
            nbrs, mask = sample_neighbors(
                indptr,
                self.g.indices,
                dst,
                torch.ones(n_dst, dtype=torch.bool, device=self.device),
                k,
                self.replace,
                _hop_key(key, hop),
                self.max_degree,
                pad=0,
                constants=self._constants,
            )
            if clock is not None:
                clock("sample")
            found = nbrs[mask]  # sync: size from data
            new = torch.unique(found)  # sync: size from data
            new = new[~torch.isin(new, dst)]  # sync again
            src = torch.cat([dst, new])  # [n_src], dst first
            self._local[src] = torch.arange(src.numel(), device=self.device)
            nbr_local = torch.where(mask, self._local[nbrs], 0)  # [n_dst, k]
            blocks.append(
                Block(
                    nbr=nbr_local,
                    mask=mask,
                    num_src=device_scalar(src.numel(), self.device),
                    num_dst=device_scalar(n_dst, self.device),
                    src_nodes=src,
                    padding_clean=True,  # no padded rows; masked slots 0
                )
            )
            if clock is not None:
                clock("compact")
            dst = src
        blocks.reverse()
        return MiniBatch(
            seeds=seeds,
            num_seeds=device_scalar(seeds.numel(), self.device),
            blocks=blocks,
            counts=torch.stack([b.num_src for b in blocks]),
            overflowed=torch.zeros((), dtype=torch.bool, device=self.device),
        )


# ----------------------------------------------------------------------------- envelope


class EnvelopeSampler:
    """Fixed-shape neighbour sampler sized by an execution envelope.

    Every tensor's shape is known before the call, from ``batch_size``, ``fanouts`` and the
    envelope sizes ``E`` (one per block, input layer first): hop ``h`` reads ``R_h`` destination
    rows (``R = batch_size`` for the seeds, then the previous hop's ``E``), fills ``[R_h, k_h]``
    neighbour slots, and compacts the distinct nodes into a buffer of ``E_h`` rows, destination
    nodes first. Deduplication uses a node-indexed marker array (``int64 [N + 1]``, allocated
    once): each candidate scatters its position with ``amin``, so the first occurrence of every
    node wins, deterministically; new nodes are numbered by a cumulative sum. Counts stay on the
    device; a count above ``E_h`` sets the sticky ``overflowed`` flag, and writes past the
    buffer go to a trash row, never out of bounds.

    Args:
        g: the graph (its device is the sampler's device).
        fanouts: per layer, input layer first (``[15, 10, 5]``: 5 per seed, then 10, then 15);
            see :func:`effective_fanouts` for fanouts above the largest in-degree.
        batch_size: seeds per mini-batch (a shorter last batch is padded).
        envelope: a :class:`zg.Envelope`, or None for the worst case.
        replace: sample with replacement. seed: base random seed.
        kernel: "torch" (default), "auto" or "fused": see :func:`zg.kernels.resolve`, the one place every kernel choice is made. Both give the
            same tensors bit for bit; ``self.kernel`` says which one runs.
    """

    def __init__(
        self,
        g: Graph,
        fanouts: Sequence[int],
        batch_size: int,
        envelope: Any = None,
        replace: bool = False,
        seed: int = 0,
        kernel: str = "torch",
    ):
        g = graph_arg(g)
        fanouts = check_fanouts(fanouts)
        batch_size = batch_size_arg(batch_size, g.num_nodes)
        replace, seed = bool_arg(replace, "replace"), seed_arg(seed)
        # The envelope (zg.envelope sits above this module: it profiles with this sampler, so
        # only its interface is used here: ``sizes`` and ``check``). None: the worst case.
        if envelope is not None and not (
            hasattr(envelope, "sizes") and callable(getattr(envelope, "check", None))
        ):
            raise TypeError(
                f"envelope must be a zg.Envelope or None, got {type(envelope).__name__}"
            )
        if envelope is not None:
            envelope.check(fanouts, batch_size, g.num_nodes)
        self._build(
            g, fanouts, batch_size, envelope, replace, seed, kernels.resolve(kernel, g.device)
        )

    @classmethod
    def _checked(
        cls, g: Graph, fanouts, batch_size, envelope, replace, seed, kernel, max_degree=None
    ):
        """Build from values the caller has checked (the Engine: each argument once; an
        ``envelope`` already checked against these fanouts, batch size and graph; ``kernel``
        resolved)."""
        self = cls.__new__(cls)
        self._build(g, fanouts, batch_size, envelope, replace, seed, kernel, max_degree)
        return self

    def _build(
        self, g, fanouts, batch_size, envelope, replace, seed, kernel, max_degree=None
    ) -> None:
        self.g, self.fanouts, self.batch_size = g, fanouts, batch_size
        self.replace, self.seed, self.envelope = replace, seed, envelope
        self.max_degree = max_in_degree(g) if max_degree is None else max_degree
        self.effective_fanouts = effective_fanouts(self.fanouts, self.max_degree, self.replace)
        self._sizes = (
            worst_case_sizes(g.num_nodes, self.fanouts, self.batch_size, self.max_degree)
            if envelope is None
            else list(envelope.sizes)
        )
        self.device = g.device
        self.kernel = kernel
        n = g.num_nodes
        # The fused kernel's marker and seen bitmap, or the marker _first and the node table.
        _node_arrays_fit("EnvelopeSampler", g, 9 if kernel == "fused" else 32)
        if self.kernel == "fused":
            # The fused kernel's marker: the local id of each node numbered this hop (which
            # ones, the seen bitmap says; the other entries are stale, never read).
            fused_sampling.warm_up()  # compile (or load numba's cache) once per process
            self._marker = fused_sampling.new_marker(n)
            self._seen = fused_sampling.new_seen_bitmap(n)
            # Per hop (seeds outward) the seconds of its "sample" and "compact" stages, filled
            # by the kernel itself when a stage clock watches.
            self._stage_seconds = torch.zeros(len(self.fanouts), 2, dtype=torch.float64)
            return
        # The marker array: where each node first occurs among a hop's candidates (int64 max:
        # not seen); reset after each hop by scattering back only the entries that hop touched.
        self._first = torch.full(
            (n + 1,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=self.device
        )  # entry N: the empty node the padding rows read
        # True from a hop's first mark to its reset: an exception (Ctrl-C in a notebook) between
        # them leaves marks behind, which the next hop clears with one fill before it marks.
        self._marker_dirty = False
        # Every hop's key from one hash of a [hops] vector (the same bits as _hop_key per hop).
        self._hop_constants = _hop_constants(len(self.fanouts), self.device)
        # Built here, never inside a (captured) iteration.
        self._constants = SlotConstants(self.device).prepare(self.effective_fanouts)
        # Launch-saving constants (fixed shapes, made once): each node's first edge, degree and
        # hash (24 bytes a node beside the marker's 8; skipped above NODE_HASH_MAX_NODES), the
        # envelope sizes as a device vector, and the row numbers of every hop's buffers.
        self._node_table = node_table(g.indptr) if n <= NODE_HASH_MAX_NODES else None
        self._rows = {}
        self._sizes_device = torch.stack([self._scalar(size) for size in self._sizes])
        self._empty = self._scalar(n)  # the node table's empty row

    @property
    def sizes(self) -> list[int]:
        """The envelope size of every block (input layer first)."""
        return list(self._sizes)

    def _kept(self, key, make) -> torch.Tensor:
        """``make()``, made once per ``key`` and kept (the step's constants and its one reused
        buffer). While torch.compile traces the step (``Engine(..., mode="compiled")``) a fresh
        one: the compiler plans the step's memory and folds constants itself, and a cache
        filled while tracing would change what the compiled graph was traced under."""
        if compiling():
            return make()
        t = self._rows.get(key)
        if t is None:
            t = self._rows[key] = make()
        return t

    def _scalar(self, value: int) -> torch.Tensor:
        """An int64 0-d device tensor holding ``value``, made once per value."""
        make = functools.partial(torch.full, (), value, dtype=torch.int64, device=self.device)
        return self._kept(("scalar", value), make)

    def _candidates(self, count: int) -> torch.Tensor:
        """int64 [count]: a hop's candidate buffer, made once per size and rewritten by every
        hop of that size (nothing returned points into it). (Traced by torch.compile, writes
        into views of a buffer kept between calls are what its functionalisation gets wrong:
        torch 2.2.1 returns wrong values; so a fresh one there, see :meth:`_kept`.)"""
        make = functools.partial(torch.zeros, count, dtype=torch.int64, device=self.device)
        return self._kept(("cand", count), make)

    def _in_slots(self, rows: int, count: int) -> torch.Tensor:
        """bool [count]: ``arange(count) >= rows`` (a candidate from a slot, not a destination
        row), made once per shape."""
        return self._kept(("slots", rows, count), lambda: self._row_ids(count) >= rows)

    def _row_ids(self, count: int) -> torch.Tensor:
        """``arange(count)`` on the device, made once per size (the sizes are the envelope's)."""
        return self._kept(count, functools.partial(torch.arange, count, device=self.device))

    def sample(
        self,
        seeds: Any,
        epoch: int = 0,
        batch: int = 0,
        *,
        key: torch.Tensor | None = None,
        clock: Any | None = None,
    ) -> MiniBatch:
        """Sample the blocks of one mini-batch. 0 host syncs, fixed shapes.

        Args:
            seeds: int [<= batch_size] node ids (validated on the host when they live there).
            epoch, batch: with the sampler's seed, they fix every random choice.
            key: optional int64 0-d device tensor that replaces ``batch_key(seed, epoch, batch)``
                (the engine keeps it in a static buffer so a captured graph can replay it).
        """
        seeds = check_seeds(seeds, self.g.num_nodes, self.device, max_len=self.batch_size)
        epoch, batch = key_arg(epoch, "epoch"), key_arg(batch, "batch")
        _check_clock(clock)
        if key is not None and not (
            isinstance(key, torch.Tensor)
            and key.dtype == torch.int64
            and key.dim() == 0
            and key.device == self.device
        ):
            raise TypeError(
                f"key must be None or an int64 0-d tensor on {self.device}, got "
                + (
                    f"dtype {key.dtype}, shape {tuple(key.shape)} on {key.device}"
                    if isinstance(key, torch.Tensor)
                    else type(key).__name__
                )
            )
        if key is None:
            key = device_scalar(batch_key(self.seed, epoch, batch), self.device)
        return self._sample(seeds, key, clock)

    def _sample(self, seeds: torch.Tensor, key: torch.Tensor, clock: Any = None) -> MiniBatch:
        """:meth:`sample` of checked values (what :meth:`zg.Envelope.profile` draws its batches
        with, once it has checked its nodes): ``seeds`` int64 [n <= batch_size] distinct ids
        of this graph, on the sampler's device; ``key`` int64 [] on the device."""
        num_seeds = seeds.numel()
        padded = torch.zeros(self.batch_size, dtype=torch.int64, device=self.device)
        padded[:num_seeds] = seeds
        return self.sample_static(padded, device_scalar(num_seeds, self.device), key, clock=clock)

    def sample_static(
        self,
        seeds: torch.Tensor,
        num_seeds: torch.Tensor,
        key: torch.Tensor,
        clock: Any | None = None,
        hop_keys: torch.Tensor | None = None,
    ) -> MiniBatch:
        """The fixed-shape core on device buffers: seeds int64 [B], num_seeds int64 [], key int64 [].

        Seeds outward, each hop runs two stages: :meth:`_sample_hop` ("sample": the neighbour
        slots) and :meth:`_compact_hop` ("compact": deduplicate and relabel into the envelope's
        buffer); the hop's compacted nodes are the next hop's rows.

        ``hop_keys`` (optional, int64 [hops]): each hop's key, ``mix64(key + constant)``, read
        from a table the caller built (the engine's ``epoch_keys``, zg.rng.epoch_key_table) so
        the step does not hash them on the device; the same bits either way.

        ``clock`` (optional, profiling only) is called as ``clock("sample")`` after each hop's
        neighbour picking and ``clock("compact")`` after its deduplication and relabelling. The
        fused kernel clocks its stages inside its one compiled call and reports them with
        ``clock.laps([("sample", s0), ("compact", c0), ("sample", s1), ...])``, so there the
        clock must have ``laps`` (a :class:`zg.step.StageClock`).

        This is the torch reference; with ``kernel="fused"`` the same tensors come from
        :mod:`zg.kernels.sampling` (see :meth:`_sample_static_fused`).
        """
        if self.kernel == "fused":
            return self._sample_static_fused(seeds, num_seeds, key, clock)
        dst, n_dst = seeds, num_seeds  # [R], []: the first hop's rows are the seeds
        blocks: list[Block] = []
        true_counts: list[torch.Tensor] = []
        sizes = list(reversed(self._sizes))  # seeds outward
        if hop_keys is None:
            hop_keys = mix64(key + self._hop_constants)  # [hops]
        for hop, k in enumerate(reversed(self.effective_fanouts)):
            cand, real_rows, mask = self._sample_hop(dst, n_dst, k, hop_keys[hop])
            if clock is not None:
                clock("sample")
            src_nodes, nbr_local, num_src = self._compact_hop(
                cand, real_rows, mask, n_dst, sizes[hop]
            )  # [E_h], [R, k], []
            kept = num_src.clamp(max=sizes[hop])  # [] what the buffer holds
            blocks.append(
                Block(
                    nbr=nbr_local,
                    mask=mask,
                    num_src=kept,
                    num_dst=n_dst,
                    src_nodes=src_nodes,
                    dst_valid=real_rows[: dst.shape[0]],
                    padding_clean=True,  # masked slots 0, padded rows all-False (mask & valid)
                )
            )
            true_counts.append(num_src)
            if clock is not None:
                clock("compact")
            dst, n_dst = src_nodes, kept
        blocks = blocks[::-1]  # (a new list: torch.compile traces it on every version)
        wanted = torch.stack(true_counts[::-1])  # [L] input layer first
        return MiniBatch(
            seeds=seeds,
            num_seeds=num_seeds,
            blocks=blocks,
            counts=torch.stack([b.num_src for b in blocks]),
            overflowed=(wanted > self._sizes_device).any(),
            envelope_sizes=self.sizes,
            wanted=wanted,
        )

    def _sample_hop(
        self, dst: torch.Tensor, n_dst: torch.Tensor, k: int, key: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The "sample" stage of one hop: up to ``k`` in-neighbours of every destination row.

        ``dst`` int64 [R] (the first ``n_dst``, an int64 0-d device tensor, are real; the other
        rows hold any node id); ``key`` int64 [], this hop's key. Returns the hop's candidates
        ``cand`` int64 [M = R * (k + 1)]: the R rows, then the R * k slots row by row (a buffer
        every hop of this size rewrites); ``real_rows`` bool [M], the candidates that are real
        destination rows (the first ``n_dst``); ``mask`` bool [R, k], the slots holding a
        neighbour. Its compiled twin is :func:`zg.kernels.sampling.pick` (the same neighbours
        and mask; it writes 0, not the row's node, at masked slots).
        """
        rows = dst.shape[0]
        pos = self._row_ids(rows * (k + 1))  # [M] candidate positions (rows, then slots)
        real_rows = pos < n_dst  # [M]: the real destination rows (they come first)
        valid_rows = real_rows[:rows]  # [R] (a view)
        # Candidates [M]: the destination rows first (so they keep local ids 0..n_dst-1),
        # then every slot, written in place into one buffer (no concatenation). Masked
        # slots repeat their own row's node, which is already a destination row, so it is
        # never a first occurrence in the compact stage. Padding rows read node N, the node
        # table's empty row (no in-edges: every slot masked), and precede every slot, so N is
        # never new either; without the table they repeat the first row's node and are masked.
        cand = self._candidates(rows * (k + 1))  # [M]
        pad_node, row_mask = (
            (self._empty, None) if self._node_table is not None else (dst[0], valid_rows)
        )
        head = torch.where(valid_rows, dst, pad_node, out=cand[:rows])  # [R] (a view)
        _, mask = sample_neighbors(
            self.g.indptr,
            self.g.indices,
            head,
            row_mask,
            k,
            self.replace,
            key,
            self.max_degree,
            pad=head[:, None],
            node_table=self._node_table,
            out=cand[rows:].view(rows, k),
            constants=self._constants,
        )  # the slots [R, k], into cand; mask [R, k]
        return cand, real_rows, mask

    def _compact_hop(
        self,
        cand: torch.Tensor,
        real_rows: torch.Tensor,
        mask: torch.Tensor,
        n_dst: torch.Tensor,
        cap: int,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The "compact" stage of one hop: deduplicate and relabel its candidates, no host read.

        ``cand`` int64 [M = R * (k + 1)], ``real_rows`` bool [M] and ``mask`` bool [R, k] as
        :meth:`_sample_hop` returns them; ``n_dst`` int64 [] the real rows; ``cap`` the
        envelope size ``E_h`` (a host int). First-occurrence order: each real row keeps its
        row as local id (a repeated seed too), new nodes get ``n_dst, n_dst + 1, ...`` in slot
        order. Returns ``src_nodes`` int64 [cap] (the real rows, the new nodes, then 0; nodes
        past ``cap`` are dropped), ``nbr_local`` int64 [R, k] (each slot's local id, 0 where
        masked, clamped to ``cap - 1``) and ``num_src`` int64 [] (the true count, which may
        exceed ``cap``). The marker array is all sentinel before and after. Its compiled twin
        is :func:`zg.kernels.sampling.compact`.
        """
        rows, k = mask.shape
        pos = self._row_ids(cand.shape[0])  # [M] candidate positions
        if self._marker_dirty:  # an exception stopped a hop between its marks and its reset
            self._first.fill_(torch.iinfo(torch.int64).max)
        self._marker_dirty = True
        self._first.scatter_reduce_(0, cand, pos, reduce="amin")
        first_pos = _gather(self._first, cand)  # [M] where each candidate first occurs
        is_first = first_pos == pos  # [M]
        is_new = is_first & self._in_slots(rows, cand.shape[0])  # first seen in a slot
        rank = torch.cumsum(is_new, 0, dtype=torch.int64)  # [M]
        num_src = n_dst + rank[-1]  # [] true count
        # Local id of every first occurrence (dst rows: their own row), then of every
        # candidate: its first occurrence's.
        local_of_first = torch.where(is_new, rank + (n_dst - 1), pos)  # [M]
        local = _gather(local_of_first, first_pos)  # [M]
        # Source-node buffer [cap]: the real dst rows (repeats included: each keeps its own
        # row), then the new nodes; padding rows and overflow go to the trash slot.
        src_nodes = torch.zeros(cap + 1, dtype=torch.int64, device=self.device)
        written = real_rows | is_new  # [M]
        target = torch.where(written, local_of_first, self._scalar(cap)).clamp(max=cap)
        src_nodes.scatter_(0, target, cand)
        src_nodes = src_nodes[:cap]  # [cap] view
        nbr_local = (local[rows:].view(rows, k) * mask).clamp(max=cap - 1)  # [R, k]
        # Reset the marker entries this hop touched (fixed-shape scatter, no fill of N).
        self._first.index_fill_(0, cand, torch.iinfo(torch.int64).max)
        self._marker_dirty = False
        return src_nodes, nbr_local, num_src

    def _sample_static_fused(
        self,
        seeds: torch.Tensor,
        num_seeds: torch.Tensor,
        key: torch.Tensor,
        clock: Any | None = None,
    ) -> MiniBatch:
        """:meth:`sample_static` through the fused CPU kernel: the same MiniBatch, bit for bit.
        With a ``clock``, the kernel's own per-hop stage seconds go to ``clock.laps``."""
        if clock is not None and not callable(getattr(clock, "laps", None)):
            raise TypeError(
                "clock: the fused kernel times its stages inside one compiled call and "
                "reports them with clock.laps([(stage, seconds), ...]); pass a "
                "zg.step.StageClock (or use kernel='torch' for a per-stage callable), "
                f"got {type(clock).__name__}"
            )
        for name, t, shape in (
            ("seeds", seeds, (self.batch_size,)),
            ("num_seeds", num_seeds, ()),
            ("key", key, ()),
        ):
            if not (
                isinstance(t, torch.Tensor)
                and t.dtype == torch.int64
                and tuple(t.shape) == shape
                and t.device.type == "cpu"
            ):
                raise TypeError(
                    f"{name} must be an int64 CPU tensor of shape {shape}, got "
                    + (
                        f"dtype {t.dtype}, shape {tuple(t.shape)} on {t.device}"
                        if isinstance(t, torch.Tensor)
                        else type(t).__name__
                    )
                )
        fanouts = list(reversed(self.effective_fanouts))  # seeds outward
        sizes = list(reversed(self._sizes))
        stage_seconds = None if clock is None else self._stage_seconds
        hops, wanted, clamped, overflowed = fused_sampling.sample_fused(
            self.g.indptr,
            self.g.indices,
            seeds.contiguous(),
            num_seeds,
            key,
            fanouts,
            sizes,
            self.replace,
            self.max_degree,
            self._marker,
            seen=self._seen,
            stage_seconds=stage_seconds,
        )
        if clock is not None:
            clock.laps(fused_sampling.stage_laps(stage_seconds))
        blocks: list[Block] = []
        n_dst = num_seeds
        for hop, (nbr, mask, src_nodes) in enumerate(hops):
            blocks.append(
                Block(
                    nbr=nbr,
                    mask=mask,
                    num_src=clamped[hop],
                    num_dst=n_dst,
                    src_nodes=src_nodes,
                    padding_clean=True,  # the same tensors as the torch path
                )
            )
            n_dst = clamped[hop]
        blocks.reverse()
        return MiniBatch(
            seeds=seeds,
            num_seeds=num_seeds,
            blocks=blocks,
            counts=clamped.flip(0),
            overflowed=overflowed,
            envelope_sizes=self.sizes,
            wanted=wanted.flip(0),
        )
