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
(the readable reference and the capturable CUDA path) and, on the CPU, the fused numba kernel
(:mod:`zg.kernels.sampling`) that does every hop in one compiled, multithreaded call and
returns the same tensors bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from . import kernels
from ._checks import batch_size_arg, bool_arg, fanouts_arg, node_ids_arg, seed_arg
from .blocks import Block
from .graph import Graph, graph_arg
from .kernels import sampling as fused_sampling
from .rng import _GOLDEN, _LOW62, HOP_GOLDEN, _signed, batch_key, device_scalar, mix64

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
    "KERNELS",
    "resolve_kernel",
]


# ----------------------------------------------------------------------------- validation

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


# ----------------------------------------------------------------------------- kernel choice

KERNELS = kernels.KERNELS


def resolve_kernel(kernel: Any, device: torch.device) -> str:
    """Which implementation an :class:`EnvelopeSampler` runs: "fused" or "torch".

    ``kernel``: "auto" (default: the fused numba kernel on the CPU when numba is installed, the
    torch ops otherwise, with a one-line notice once when numba is missing), "fused" (the CPU
    kernel; a ValueError on CUDA, a RuntimeError without numba) or "torch". This is
    :func:`zg.kernels.resolve`, the one place every kernel choice is made.
    """
    return kernels.resolve(kernel, device)


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
    node_hash: torch.Tensor | None = None,
):
    """Pick up to ``fanout`` in-neighbours of each node, in fixed shape.

    Args:
        indptr: int64 [N + 1]; indices: int64 [E], the graph's own arrays, read in place (never
            copied, so a memory-mapped graph stays on disk but for the rows sampled).
        nodes: int64 [R] destination node ids (rows >= the true count hold any valid id).
        valid_rows: bool [R] which rows are real.
        key: int64 0-d device tensor, this hop's random key.
        max_degree: the graph's largest in-degree, if known (a host int). Without replacement
            and ``fanout >= max_degree`` every row takes all its neighbours, so Floyd's ``k``
            rounds (``O(k^2)`` per row) are skipped; the result is the same.
        pad: the id masked slots hold (an int, or an int64 0-d tensor on the device).
        node_hash: optional int64 [N], ``mix64(arange(N))`` computed once (one gather per hop
            instead of a 12-op hash; the same bits).
    Returns:
        (neighbours int64 [R, k] global ids, mask bool [R, k]). Masked slots hold ``pad``.
    """
    k = fanout
    rows = nodes.shape[0]
    start = _gather(indptr, nodes)  # [R]
    degree = _gather(indptr, nodes + 1) - start  # [R]
    hashed = mix64(nodes) if node_hash is None else _gather(node_hash, nodes)
    stream = key ^ hashed  # [R] the row's splitmix64 stream; draw s hashes stream + s * golden
    # Slot-major [k, R] layout: round i of Floyd reads and writes one contiguous row.
    slots = torch.arange(k, device=nodes.device)[:, None]  # [k, 1]
    if not replace and max_degree is not None and k >= max_degree:
        offset = slots.expand(k, rows)  # every row: all neighbours
        mask = slots < degree[None, :]  # [k, R]
    elif replace:
        draws = mix64(stream[None, :] + _slot_steps(k, nodes.device)) & _LOW62  # [k, R]
        offset = torch.remainder(draws, degree.clamp(min=1)[None, :])
        mask = (degree > 0)[None, :].expand(k, -1)
    else:
        draws = mix64(stream[None, :] + _slot_steps(k, nodes.device)) & _LOW62  # [k, R]
        # Floyd: for j = d-k .. d-1 draw t in [0, j]; take t unless already taken, else j.
        # The draws do not depend on earlier rounds, so all k are hashed at once; only the
        # "already taken?" test runs round by round.
        # The rounds run on int32 offsets (half the memory traffic of int64) whenever the
        # edge count, a shape known on the host, bounds every degree below 2^31.
        j = degree[None, :] - k + slots  # [k, R]
        t = torch.remainder(draws, (j + 1).clamp(min=1))  # [k, R] in [0, j]
        narrow = torch.int32 if indices.numel() < 2**31 else torch.int64
        t, j = t.to(narrow), j.to(narrow)
        chosen = _floyd_rounds(t, j, k)  # [k, R]
        small = degree <= k  # take every neighbour
        offset = torch.where(small[None, :], slots, chosen.to(torch.int64))  # [k, R]
        mask = slots < degree[None, :]  # [k, R]
    mask = (mask & valid_rows[None, :]).t()  # [R, k] (a view)
    if indices.numel() == 0:  # no edges: every slot masked
        return torch.full(mask.shape, int(pad), dtype=torch.int64, device=nodes.device), mask
    # Masked slots read edge 0 (always in bounds: times a False mask is 0) and are then
    # overwritten with pad.
    edge = (start[:, None] + offset.t()) * mask  # [R, k]
    return torch.where(mask, _gather(indices, edge), pad), mask


