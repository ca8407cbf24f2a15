"""Grappa training for real: P worker processes, isolated local graphs, gradient-only exchange.

Where it sits: the top of the Grappa half. ``train(g, workers=P, ...)`` validates a
:class:`TrainConfig`, partitions the graph, spawns P processes (:mod:`zg.grappa.launch`:
gloo on CPU, nccl on GPUs, timeouts everywhere) and runs :func:`run_worker` in each; the same
function runs under ``torchrun ... -m zg.grappa --config cfg.json``. One iteration of a worker:

    seeds (its own training nodes) -> sample on its LOCAL graph -> gather LOCAL features
    -> forward -> per-seed loss l_v -> [all_gather 3 scalars] -> loss = sum f_v l_v
    -> backward (DDP hook: grad * s_p, all_reduce SUM) -> step

with ``f_v`` and ``s_p`` from the estimator (:mod:`zg.grappa.estimators`). Nothing but
gradients and those scalars crosses the wire; every ``repartition_every`` epochs a new
super-epoch regroups the chunks (:mod:`zg.grappa.partition`) and each worker rebuilds its
local graph, sampler and coverage weights. Rank 0 evaluates on the full graph after each
epoch (outside the timed part) and writes the history JSON.

Trainers (``trainer=``), all through :func:`run_worker`, so they differ only where they must:

    grappa          the above
    isolated        the same workers, estimator "mean", never repartitioned (no correction)
    psgd_pa         isolated local training, each worker its own optimizer, and every
                    ``average_every`` iterations (default: once per epoch) the parameters are
                    averaged with one all_reduce (periodic model averaging)
    feature_fetch   every worker samples on the whole graph's structure (as ``single`` does),
                    owns only its partition's features and fetches the remote ones every
                    iteration (:mod:`zg.baselines.remote`); gradients averaged ("mean")
    single          one process, the whole graph: the accuracy ceiling

Iterations: ``batch_size`` is the *global* number of seeds per iteration. An epoch has
``I = ceil(|train| / batch_size)`` iterations on every worker (a collective needs everyone),
and each worker splits its own shuffled training nodes into I near-equal batches, so every
training node is a seed once per epoch whatever the trainer. ``mode="full"``: one iteration
per epoch on the whole local graph (all neighbours, all local training nodes).

Reproducible: the same config and seed give the same losses, accuracies and byte counts on the
same machine and torch version (seeded init, seeded samplers, deterministic gloo reductions at
fixed P). Every random draw of an epoch derives from (seed, rank, epoch): the shuffle, the
sampler's keys and the dropout generator, which is reseeded at the start of every epoch. No
random stream runs across epochs, so an epoch can be rerun, or a run resumed, exactly.

Failure and restart: with ``checkpoint_dir`` set, rank 0 writes a checkpoint every
``checkpoint_every`` epochs (atomically: a temporary file, then a rename): the parameters and
Adam state (one copy under DDP, where every worker holds the same ones, which is checked when
writing; one per worker for psgd_pa), the epoch to resume at, the history records so far and
the config. A run that finds a checkpoint there resumes from it on every rank: the epochs before
it are kept in the history, none is run twice, and the result is the same as an uninterrupted
run's. That is what makes ``torchrun --max-restarts=N`` useful: when a worker dies, torchrun
restarts all of them and they continue from the last checkpoint. A checkpoint that cannot be
read, or was written by a run with another config or graph, stops every rank with
:class:`CheckpointError` before any training. A peer that stops answering makes every other
worker fail after ``timeout`` seconds with a ``TimeoutError`` naming the timeout (gloo enforces
it on every collective; under nccl, torch's watchdog does).
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import models as zg_models
from ..graph import Graph
from ..pipeline import epoch_order, make_optimizer
from ..envelope import Envelope
from ..sampling import DynamicSampler, EnvelopeSampler, check_fanouts
from ._checks import bool_arg, choice_arg, graph_arg, int_arg, real_arg
from .comm import KINDS, CommLedger
from .coverage import local_coverage
from .estimators import Estimator, batch_stats
from .fullgraph import evaluate, whole_graph_block
from .launch import spawn, worker_device
from .partition import METHODS, SCHEDULES, Partition, partition

__all__ = ["TrainConfig", "train", "train_many", "run_worker", "TRAINERS", "MODES", "HookState",
           "estimator_hook", "make_partition", "iterations_per_epoch", "super_epoch_of",
           "CheckpointError", "checkpoint_file", "read_checkpoint", "FAULT_ENV", "FAULT_ONCE_ENV"]

TRAINERS = ("grappa", "isolated", "psgd_pa", "feature_fetch", "single")
MODES = ("minibatch", "full")
SAMPLERS = ("dynamic", "envelope")
MAX_LAYERS = 64                 # more is a typo, and [10] * num_layers must stay small
MAX_SECONDS = 1e7               # ~4 months: beyond this a timeout is a typo (and overflows timedelta)


# ----------------------------------------------------------------------------- configuration


@dataclass
class TrainConfig:
    """Everything a run needs besides the graph. JSON-serialisable (``asdict``).

    trainer, workers (P), estimator, weighting, coverage_floor, shrink: see the module and
    :mod:`zg.grappa.estimators`. repartition_every: epochs per super-epoch (None or 0: never).
    method, num_chunks, halo, schedule: see :func:`zg.grappa.partition`. mode: "minibatch" or
    "full". model, hidden_dim, num_layers, dropout: see :func:`zg.models.build`. fanouts:
    input layer first (default 10 per layer). sampler: "dynamic" (host-mediated, the
    reference) or "envelope" (each worker runs the ZeroGNN fixed-shape step on its local
    graph: envelope sampler, padded blocks, no host syncs in the iteration). envelope,
    envelope_quantile, envelope_margin: how each worker sizes its envelope for every
    super-epoch ("profiled": :meth:`zg.Envelope.profile` on its local graph with that quantile
    and margin; "worst_case": never overflows). An epoch in which any worker overflowed is
    rewound exactly (parameters, optimizer state and RNG restored on every worker), the
    overflowing envelopes grow, and the epoch runs again; the history counts these replays.
    batch_size: global seeds per iteration. lr,
    weight_decay: Adam. average_every: psgd_pa's averaging period in iterations (default one
    epoch). eval_every: evaluate every k epochs (and after the last). backend: gloo / nccl /
    None (auto). timeout: seconds any collective may wait. run_timeout: seconds the whole run
    may take (None: no limit). threads: torch threads per worker (default cores / P).
    history_path: where rank 0 writes the history JSON. model_path: where rank 0 saves the
    final ``state_dict`` (torch.save), if given. checkpoint_dir: a folder for the run's
    checkpoint (``checkpoint.pt``; None: no checkpoints); a run that finds one there resumes from
    it (see the module docstring). Under torchrun across machines it only needs to be on rank
    0's machine: rank 0 reads it and broadcasts it. checkpoint_every: epochs between checkpoints
    (default: one super-epoch, ``repartition_every``, or every epoch when never repartitioning);
    the last epoch is always checkpointed, so a finished run started again only rewrites its
    history. progress: a tqdm bar on rank 0.
    dataset: only for the command line (``python -m zg.grappa``): which graph to load.
    """

    trainer: str = "grappa"
    workers: int = 2
    estimator: str = "batch"
    weighting: str = "inverse"
    coverage_floor: float = 0.05
    shrink: Any = "auto"
    repartition_every: Optional[int] = 5
    epochs: int = 20
    seed: int = 0
    method: str = "random"
    num_chunks: Optional[int] = None
    halo: bool = False
    schedule: str = "round_robin"
    mode: str = "minibatch"
    model: str = "sage"
    hidden_dim: int = 64
    num_layers: int = 2
    dropout: float = 0.5
    fanouts: Optional[List[int]] = None
    sampler: str = "dynamic"
    envelope: str = "profiled"
    envelope_quantile: float = 0.99
    envelope_margin: float = 0.05
    batch_size: int = 512
    lr: float = 0.01
    weight_decay: float = 0.0
    average_every: Optional[int] = None
    eval_every: int = 1
    backend: Optional[str] = None
    timeout: float = 120.0
    run_timeout: Optional[float] = None
    threads: Optional[int] = None
    history_path: Optional[str] = None
    model_path: Optional[str] = None
    checkpoint_dir: Optional[str] = None
    checkpoint_every: Optional[int] = None
    progress: bool = False
    dataset: Any = None

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "TrainConfig":
        if not isinstance(values, dict):
            raise TypeError(f"config must be a dict (a JSON object), got {type(values).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown config key(s) {unknown}; known keys: {sorted(known)}")
        return cls(**values).validated()

    def validated(self) -> "TrainConfig":
        """Check every field (errors name it) and apply what each trainer implies."""
        choice_arg(self.trainer, "trainer", TRAINERS)
        int_arg(self.workers, "workers", low=1)
        Estimator(self.estimator, self.weighting, self.coverage_floor, self.shrink)
        if self.repartition_every is not None:
            int_arg(self.repartition_every, "repartition_every", low=0)
        int_arg(self.epochs, "epochs", low=1)
        int_arg(self.seed, "seed", low=0, high=2**63 - 1)                # torch.manual_seed's range
        choice_arg(self.method, "method", METHODS)
        if self.num_chunks is not None:
            int_arg(self.num_chunks, "num_chunks", low=1)
        bool_arg(self.halo, "halo")
        choice_arg(self.schedule, "schedule", SCHEDULES)
        choice_arg(self.mode, "mode", MODES)
        choice_arg(self.model, "model", tuple(zg_models.MODELS))
        int_arg(self.hidden_dim, "hidden_dim", low=1)
        int_arg(self.num_layers, "num_layers", low=1, high=MAX_LAYERS)
        real_arg(self.dropout, "dropout", low=0.0, high=0.999)
        if self.fanouts is None:
            self.fanouts = [10] * self.num_layers
        self.fanouts = check_fanouts(self.fanouts)
        if len(self.fanouts) != self.num_layers:
            raise ValueError(f"fanouts has {len(self.fanouts)} entries but num_layers="
                             f"{self.num_layers}; give one fanout per layer")
        choice_arg(self.sampler, "sampler", SAMPLERS)
        choice_arg(self.envelope, "envelope", ("profiled", "worst_case"))
        real_arg(self.envelope_quantile, "envelope_quantile", low=0.0, high=1.0, low_open=True)
        real_arg(self.envelope_margin, "envelope_margin", low=0.0, high=10.0)
        if self.sampler == "envelope" and (self.mode != "minibatch" or self.trainer == "feature_fetch"):
            raise ValueError(f"sampler='envelope' samples each worker's local graph in mode='minibatch' "
                             f"(trainers grappa, isolated, psgd_pa, single); got trainer="
                             f"{self.trainer!r}, mode={self.mode!r}")
        int_arg(self.batch_size, "batch_size", low=1)
        real_arg(self.lr, "lr", low=0.0, low_open=True)
        real_arg(self.weight_decay, "weight_decay", low=0.0)
        if self.average_every is not None:
            int_arg(self.average_every, "average_every", low=1)
        int_arg(self.eval_every, "eval_every", low=1)
        if self.backend is not None:
            choice_arg(self.backend, "backend", ("gloo", "nccl"))
        real_arg(self.timeout, "timeout", low=0.0, high=MAX_SECONDS, low_open=True)
        if self.run_timeout is not None:
            real_arg(self.run_timeout, "run_timeout", low=0.0, high=MAX_SECONDS, low_open=True)
        if self.threads is not None:
            int_arg(self.threads, "threads", low=1)
        for name in ("history_path", "model_path", "checkpoint_dir"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise TypeError(f"{name} must be a non-empty str (a path) or None, got "
                                f"{type(value).__name__} {value!r}")
        if self.checkpoint_every is not None:
            int_arg(self.checkpoint_every, "checkpoint_every", low=1)
        bool_arg(self.progress, "progress")
        if self.dataset is not None and not isinstance(self.dataset, (str, dict)):
            raise TypeError(f"dataset must be a name, an object or None, got "
                            f"{type(self.dataset).__name__} {self.dataset!r}")
        if self.trainer == "single":
            self.workers, self.num_chunks = 1, 1
        if self.trainer in ("single", "isolated", "feature_fetch"):
            self.estimator = "mean"
        if self.trainer != "grappa":
            self.repartition_every = None
        if self.trainer == "feature_fetch" and self.mode != "minibatch":
            raise ValueError("trainer='feature_fetch' trains in mode='minibatch' (it fetches the "
                             "features of sampled neighbourhoods); got mode='full'")
        if self.repartition_every == 0:
            self.repartition_every = None
        if self.checkpoint_every is None:
            self.checkpoint_every = self.repartition_every or 1
        return self

    @property
    def estimator_object(self) -> Estimator:
        return Estimator(self.estimator, self.weighting, self.coverage_floor, self.shrink)


def super_epoch_of(cfg: TrainConfig, epoch: int) -> int:
    return 0 if not cfg.repartition_every else epoch // cfg.repartition_every


def iterations_per_epoch(cfg: TrainConfig, num_train: int) -> int:
    return 1 if cfg.mode == "full" else math.ceil(num_train / cfg.batch_size)


def make_partition(g: Graph, cfg: TrainConfig) -> Partition:
    """The partition a config asks for (what every rank computes identically under torchrun)."""
    return partition(g, cfg.workers, cfg.method, cfg.seed, num_chunks=cfg.num_chunks,
                     halo=cfg.halo, schedule=cfg.schedule)


def _check_plan(g: Graph, cfg: TrainConfig, part: Partition) -> None:
    """Every worker needs at least one seed per iteration in every super-epoch it will see."""
    if not isinstance(part, Partition):
        raise TypeError(f"partition must be a zg.grappa.Partition, got {type(part).__name__}")
    if part.num_nodes != g.num_nodes:
        raise ValueError(f"partition was made for {part.num_nodes} nodes but g has {g.num_nodes}")
    if part.num_parts != cfg.workers:
        raise ValueError(f"partition has num_parts={part.num_parts} but workers={cfg.workers}")
    iterations = iterations_per_epoch(cfg, g.train_idx.numel())
    touched = super_epoch_of(cfg, cfg.epochs - 1) + 1                  # super-epochs 0 .. touched-1
    for s in range(min(touched, part.num_super_epochs)):
        counts = torch.bincount(part.owner(s)[g.train_idx.cpu()], minlength=cfg.workers)
        worst = int(torch.argmin(counts))
        if int(counts[worst]) < iterations:
            raise ValueError(
                f"empty partition: worker {worst} owns {int(counts[worst])} training nodes in "
                f"super-epoch {s}, fewer than the {iterations} iterations of an epoch; use fewer "
                "workers or a larger batch_size")


# ----------------------------------------------------------------------------- the DDP hook


class HookState:
    """State of :func:`estimator_hook`: this iteration's worker scale s_p and the ledger."""

    def __init__(self, ledger: CommLedger, process_group=None):
        self.scale = 1.0
        self.ledger = ledger
        self.process_group = process_group


