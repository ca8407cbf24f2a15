"""Partitions for Grappa: chunks, the sweeping schedule of super-epochs, local graphs, statistics.

Where it sits: the first stage of a Grappa run. ``partition(g, P)`` cuts the nodes into
``C >= P`` balanced *chunks*; in every *super-epoch* each of the P workers owns a group of
``C / P`` chunks, and the :func:`local_graph <Partition.local_graph>` of its nodes is all it
will ever train on. Repartitioning means moving to the next super-epoch: the chunks regroup, so
edges that were cut become local.

Chunks (``method``):

    random   a seeded uniform permutation cut into C runs; sizes differ by at most one node
    metis    METIS (through pymetis) on the symmetrised graph, C parts, its default 3% imbalance

The schedule (``schedule``), for ``C = k P`` chunks (k chunks per worker):

    round_robin (default)  worker p owns a *base* chunk (seat p of a circle of C seats) and a
                           *variable* chunk (the seat opposite, C - 1 - p). Each super-epoch
                           every chunk but chunk 0 moves one seat along the circle (the circle
                           method of a round-robin tournament), so after C - 1 super-epochs
                           every pair of chunks has shared a worker exactly once. For k >= 3 a
                           seeded greedy cover builds the rounds instead (each round groups the
                           chunks so as to meet as many not-yet-met pairs as possible) until
                           every pair has met.
    fixed_base             worker p keeps base chunk p for ever; only the variable chunks
                           (P .. C-1) sweep past the workers, one group per super-epoch. Every
                           (base, variable) pair meets, but two base chunks never do, so edges
                           between them are never trained on. Kept as the contrast that shows
                           why the round-robin schedule lets the base chunk move too.

    partner_sweep          the authors' public code (chongyang-xu/grappa, ``t10n/dataloader.py``:
                           ``get_cur_dataloader``, ``load_nbr_chunk_v2``): C = P, worker p keeps its
                           own chunk p and adds one *partner* chunk, which moves every super-epoch
                           to the next chunk, skipping p itself: p + 1, p + 2, ... (mod P), so the
                           partner of super-epoch s is ``(p + 1 + s mod (P - 1)) mod P`` and the
                           period is P - 1 super-epochs. The partner adds structure only: a
                           worker's seeds are its own chunk's training nodes, always. Here a
                           node is stored by two workers (its chunk's and the one whose partner
                           it is), but it is a seed of exactly one.

With ``C = P`` (and any schedule but partner_sweep) there is one chunk per worker and one
super-epoch: no repartitioning.

Every super-epoch makes every node a seed of exactly one worker (:meth:`Partition.owner`); in
the two tournament schedules the groups of a round are a partition of the chunks, so every node
is also stored (with its in-edges) by exactly one worker. A local graph holds the owned nodes (local ids ``0 .. num_owned - 1``) and, with
``halo=True``, after them the *halo*: every in-neighbour of an owned node that is not owned,
with its features but without its own in-edges. Its edges are all in-edges of owned nodes whose
source is local; halo nodes have in-degree 0 there. Its training nodes (the worker's seeds) are
the owned training nodes, or with ``partner_sweep`` those of the worker's own chunk only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from .._checks import memory_arg, seed_arg
from ..errors import ZgError
from ..graph import Graph
from ._checks import bool_arg, choice_arg, graph_arg, int_arg

__all__ = [
    "partition",
    "Partition",
    "LocalGraph",
    "METHODS",
    "SCHEDULES",
    "chunk_nodes",
    "EmptyPartitionError",
]

METHODS = ("random", "metis")
SCHEDULES = ("round_robin", "fixed_base", "partner_sweep")


class EmptyPartitionError(ZgError, ValueError):
    """A chunk the partitioner left without nodes: too many chunks for the graph (the caller's
    ``num_chunks``, or ``num_parts`` when the chunks are the parts)."""


# ----------------------------------------------------------------------------- chunks


def chunk_nodes(g: Graph, num_chunks: int, method: str = "random", seed: int = 0) -> torch.Tensor:
    """int64 [N]: the chunk (0 .. num_chunks - 1) of every node, balanced; see the module doc."""
    graph_arg(g)
    num_chunks = int_arg(num_chunks, "num_chunks", low=1, high=g.num_nodes)
    method = choice_arg(method, "method", METHODS)
    seed = seed_arg(seed)
    n = g.num_nodes
    if method == "random" or num_chunks == 1:
        gen = torch.Generator().manual_seed(seed)
        perm = torch.randperm(n, generator=gen)  # [N]
        chunk_of = torch.empty(n, dtype=torch.int64)
        chunk_of[perm] = torch.arange(n) * num_chunks // n  # runs of N/C nodes
        return chunk_of
    return _metis_chunks(g, num_chunks, seed)


def _metis_chunks(g: Graph, num_chunks: int, seed: int) -> torch.Tensor:
    try:
        import pymetis
    except ImportError as exc:
        raise ImportError(f"method='metis' needs pymetis (pip install pymetis): {exc}") from None
    n = g.num_nodes
    src, dst = g.edges()
    keep = src != dst  # METIS: no self-loops
    a, b = src[keep].cpu(), dst[keep].cpu()
    # METIS wants each undirected edge once per direction, without repeats.
    key = torch.unique(torch.cat([a * n + b, b * n + a]))  # sorted by (a, b)
    first, second = key // n, key % n
    xadj = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(torch.bincount(first, minlength=n), 0, out=xadj[1:])
    options = pymetis.Options(seed=int(seed) % (2**31 - 1))
    adjacency = pymetis.CSRAdjacency(xadj.numpy(), second.numpy())
    _, membership = pymetis.part_graph(num_chunks, adjacency=adjacency, options=options)
    return torch.as_tensor(np.asarray(membership), dtype=torch.int64)


# ----------------------------------------------------------------------------- schedules


def _round_robin(num_chunks: int, num_parts: int, seed: int) -> list[list[list[int]]]:
    """rounds[s][p] = chunks of worker p in super-epoch s (each pair of chunks meets once)."""
    k = num_chunks // num_parts
    if k == 1:
        return [[[p] for p in range(num_parts)]]
    if k == 2:
        others = list(range(1, num_chunks))
        rounds = []
        for r in range(num_chunks - 1):
            seats = [0] + others[r:] + others[:r]  # chunk 0 never moves
            rounds.append([[seats[p], seats[num_chunks - 1 - p]] for p in range(num_parts)])
        return rounds
    return _greedy_cover(num_chunks, num_parts, seed)


def _greedy_cover(num_chunks: int, num_parts: int, seed: int) -> list[list[list[int]]]:
    """Rounds of groups of k = C / P chunks until every pair of chunks shared a group."""
    k = num_chunks // num_parts
    unmet = ~np.eye(num_chunks, dtype=bool)  # [C, C]
    rng = np.random.default_rng(seed)
    rounds = []
    while unmet.any():
        free = [int(c) for c in rng.permutation(num_chunks)]
        groups = []
        for _ in range(num_parts):
            start = max(free, key=lambda c: int(unmet[c, free].sum()))  # ties: first in the shuffle
            group = [start]
            free.remove(start)
            while len(group) < k:
                nxt = max(free, key=lambda c: int(unmet[c, group].sum()))
                group.append(nxt)
                free.remove(nxt)
            groups.append(group)
        for group in groups:
            unmet[np.ix_(group, group)] = False
        rounds.append(groups)
    return rounds


def _fixed_base(num_chunks: int, num_parts: int) -> list[list[list[int]]]:
    k = num_chunks // num_parts
    if k == 1:
        return [[[p] for p in range(num_parts)]]
    group = lambda j: [num_parts + j * (k - 1) + i for i in range(k - 1)]  # noqa: E731
    return [[[p] + group((p + s) % num_parts) for p in range(num_parts)] for s in range(num_parts)]


SLOT_BYTES = 48  # a chunk id in the schedule: a Python int in a list and its int64 copy


def _schedule_slots(schedule: str, num_chunks: int, num_parts: int) -> int:
    """How many chunk ids the schedule holds (S rounds x P workers x k chunks; the greedy
    cover's count is its lower bound: every pair of chunks must share a group once)."""
    k = num_chunks // num_parts
    if schedule == "partner_sweep":
        return 2 * num_parts * max(1, num_parts - 1)
    if k == 1:
        return num_parts
    if schedule == "fixed_base":
        return num_parts * num_chunks
    if k == 2:
        return (num_chunks - 1) * num_chunks
    return num_chunks * (num_chunks - 1) // (k - 1)


def _partner_sweep(num_parts: int) -> list[list[list[int]]]:
    """rounds[s][p] = [p, partner of p in super-epoch s] (one chunk per worker, C = P)."""
    if num_parts == 1:
        return [[[0]]]
    return [[[p, (p + 1 + s) % num_parts] for p in range(num_parts)] for s in range(num_parts - 1)]


# ----------------------------------------------------------------------------- local graphs


@dataclass
class LocalGraph:
    """What one worker trains on in one super-epoch.

    Attributes:
        graph: a zg.Graph on local ids: owned nodes ``0 .. num_owned - 1`` (in global id order),
            then halo nodes. Features and labels of every local node; ``train_idx`` holds the
            worker's seeds: its owned training nodes (with ``partner_sweep``: those of its own
            chunk only; halo nodes are never seeds); no val/test split.
        global_ids: int64 [n_local], the global id of each local node.
        num_owned: number of owned nodes.
        global_in_degree: int64 [n_local], each local node's in-degree in the *whole* graph (the
            one number per node a worker needs beyond its own edges: coverage divides by it).
    """

    graph: Graph
    global_ids: torch.Tensor
    num_owned: int
    global_in_degree: torch.Tensor
    worker: int
    super_epoch: int

    @property
    def num_halo(self) -> int:
        return self.graph.num_nodes - self.num_owned


# ----------------------------------------------------------------------------- the partition


class Partition:
    """Chunks plus a schedule: who owns which node in every super-epoch.

    Build one with :func:`partition`. It does not keep the graph (so it is cheap to send to
    worker processes); methods that need it take ``g`` and check it has ``num_nodes`` nodes.

    Attributes:
        chunk_of: int64 [N] chunk of every node.
        schedule: int64 [S, P, k]: ``schedule[s, p]`` are the chunks worker p owns in super-epoch
            ``s`` (super-epochs past S wrap around: super-epoch s uses round ``s % S``); the
            first is its base chunk, whose training nodes are its seeds.
        seeds_from_base: only the base chunk's training nodes are seeds (``partner_sweep``: the
            partner chunk adds structure only); otherwise every owned training node is.
    """

    def __init__(
        self,
        chunk_of: torch.Tensor,
        num_parts: int,
        rounds: list[list[list[int]]],
        *,
        method: str,
        seed: int,
        halo: bool,
        schedule: str,
    ):
        self.chunk_of = chunk_of
        self.num_parts = num_parts
        self.schedule = torch.tensor(rounds, dtype=torch.int64)  # [S, P, k]
        self.method, self.seed, self.halo, self.schedule_name = method, seed, halo, schedule
        self.seeds_from_base = schedule == "partner_sweep"
        # Groups overlap under partner_sweep (C = P, k = 2): count the chunks, not the seats.
        self.num_chunks = (
            num_parts
            if self.seeds_from_base
            else int(self.schedule.shape[1] * self.schedule.shape[2])
        )
        self.chunk_sizes = torch.bincount(chunk_of, minlength=self.num_chunks)  # [C]

    # ------------------------------------------------------------------------- ownership

    @property
    def num_nodes(self) -> int:
        return int(self.chunk_of.numel())

    @property
    def num_super_epochs(self) -> int:
        """S: the schedule's period (1 when there is nothing to rotate)."""
        return int(self.schedule.shape[0])

    def _round(self, super_epoch: Any) -> int:
        return int_arg(super_epoch, "super_epoch", low=0) % self.num_super_epochs

    def _worker(self, worker: Any) -> int:
        return int_arg(worker, "worker", low=0, high=self.num_parts - 1)

    def chunks(self, worker: int, super_epoch: int = 0) -> list[int]:
        """The chunks worker owns in super_epoch (base chunk first)."""
        return self.schedule[self._round(super_epoch), self._worker(worker)].tolist()

    def owner(self, super_epoch: int = 0) -> torch.Tensor:
        """int64 [N]: the worker whose seeds each node belongs to in super_epoch (in the
        tournament schedules also the one worker that stores it; under ``partner_sweep`` the
        worker of its own chunk)."""
        chunk_owner = torch.empty(self.num_chunks, dtype=torch.int64)
        for p, group in enumerate(self.schedule[self._round(super_epoch)]):
            chunk_owner[group[:1] if self.seeds_from_base else group] = p
        return chunk_owner[self.chunk_of]

    def partner(self, worker: int, super_epoch: int = 0) -> int | None:
        """``partner_sweep``: the partner chunk of worker in super_epoch (None otherwise or for P = 1)."""
        chunks = self.chunks(worker, super_epoch)
        return chunks[1] if self.seeds_from_base and len(chunks) > 1 else None

    def owned_nodes(self, worker: int, super_epoch: int = 0) -> torch.Tensor:
        """int64 [n_p] sorted global ids of the nodes worker owns in super_epoch."""
        mine = torch.isin(
            self.chunk_of, self.schedule[self._round(super_epoch), self._worker(worker)]
        )
        return torch.nonzero(mine).flatten()

    def pair_coverage(self, super_epochs: int | None = None) -> torch.Tensor:
        """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. super_epochs - 1
        (default: one full period). The diagonal is True."""
        upto = (
            self.num_super_epochs
            if super_epochs is None
            else int_arg(super_epochs, "super_epochs", low=1)
        )
        met = torch.eye(self.num_chunks, dtype=torch.bool)
        for s in range(upto):
            for group in self.schedule[s % self.num_super_epochs]:
                met[group[:, None], group[None, :]] = True
        return met

    # ------------------------------------------------------------------------- local graphs

    def _check_graph(self, g: Any) -> Graph:
        graph_arg(g)
        if g.num_nodes != self.num_nodes:
            raise ValueError(
                f"g has {g.num_nodes} nodes but this partition was made for "
                f"{self.num_nodes}; partition g itself"
            )
        return g

    def local_graph(self, g: Graph, worker: int, super_epoch: int = 0) -> LocalGraph:
        """The graph worker trains on in super_epoch (owned nodes, then the halo if enabled)."""
        g = self._check_graph(g)
        s = int_arg(super_epoch, "super_epoch", low=0)
        return self._local_graph(g, self._worker(worker), s)

    def _local_graph(self, g: Graph, worker: int, s: int) -> LocalGraph:
        """:meth:`local_graph` of checked values: ``g`` the checked graph this partition was
        made for, ``worker`` in ``[0, P)``, ``s >= 0`` (what a Grappa worker's local data calls
        at every repartition, with the run's graph checked once at its start). The local graph
        is cut from ``g``'s checked arrays, so it is built without a second validation."""
        chunks = self.schedule[s % self.num_super_epochs, worker]  # the worker's chunks
        owned = torch.nonzero(torch.isin(self.chunk_of, chunks)).flatten()
        owned = owned.to(g.device)  # [n_own], sorted
        n, n_own = g.num_nodes, owned.numel()
        deg = g.in_degrees()[owned]  # [n_own]
        total = int(deg.sum())
        # Edge ids of every owned node's CSC slice, in order: indptr[v] + 0 .. deg[v] - 1.
        dst = torch.repeat_interleave(torch.arange(n_own, device=g.device), deg, output_size=total)
        first = torch.cumsum(deg, 0) - deg  # [n_own]
        edge_ids = g.indptr[owned][dst] + (torch.arange(total, device=g.device) - first[dst])
        src_global = g.indices[edge_ids]  # [total]
        local = torch.full((n,), -1, dtype=torch.int64, device=g.device)
        local[owned] = torch.arange(n_own, device=g.device)
        if self.halo:
            halo = torch.unique(src_global[local[src_global] < 0])  # [n_halo], sorted
            local[halo] = n_own + torch.arange(halo.numel(), device=g.device)
        else:
            halo = owned.new_zeros(0)
            keep = local[src_global] >= 0
            src_global, dst = src_global[keep], dst[keep]
        src = local[src_global]  # [E_local]
        n_local = n_own + halo.numel()
        # Edges are already grouped by destination (owned nodes in order); halo rows are empty.
        indptr = torch.zeros(n_local + 1, dtype=torch.int64, device=g.device)
        torch.cumsum(torch.bincount(dst, minlength=n_local), 0, out=indptr[1:])
        global_ids = torch.cat([owned, halo])  # [n_local]
        train = None
        if g.train_idx is not None:
            t = local[g.train_idx]
            seeds = (t >= 0) & (t < n_own)
            if self.seeds_from_base:  # the partner adds structure only
                base = int(chunks[0])
                seeds &= self.chunk_of.to(g.device)[g.train_idx] == base
            train = torch.sort(t[seeds]).values
        # Rows of g's checked arrays and a CSC built above from g's own: nothing to validate.
        sub = Graph._trusted(
            indptr,
            src,
            x=None if g.x is None else g.x[global_ids],
            y=None if g.y is None else g.y[global_ids],
            num_classes=g.num_classes,
            splits={"train_idx": train, "val_idx": None, "test_idx": None},
            name=f"{g.name}[worker {worker}, super-epoch {s}]",
        )
        return LocalGraph(sub, global_ids, n_own, g.in_degrees()[global_ids], worker, s)

    # ------------------------------------------------------------------------- statistics

    def stats(self, g: Graph, super_epoch: int = 0) -> dict[str, Any]:
        """Per-partition and total statistics of super_epoch (vectorised over all edges).

        Per part: ``nodes`` (owned), ``train_nodes``, ``edges`` (edges of its local graph),
        ``cut_edges`` (in-edges of owned nodes whose source another worker owns), ``halo``
        (distinct such sources; stored only with ``halo=True``, counted either way),
        ``replication`` ((nodes + stored halo) / nodes). Totals: ``edge_cut_fraction`` (cut
        edges / all edges), ``replication_factor`` (stored nodes / N), ``balance`` (largest
        part / mean part), ``chunk_sizes``.
        """
        g = self._check_graph(g)
        if self.seeds_from_base:
            return self._stored_stats(g, super_epoch)
        owner = self.owner(super_epoch).to(g.device)  # [N]
        src, dst = g.edges()
        p_dst = owner[dst]
        cut = owner[src] != p_dst  # [E]
        P, n = self.num_parts, g.num_nodes
        nodes = torch.bincount(owner, minlength=P)
        cut_edges = torch.bincount(p_dst[cut], minlength=P)
        local_edges = torch.bincount(p_dst, minlength=P) - (0 if self.halo else cut_edges)
        halo_key = torch.unique(p_dst[cut] * n + src[cut])  # distinct (worker, source)
        halo = torch.bincount(halo_key // n, minlength=P)
        train = (
            torch.bincount(owner[g.train_idx], minlength=P)
            if g.train_idx is not None
            else torch.zeros(P, dtype=torch.int64)
        )
        stored = nodes + (halo if self.halo else 0)
        parts = [
            {
                "worker": p,
                "chunks": self.chunks(p, super_epoch),
                "nodes": int(nodes[p]),
                "train_nodes": int(train[p]),
                "edges": int(local_edges[p]),
                "cut_edges": int(cut_edges[p]),
                "halo": int(halo[p]),
                "replication": float(stored[p]) / max(1, int(nodes[p])),
            }
            for p in range(P)
        ]
        return {
            "super_epoch": int(super_epoch),
            "method": self.method,
            "num_parts": P,
            "num_chunks": self.num_chunks,
            "halo": self.halo,
            "parts": parts,
            "cut_edges": int(cut.sum()),
            "edge_cut_fraction": float(cut.sum()) / max(1, g.num_edges),
            "replication_factor": float(stored.sum()) / n,
            "balance": float(nodes.max()) / (n / P),
            "chunk_sizes": self.chunk_sizes.tolist(),
        }

    def _stored_stats(self, g: Graph, super_epoch: int) -> dict[str, Any]:
        """:meth:`stats` when groups overlap (``partner_sweep``): worker by worker. ``nodes``
        are the nodes it stores with their in-edges (both chunks), ``train_nodes`` its seeds;
        ``edge_cut_fraction`` is the cut share of all stored nodes' in-edges (each edge counted
        once per worker that stores its destination)."""
        src, dst = g.edges()
        chunk_of = self.chunk_of.to(g.device)
        owner = self.owner(super_epoch).to(g.device)
        P, n = self.num_parts, g.num_nodes
        parts, stored_total, cut_total, in_edges_total = [], 0, 0, 0
        for p in range(P):
            group = torch.tensor(self.chunks(p, super_epoch), device=g.device)
            mine = torch.isin(chunk_of, group)  # [N] stored with in-edges
            into = mine[dst]  # [E]
            cut = into & ~mine[src]
            halo = int(torch.unique(src[cut]).numel())
            nodes, cut_edges, into_edges = int(mine.sum()), int(cut.sum()), int(into.sum())
            train = int((owner[g.train_idx] == p).sum()) if g.train_idx is not None else 0
            stored = nodes + (halo if self.halo else 0)
            parts.append(
                {
                    "worker": p,
                    "chunks": self.chunks(p, super_epoch),
                    "nodes": nodes,
                    "train_nodes": train,
                    "edges": into_edges if self.halo else into_edges - cut_edges,
                    "cut_edges": cut_edges,
                    "halo": halo,
                    "replication": float(stored) / max(1, nodes),
                }
            )
            stored_total, cut_total, in_edges_total = (
                stored_total + stored,
                cut_total + cut_edges,
                in_edges_total + into_edges,
            )
        sizes = torch.tensor([q["nodes"] for q in parts], dtype=torch.float64)
        return {
            "super_epoch": int(super_epoch),
            "method": self.method,
            "num_parts": P,
            "num_chunks": self.num_chunks,
            "halo": self.halo,
            "parts": parts,
            "cut_edges": cut_total,
            "edge_cut_fraction": cut_total / max(1, in_edges_total),
            "replication_factor": stored_total / n,
            "balance": float(sizes.max() / sizes.mean()),
            "chunk_sizes": self.chunk_sizes.tolist(),
        }

    def summary(self) -> dict[str, Any]:
        return {
            "num_nodes": self.num_nodes,
            "num_parts": self.num_parts,
            "num_chunks": self.num_chunks,
            "method": self.method,
            "seed": self.seed,
            "halo": self.halo,
            "schedule": self.schedule_name,
            "num_super_epochs": self.num_super_epochs,
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Partition(num_parts={s['num_parts']}, num_chunks={s['num_chunks']}, "
            f"method={s['method']!r}, schedule={s['schedule']!r} ({s['num_super_epochs']} "
            f"super-epochs), halo={s['halo']}, seed={s['seed']})"
        )


def partition(
    g: Graph,
    num_parts: int,
    method: str = "random",
    seed: int = 0,
    *,
    num_chunks: int | None = None,
    halo: bool = False,
    schedule: str = "round_robin",
) -> Partition:
    """Cut ``g`` into ``num_chunks`` balanced chunks and schedule them onto ``num_parts`` workers.

    Args:
        g: the graph. num_parts: P, the number of workers, 1 <= P <= N.
        method: "random" | "metis" (needs pymetis).
        seed: fixes the chunks (and the greedy schedule for k >= 3).
        num_chunks: C, a multiple of P with P <= C <= N; default 2P (a base and a variable
            chunk per worker, so repartitioning has something to move; C = P disables it).
            ``schedule="partner_sweep"`` takes C = P (its default there).
        halo: store the one-hop halo (in-neighbours of owned nodes, features only).
        schedule: "round_robin" (every pair of chunks meets) | "fixed_base" | "partner_sweep"
            (own chunk + a sweeping partner chunk, seeds from the own chunk: the authors' public
            code; see the module doc).
    Raises:
        ValueError if a chunk comes out empty (METIS can do that on tiny or disconnected
        graphs): every worker must own nodes in every super-epoch.
    """
    g = graph_arg(g)
    num_parts = int_arg(num_parts, "num_parts", low=1)
    if num_parts > g.num_nodes:
        raise ValueError(
            f"num_parts={num_parts} is larger than the graph's {g.num_nodes} nodes; "
            "every worker needs at least one node"
        )
    method = choice_arg(method, "method", METHODS)
    seed = seed_arg(seed)
    halo = bool_arg(halo, "halo")
    schedule = choice_arg(schedule, "schedule", SCHEDULES)
    if num_chunks is None:
        num_chunks = (
            num_parts
            if schedule == "partner_sweep"
            else min(2 * num_parts, g.num_nodes - g.num_nodes % num_parts)
        )
    num_chunks = int_arg(num_chunks, "num_chunks", low=num_parts, high=g.num_nodes)
    if schedule == "partner_sweep" and num_chunks != num_parts:
        raise ValueError(
            f"schedule='partner_sweep' has one chunk per worker: num_chunks must equal "
            f"num_parts={num_parts}, got {num_chunks}"
        )
    if num_chunks % num_parts:
        raise ValueError(
            f"num_chunks={num_chunks} must be a multiple of num_parts={num_parts} "
            "(each worker owns the same number of chunks)"
        )
    slots = _schedule_slots(schedule, num_chunks, num_parts)
    greedy = schedule == "round_robin" and num_chunks // num_parts >= 3
    memory_arg(
        SLOT_BYTES * slots + (num_chunks**2 if greedy else 0) + 24 * g.num_nodes,
        f"partition(num_parts={num_parts}, num_chunks={num_chunks}, schedule={schedule!r}) "
        f"of a graph of {g.num_nodes} nodes: a schedule of {slots} chunk slots",
    )
    chunk_of = chunk_nodes(g, num_chunks, method, seed)
    sizes = torch.bincount(chunk_of, minlength=num_chunks)
    if bool((sizes == 0).any()):
        empty = int(torch.nonzero(sizes == 0)[0])
        raise EmptyPartitionError(
            f"empty partition: {method} left chunk {empty} of {num_chunks} without "
            "nodes; use fewer num_parts / num_chunks or method='random'"
        )
    rounds = (
        _round_robin(num_chunks, num_parts, seed)
        if schedule == "round_robin"
        else _fixed_base(num_chunks, num_parts)
        if schedule == "fixed_base"
        else _partner_sweep(num_parts)
    )
    return Partition(
        chunk_of, num_parts, rounds, method=method, seed=seed, halo=halo, schedule=schedule
    )
