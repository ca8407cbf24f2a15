"""The fused CPU sampling kernel: :meth:`zg.EnvelopeSampler.sample_static` in one numba loop.

Where it sits: inside ``EnvelopeSampler`` (seeds -> **sample -> compact** -> gather -> ...). On
the CPU the torch reference makes about fifty full-tensor passes per hop (hash, Floyd rounds,
scatter, cumsum, gather); this kernel does the same work for every hop of a batch in one
compiled call: per hop a multithreaded loop over the rows picks the neighbours, then one
sequential pass over the candidates deduplicates them through a node-indexed marker array
(touching only the candidates, and resetting only the entries it touched).

It produces exactly what the torch reference produces for the same key, bit for bit: the same
splitmix64 hash of ``(key, hop, node, slot)``, the same Floyd choices, the same with/without
replacement rule, the same first-occurrence order of new nodes (destination rows first, then
the slots row by row), the same local ids, padding, clamping, overflow flag and ``wanted``
counts. ``tests/test_fused_sampling.py`` checks every output tensor against the reference.

numba is optional: :func:`available` says whether it imported; ``import zg`` never needs it.
The first call compiles the kernel (or loads it from numba's on-disk cache, ``cache=True``);
:func:`warm_up` does that on a tiny graph and returns the seconds it took, and
:func:`compile_info` reports them.
"""

from __future__ import annotations

import time
from typing import Callable, List, Optional, Sequence, Tuple

import numpy as np
import torch

__all__ = ["available", "import_error", "warm_up", "compile_info", "sample_fused", "set_threads"]

try:  # numba is an optional dependency (the "fast" extra); without it the torch path runs
    import numba
    from numba import njit, prange
    _IMPORT_ERROR: Optional[BaseException] = None
except ImportError as exc:  # pragma: no cover - exercised by monkeypatching in the tests
    numba = None
    _IMPORT_ERROR = exc


def available() -> bool:
    """True when numba imported, so the fused kernel can run."""
    return numba is not None


def import_error() -> Optional[BaseException]:
    """Why numba did not import (None when it did)."""
    return _IMPORT_ERROR


# The constants of zg.rng.mix64 and zg.sampling._hop_key, as uint64.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_LOW62 = np.uint64((1 << 62) - 1)

_compile = {"seconds": None, "cache_hits": None, "cache_misses": None}


