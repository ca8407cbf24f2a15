"""One Grappa worker: the same :class:`zg.Engine` a single-process user runs, on its local graph.

Where it sits: inside every worker process that :func:`zg.grappa.train` (or ``torchrun -m
zg.grappa``) starts. Per super-epoch the worker's source (:mod:`zg.grappa.sources`) builds its
local graph, weights and envelope, and the worker builds a ``zg.Engine`` over it with

* ``forward``: the model wrapped in DDP with the estimator's communication hook
  (:mod:`zg.grappa.hook`), so backward all-reduces ``s_p * gradient`` (psgd_pa: no DDP; its
  parameters are averaged every ``average_every`` iterations);
* ``loss``: the estimator's weighted loss ``sum_v f_v l_v``, its scalars all-gathered and combined
  on the device (no host read in the step);
* ``guard``: the one overflow policy shared by every worker. The flag rides the gradient
  all-reduce, so one worker's overflow stops every worker's step for that iteration; all
  workers read it at the same iterations and resume from the same batch (no epoch reruns, no
  copies of the model);
* ``batches``: the worker's own training nodes, cut into the I iterations every worker runs;
* ``optimizer``: one DeviceAdam for the whole run (its state survives repartitioning).

With ``sampler="envelope"`` the Engine runs the static step (the ZeroGNN fixed-shape envelope
step: seeds from the device table, keys derived on the device); on CUDA it is not captured into
a CUDA Graph, because DDP's hooks run Python during backward. ``mode="full"`` trains on the
whole local graph in one iteration per epoch through the same :func:`zg.step.train_step`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F

from .. import models as zg_models
from .._io import atomic_write
from ..engine import Engine
from ..graph import Graph
from ..optim import make_optimizer
from ..rng import batch_key, seed_dropout
from ..sampling import MiniBatch
from ..step import OverflowGuard, train_step
from .checkpoint import checkpoint_file, resume, write_checkpoint
from .comm import KINDS, CommLedger
from .config import TrainConfig, check_plan, make_partition, super_epoch_of
from .faults import fault_from_env, inject_fault
from ..inference import evaluate
from .history import epoch_record, history, write_json
from .hook import HookState, average_parameters, estimator_hook, gather_row, reduce_overflow_flag
from .launch import worker_device
from .partition import Partition
from .sources import IsolatedSource

__all__ = ["run_worker"]


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


class _EstimatorLoss:
    """The worker's loss ``sum_v f_v l_v`` (per-seed cross-entropy times the estimator's
    factors), with the estimator's scalars all-gathered and combined on the device. It also
    keeps, per executed batch, the sums the history reports (mean loss, shrinkage lambda)."""

    def __init__(self, cfg: TrainConfig, source, rank: int, world: int, ledger: CommLedger,
                 hook_state: Optional[HookState], guard: Optional[OverflowGuard], full: bool):
        self.cfg, self.source, self.rank, self.world = cfg, source, rank, world
        self.estimator = cfg.estimator_object
        self.ledger, self.hook_state, self.guard, self.full = ledger, hook_state, guard, full
        self.current: Dict[str, torch.Tensor] = {}
        self.per_batch: Dict[int, Dict[str, torch.Tensor]] = {}

    def __call__(self, logits: torch.Tensor, labels: torch.Tensor, mb: MiniBatch) -> torch.Tensor:
        if self.full:                                   # whole-graph logits: keep the seeds' rows
            logits = logits.index_select(0, mb.seeds)
        valid = mb.valid & (labels >= 0)                                      # [B]
        per_seed = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")   # [B]
        weights = self.source.weights.index_select(0, mb.seeds)               # [B]
        if self.cfg.trainer == "psgd_pa":
            valid_f = valid.to(per_seed.dtype)
            factors = valid_f / valid_f.sum().clamp(min=1.0)
            if self.guard is not None:                  # no per-iteration collective to ride on
                reduce_overflow_flag(self.guard, self.ledger)
            lam = None
        else:
            from .estimators import masked_batch_stats
            stats = None
            if self.estimator.needs_stats:
                mine = masked_batch_stats(weights, valid)                       # [3] float64
                self.ledger.record("scalars", "all_gather", mine.numel() * mine.element_size())
                gathered = [torch.empty_like(mine) for _ in range(self.world)]
                dist.all_gather(gathered, mine)
                stats = torch.stack(gathered)                                   # [P, 3], device
            factors, scale, info = self.estimator.combine_device(weights, valid, self.rank,
                                                                 self.world, stats)
            self.hook_state.scale = scale
            lam = info.get("lambda")
        self.current = {"loss_sum": (per_seed.detach() * valid).sum().double(),
                        "count": valid.sum().double()}
        if lam is not None:
            self.current["lambda"] = lam
        return (per_seed * factors.to(per_seed.dtype)).sum()

    def keep(self, batch: int) -> None:
        """After batch ``batch`` ran: its sums replace any earlier (rewound) execution's."""
        self.per_batch[batch] = self.current

    def take(self):
        """(loss sum, seeds, mean lambda or None) over the epoch's applied batches; one read."""
        kept = [self.per_batch[b] for b in sorted(self.per_batch)]
        self.per_batch = {}
        loss_sum = float(torch.stack([k["loss_sum"] for k in kept]).sum()) if kept else 0.0
        seen = float(torch.stack([k["count"] for k in kept]).sum()) if kept else 0.0
        lams = [k["lambda"] for k in kept if "lambda" in k]
        lam = float(torch.stack(lams).mean()) if lams else None
        return loss_sum, seen, lam


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
    check_plan(g, cfg, part)
    ledger = CommLedger(world)
    full = cfg.mode == "full"
    envelope_step = cfg.sampler == "envelope" and not full
    guard = OverflowGuard(cfg.num_layers, device, distributed=True) if envelope_step else None

    torch.manual_seed(cfg.seed)                      # identical initial parameters everywhere
    model = zg_models.build(cfg.model, g.feat_dim, cfg.hidden_dim, g.num_classes, cfg.num_layers,
                            dropout=cfg.dropout).to(device)
    if cfg.trainer == "feature_fetch":
        from ..baselines.remote import FeatureFetchSource
        source = FeatureFetchSource(cfg, g, part, rank, world, device, ledger)
    else:
        source = IsolatedSource(cfg, g, part, rank, world, device, cfg.estimator_object)
    hook_state = None
    if cfg.trainer == "psgd_pa":
        net = model
    else:
        net = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None,
                                      broadcast_buffers=False)
        hook_state = HookState(ledger, guard=guard)
        net.register_comm_hook(hook_state, estimator_hook)
    optimizer = make_optimizer(model, "adam", cfg.lr, cfg.weight_decay)
    iterations = source.iterations
    average_every = cfg.average_every or iterations
    loss = _EstimatorLoss(cfg, source, rank, world, ledger, hook_state, guard, full)
    fault = fault_from_env(rank)

    def before_step(epoch: int, b: int) -> None:
        if fault is not None and fault[1:] == (epoch, b):
            inject_fault(fault[0])

    def after_step(epoch: int, b: int) -> None:
        loss.keep(b)
        if cfg.trainer == "psgd_pa" and (epoch * iterations + b + 1) % average_every == 0:
            # Gated like the optimizer step: an overflowed iteration averages nothing.
            average_parameters(model, world, ledger, apply=None if guard is None else guard.apply())

    records: List[Dict[str, Any]] = []
    first_epoch, seconds_before, resumed_at = 0, 0.0, []
    checkpoint = checkpoint_file(cfg)
    if checkpoint is not None:
        state = resume(checkpoint, cfg, g, rank, world, model, optimizer, device)
        if state is not None:
            first_epoch, seconds_before = state["next_epoch"], state["seconds"]
            records = state["records"] if rank == 0 else []
            resumed_at = state["resumed_at"] + [first_epoch]
    eval_graph = g.to(device) if rank == 0 else None
    bar = None
    if rank == 0 and cfg.progress:
        try:
            from tqdm.auto import tqdm
            bar = tqdm(total=cfg.epochs, initial=first_epoch, desc=f"{cfg.trainer} P={world}", leave=False)
        except ImportError:
            bar = None
    engine: Optional[Engine] = None
    run_start = time.perf_counter()
    for epoch in range(first_epoch, cfg.epochs):
        s = super_epoch_of(cfg, epoch)
        t = time.perf_counter()
        if s != source.super_epoch:
            source.start_super_epoch(s)
            engine = None if full else _engine(cfg, source, model, net, optimizer, device, loss,
                                               guard, before_step, after_step)
        repartition_seconds = time.perf_counter() - t
        dist.barrier()                               # the epoch clock starts together
        model.train()
        start = time.perf_counter()
        overflows = rewound = 0
        if full:
            before_step(epoch, 0)
            seed_dropout(batch_key(source.seed, epoch, 0))
            seeds = source.train_nodes.to(device)
            full_batch = MiniBatch(seeds=seeds, num_seeds=torch.tensor(seeds.numel(), device=device),
                                   blocks=[source.block] * cfg.num_layers,
                                   counts=torch.zeros(cfg.num_layers, dtype=torch.int64, device=device),
                                   overflowed=torch.zeros((), dtype=torch.bool, device=device))
            train_step(lambda clock: full_batch, model, optimizer, lambda nodes: source.graph.x,
                       source.graph.y, loss=loss, forward=net)
            after_step(epoch, 0)
        else:
            engine.epoch, engine.batch = epoch, 0
            stats = engine.train_epoch()
            overflows, rewound = stats.overflows, stats.rewound_batches
        seconds = time.perf_counter() - start
        loss_sum, seen, lam = loss.take()
        comm = ledger.take()
        row = [loss_sum, seen, seconds, repartition_seconds, source.mean_coverage]
        row += [float(comm["bytes"][k]) for k in KINDS] + [float(comm["rounds"][k]) for k in KINDS]
        table = gather_row(torch.tensor(row, dtype=torch.float64, device=device), world)   # [P, 13]
        if rank == 0:
            record = epoch_record(epoch, s, table, [lam] if lam is not None else [], iterations)
            if envelope_step:
                record["envelope_overflows"] = overflows
                record["rewound_batches"] = rewound
            if (epoch + 1) % cfg.eval_every == 0 or epoch == cfg.epochs - 1:
                t = time.perf_counter()
                acc = evaluate(model, eval_graph, ("val", "test"))
                record.update(val_acc=acc["val"], test_acc=acc["test"],
                              eval_seconds=time.perf_counter() - t)
            records.append(record)
            if bar is not None:
                bar.set_postfix(loss=f"{record['loss']:.3f}", val=record.get("val_acc"))
                bar.update()
        if checkpoint is not None and ((epoch + 1) % cfg.checkpoint_every == 0
                                       or epoch == cfg.epochs - 1):
            write_checkpoint(checkpoint, cfg, g, rank, world, model, optimizer, device, epoch + 1,
                             (epoch + 1) * iterations, records,
                             seconds_before + time.perf_counter() - run_start, resumed_at)
        dist.barrier()                               # nobody's clock runs while rank 0 evaluates
    if bar is not None:
        bar.close()
    if rank == 0:
        result = history(cfg, g, part, world, records, seconds_before + time.perf_counter() - run_start,
                         dist.get_backend(), resumed_at)
        if history_path:
            write_json(result, history_path)
        if cfg.model_path:
            params = {k: v.cpu() for k, v in model.state_dict().items()}
            atomic_write(cfg.model_path, lambda f: torch.save(params, f), name="model_path")


def _engine(cfg: TrainConfig, source, model, net, optimizer, device, loss, guard, before_step,
            after_step) -> Engine:
    """The worker's Engine for the current super-epoch (the same class a single process runs)."""
    envelope_step = cfg.sampler == "envelope"
    return Engine(source.graph, model, cfg.fanouts, source.rows,
                  envelope=source.envelope if envelope_step else "worst_case",
                  optimizer=optimizer, device=device, capture=envelope_step, cuda_graph=False,
                  seed=source.seed, pipeline="envelope" if envelope_step else "dynamic",
                  audit_iterations=0, nodes=source.train_nodes, batches=source.batches,
                  forward=net, loss=loss, features=source.features,
                  guard=guard if guard is not None else OverflowGuard(cfg.num_layers, device),
                  before_step=before_step, after_step=after_step)
