"""The fused CPU sampler: :meth:`zg.EnvelopeSampler.sample_static` in one compiled call.

Its torch reference: the torch ops of :meth:`zg.EnvelopeSampler.sample_static` (``kernel="torch"``,
what CUDA runs). ``tests/core/test_kernels_sampling.py`` checks every output tensor of the two
against each other, bit for bit.

Where it sits: inside ``EnvelopeSampler`` (seeds -> **sample -> compact** -> gather -> ...). On
the CPU the torch reference makes about fifty full-tensor passes per hop (hash, Floyd rounds,
scatter, cumsum, gather); this kernel does the same work for every hop of a batch in one
compiled call (:func:`sample_all`), hop after hop:

* **sample** (:func:`pick`): a multithreaded loop over the rows picks the neighbours;
* **compact** (:func:`compact`): one sequential pass over the candidates deduplicates and
  relabels them: a bitmap of the nodes seen this hop (N bits, which stay in cache) answers
  "seen before?", and a node-indexed marker array holds the local ids of the nodes whose bit
  is set (only written for new nodes, never reset; the bitmap's touched words are cleared
  after the hop).

It produces exactly what the torch reference produces for the same key: the same splitmix64
stream per row (``key ^ mix64(node)``, draw ``s`` hashing ``stream + s * golden``), the same Floyd choices, the same with/without replacement
rule, the same first-occurrence order of new nodes (destination rows first, then the slots row
by row), the same local ids, padding, clamping, overflow flag and ``wanted`` counts.

Profiling: with ``stage_seconds`` the same compiled call also clocks its two stages per hop
(``time.perf_counter`` read through numba's ``objmode``, twice per stage; without it the clock
is never read), so there is one driver whether or not a profiler watches.

The first call compiles the kernel (or loads it from numba's on-disk cache, ``cache=True``);
:func:`warm_up` does that on a tiny graph and returns the seconds it took, and
:func:`compile_info` reports them. numba is optional (:func:`zg.kernels.available`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import torch

from .._checks import memory_arg
from .choice import available, import_error, numba, set_threads

__all__ = [
    "available",
    "import_error",
    "warm_up",
    "compile_info",
    "sample_fused",
    "set_threads",
    "new_marker",
    "new_seen_bitmap",
    "stage_laps",
]

# The constants of zg.rng.mix64 and zg.sampling._hop_key, as uint64.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_SIGN = np.uint64(1 << 63)
_ALL_ONES = np.uint64((1 << 64) - 1)

_compile = {"seconds": None, "cache_hits": None, "cache_misses": None}


if numba is not None:
    from numba import njit, objmode, prange

    @njit(inline="always", cache=True)
    def mix64(x):
        # splitmix64 finaliser; uint64 arithmetic wraps, as torch's int64 does.
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _MIX1
        x = (x ^ (x >> np.uint64(27))) * _MIX2
        return x ^ (x >> np.uint64(31))

    @njit(inline="always", cache=True)
    def draw_below(bits, bound):
        """torch.remainder(x, bound) for the int64 x with these uint64 bits (the floor modulo:
        in [0, bound) for bound > 0, as the torch path computes it on the signed draw)."""
        m = np.uint64(bound)
        r = bits % m
        if bits >= _SIGN:  # x = bits - 2^64 < 0
            r = (r + m - (_ALL_ONES % m + np.uint64(1)) % m) % m
        return np.int64(r)

    @njit(cache=True)
    def hop_key(key, hop):
        """zg.sampling._hop_key on a uint64: mix64(key + (hop + 1) * golden)."""
        return mix64(key + np.uint64(hop + 1) * _GOLDEN)

    @njit(cache=True)
    def check_seeds(seeds, num_seeds, num_nodes):
        """0, or 1: num_seeds outside [0, B]; 2: a real seed outside [0, N) (numba does not
        check bounds, so this does before anything is read)."""
        if num_seeds < 0 or num_seeds > seeds.shape[0]:
            return 1
        for i in range(num_seeds):
            if seeds[i] < 0 or seeds[i] >= num_nodes:
                return 2
        return 0

    @njit(parallel=True, cache=True, nogil=True)
    def pick(indptr, indices, dst, n_dst, k, key, replace, all_neighbors, nbr, mask):
        """The "sample" stage of one hop: up to k in-neighbours of each of the rows dst[:n_dst].

        dst int64 [R]; nbr int64 [R * k] global ids (0 where masked), mask bool [R * k],
        row-major [R, k]; key uint64, this hop's key. Rows >= n_dst are all masked.
        """
        rows = dst.shape[0]
        # Per row the offsets into its neighbour list (in nbr) and the validity (in mask); the
        # row's start in indices goes to starts.
        starts = np.empty(rows, dtype=np.int64)
        for r in prange(rows):
            base = r * k
            if r >= n_dst:
                starts[r] = 0
                for s in range(k):
                    nbr[base + s] = 0
                    mask[base + s] = False
                continue
            node = dst[r]
            start = indptr[node]
            degree = indptr[node + 1] - start
            starts[r] = start
            stream = key ^ mix64(np.uint64(node))  # draw s: mix64(stream + s * golden)
            if replace:
                for s in range(k):
                    if degree > 0:
                        draw = mix64(stream + np.uint64(s) * _GOLDEN)
                        nbr[base + s] = draw_below(draw, degree)
                        mask[base + s] = True
                    else:
                        nbr[base + s] = 0
                        mask[base + s] = False
            elif all_neighbors or degree <= k:
                for s in range(k):
                    nbr[base + s] = s
                    mask[base + s] = s < degree
            else:
                # Floyd: for j = d-k .. d-1 draw t in [0, j]; take t unless already taken, else j.
                for s in range(k):
                    j = degree - k + s
                    draw = mix64(stream + np.uint64(s) * _GOLDEN)
                    t = draw_below(draw, j + 1)
                    for q in range(s):
                        if nbr[base + q] == t:
                            t = j
                            break
                    nbr[base + s] = t
                    mask[base + s] = True
        # Offsets -> global ids in a loop of independent loads (many cache misses in flight at
        # once, rather than one per row between the Floyd rounds).
        for r in prange(n_dst):
            base = r * k
            start = starts[r]
            for s in range(k):
                if mask[base + s]:
                    nbr[base + s] = indices[start + nbr[base + s]]
                else:
                    nbr[base + s] = 0

    @njit(cache=True, nogil=True)
    def compact(dst, n_dst, k, marker, seen, nbr, mask, src):
        """The "compact" stage of one hop: number the distinct nodes, rewrite nbr as local ids.

        First-occurrence order: destination rows keep their row, new nodes get n_dst,
        n_dst + 1, ... in slot order (row by row). src int64 [cap] receives dst[:n_dst], the
        new nodes, then zeros; local ids >= cap are clamped to cap - 1 (overflow).

        seen uint64 [ceil(N / 64)] is a bitmap of the nodes numbered this hop, all zero before
        and after; marker int32/int64 [N] holds the local id of each node whose bit is set and
        is read for no other node, so it is never reset. The bitmap (300 KiB for 2.4M nodes)
        answers "seen before?" from the core's cache; a new node's marker entry is only
        written, and a reset touches bitmap words, not marker entries. Returns the true count.
        """
        rows = dst.shape[0]
        cap = src.shape[0]
        for i in range(n_dst):
            v = dst[i]
            src[i] = v
            w = v >> 6
            bit = np.uint64(1) << np.uint64(v & 63)
            if (seen[w] & bit) == 0:  # a repeated seed keeps its first row
                seen[w] |= bit
                marker[v] = i
        for i in range(n_dst, cap):
            src[i] = 0
        count = n_dst
        for p in range(rows * k):
            if mask[p]:
                v = nbr[p]
                w = v >> 6
                bit = np.uint64(1) << np.uint64(v & 63)
                word = seen[w]
                if (word & bit) != 0:
                    local = np.int64(marker[v])
                else:
                    seen[w] = word | bit
                    local = count
                    marker[v] = count
                    if count < cap:
                        src[count] = v
                    count += 1
                nbr[p] = min(local, cap - 1)
        if count > cap or 8 * count > seen.shape[0]:
            seen[:] = 0  # the overflowed nodes are not in src; or cheaper
        else:
            for i in range(n_dst):
                seen[dst[i] >> 6] = 0
            for i in range(n_dst, count):
                seen[src[i] >> 6] = 0
        return count

    @njit(cache=True)
    def now():
        """time.perf_counter() in seconds, from compiled code (numba's objmode: the GIL is
        taken for the read, which is why this function, unlike the kernels, is not nogil)."""
        with objmode(seconds="float64"):
            seconds = time.perf_counter()
        return seconds

    @njit(cache=True, nogil=True)
    def sample_all(
        indptr,
        indices,
        seeds,
        num_seeds,
        key,
        fanouts,
        caps,
        replace,
        max_degree,
        marker,
        seen,
        nbr_out,
        mask_out,
        src_out,
        counts_out,
        overflowed_out,
        timed,
        stage_seconds,
    ):
        """Every hop of one batch, seeds outward: pick ("sample"), then compact, hop after hop.

        indptr int64 [N+1], indices int64 [E]; seeds int64 [B]; num_seeds, key int64 [1];
        fanouts, caps int64 [L] (seeds outward); marker int32/int64 [N] (any contents: read
        only where seen has the node's bit); seen uint64 [ceil(N / 64)] all zero (left so);
        nbr_out int64 [sum R_h * k_h] and mask_out bool [same] (row-major [R_h, k_h] per hop);
        src_out int64 [sum cap_h]; counts_out int64 [2L] (true counts, then clamped);
        overflowed_out bool [1]. timed: if True, stage_seconds float64 [L, 2] receives each
        hop's (sample, compact) wall seconds; if False the clock is never read.
        Returns :func:`check_seeds`'s status (nothing written unless 0).
        """
        status = check_seeds(seeds, num_seeds[0], indptr.shape[0] - 1)
        if status != 0:
            return status
        num_hops = fanouts.shape[0]
        key_u = np.uint64(key[0])
        dst = seeds
        n_dst = num_seeds[0]
        nbr_at = 0
        src_at = 0
        overflowed = False
        for hop in range(num_hops):
            k = fanouts[hop]
            cap = caps[hop]
            rows = dst.shape[0]
            nbr = nbr_out[nbr_at : nbr_at + rows * k]
            mask = mask_out[nbr_at : nbr_at + rows * k]
            src = src_out[src_at : src_at + cap]
            started = now() if timed else 0.0
            pick(
                indptr,
                indices,
                dst,
                n_dst,
                k,
                hop_key(key_u, hop),
                replace,
                (not replace) and k >= max_degree,
                nbr,
                mask,
            )
            if timed:
                picked = now()
                stage_seconds[hop, 0] = picked - started
            count = compact(dst, n_dst, k, marker, seen, nbr, mask, src)
            if timed:
                stage_seconds[hop, 1] = now() - picked
            overflowed = overflowed or count > cap
            clamped = min(count, cap)
            counts_out[hop] = count
            counts_out[num_hops + hop] = clamped
            nbr_at += rows * k
            src_at += cap
            dst = src
            n_dst = clamped
        overflowed_out[0] = overflowed
        return 0


def new_marker(num_nodes: int) -> torch.Tensor:
    """The node-indexed marker array the kernel deduplicates with: the local id of each node
    numbered in the current hop (which nodes those are, the seen bitmap says; the other
    entries are stale and never read, so the kernel never resets it). int32 (half the cache
    footprint) whenever the node ids fit."""
    dtype = torch.int32 if num_nodes < 2**31 - 1 else torch.int64
    memory_arg(num_nodes * (4 if dtype == torch.int32 else 8), f"new_marker(num_nodes={num_nodes})")
    return torch.full((num_nodes,), -1, dtype=dtype)


def new_seen_bitmap(num_nodes: int) -> np.ndarray:
    """The compact stage's bitmap of the nodes numbered this hop: uint64 [ceil(N / 64)], all
    zero between hops (the kernel clears the words it set). A sampler keeps one."""
    memory_arg((num_nodes + 63) // 64 * 8, f"new_seen_bitmap(num_nodes={num_nodes})")
    return np.zeros((num_nodes + 63) // 64, dtype=np.uint64)


def sample_fused(
    indptr: torch.Tensor,
    indices: torch.Tensor,
    seeds: torch.Tensor,
    num_seeds: torch.Tensor,
    key: torch.Tensor,
    fanouts: Sequence[int],
    caps: Sequence[int],
    replace: bool,
    max_degree: int,
    marker: torch.Tensor,
    seen: np.ndarray | None = None,
    stage_seconds: torch.Tensor | None = None,
):
    """Run every hop of one batch (seeds outward) in one compiled call. CPU tensors only.

    ``indptr`` int64 [N + 1], ``indices`` int64 [E] (CSC); ``seeds`` int64 [B] (the first
    ``num_seeds`` real); ``num_seeds``, ``key`` int64 []; ``fanouts`` and ``caps`` (envelope
    sizes) per hop, seeds outward; ``max_degree`` the graph's largest in-degree; ``marker``
    from :func:`new_marker`; ``seen`` from :func:`new_seen_bitmap` (None: a fresh one).
    ``stage_seconds``: None, or a float64 CPU tensor [L, 2] that receives each hop's
    (sample, compact) wall seconds, clocked inside the same compiled call
    (:func:`stage_laps` turns it into a stage clock's laps).

    Returns (per hop, seeds outward: (nbr [R, k], mask [R, k], src_nodes [cap]),
    wanted int64 [L] true counts, clamped int64 [L], overflowed bool []), all torch tensors;
    the per-hop tensors are views of three flat buffers allocated per call.
    """
    if numba is None:
        raise RuntimeError(
            f"the fused sampling kernel needs numba, which did not import: {import_error()}"
        )
    set_threads()
    L = len(fanouts)
    timed = stage_seconds is not None
    if timed and not (
        isinstance(stage_seconds, torch.Tensor)
        and stage_seconds.dtype == torch.float64
        and tuple(stage_seconds.shape) == (L, 2)
        and stage_seconds.device.type == "cpu"
        and stage_seconds.is_contiguous()
    ):
        raise TypeError(
            f"stage_seconds must be None or a contiguous float64 CPU tensor of shape "
            f"({L}, 2), got {stage_seconds!r:.80}"
        )
    batch = seeds.shape[0]
    rows = [batch] + list(caps[:-1])
    nbr_sizes = [r * k for r, k in zip(rows, fanouts)]
    total = sum(nbr_sizes)
    nbr = torch.empty(total, dtype=torch.int64)
    mask = torch.empty(total, dtype=torch.bool)
    src = torch.empty(sum(caps), dtype=torch.int64)
    counts = torch.empty(2 * L, dtype=torch.int64)
    overflowed = torch.empty(1, dtype=torch.bool)
    hops: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    at = src_at = 0
    for r, k, cap, size in zip(rows, fanouts, caps, nbr_sizes):
        hops.append(
            (
                nbr[at : at + size].view(r, k),
                mask[at : at + size].view(r, k),
                src[src_at : src_at + cap],
            )
        )
        at += size
        src_at += cap
    if seen is None:
        seen = new_seen_bitmap(indptr.shape[0] - 1)
    # Host memory read through numpy: not an aten op, so no "sync" (these are CPU tensors).
    status = sample_all(
        indptr.numpy(),
        indices.numpy(),
        seeds.numpy(),
        num_seeds.reshape(1).numpy(),
        key.reshape(1).numpy(),
        np.asarray(fanouts, dtype=np.int64),
        np.asarray(caps, dtype=np.int64),
        bool(replace),
        int(max_degree),
        marker.numpy(),
        seen,
        nbr.numpy(),
        mask.numpy(),
        src.numpy(),
        counts.numpy(),
        overflowed.numpy(),
        timed,
        stage_seconds.numpy() if timed else _NO_SECONDS,
    )
    if status == 1:
        raise ValueError(
            f"num_seeds must be in [0, {batch}] (the seed buffer's rows), got {int(num_seeds)}"
        )
    if status == 2:
        raise ValueError(
            f"seeds[:num_seeds] must be node ids in [0, {indptr.shape[0] - 1}); some are not"
        )
    return hops, counts[:L], counts[L:], overflowed.view(())


_NO_SECONDS = np.zeros((0, 2), dtype=np.float64)  # stage_seconds when not timed (never written)


def stage_laps(stage_seconds: torch.Tensor) -> list[tuple[str, float]]:
    """``[("sample", s0), ("compact", c0), ("sample", s1), ...]`` from a filled
    ``stage_seconds`` [L, 2] (seeds outward), for :meth:`zg.step.StageClock.laps`."""
    # Read through numpy: host memory, not an aten op (Tensor.tolist would count as a host sync).
    return [
        (stage, float(seconds))
        for hop in stage_seconds.numpy().tolist()
        for stage, seconds in zip(("sample", "compact"), hop)
    ]


def warm_up() -> float:
    """Compile the kernel (or load it from numba's cache) on a tiny graph; returns the seconds.

    Runs once per process; later calls return the first call's seconds. torch's thread count is
    kept: the first parallel launch of numba's OpenMP threading layer resets it to numba's."""
    if _compile["seconds"] is not None:
        return _compile["seconds"]
    if numba is None:
        raise RuntimeError(
            f"the fused sampling kernel needs numba, which did not import: {import_error()}"
        )
    torch_threads = torch.get_num_threads()
    start = time.perf_counter()
    indptr = torch.tensor([0, 2, 3, 3], dtype=torch.int64)
    indices = torch.tensor([1, 2, 0], dtype=torch.int64)
    for stage_seconds in (None, torch.zeros(2, 2, dtype=torch.float64)):  # the clock read too
        sample_fused(
            indptr,
            indices,
            torch.tensor([0, 1], dtype=torch.int64),
            torch.tensor(2, dtype=torch.int64),
            torch.tensor(7, dtype=torch.int64),
            [1, 2],
            [3, 3],
            False,
            2,
            new_marker(3),
            stage_seconds=stage_seconds,
        )
    _compile["seconds"] = time.perf_counter() - start
    if torch.get_num_threads() != torch_threads:
        torch.set_num_threads(torch_threads)
    hits = misses = 0
    for function in (sample_all, pick, compact, check_seeds, hop_key, now):
        hits += int(sum(function.stats.cache_hits.values()))
        misses += int(sum(function.stats.cache_misses.values()))
    _compile["cache_hits"], _compile["cache_misses"] = hits, misses
    return _compile["seconds"]


def compile_info() -> dict:
    """The first call's seconds and whether it compiled or loaded numba's cache.

    ``{"seconds": float or None (not called yet), "from_cache": bool or None,
    "numba": version or None, "threading_layer": str or None}``."""
    layer = None
    if numba is not None and _compile["seconds"] is not None:
        try:
            layer = numba.threading_layer()
        except ValueError:
            layer = None
    return {
        "seconds": _compile["seconds"],
        "from_cache": (
            None
            if _compile["cache_hits"] is None
            else _compile["cache_hits"] > 0 and _compile["cache_misses"] == 0
        ),
        "numba": None if numba is None else numba.__version__,
        "threading_layer": layer,
    }