def estimator_hook(state: HookState, bucket):  # no annotations: DDP rejects string ones
    """DDP communication hook: ``bucket <- sum_p s_p * bucket_p`` (all_reduce SUM).

    DDP hands each bucket of this worker's gradient (of its loss ``sum f_v l_v``) to the hook
    and uses what the future returns as the gradient on every worker, so after backward every
    worker holds the estimator's combined gradient G of equation (1) in
    :mod:`zg.grappa.estimators`. DDP does not divide by the world size when a hook is set.
    Returns a ``torch.futures.Future[torch.Tensor]`` of the reduced bucket.
    """
    buffer = bucket.buffer()
    if state.scale != 1.0:
        buffer.mul_(state.scale)
    state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
    future = dist.all_reduce(buffer, group=state.process_group, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])


# ----------------------------------------------------------------------------- data sources


def _derived_seed(*parts: int) -> int:
    value = 0x5EED
    for p in parts:
        value = (value * 1_000_003 + int(p)) % (2**62)
    return value


class IsolatedSource:
    """What an isolated worker trains on: its local graph, sampled locally (grappa, isolated,
    psgd_pa, single). ``sample`` returns blocks, local features, the logits rows of the seeds
    (None when the blocks' output rows are the seeds), labels and node weights."""

    def __init__(self, cfg: TrainConfig, g: Graph, part: Partition, rank: int, world: int,
                 device: torch.device, estimator: Estimator):
        self.cfg, self.g, self.part, self.rank = cfg, g, part, rank
        self.device, self.estimator = device, estimator
        self.iterations = iterations_per_epoch(cfg, g.train_idx.numel())
        self.super_epoch = None

    def start_super_epoch(self, s: int) -> None:
        local = self.part.local_graph(self.g, self.rank, s)
        self.local = local.graph.to(self.device)
        coverage = local_coverage(local, self.cfg.num_layers).to(self.device)     # [n_local]
        self.weights = self.estimator.node_weights(coverage)                        # [n_local]
        self.train_nodes = self.local.train_idx.cpu()
        seed = _derived_seed(self.cfg.seed, self.rank, s)
        if self.cfg.mode == "full":
            self.block = whole_graph_block(self.local)
        elif self.cfg.sampler == "envelope":
            # The worker's largest batch: batches() splits its training nodes into I parts.
            rows = max(1, math.ceil(self.train_nodes.numel() / self.iterations))
            if self.cfg.envelope == "worst_case":
                envelope = Envelope.worst_case(self.local, self.cfg.fanouts, rows)
            else:
                envelope = Envelope.profile(self.local, self.cfg.fanouts, rows, seed=seed,
                                            quantile=self.cfg.envelope_quantile,
                                            margin=self.cfg.envelope_margin, nodes=self.train_nodes)
            self.sampler = EnvelopeSampler(self.local, self.cfg.fanouts, rows, envelope=envelope, seed=seed)
        else:
            self.sampler = DynamicSampler(self.local, self.cfg.fanouts, seed=seed)
        self.super_epoch = s
        self.mean_coverage = float(coverage[self.local.train_idx].mean())

    def batches(self, epoch: int):
        order = epoch_order(self.train_nodes, _derived_seed(self.cfg.seed, self.rank), epoch)
        return torch.tensor_split(order, self.iterations)

    def sample(self, seeds: torch.Tensor, epoch: int, iteration: int):
        seeds = seeds.to(self.device)
        y = self.local.y[seeds]
        w = self.weights[seeds]
        if self.cfg.mode == "full":
            return [self.block] * self.cfg.num_layers, self.local.x, seeds, y, w
        mb = self.sampler.sample(seeds, epoch, iteration)
        if self.cfg.sampler == "envelope":
            # Fixed shapes: padded seed rows are dropped by a slice whose length the host
            # already knows (these seeds came from the host), so no sync; the overflow flag
            # stays on the device and is read once per epoch.
            self._overflow = self._overflow | mb.overflowed
            self._wanted = torch.maximum(self._wanted, mb.wanted)
            return mb.blocks, self.local.x.index_select(0, mb.input_nodes), slice(0, seeds.numel()), y, w
        return mb.blocks, self.local.x.index_select(0, mb.input_nodes), None, y, w

    # Exact rewind of an epoch in which some worker's envelope overflowed (sampler="envelope").

    @property
    def rewindable(self) -> bool:
        """Whether an epoch may have to be rerun: envelopes can overflow (the config allows
        sampler="envelope" only in mode="minibatch"). The methods below serve that case."""
        return self.cfg.sampler == "envelope"

    def begin_epoch(self) -> None:
        self._overflow = torch.zeros((), dtype=torch.bool, device=self.device)
        self._wanted = torch.zeros(len(self.cfg.fanouts), dtype=torch.int64, device=self.device)

    def epoch_overflowed(self) -> torch.Tensor:
        """bool [] this worker's sticky overflow flag of the epoch."""
        return self._overflow

    def grow(self) -> None:
        """Grow this worker's envelope after an overflow (to the observed counts plus margin)."""
        if bool(self._overflow):
            envelope = self.sampler.envelope.grow(observed=self._wanted.cpu().tolist())
            self.sampler = EnvelopeSampler(self.local, self.cfg.fanouts, self.sampler.batch_size,
                                           envelope=envelope, seed=self.sampler.seed)