# Above this many nodes the static sampler hashes node ids per hop instead of keeping a table.
NODE_HASH_MAX_NODES = 1 << 26

# Up to this many rounds Floyd's loop (4 ops a round) launches fewer ops than the closed form.
_FLOYD_LOOP_MAX_K = 6
_STRICTLY_BELOW: dict = {}


def _floyd_rounds(t: torch.Tensor, j: torch.Tensor, k: int) -> torch.Tensor:
    """Floyd's choices for every row at once: ``chosen[i] = j[i] if t[i] is already taken else
    t[i]`` (t, j: [k, R], ``t[i] <= j[i] = d - k + i``), the same values as the round-by-round
    loop, in a fixed number of ops.

    Round ``i`` finds ``t[i]`` taken exactly when (a) some earlier round drew the same ``t``
    (whatever that round then chose, the value was in the set after it), or (b) ``t[i]``
    equals ``j[m]`` of an earlier round ``m = t[i] - (d - k)`` that was itself taken (only then
    did round ``m`` add ``j[m]``; if it added ``t[m] == j[m]``, (a) holds). So ``taken`` is (a)
    OR-ed along a chain of pointers to earlier rounds, which ``ceil(log2 k)`` pointer-doubling
    steps resolve. For small ``k`` the loop is shorter and runs instead.
    """
    if k <= _FLOYD_LOOP_MAX_K:
        chosen = t.clone()  # [k, R]
        for i in range(1, k):
            taken = (chosen[:i] == t[i]).any(dim=0)  # [R]
            chosen[i] = torch.where(taken, j[i], t[i])
        return chosen
    key = (k, t.device)
    below = _STRICTLY_BELOW.get(key)
    if below is None:  # [k, k, 1] m < i, built once per (k, device)
        below = torch.ones(k, k, dtype=torch.bool, device=t.device).tril(-1)[:, :, None]
        _STRICTLY_BELOW[key] = below
    # (a) an earlier round drew the same t: [k, k, R] -> [k, R]
    taken = ((t[:, None, :] == t[None, :, :]) & below).any(dim=1)
    # (b) the pointer to round m = t[i] - (j[i] - i), when 0 <= m < i; else to itself.
    slots = torch.arange(k, device=t.device, dtype=t.dtype)[:, None]  # [k, 1]
    m = t - j + slots  # [k, R]
    ptr = torch.where((m >= 0) & (m < slots), m, slots).to(torch.int64)  # [k, R]
    for _ in range(max(1, (k - 1).bit_length())):
        taken = taken | torch.gather(taken, 0, ptr)
        ptr = torch.gather(ptr, 0, ptr)
    return torch.where(taken, j, t)


_SLOT_STEPS: dict = {}


def _slot_steps(k: int, device: torch.device) -> torch.Tensor:
    """int64 [k, 1]: ``s * golden`` (wrapping int64 arithmetic) for s < k, the steps of a
    splitmix64 stream; built on the device once per (k, device) (the samplers build theirs
    when they are made), so a draw costs one add and one hash."""
    key = (torch.device(device), k)
    steps = _SLOT_STEPS.get(key)
    if steps is None:
        steps = torch.arange(k, dtype=torch.int64, device=device)[:, None] * _GOLDEN
        _SLOT_STEPS[key] = steps
    return steps


