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
from typing import List, Optional, Sequence, Tuple

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

    @njit(parallel=True, cache=True, nogil=True)
    def sample_all(indptr, indices, seeds, num_seeds, key, fanouts, caps, replace, max_degree,
                   marker, nbr_out, mask_out, src_out, counts_out, overflowed_out):
        """Every hop of one batch, seeds outward.

        indptr int64 [N+1], indices int64 [E]; seeds int64 [B]; num_seeds, key int64 [1];
        fanouts, caps int64 [L] (seeds outward); marker int32/int64 [N] all -1 (left all -1);
        nbr_out int64 [sum R_h * k_h] and mask_out bool [same] (row-major [R_h, k_h] per hop);
        src_out int64 [sum cap_h]; counts_out int64 [2L] (true counts, then clamped);
        overflowed_out bool [1]. Returns 0, or (nothing written) 1: num_seeds outside
        [0, B]; 2: a real seed outside [0, N) (numba does not check bounds, so this does).
        """
        n = indptr.shape[0] - 1
        num_hops = fanouts.shape[0]
        key_u = np.uint64(key[0])
        n_dst = num_seeds[0]
        rows = seeds.shape[0]
        if n_dst < 0 or n_dst > rows:
            return 1
        for i in range(n_dst):
            if seeds[i] < 0 or seeds[i] >= n:
                return 2
        dst = seeds
        nbr_at = 0
        src_at = 0
        overflowed = False
        for hop in range(num_hops):
            k = fanouts[hop]
            cap = caps[hop]
            hop_key = mix64(key_u + np.uint64(hop + 1) * _GOLDEN)   # zg.sampling._hop_key
            nbr = nbr_out[nbr_at: nbr_at + rows * k]
            mask = mask_out[nbr_at: nbr_at + rows * k]
            src = src_out[src_at: src_at + cap]
            all_neighbors = (not replace) and k >= max_degree

            # 1. Pick neighbours: per row the offsets into its neighbour list (in nbr) and the
            #    validity (in mask); the row's start in indices goes to starts.
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
                row_key = mix64(hop_key ^ mix64(np.uint64(node)))
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
                    # Floyd: for j = d-k .. d-1 draw t in [0, j]; take t unless already taken,
                    # else j.
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
            # Offsets -> global ids in a loop of independent loads (many cache misses in
            # flight at once, rather than one per row between the Floyd rounds).
            for r in prange(n_dst):
                base = r * k
                start = starts[r]
                for s in range(k):
                    if mask[base + s]:
                        nbr[base + s] = indices[start + nbr[base + s]]
                    else:
                        nbr[base + s] = 0

            # 2. Deduplicate in first-occurrence order: destination rows keep their row, new
            #    nodes get n_dst, n_dst + 1, ... in slot order. marker[v] = v's local id.
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
            # 3. Reset only what this hop touched (all of it after an overflow: rare, O(N)).
            if count > cap:
                overflowed = True
                for v in prange(n):
                    marker[v] = -1
            else:
                for i in range(n_dst):
                    marker[dst[i]] = -1
                for i in range(n_dst, count):
                    marker[src[i]] = -1
            clamped = min(count, cap)
            counts_out[hop] = count
            counts_out[num_hops + hop] = clamped
            nbr_at += rows * k
            src_at += cap
            dst = src
            n_dst = clamped
            rows = cap
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
                 caps: Sequence[int], replace: bool, max_degree: int, marker: torch.Tensor):
    """Run every hop of one batch (seeds outward). CPU tensors only.

    Returns (per hop, seeds outward: (nbr [R, k], mask [R, k], src_nodes [cap]),
    wanted int64 [L] true counts, clamped int64 [L], overflowed bool []), all torch tensors;
    the per-hop tensors are views of three flat buffers allocated per call.
    """
    kernel = _get_kernel()
    set_threads()
    batch = seeds.shape[0]
    rows = [batch] + list(caps[:-1])
    nbr_sizes = [r * k for r, k in zip(rows, fanouts)]
    total = sum(nbr_sizes)
    nbr = torch.empty(total, dtype=torch.int64)
    mask = torch.empty(total, dtype=torch.bool)
    src = torch.empty(sum(caps), dtype=torch.int64)
    counts = torch.empty(2 * len(fanouts), dtype=torch.int64)
    overflowed = torch.empty(1, dtype=torch.bool)
    status = kernel(indptr.numpy(), indices.numpy(), seeds.numpy(), num_seeds.reshape(1).numpy(),
           key.reshape(1).numpy(), np.asarray(fanouts, dtype=np.int64),
           np.asarray(caps, dtype=np.int64), bool(replace), int(max_degree), marker.numpy(),
           nbr.numpy(), mask.numpy(), src.numpy(), counts.numpy(), overflowed.numpy())
    if status == 1:
        raise ValueError(f"num_seeds must be in [0, {batch}] (the seed buffer's rows), got {int(num_seeds)}")
    if status == 2:
        raise ValueError(f"seeds[:num_seeds] must be node ids in [0, {indptr.shape[0] - 1}); "
                         f"some are not")
    hops: List[Tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    at = src_at = 0
    for r, k, cap, size in zip(rows, fanouts, caps, nbr_sizes):
        hops.append((nbr[at: at + size].view(r, k), mask[at: at + size].view(r, k),
                     src[src_at: src_at + cap]))
        at += size
        src_at += cap
    L = len(fanouts)
    return hops, counts[:L], counts[L:], overflowed.view(())


def warm_up() -> float:
    """Compile the kernel (or load it from numba's cache) on a tiny graph; returns the seconds.

    Runs once per process; later calls return the first call's seconds."""
    if _compile["seconds"] is not None:
        return _compile["seconds"]
    kernel = _get_kernel()
    start = time.perf_counter()
    indptr = torch.tensor([0, 2, 3, 3], dtype=torch.int64)
    indices = torch.tensor([1, 2, 0], dtype=torch.int64)
    sample_fused(indptr, indices, torch.tensor([0, 1], dtype=torch.int64),
                 torch.tensor(2, dtype=torch.int64), torch.tensor(7, dtype=torch.int64), [1, 2],
                 [3, 3], False, 2, new_marker(3))
    _compile["seconds"] = time.perf_counter() - start
    stats = kernel.stats
    _compile["cache_hits"] = int(sum(stats.cache_hits.values()))
    _compile["cache_misses"] = int(sum(stats.cache_misses.values()))
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
            "from_cache": None if _compile["cache_hits"] is None else _compile["cache_hits"] > 0,
            "numba": None if numba is None else numba.__version__,
            "threading_layer": layer}
