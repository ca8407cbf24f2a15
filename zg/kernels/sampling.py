"""The fused CPU sampling kernel: :meth:`zg.EnvelopeSampler.sample_static` in one numba loop.

Where it sits: inside ``EnvelopeSampler`` (seeds -> **sample -> compact** -> gather -> ...). On
the CPU the torch reference makes about fifty full-tensor passes per hop (hash, Floyd rounds,
scatter, cumsum, gather); this kernel does the same work for every hop of a batch in one
compiled call: per hop a multithreaded loop over the rows picks the neighbours, then one
sequential pass over the candidates deduplicates them: a bitmap of the nodes seen this hop
(N bits, which stay in cache) answers "seen before?", and a node-indexed marker array holds
the local ids of the nodes whose bit is set (only written for new nodes, never reset; the
bitmap's touched words are cleared after the hop). A multithreaded
compact stage with the same outputs (:func:`compact_parallel`) is available per call
(``parallel_min_slots``); see ``PARALLEL_MIN_SLOTS`` for why it is not the default.

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
            if (seen[w] & bit) == 0:                  # a repeated seed keeps its first row
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
            seen[:] = 0                       # the overflowed nodes are not in src; or cheaper
        else:
            for i in range(n_dst):
                seen[dst[i] >> 6] = 0
            for i in range(n_dst, count):
                seen[src[i] >> 6] = 0
        return count

    @njit(cache=True, nogil=True)
    def first_occurrences(t, owners, dst, n_dst, nbr, mask, marker, seen, codes, chunk, firsts):
        """Phase 1 for owner t: codes[e] = the element where element e's node first occurs, for
        the elements whose node's 64-node bitmap word is in t's range of words (owner t of
        ``owners`` holds one contiguous share of the bitmap). Every owner reads all elements
        in order but touches only its own words and their nodes' marker entries; at the end it
        zeroes its words. firsts[t, c]: the new nodes it found first in slot chunk c."""
        words = seen.shape[0]
        lo = (words * t) // owners
        hi = (words * (t + 1)) // owners
        elements = n_dst + nbr.shape[0]
        for e in range(elements):
            if e < n_dst:
                v = dst[e]
            elif mask[e - n_dst]:
                v = nbr[e - n_dst]
            else:
                continue
            w = v >> 6
            if w < lo or w >= hi:
                continue
            bit = np.uint64(1) << np.uint64(v & 63)
            if (seen[w] & bit) != 0:
                codes[e] = marker[v]
            else:
                seen[w] |= bit
                marker[v] = e
                codes[e] = e
                if e >= n_dst:
                    firsts[t, (e - n_dst) // chunk] += 1
        seen[lo:hi] = 0

    @njit(parallel=True, cache=True, nogil=True)
    def compact_parallel(dst, n_dst, k, marker, seen, nbr, mask, src, codes, local_of, owners):
        """:func:`compact` with the same outputs, bit for bit, on all of numba's threads.

        codes, local_of: scratch [>= n_dst + R * k] of the marker's dtype, which must hold
        n_dst + R * k (:func:`compact_hop` checks); owners: numba's thread count (an argument:
        numba cannot cache a kernel that asks for it). "Elements" are the rows dst[:n_dst], then
        the slots row by row (element n_dst + p is slot p); first occurrence means the first
        element in that order, as in :func:`compact`.

        1. Parallel over owners (one per thread): each node belongs to the owner of its 64-node
           bitmap word; an owner scans every element and, for its own nodes only, records the
           element where the node first occurs (:func:`first_occurrences`). The random
           accesses, the costly part, split between the threads; no two share a word or entry.
        2. Prefix sums of the new nodes per chunk of the slots (the owners counted them), then
           parallel over chunks: each new node takes local id n_dst + its rank, goes to src,
           and its slot to its local id.
        3. Parallel over chunks: every other slot takes its first occurrence's local id (a
           destination row keeps its row).
        Local ids >= cap are clamped to cap - 1 as in :func:`compact`. Returns the true count.
        """
        rows = dst.shape[0]
        cap = src.shape[0]
        slots = rows * k
        owners = max(1, owners)
        chunk = 16384
        chunks = max(1, (slots + chunk - 1) // chunk)
        firsts = np.zeros((owners, chunks), dtype=np.int64)
        for t in prange(owners):                                       # 1
            first_occurrences(t, owners, dst, n_dst, nbr, mask, marker, seen, codes, chunk, firsts)
        news = np.empty(chunks + 1, dtype=np.int64)                    # 2
        news[0] = n_dst
        for c in range(chunks):
            news[c + 1] = news[c] + firsts[:, c].sum()
        count = news[chunks]
        for c in prange(chunks):
            local = news[c]
            for p in range(c * chunk, min(slots, (c + 1) * chunk)):
                if mask[p] and codes[n_dst + p] == n_dst + p:
                    local_of[n_dst + p] = local
                    if local < cap:
                        src[local] = nbr[p]
                    nbr[p] = min(local, cap - 1)
                    local += 1
        for c in prange(chunks):                                       # 3
            for p in range(c * chunk, min(slots, (c + 1) * chunk)):
                if mask[p]:
                    code = np.int64(codes[n_dst + p])
                    if code < n_dst:
                        nbr[p] = code                                  # a destination row
                    elif code != n_dst + p:
                        nbr[p] = min(np.int64(local_of[code]), cap - 1)
        for i in range(n_dst):
            src[i] = dst[i]
        for i in range(min(count, cap), cap):
            src[i] = 0
        return count

    @njit(cache=True, nogil=True)
    def compact_hop(dst, n_dst, k, marker, seen, nbr, mask, src, codes, local_of,
                    parallel_min_slots, threads):
        """One hop's compact stage: :func:`compact_parallel` when the hop has at least
        ``parallel_min_slots`` slots (and the scratch and the marker's dtype can hold its slot
        codes), else the sequential :func:`compact`. The same outputs either way."""
        slots = dst.shape[0] * k
        fits = marker.itemsize == 8 or n_dst + slots < 2**31 - 1     # codes in the marker dtype
        elements = n_dst + slots
        if (slots >= parallel_min_slots and fits and codes.shape[0] >= elements
                and local_of.shape[0] >= elements):
            return compact_parallel(dst, n_dst, k, marker, seen, nbr, mask, src, codes, local_of,
                                    threads)
        return compact(dst, n_dst, k, marker, seen, nbr, mask, src)

    @njit(cache=True, nogil=True)
    def sample_all(indptr, indices, seeds, num_seeds, key, fanouts, caps, replace, max_degree,
                   marker, seen, nbr_out, mask_out, src_out, counts_out, overflowed_out, codes,
                   local_of, parallel_min_slots, threads):
        """Every hop of one batch, seeds outward: pick, then compact, hop after hop.

        indptr int64 [N+1], indices int64 [E]; seeds int64 [B]; num_seeds, key int64 [1];
        fanouts, caps int64 [L] (seeds outward); marker int32/int64 [N] (any contents: read
        only where seen has the node's bit); seen uint64 [ceil(N / 64)] all zero (left so);
        nbr_out int64 [sum R_h * k_h] and mask_out bool [same] (row-major [R_h, k_h] per hop);
        src_out int64 [sum cap_h]; counts_out int64 [2L] (true counts, then clamped);
        overflowed_out bool [1]; codes, local_of, parallel_min_slots, threads: see
        :func:`compact_hop`.
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
            nbr = nbr_out[nbr_at: nbr_at + rows * k]
            mask = mask_out[nbr_at: nbr_at + rows * k]
            src = src_out[src_at: src_at + cap]
            pick(indptr, indices, dst, n_dst, k, hop_key(key_u, hop), replace,
                 (not replace) and k >= max_degree, nbr, mask)
            count = compact_hop(dst, n_dst, k, marker, seen, nbr, mask, src, codes, local_of,
                                parallel_min_slots, threads)
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


# Hops with at least this many neighbour slots (rows x fanout) deduplicate with the
# multithreaded compact_parallel, smaller ones with the sequential compact. Off by default
# (no hop reaches it): on the 2-core machine, quiet, bench/compact.py (compact.json, products_like,
# 2 threads) measured the parallel compact no faster than the sequential one (0.98x wall, 1.8x
# the CPU time: the owners split the random accesses, but each reads every slot and the
# numbering takes two more passes). sample_fused's parallel_min_slots (e.g. 32_768) turns it on
# per call; the outputs are the same either way.
PARALLEL_MIN_SLOTS = 2**62


class Workspace:
    """The compact stage's scratch, kept between calls (a sampler holds one): the seen bitmap
    (uint64 [ceil(N / 64)], all zero between hops) and :func:`compact_parallel`'s two arrays
    (codes, local ids) [rows + slots of the largest hop] of the marker's dtype, grown when a
    call needs more."""

    def __init__(self):
        self.scratch = tuple(np.empty(0, dtype=np.int32) for _ in range(2))
        self.bitmap = np.zeros(0, dtype=np.uint64)

    def seen(self, num_nodes: int) -> np.ndarray:
        words = (num_nodes + 63) // 64
        if self.bitmap.shape[0] != words:
            self.bitmap = np.zeros(words, dtype=np.uint64)
        return self.bitmap

    def arrays(self, elements: int, dtype) -> Tuple[np.ndarray, np.ndarray]:
        if self.scratch[0].dtype != dtype or self.scratch[0].shape[0] < elements:
            self.scratch = tuple(np.empty(elements, dtype=dtype) for _ in range(2))
        return self.scratch


def new_marker(num_nodes: int) -> torch.Tensor:
    """The node-indexed marker array the kernel deduplicates with: the local id of each node
    numbered in the current hop (which nodes those are, the workspace's seen bitmap says; the
    other entries are stale and never read, so the kernel never resets it). int32 (half the
    cache footprint) whenever the node ids fit."""
    dtype = torch.int32 if num_nodes < 2**31 - 1 else torch.int64
    return torch.full((num_nodes,), -1, dtype=dtype)


def sample_fused(indptr: torch.Tensor, indices: torch.Tensor, seeds: torch.Tensor,
                 num_seeds: torch.Tensor, key: torch.Tensor, fanouts: Sequence[int],
                 caps: Sequence[int], replace: bool, max_degree: int, marker: torch.Tensor,
                 clock: Optional[Callable[[str], None]] = None, workspace: Optional[Workspace] = None,
                 parallel_min_slots: Optional[int] = None):
    """Run every hop of one batch (seeds outward). CPU tensors only.

    Without ``clock``: one compiled call for all hops. With ``clock`` (profiling): hop by hop
    from Python, calling ``clock("sample")`` after each hop's picking and ``clock("compact")``
    after its deduplication (the same results; a little Python per hop).

    Returns (per hop, seeds outward: (nbr [R, k], mask [R, k], src_nodes [cap]),
    wanted int64 [L] true counts, clamped int64 [L], overflowed bool []), all torch tensors;
    the per-hop tensors are views of three flat buffers allocated per call.

    ``workspace``: the compact stage's scratch (a :class:`Workspace`; None: a new one).
    ``parallel_min_slots``: hops with at least this many slots use :func:`compact_parallel`
    (None: ``PARALLEL_MIN_SLOTS``; 0 forces it everywhere, a huge value forces the sequential
    :func:`compact`). The outputs do not depend on it.
    """
    _get_kernel()
    threads = set_threads()
    if parallel_min_slots is None:
        parallel_min_slots = PARALLEL_MIN_SLOTS
    if isinstance(parallel_min_slots, bool) or not isinstance(parallel_min_slots, int) or parallel_min_slots < 0:
        raise ValueError(f"parallel_min_slots must be an int >= 0, got {parallel_min_slots!r}")
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
    elements = [r + s for r, s in zip(rows, nbr_sizes) if s >= parallel_min_slots]
    workspace = workspace or Workspace()
    scratch = workspace.arrays(max(elements, default=0), marker.numpy().dtype)
    seen = workspace.seen(indptr.shape[0] - 1)
    if clock is None:
        status = sample_all(*graph, seeds.numpy(), num_seeds.reshape(1).numpy(),
                            key.reshape(1).numpy(), np.asarray(fanouts, dtype=np.int64),
                            np.asarray(caps, dtype=np.int64), bool(replace), int(max_degree),
                            marker.numpy(), seen, nbr.numpy(), mask.numpy(), src.numpy(),
                            counts.numpy(), overflowed.numpy(), *scratch, parallel_min_slots, threads)
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
                count = compact_hop(dst, n_dst, k, marker.numpy(), seen, h_nbr, h_mask, h_src,
                                    *scratch, parallel_min_slots, threads)
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

    Runs once per process; later calls return the first call's seconds. torch's thread count is
    kept: the first parallel launch of numba's OpenMP threading layer resets it to numba's."""
    if _compile["seconds"] is not None:
        return _compile["seconds"]
    _get_kernel()
    torch_threads = torch.get_num_threads()
    start = time.perf_counter()
    indptr = torch.tensor([0, 2, 3, 3], dtype=torch.int64)
    indices = torch.tensor([1, 2, 0], dtype=torch.int64)
    for clock in (None, lambda stage: None):             # both the one-call and the per-hop path
        sample_fused(indptr, indices, torch.tensor([0, 1], dtype=torch.int64),
                     torch.tensor(2, dtype=torch.int64), torch.tensor(7, dtype=torch.int64), [1, 2],
                     [3, 3], False, 2, new_marker(3), clock=clock, parallel_min_slots=0)
    _compile["seconds"] = time.perf_counter() - start
    if torch.get_num_threads() != torch_threads:
        torch.set_num_threads(torch_threads)
    hits = misses = 0
    for function in (sample_all, pick, compact, compact_parallel, compact_hop, check_seeds, hop_key):
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