def _gather(src: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``src[index]`` for a 1-d ``src``, shaped like ``index``: ``torch.gather`` on the flat
    index, several times faster on CPU than advanced indexing, and the same on a GPU."""
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
        """bool [B]: which seed rows are real (padding rows False); no host read."""
        return torch.arange(self.seeds.shape[0], device=self.seeds.device) < self.num_seeds

    def to_dgl_blocks(self):
        """Exact DGL blocks, input layer first (reads metadata on the host; tests only)."""
        if bool(self.overflowed):
            raise ValueError("this mini-batch overflowed its envelope; its blocks are truncated")
        return [b.to_dgl() for b in self.blocks]

    def node_sets(self) -> list[torch.Tensor]:
        """Sorted global ids of each block's true source nodes (host reads; tests and hashes)."""
        return [torch.sort(b.src_nodes[: int(b.num_src)]).values for b in self.blocks]


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
        self.g = graph_arg(g)
        self.fanouts = check_fanouts(fanouts)
        self.replace = bool_arg(replace, "replace")
        self.seed = seed_arg(seed)
        self.max_degree = max_in_degree(g)
        self.effective_fanouts = effective_fanouts(self.fanouts, self.max_degree, self.replace)
        self.device = g.device
        self._local = torch.zeros(g.num_nodes, dtype=torch.int64, device=self.device)

    def sample(
        self, seeds: Any, epoch: int = 0, batch: int = 0, clock: Any | None = None
    ) -> MiniBatch:
        """Sample one mini-batch; ``clock`` (profiling) is called with "sample" / "compact"."""
        seeds = check_seeds(seeds, self.g.num_nodes, self.device)
        key = device_scalar(
            batch_key(self.seed, seed_arg(epoch, "epoch"), seed_arg(batch, "batch")), self.device
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
        kernel: "auto" (default), "fused" or "torch": see :func:`resolve_kernel`. Both give the
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
        kernel: str = "auto",
    ):
        self.g = graph_arg(g)
        self.fanouts = check_fanouts(fanouts)
        self.batch_size = batch_size_arg(batch_size, self.g.num_nodes)
        self.replace = bool_arg(replace, "replace")
        self.seed = seed_arg(seed)
        self.max_degree = max_in_degree(g)
        self.effective_fanouts = effective_fanouts(self.fanouts, self.max_degree, self.replace)
        # The envelope (zg.envelope sits above this module: it profiles with this sampler, so
        # only its interface is used here: ``sizes`` and ``check``). None: the worst case.
        if envelope is None:
            self._sizes = worst_case_sizes(
                g.num_nodes, self.fanouts, self.batch_size, self.max_degree
            )
        elif not (hasattr(envelope, "sizes") and callable(getattr(envelope, "check", None))):
            raise TypeError(
                f"envelope must be a zg.Envelope or None, got {type(envelope).__name__}"
            )
        else:
            envelope.check(self.fanouts, self.batch_size, g.num_nodes)
            self._sizes = list(envelope.sizes)
        self.envelope = envelope
        self.device = g.device
        self.kernel = resolve_kernel(kernel, self.device)
        n = g.num_nodes
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
        # Marker arrays, one trash row at index N for masked candidates; reset after each hop
        # by scattering back only the entries that hop touched.
        self._first = torch.full(
            (n + 1,), torch.iinfo(torch.int64).max, dtype=torch.int64, device=self.device
        )
        self._local = torch.zeros(n + 1, dtype=torch.int64, device=self.device)
        # Every hop's key from one hash of a [hops] vector (the same bits as _hop_key per hop).
        self._hop_constants = _hop_constants(len(self.fanouts), self.device)
        for k in self.effective_fanouts:  # built here, never inside a (captured) iteration
            _slot_steps(k, self.device)
        # Launch-saving constants (fixed shapes, made once): each node's hash (8 bytes a node,
        # beside the markers' 16; skipped above NODE_HASH_MAX_NODES), the trash id as a device
        # scalar, and the row numbers of every hop's buffers.
        self._node_hash = (
            mix64(torch.arange(n, device=self.device)) if n <= NODE_HASH_MAX_NODES else None
        )
        self._trash = torch.full((), n, dtype=torch.int64, device=self.device)
        self._rows = {}

    @property
    def sizes(self) -> list[int]:
        """The envelope size of every block (input layer first)."""
        return list(self._sizes)

    def _scalar(self, value: int) -> torch.Tensor:
        """An int64 0-d device tensor holding ``value``, made once per value."""
        key = ("scalar", value)
        t = self._rows.get(key)
        if t is None:
            t = self._rows[key] = torch.full((), value, dtype=torch.int64, device=self.device)
        return t

    def _row_ids(self, count: int) -> torch.Tensor:
        """``arange(count)`` on the device, made once per size (the sizes are the envelope's)."""
        ids = self._rows.get(count)
        if ids is None:
            ids = self._rows[count] = torch.arange(count, device=self.device)
        return ids

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
        epoch, batch = seed_arg(epoch, "epoch"), seed_arg(batch, "batch")
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
        num_seeds = seeds.numel()
        padded = torch.zeros(self.batch_size, dtype=torch.int64, device=self.device)
        padded[:num_seeds] = seeds
        if key is None:
            key = device_scalar(batch_key(self.seed, epoch, batch), self.device)
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
        n = self.g.num_nodes
        dev = self.device
        indptr = self.g.indptr
        sentinel = torch.iinfo(torch.int64).max
        dst, n_dst = seeds, num_seeds  # [R], []
        overflowed = torch.zeros((), dtype=torch.bool, device=dev)
        blocks: list[Block] = []
        true_counts: list[torch.Tensor] = []
        sizes = list(reversed(self._sizes))  # seeds outward
        if hop_keys is None:
            hop_keys = mix64(key + self._hop_constants)  # [hops]
        for hop, k in enumerate(reversed(self.effective_fanouts)):
            rows, cap = dst.shape[0], sizes[hop]
            valid_rows = self._row_ids(rows) < n_dst  # [R]
            # Masked slots come out as N, the marker arrays' trash row.
            nbrs, mask = sample_neighbors(
                indptr,
                self.g.indices,
                dst,
                valid_rows,
                k,
                self.replace,
                hop_keys[hop],
                self.max_degree,
                pad=self._trash,
                node_hash=self._node_hash,
            )  # [R, k]
            if clock is not None:
                clock("sample")
            # Candidates: destination rows first (so they keep local ids 0..n_dst-1), then slots.
            cand = torch.cat(
                [torch.where(valid_rows, dst, self._trash), nbrs.flatten()]
            )  # [M], masked: N
            pos = self._row_ids(cand.shape[0])  # [M]
            self._first.scatter_reduce_(0, cand, pos, reduce="amin")
            is_first = (_gather(self._first, cand) == pos) & (cand < n)  # [M]
            is_new = is_first & (pos >= rows)  # first seen in a slot
            rank = torch.cumsum(is_new, 0, dtype=torch.int64)  # [M]
            num_src = n_dst + rank[-1]  # [] true count
            overflowed = overflowed | (num_src > cap)
            new_local = n_dst + rank - 1  # local id if is_new
            # Local ids of every first occurrence, through the node-indexed array.
            local_of_first = torch.where(is_new, new_local, pos)  # dst rows: own row
            self._local.scatter_(0, torch.where(is_first, cand, self._trash), local_of_first)
            local = _gather(self._local, cand)  # [M]
            # Source-node buffer [cap]: dst rows, then new nodes; overflow goes to the trash row.
            src_nodes = torch.zeros(cap + 1, dtype=torch.int64, device=dev)
            src_nodes[:rows] = dst * valid_rows  # envelope: rows <= cap
            target = torch.where(is_new, new_local, self._scalar(cap)).clamp(max=cap)
            src_nodes.scatter_(0, target, cand.clamp(max=n - 1))
            src_nodes = src_nodes[:cap]  # [cap] view
            nbr_local = (local[rows:].view(rows, k) * mask).clamp(max=cap - 1)  # [R, k]
            # Reset the marker entries this hop touched (fixed-shape scatter, no fill of N).
            self._first.index_fill_(0, cand, sentinel)
            kept = num_src.clamp(max=cap)  # [] what the buffer holds
            blocks.append(
                Block(nbr=nbr_local, mask=mask, num_src=kept, num_dst=n_dst, src_nodes=src_nodes)
            )
            true_counts.append(num_src)
            if clock is not None:
                clock("compact")
            dst, n_dst = src_nodes, kept
        blocks.reverse()
        counts = torch.stack([b.num_src for b in blocks])
        return MiniBatch(
            seeds=seeds,
            num_seeds=num_seeds,
            blocks=blocks,
            counts=counts,
            overflowed=overflowed,
            envelope_sizes=self.sizes,
            wanted=torch.stack(true_counts[::-1]),
        )

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
                Block(nbr=nbr, mask=mask, num_src=clamped[hop], num_dst=n_dst, src_nodes=src_nodes)
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