def _average_parameters(model: torch.nn.Module, world: int, ledger: CommLedger) -> None:
    """PSGD-PA's averaging step: one all_reduce of all parameters, divided by P."""
    params = [p for p in model.parameters()]
    flat = torch.cat([p.detach().reshape(-1) for p in params])           # [num_params]
    ledger.record("parameters", "all_reduce", flat.numel() * flat.element_size())
    dist.all_reduce(flat)
    flat /= world
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset: offset + p.numel()].view_as(p))
            offset += p.numel()


# ----------------------------------------------------------------------------- checkpoints

CHECKPOINT_FILE = "checkpoint.pt"
# Config fields a resumed run may change: where things go, how long to wait, how often to save.
RESUMABLE_CHANGES = ("history_path", "model_path", "checkpoint_dir", "checkpoint_every", "progress",
                     "timeout", "run_timeout", "threads")
_CHECKPOINT_KEYS = ("config", "graph", "world", "next_epoch", "step", "records", "model",
                    "optimizer", "seconds", "resumed_at")


class CheckpointError(RuntimeError):
    """A checkpoint the run cannot resume from: unreadable, or written by a different run."""


def checkpoint_file(cfg: TrainConfig) -> Optional[str]:
    """Where a config's checkpoint lives (None without ``checkpoint_dir``)."""
    return None if cfg.checkpoint_dir is None else os.path.join(cfg.checkpoint_dir, CHECKPOINT_FILE)