if numba is not None:
    @njit(inline="always", cache=True)
    def mix64(x):
        # splitmix64 finaliser; uint64 arithmetic wraps, as torch's int64 does.
        x = x + _GOLDEN
        x = (x ^ (x >> np.uint64(30))) * _MIX1
        x = (x ^ (x >> np.uint64(27))) * _MIX2
        return x ^ (x >> np.uint64(31))

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
            row_key = mix64(key ^ mix64(np.uint64(node)))
            if replace:
                for s in range(k):
                    if degree > 0:
                        draw = mix64(row_key + np.uint64(s)) & _LOW62
                        nbr[base + s] = np.int64(draw % np.uint64(degree))
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
                    draw = mix64(row_key + np.uint64(s)) & _LOW62
                    t = np.int64(draw % np.uint64(j + 1))
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
    def compact(dst, n_dst, k, marker, nbr, mask, src):
        """The "compact" stage of one hop: number the distinct nodes, rewrite nbr as local ids.

        First-occurrence order: destination rows keep their row, new nodes get n_dst,
        n_dst + 1, ... in slot order (row by row). src int64 [cap] receives dst[:n_dst], the
        new nodes, then zeros; local ids >= cap are clamped to cap - 1 (overflow). marker
        int32/int64 [N] holds each node's local id during the hop and is all -1 before and
        after: only the entries the hop touched are reset (all of them after an overflow).
        Returns the true count.
        """
        rows = dst.shape[0]
        cap = src.shape[0]
        for i in range(n_dst):
            src[i] = dst[i]
            if marker[dst[i]] < 0:
                marker[dst[i]] = i
        for i in range(n_dst, cap):
            src[i] = 0
        count = n_dst
        for p in range(rows * k):
            if mask[p]:
                v = nbr[p]
                local = marker[v]
                if local < 0:
                    local = count
                    marker[v] = count
                    if count < cap:
                        src[count] = v
                    count += 1
                nbr[p] = min(local, cap - 1)
        if count > cap:
            marker[:] = -1                 # the overflowed nodes are not in src: reset all
        else:
            for i in range(n_dst):
                marker[dst[i]] = -1
            for i in range(n_dst, count):
                marker[src[i]] = -1
        return count

    @njit(cache=True, nogil=True)
    def sample_all(indptr, indices, seeds, num_seeds, key, fanouts, caps, replace, max_degree,
                   marker, nbr_out, mask_out, src_out, counts_out, overflowed_out):
        """Every hop of one batch, seeds outward: pick, then compact, hop after hop.

        indptr int64 [N+1], indices int64 [E]; seeds int64 [B]; num_seeds, key int64 [1];
        fanouts, caps int64 [L] (seeds outward); marker int32/int64 [N] all -1 (left all -1);
        nbr_out int64 [sum R_h * k_h] and mask_out bool [same] (row-major [R_h, k_h] per hop);
        src_out int64 [sum cap_h]; counts_out int64 [2L] (true counts, then clamped);
        overflowed_out bool [1]. Returns :func:`check_seeds`'s status (nothing written unless 0).
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
            nbr = nbr_out[nbr_at: nbr_at + rows * k]
            mask = mask_out[nbr_at: nbr_at + rows * k]
            src = src_out[src_at: src_at + cap]
            pick(indptr, indices, dst, n_dst, k, hop_key(key_u, hop), replace,
                 (not replace) and k >= max_degree, nbr, mask)
            count = compact(dst, n_dst, k, marker, nbr, mask, src)
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


def _get_kernel():
    if numba is None:
        raise RuntimeError(f"the fused sampling kernel needs numba, which did not import: {_IMPORT_ERROR}")
    return sample_all


def set_threads() -> int:
    """numba's thread count = torch's (the count DGL's sampler uses too); returns it."""
    threads = max(1, min(torch.get_num_threads(), numba.config.NUMBA_NUM_THREADS))
    if numba.get_num_threads() != threads:
        numba.set_num_threads(threads)
    return threads


def new_marker(num_nodes: int) -> torch.Tensor:
    """The node-indexed marker array the kernel deduplicates with (all -1; it leaves it so).
    int32 (half the cache footprint) whenever the node ids fit."""
    dtype = torch.int32 if num_nodes < 2**31 - 1 else torch.int64
    return torch.full((num_nodes,), -1, dtype=dtype)


def sample_fused(indptr: torch.Tensor, indices: torch.Tensor, seeds: torch.Tensor,
                 num_seeds: torch.Tensor, key: torch.Tensor, fanouts: Sequence[int],
                 caps: Sequence[int], replace: bool, max_degree: int, marker: torch.Tensor,
                 clock: Optional[Callable[[str], None]] = None):
    """Run every hop of one batch (seeds outward). CPU tensors only.

    Without ``clock``: one compiled call for all hops. With ``clock`` (profiling): hop by hop
    from Python, calling ``clock("sample")`` after each hop's picking and ``clock("compact")``
    after its deduplication (the same results; a little Python per hop).

    Returns (per hop, seeds outward: (nbr [R, k], mask [R, k], src_nodes [cap]),
    wanted int64 [L] true counts, clamped int64 [L], overflowed bool []), all torch tensors;
    the per-hop tensors are views of three flat buffers allocated per call.
    """
    _get_kernel()
    set_threads()
    batch = seeds.shape[0]
    rows = [batch] + list(caps[:-1])
    nbr_sizes = [r * k for r, k in zip(rows, fanouts)]
    total = sum(nbr_sizes)
    nbr = torch.empty(total, dtype=torch.int64)
    mask = torch.empty(total, dtype=torch.bool)
    src = torch.empty(sum(caps), dtype=torch.int64)
    L = len(fanouts)
    counts = torch.empty(2 * L, dtype=torch.int64)
    overflowed = torch.empty(1, dtype=torch.bool)
    hops: List[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    at = src_at = 0
    for r, k, cap, size in zip(rows, fanouts, caps, nbr_sizes):
        hops.append((nbr[at: at + size].view(r, k), mask[at: at + size].view(r, k),
                     src[src_at: src_at + cap]))
        at += size
        src_at += cap
    graph = (indptr.numpy(), indices.numpy())
    if clock is None:
        status = sample_all(*graph, seeds.numpy(), num_seeds.reshape(1).numpy(),
                            key.reshape(1).numpy(), np.asarray(fanouts, dtype=np.int64),
                            np.asarray(caps, dtype=np.int64), bool(replace), int(max_degree),
                            marker.numpy(), nbr.numpy(), mask.numpy(), src.numpy(),
                            counts.numpy(), overflowed.numpy())
    else:
        # Host memory read through numpy: not an aten op, so no "sync" (these are CPU tensors).
        n_dst = int(num_seeds.reshape(1).numpy()[0])
        status = check_seeds(seeds.numpy(), n_dst, indptr.shape[0] - 1)
        if status == 0:
            key_u = key.reshape(1).numpy().view(np.uint64)[0]
            dst, any_overflow = seeds.numpy(), False
            for hop, ((h_nbr, h_mask, h_src), k, cap) in enumerate(zip(hops, fanouts, caps)):
                h_nbr, h_mask, h_src = h_nbr.view(-1).numpy(), h_mask.view(-1).numpy(), h_src.numpy()
                pick(*graph, dst, n_dst, k, np.uint64(hop_key(key_u, hop)), bool(replace),
                     (not replace) and k >= max_degree, h_nbr, h_mask)
                clock("sample")
                count = compact(dst, n_dst, k, marker.numpy(), h_nbr, h_mask, h_src)
                any_overflow = any_overflow or count > cap
                counts[hop], counts[L + hop] = count, min(count, cap)
                clock("compact")
                dst, n_dst = h_src, min(count, cap)
            overflowed[0] = any_overflow
    if status == 1:
        raise ValueError(f"num_seeds must be in [0, {batch}] (the seed buffer's rows), got {int(num_seeds)}")
    if status == 2:
        raise ValueError(f"seeds[:num_seeds] must be node ids in [0, {indptr.shape[0] - 1}); "
                         f"some are not")
    return hops, counts[:L], counts[L:], overflowed.view(())


def warm_up() -> float:
    """Compile the kernel (or load it from numba's cache) on a tiny graph; returns the seconds.

    Runs once per process; later calls return the first call's seconds."""
    if _compile["seconds"] is not None:
        return _compile["seconds"]
    _get_kernel()
    start = time.perf_counter()
    indptr = torch.tensor([0, 2, 3, 3], dtype=torch.int64)
    indices = torch.tensor([1, 2, 0], dtype=torch.int64)
    for clock in (None, lambda stage: None):             # both the one-call and the per-hop path
        sample_fused(indptr, indices, torch.tensor([0, 1], dtype=torch.int64),
                     torch.tensor(2, dtype=torch.int64), torch.tensor(7, dtype=torch.int64), [1, 2],
                     [3, 3], False, 2, new_marker(3), clock=clock)
    _compile["seconds"] = time.perf_counter() - start
    hits = misses = 0
    for function in (sample_all, pick, compact, check_seeds, hop_key):
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
    return {"seconds": _compile["seconds"],
            "from_cache": (None if _compile["cache_hits"] is None
                           else _compile["cache_hits"] > 0 and _compile["cache_misses"] == 0),
            "numba": None if numba is None else numba.__version__,
            "threading_layer": layer}