def _graph_signature(g: Graph) -> Dict[str, int]:
    return {"num_nodes": g.num_nodes, "num_edges": g.num_edges, "feat_dim": g.feat_dim,
            "num_classes": int(g.num_classes), "num_train": int(g.train_idx.numel())}


def _to_cpu(obj: Any) -> Any:
    if torch.is_tensor(obj):
        return obj.detach().cpu()
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def read_checkpoint(path: str, cfg: TrainConfig, g: Graph, world: int) -> Optional[Dict[str, Any]]:
    """The checkpoint at ``path`` checked against this run, or None if there is none.

    Raises :class:`CheckpointError` (naming the file and what is wrong) if it cannot be read or
    was written by a run with another config (any field but :data:`RESUMABLE_CHANGES`), another
    graph or another number of workers. Loaded with ``weights_only=True``: tensors and plain
    containers only, never arbitrary pickled objects.
    """
    if not os.path.exists(path):
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:                     # truncated zip, bad pickle, wrong magic, ...
        raise CheckpointError(f"checkpoint {path} cannot be read ({type(exc).__name__}: "
                              f"{str(exc)[:200]}); it is corrupt or truncated. Delete it to start "
                              "afresh") from exc
    if not isinstance(state, dict) or state.get("format") != "zg.grappa.checkpoint" \
            or state.get("version") != 1:
        raise CheckpointError(f"{path} is not a zg.grappa checkpoint (format version 1)")
    missing = [k for k in _CHECKPOINT_KEYS if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {missing}; it is corrupt")
    saved = state["config"] if isinstance(state["config"], dict) else {}
    mine = asdict(cfg)
    differ = sorted(k for k in set(saved) | set(mine)
                    if k not in RESUMABLE_CHANGES and saved.get(k, "<absent>") != mine.get(k, "<absent>"))
    if differ:
        shown = "; ".join(f"{k}: {saved.get(k, '<absent>')!r} there, {mine.get(k, '<absent>')!r} here"
                          for k in differ[:6])
        raise CheckpointError(f"checkpoint {path} was written by a run with a different config "
                              f"({shown}). Use another checkpoint_dir, or delete it to start afresh")
    if state["graph"] != _graph_signature(g):
        raise CheckpointError(f"checkpoint {path} was written for another graph "
                              f"({state['graph']} there, {_graph_signature(g)} here)")
    if state["world"] != world:
        raise CheckpointError(f"checkpoint {path} was written by {state['world']} workers; this run "
                              f"has {world}")
    next_epoch, records = state["next_epoch"], state["records"]
    if not isinstance(next_epoch, int) or not 1 <= next_epoch <= cfg.epochs \
            or not isinstance(records, list) \
            or [r.get("epoch") if isinstance(r, dict) else None for r in records] != list(range(next_epoch)):
        raise CheckpointError(f"checkpoint {path} is inconsistent: resume at epoch {next_epoch!r} "
                              f"with {len(records) if isinstance(records, list) else '?'} epoch records")
    copies = 1 if cfg.trainer != "psgd_pa" else world
    if not (isinstance(state["model"], list) and isinstance(state["optimizer"], list)
            and len(state["model"]) == len(state["optimizer"]) == copies):
        raise CheckpointError(f"checkpoint {path} should hold {copies} model and optimizer state(s)")
    return state


def _save_checkpoint(path: str, state: Dict[str, Any]) -> None:
    """torch.save atomically: a temporary file in the same folder, flushed to disk, renamed."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".checkpoint-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _replica_fingerprint(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> torch.Tensor:
    """float64 [n]: a sum per parameter and per optimizer-state tensor (equal replicas, equal sums)."""
    sums = [p.detach().double().sum().cpu() for p in model.parameters()]
    for per_param in optimizer.state.values():
        sums += [v.detach().double().sum().cpu() for v in per_param.values() if torch.is_tensor(v)]
    return torch.stack(sums)


def _write_checkpoint(path: str, cfg: TrainConfig, g: Graph, rank: int, world: int,
                      model: torch.nn.Module, optimizer: torch.optim.Optimizer, device: torch.device,
                      next_epoch: int, step: int, records: List[Dict[str, Any]], seconds: float,
                      resumed_at: List[int]) -> None:
    """Every rank calls it (collectives inside); rank 0 writes the file."""
    mine = {"model": _to_cpu(model.state_dict()), "optimizer": _to_cpu(optimizer.state_dict())}
    if cfg.trainer == "psgd_pa":                 # every worker its own parameters and Adam state
        states: List[Any] = [None] * world
        dist.all_gather_object(states, mine)
    else:
        # Under DDP every worker applies the same reduced gradient with the same Adam, so one
        # copy stands for all; checked here rather than assumed.
        prints = _gather_row(_replica_fingerprint(model, optimizer).to(device), world)  # [P, n]
        if not all(torch.equal(prints[0], prints[p]) for p in range(1, world)):
            raise CheckpointError(f"the {world} workers' parameters or optimizer states differ "
                                  f"after epoch {next_epoch - 1}; refusing to write a checkpoint")
        states = [mine]
    if rank == 0:
        _save_checkpoint(path, {
            "format": "zg.grappa.checkpoint", "version": 1, "config": asdict(cfg),
            "graph": _graph_signature(g), "world": world, "next_epoch": next_epoch, "step": step,
            "records": records, "model": [s["model"] for s in states],
            "optimizer": [s["optimizer"] for s in states], "seconds": seconds,
            "resumed_at": list(resumed_at)})


def _resume(path: str, cfg: TrainConfig, g: Graph, rank: int, world: int, model: torch.nn.Module,
            optimizer: torch.optim.Optimizer, device: torch.device) -> Optional[Dict[str, Any]]:
    """Rank 0 reads and checks the checkpoint and broadcasts it; every rank loads its part.

    Returns the checkpoint (None: there is none, start afresh). All ranks raise the same
    :class:`CheckpointError` together if any of them cannot load it, so no rank trains on
    while another has stopped, and nothing trains half-loaded.
    """
    payload: List[Any] = [None]
    if rank == 0:
        try:
            payload[0] = read_checkpoint(path, cfg, g, world)
        except CheckpointError as exc:
            payload[0] = {"error": str(exc)}
    dist.broadcast_object_list(payload, src=0)
    state = payload[0]
    if state is None:
        return None
    error = state.get("error")
    if error is None:
        mine = rank if len(state["model"]) > 1 else 0
        try:
            model.load_state_dict(state["model"][mine])
            optimizer.load_state_dict(state["optimizer"][mine])
        except Exception as exc:
            error = (f"checkpoint {path} does not fit this run's model or optimizer on rank {rank} "
                     f"({type(exc).__name__}: {str(exc)[:200]})")
    failed = torch.tensor([0 if error is None else rank + 1], dtype=torch.int64, device=device)
    dist.all_reduce(failed, op=dist.ReduceOp.MAX)
    if error is not None:
        raise CheckpointError(error)
    if int(failed.item()):
        raise CheckpointError(f"checkpoint {path}: rank {int(failed.item()) - 1} could not load it")
    return state


# ----------------------------------------------------------------------------- fault injection

FAULT_ENV = "ZG_GRAPPA_FAULT"
FAULT_ONCE_ENV = "ZG_GRAPPA_FAULT_ONCE"


def _fault_from_env(rank: int):
    """Fault-injection hook for tests: ``ZG_GRAPPA_FAULT="kill:EPOCH:ITERATION:RANK"`` makes that
    rank SIGKILL itself at the start of that iteration; ``"stall:..."`` makes it sleep for ever
    (a peer that never answers). With ``ZG_GRAPPA_FAULT_ONCE=<marker file>`` the fault fires only
    if the marker does not exist yet, and creates it first, so a restarted run does not fail
    again. Returns (action, epoch, iteration) for this rank, or None."""
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return None
    parts = spec.split(":")
    if len(parts) != 4 or parts[0] not in ("kill", "stall") or not all(p.isdigit() for p in parts[1:]):
        raise ValueError(f"{FAULT_ENV} must look like 'kill:EPOCH:ITERATION:RANK' or "
                         f"'stall:EPOCH:ITERATION:RANK', got {spec!r}")
    if int(parts[3]) != rank:
        return None
    return parts[0], int(parts[1]), int(parts[2])


def _inject_fault(action: str) -> None:
    marker = os.environ.get(FAULT_ONCE_ENV)
    if marker:
        try:
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return                               # fired before: this is the restarted run
    sys.stdout.flush()
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    while True:                                  # "stall": alive, in the group, silent
        time.sleep(3600)


# ----------------------------------------------------------------------------- the worker


def run_worker(rank: int, world: int, cfg: TrainConfig, g: Graph, part: Optional[Partition],
               history_path: Optional[str], local_rank: Optional[int] = None) -> None:
    """One worker of any trainer, inside an initialised default process group.

    ``part`` None: compute it from the config (every rank gets the same one). Rank 0 writes the
    history JSON to ``history_path`` (if given). With ``cfg.checkpoint_dir`` it resumes from the
    checkpoint there, if any, and writes one every ``cfg.checkpoint_every`` epochs. A collective
    that waits longer than ``cfg.timeout`` raises ``TimeoutError`` naming the timeout.
    """
    try:
        _run_worker(rank, world, cfg, g, part, history_path, local_rank)
    except RuntimeError as exc:
        text = str(exc).lower()
        if "timed out" not in text and "operation timeout" not in text:
            raise
        raise TimeoutError(f"worker {rank}: a collective waited longer than timeout={cfg.timeout} s "
                           f"(TrainConfig.timeout), so a peer is gone or stuck. The backend said: "
                           f"{str(exc)[:300]}") from exc


def _run_worker(rank: int, world: int, cfg: TrainConfig, g: Graph, part: Optional[Partition],
                history_path: Optional[str], local_rank: Optional[int]) -> None:
    from torch.nn.parallel import DistributedDataParallel

    if world != cfg.workers:
        raise ValueError(f"the process group has {world} workers but the config says workers="
                         f"{cfg.workers} (trainer={cfg.trainer!r})")
    device = worker_device(dist.get_backend(), rank if local_rank is None else local_rank)
    torch.set_num_threads(cfg.threads or max(1, (os.cpu_count() or 1) // world))
    if part is None:
        part = make_partition(g, cfg)
    _check_plan(g, cfg, part)
    estimator = cfg.estimator_object
    ledger = CommLedger(world)

    torch.manual_seed(cfg.seed)                      # identical initial parameters everywhere
    model = zg_models.build(cfg.model, g.feat_dim, cfg.hidden_dim, g.num_classes, cfg.num_layers,
                            dropout=cfg.dropout).to(device)
    if cfg.trainer == "feature_fetch":
        from ..baselines.remote import FeatureFetchSource
        source = FeatureFetchSource(cfg, g, part, rank, world, device, ledger)
    else:
        source = IsolatedSource(cfg, g, part, rank, world, device, estimator)
    if cfg.trainer == "psgd_pa":
        net = model
    else:
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                      broadcast_buffers=False)
        hook_state = HookState(ledger)
        net.register_comm_hook(hook_state, estimator_hook)
    optimizer = make_optimizer(model, "adam", cfg.lr, cfg.weight_decay)
    average_every = cfg.average_every or source.iterations
    fault = _fault_from_env(rank)

    records: List[Dict[str, Any]] = []
    step, first_epoch, seconds_before, resumed_at = 0, 0, 0.0, []
    checkpoint = checkpoint_file(cfg)
    if checkpoint is not None:
        state = _resume(checkpoint, cfg, g, rank, world, model, optimizer, device)
        if state is not None:
            first_epoch, step, seconds_before = state["next_epoch"], state["step"], state["seconds"]
            records = state["records"] if rank == 0 else []
            resumed_at = state["resumed_at"] + [first_epoch]
    eval_graph = g.to(device) if rank == 0 else None
    eval_block = whole_graph_block(eval_graph) if rank == 0 else None
    bar = None
    if rank == 0 and cfg.progress:
        try:
            from tqdm.auto import tqdm
            bar = tqdm(total=cfg.epochs, initial=first_epoch, desc=f"{cfg.trainer} P={world}", leave=False)
        except ImportError:
            bar = None
    run_start = time.perf_counter()
    for epoch in range(first_epoch, cfg.epochs):
        s = super_epoch_of(cfg, epoch)
        t = time.perf_counter()
        if s != source.super_epoch:
            source.start_super_epoch(s)
        repartition_seconds = time.perf_counter() - t
        dist.barrier()                               # the epoch clock starts together
        model.train()
        torch.manual_seed(_derived_seed(cfg.seed, rank, 7, epoch))   # this worker's dropout, this epoch
        start = time.perf_counter()
        replays = 0
        while True:                                  # more than once only after an overflow
            snapshot = None
            if source.rewindable:                       # envelope sampler: keep the epoch's start
                snapshot = _snapshot(model, optimizer, step, device)
                source.begin_epoch()
            loss_sum = torch.zeros((), dtype=torch.float64, device=device)
            seen, lambdas = 0, []
            for it, seeds in enumerate(source.batches(epoch)):
                if fault is not None and fault[1:] == (epoch, it):
                    _inject_fault(fault[0])
                blocks, x, rows, y, w = source.sample(seeds, epoch, it)
                logits = net(blocks, x)
                if rows is not None:
                    logits = logits[rows]
                per_seed = F.cross_entropy(logits, y, reduction="none")            # [B]
                if cfg.trainer == "psgd_pa":
                    factors = torch.full_like(per_seed, 1.0 / per_seed.numel())
                else:
                    stats = None
                    if estimator.needs_stats:
                        stats = _gather_stats(batch_stats(w), world, ledger)         # [P, 3]
                    factors, hook_state.scale, info = estimator.combine(w, rank, world, stats)
                    if "lambda" in info:
                        lambdas.append(info["lambda"])
                loss = (per_seed * factors.to(per_seed.device)).sum()
                optimizer.zero_grad(set_to_none=False)
                loss.backward()
                optimizer.step()
                step += 1
                if cfg.trainer == "psgd_pa" and step % average_every == 0:
                    _average_parameters(model, world, ledger)
                loss_sum += per_seed.detach().sum().double()
                seen += per_seed.numel()
            if snapshot is None or not _any_overflowed(source.epoch_overflowed()):
                break
            # Some worker's envelope overflowed: every worker restores the epoch's start
            # (parameters, optimizer state, RNG), the overflowing ones grow, and the epoch reruns.
            step = _restore(snapshot, model, optimizer, device)
            source.grow()
            replays += 1
        seconds = time.perf_counter() - start
        comm = ledger.take()
        row = [float(loss_sum), float(seen), seconds, repartition_seconds, source.mean_coverage]
        row += [float(comm["bytes"][k]) for k in KINDS] + [float(comm["rounds"][k]) for k in KINDS]
        table = _gather_row(torch.tensor(row, dtype=torch.float64), world)     # [P, 13] bookkeeping
        if rank == 0:
            record = _epoch_record(epoch, s, table, lambdas, source.iterations)
            if cfg.sampler == "envelope":
                record["envelope_replays"] = replays
            if (epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
                t = time.perf_counter()
                acc = evaluate(model, eval_graph, ("val", "test"), block=eval_block)
                record.update(val_acc=acc["val"], test_acc=acc["test"],
                              eval_seconds=time.perf_counter() - t)
            records.append(record)
            if bar is not None:
                bar.set_postfix(loss=f"{record['loss']:.3f}", val=record.get("val_acc"))
                bar.update()
        if checkpoint is not None and ((epoch + 1) % cfg.checkpoint_every == 0
                                       or epoch == cfg.epochs - 1):
            _write_checkpoint(checkpoint, cfg, g, rank, world, model, optimizer, device, epoch + 1,
                              step, records, seconds_before + time.perf_counter() - run_start,
                              resumed_at)
        dist.barrier()                               # nobody's clock runs while rank 0 evaluates
    if bar is not None:
        bar.close()
    if rank == 0:
        history = _history(cfg, g, part, world, records,
                           seconds_before + time.perf_counter() - run_start, dist.get_backend(),
                           resumed_at)
        if history_path:
            write_json(history, history_path)
        if cfg.model_path:
            torch.save({k: v.cpu() for k, v in model.state_dict().items()}, cfg.model_path)


def _snapshot(model: torch.nn.Module, optimizer: torch.optim.Optimizer, step: int,
              device: torch.device) -> Dict[str, Any]:
    """Everything an epoch changes on a worker: parameters, optimizer state, step, RNG."""
    import copy

    snap = {"model": copy.deepcopy(model.state_dict()), "optimizer": copy.deepcopy(optimizer.state_dict()),
            "step": step, "rng": torch.get_rng_state()}
    if device.type == "cuda":
        snap["cuda_rng"] = torch.cuda.get_rng_state(device)
    return snap


def _restore(snap: Dict[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             device: torch.device) -> int:
    model.load_state_dict(snap["model"])
    optimizer.load_state_dict(snap["optimizer"])
    torch.set_rng_state(snap["rng"])
    if "cuda_rng" in snap:
        torch.cuda.set_rng_state(snap["cuda_rng"], device)
    return snap["step"]


def _any_overflowed(mine: torch.Tensor) -> bool:
    """Whether any worker's envelope overflowed this epoch: one 1-element all_reduce (MAX) and
    one host read per epoch, never per iteration (bookkeeping, like the history row)."""
    flag = mine.to(torch.int32).reshape(1)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    return bool(flag.item())


def _gather_stats(mine: torch.Tensor, world: int, ledger: CommLedger) -> torch.Tensor:
    """All workers' (n_p, W_p, Q_p): the few scalars Grappa sends besides gradients."""
    ledger.record("scalars", "all_gather", mine.numel() * mine.element_size())
    return _gather_row(mine, world)


def _gather_row(mine: torch.Tensor, world: int) -> torch.Tensor:
    out = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(out, mine)
    return torch.stack(out).cpu()                                        # [P, len]


def _epoch_record(epoch: int, s: int, table: torch.Tensor, lambdas: List[float],
                  iterations: int) -> Dict[str, Any]:
    nk = len(KINDS)
    by_kind = table[:, 5: 5 + nk]                                        # [P, kinds]
    rounds = table[:, 5 + nk: 5 + 2 * nk]
    record = {
        "epoch": epoch, "super_epoch": s, "iterations": iterations,
        "loss": float(table[:, 0].sum() / table[:, 1].sum()),
        "seconds": float(table[:, 2].max()),
        "worker_seconds": table[:, 2].tolist(),
        "repartition_seconds": float(table[:, 3].max()),
        "mean_coverage": table[:, 4].tolist(),
        "bytes_sent": [int(b) for b in by_kind.sum(1)],
        "bytes_by_kind": {k: [int(b) for b in by_kind[:, i]] for i, k in enumerate(KINDS)},
        "rounds": [int(r) for r in rounds.sum(1)],
        "val_acc": None, "test_acc": None, "eval_seconds": None,
    }
    if lambdas:
        record["shrink_lambda"] = sum(lambdas) / len(lambdas)
    return record


def _history(cfg: TrainConfig, g: Graph, part: Partition, world: int, records: List[Dict[str, Any]],
             total_seconds: float, backend: str, resumed_at: Optional[List[int]] = None) -> Dict[str, Any]:
    """The history JSON. ``total_seconds`` counts the work kept (after a restart: up to the
    checkpoint, plus the resumed part); ``resumed_at`` lists the epochs resumed from checkpoints."""
    evaluated = [r for r in records if r["val_acc"] is not None]
    best = max(evaluated, key=lambda r: r["val_acc"])
    last = evaluated[-1]
    per_worker = [sum(r["bytes_sent"][p] for r in records) for p in range(world)]
    seconds = [r["seconds"] for r in records]
    return {
        "format": "zg.grappa.history", "version": 1,
        "config": asdict(cfg), "workers": world, "backend": backend,
        "graph": {k: v for k, v in g.summary().items() if k != "device"},
        "partition": {**part.summary(),
                      "stats": [part.stats(g, s) for s in sorted({r["super_epoch"] % part.num_super_epochs
                                                                   for r in records})]},
        "epochs": records,
        "final": {"val_acc": last["val_acc"], "test_acc": last["test_acc"],
                  "best_val_acc": best["val_acc"], "test_acc_at_best_val": best["test_acc"],
                  "best_epoch": best["epoch"]},
        "bytes_sent_per_worker": per_worker,
        "bytes_per_epoch_per_worker": sum(per_worker) / (world * len(records)),
        "seconds_per_epoch": sorted(seconds)[len(seconds) // 2],         # median epoch
        "total_seconds": total_seconds,
        "resumed_at_epochs": list(resumed_at or []),
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "platform": platform.platform(), "cpu_count": os.cpu_count()},
    }


def write_json(obj: Any, path: str) -> None:
    """Write JSON atomically (a temporary file in the same folder, then rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------- the entry point


def train(g: Graph, workers: int = 4, estimator: str = "batch", repartition_every: Optional[int] = 5,
          epochs: int = 20, seed: int = 0, *, partition: Optional[Partition] = None,
          history_path: Optional[str] = None, **options: Any) -> Dict[str, Any]:
    """Train with P real worker processes on this machine and return the history.

    Args:
        g: graph with features, labels, train and val splits.
        workers: P (1 <= P <= number of nodes). estimator: "mean" | "node" | "batch" | "shrink"
            (or the "uniform" reference); see :mod:`zg.grappa.estimators`.
        repartition_every: epochs per super-epoch (None or 0: never repartition).
        epochs, seed: as named.
        partition: a precomputed :class:`Partition` for P workers (default: from the config);
            its method, chunks, halo and schedule then replace the config's.
        history_path: where to keep the history JSON (default: a temporary file, removed).
        options: any other :class:`TrainConfig` field (trainer, mode, model, num_layers,
            fanouts, batch_size, lr, method, halo, timeout, run_timeout, progress, ...).
    Returns:
        The history dict (also the JSON's content): ``epochs`` (loss, val_acc, test_acc,
        seconds, bytes_sent per worker, bytes_by_kind, rounds per epoch), ``final``,
        ``bytes_sent_per_worker``, ``bytes_per_epoch_per_worker``, ``seconds_per_epoch``,
        ``partition``, ``config``.
    """
    run = dict(workers=workers, estimator=estimator, repartition_every=repartition_every,
               epochs=epochs, seed=seed, partition=partition, history_path=history_path, **options)
    return train_many(g, [run])[0]


def _prepare(g: Graph, run: Dict[str, Any]):
    """Validate one run's options -> (config, partition, history path, keep the file?)."""
    if not isinstance(run, dict):
        raise TypeError(f"each run must be a dict of train() options, got {type(run).__name__}")
    options = dict(run)
    partition = options.pop("partition", None)
    unknown = sorted(set(options) - {f.name for f in fields(TrainConfig)})
    if unknown:
        raise TypeError(f"train() got unknown option(s) {unknown}; see zg.grappa.TrainConfig")
    cfg = TrainConfig(**options).validated()
    if cfg.workers > g.num_nodes:
        raise ValueError(f"workers={cfg.workers} is larger than the graph's {g.num_nodes} nodes")
    if partition is not None:
        _check_plan(g, cfg, partition)
        # The partition given decides how nodes are cut; the history must say so.
        cfg.method, cfg.num_chunks, cfg.halo, cfg.schedule = (
            partition.method, partition.num_chunks, partition.halo, partition.schedule_name)
    part = make_partition(g, cfg) if partition is None else partition
    _check_plan(g, cfg, part)
    if cfg.trainer == "single" and part.num_parts != 1:
        raise ValueError("trainer='single' runs one worker; pass no partition")
    return cfg, part, cfg.history_path, cfg.history_path is not None


def _run_many(rank: int, world: int, g: Graph, jobs: List[Any]) -> None:
    for cfg, part, path in jobs:
        run_worker(rank, world, cfg, g, part, path)


def train_many(g: Graph, runs: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Several runs, one after the other, in *one* set of worker processes.

    Each run is a dict of :func:`train` arguments (``workers``, ``estimator``, ...,
    ``partition``, ``history_path``); all must have the same number of workers, backend and
    timeouts. A run here gives the same history as the same :func:`train` call (every run
    reseeds everything at its start); it only saves starting P processes per run.
    """
    graph_arg(g, train=True)
    if g.val_idx is None or g.val_idx.numel() == 0:
        raise ValueError("g has no validation nodes (val_idx); rank 0 evaluates on them")
    if isinstance(runs, dict) or not isinstance(runs, (list, tuple)) or not runs:
        raise TypeError("runs must be a non-empty list of dicts of train() options")
    prepared = [_prepare(g, run) for run in runs]
    first = prepared[0][0]
    folders = [cfg.checkpoint_dir for cfg, *_ in prepared if cfg.checkpoint_dir is not None]
    if len(folders) != len({os.path.abspath(f) for f in folders}):
        raise ValueError("every run of train_many needs its own checkpoint_dir (a run would resume "
                         "from another's checkpoint)")
    for cfg, *_ in prepared[1:]:
        for name in ("workers", "backend", "timeout", "run_timeout"):
            if getattr(cfg, name) != getattr(first, name):
                raise ValueError(f"every run of train_many needs the same {name}; got "
                                 f"{getattr(first, name)!r} and {getattr(cfg, name)!r}")
    # Temporary history files only once every run is known to be valid.
    prepared = [(cfg, part, path if keep else os.path.join(tempfile.mkdtemp(prefix="zg-grappa-"),
                                                         "history.json"), keep)
                for cfg, part, path, keep in prepared]
    jobs = [(cfg, part, path) for cfg, part, path, _ in prepared]
    histories = []
    try:
        spawn(_run_many, first.workers, args=(g.to("cpu"), jobs), timeout=first.timeout,
              run_timeout=first.run_timeout, backend=first.backend)
        for _, _, path, keep in prepared:
            with open(path) as f:
                history = json.load(f)
            history["path"] = path if keep else None
            histories.append(history)
    finally:
        for _, _, path, keep in prepared:
            if not keep:                         # the temporary folder, also after a failure
                shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    return histories
