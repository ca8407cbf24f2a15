"""ZeroGNN data-parallel training: P processes, each the whole graph and one Engine.

Where it sits: beside :class:`zg.Engine`, for ZeroGNN's multi-GPU setting ("strong multi-GPU
scaling by eliminating host-side bottlenecks"). Every process holds the whole graph and runs the
same static envelope step; each global batch of ``batch_size`` seeds is split into P near-equal
shares and process r trains on share r. Gradients are summed inside the step, between backward
and the optimizer step, by one all-reduce of a flat buffer that also carries the share's valid
seed count, the share's summed loss and the overflow flag:

    flat = [grad of sum_v l_v (every parameter) | sum_v l_v | n_r | overflowed_r]  -> all_reduce SUM
    grad <- flat[:-3] / flat[-2]       (the mean over the whole global batch, on every process)
    loss <- flat[-3] / flat[-2]        (the global batch's mean per-seed loss, as zg.Engine reports)

so the update is exactly the single-process update on the global batch (every seed's
neighbourhood is sampled from the same key whichever process holds it; the sums only
re-associate), and one process's overflow stops every process's step (the one overflow policy
of :mod:`zg.step`). No host read happens in the step: on CUDA with NCCL the all-reduce sits
inside the captured CUDA Graph (torch supports capturing NCCL collectives); on the CPU it runs
over gloo. Processes start through :func:`zg.grappa.launch.spawn` (timeouts everywhere).

    from zg import parallel
    hist = parallel.train(g, workers=2, epochs=3, batch_size=1024, fanouts=[15, 10, 5])
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import torch
import torch.distributed as dist

from . import kernels, models, optim
from ._checks import bool_arg, choice_arg, int_arg, output_file_arg, real_arg, seed_arg
from .engine import Engine, StepHooks
from .envelope import Envelope
from .graph import Graph
from .grappa.launch import spawn, worker_device
from .rng import batch_ranges, epoch_order
from .sampling import check_fanouts
from .step import OverflowGuard, per_seed_cross_entropy

__all__ = ["train", "GradientAllReduce", "shares"]


def shares(order: torch.Tensor, batch_size: int, rank: int, world: int) -> list[torch.Tensor]:
    """Process ``rank``'s share of every global batch of ``order`` (cut into ``batch_size``
    chunks, each split into ``world`` near-equal parts; a part may be empty)."""

    return [
        torch.tensor_split(order[start:end], world)[rank]
        for start, end in batch_ranges(order.numel(), batch_size)
    ]


class GradientAllReduce:
    """The step's gradient reduction: one all-reduce of [grads | count | flag] (see module)."""

    def __init__(
        self,
        model: torch.nn.Module,
        guard: OverflowGuard,
        counter: dict[str, torch.Tensor],
        process_group=None,
    ):
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.guard, self.counter, self.group = guard, counter, process_group
        self.bytes_sent = 0

    def __call__(self) -> None:
        grads = [p.grad.reshape(-1) for p in self.params]
        loss = self.counter["loss"].detach()  # the step's loss tensor (the share's sum), []
        extra = torch.stack(
            [
                loss.to(grads[0].dtype).reshape(()),
                self.counter["count"].to(grads[0].dtype),
                self.guard.outgoing().to(grads[0].dtype).reshape(()),
            ]
        )
        flat = torch.cat(grads + [extra])  # [num_params + 3]
        self.bytes_sent += flat.numel() * flat.element_size()
        dist.all_reduce(flat, group=self.group)
        self.guard.merge(flat[-1])
        count = flat[-2].clamp(min=1.0)
        # What the step returns as its loss becomes the global batch's mean per-seed loss (the
        # backward pass that needed the sum is done), so every process reports what one
        # process training on the whole batch reports.
        loss.copy_((flat[-3] / count).to(loss.dtype))
        mean = flat[:-3] / count
        offset = 0
        for p in self.params:
            p.grad.copy_(mean[offset : offset + p.numel()].view_as(p.grad))
            offset += p.numel()


def _sum_loss(counter: dict[str, torch.Tensor]):
    """Sum (not mean) of the counted seeds' cross-entropy (:func:`zg.step.per_seed_cross_entropy`),
    the gradient's objective; remembers the share's count and the loss tensor, which
    :class:`GradientAllReduce` turns into the global mean after backward."""

    def loss(logits, labels, mb):
        per_seed, counted = per_seed_cross_entropy(logits, labels, mb.valid)  # [B], [B]
        counter["count"] = counted.sum()
        counter["loss"] = per_seed.sum()
        return counter["loss"]

    return loss


def _worker(rank: int, world: int, g: Graph, options: dict[str, Any], out: str) -> None:
    device = worker_device(dist.get_backend(), rank)
    torch.set_num_threads(options["threads"] or max(1, (os.cpu_count() or 1) // world))
    torch.manual_seed(options["seed"])  # identical initial parameters
    model = models.build(
        options["model"],
        g.feat_dim,
        options["hidden_dim"],
        g.num_classes,
        len(options["fanouts"]),
        dropout=options["dropout"],
    )
    guard = OverflowGuard(len(options["fanouts"]), device, distributed=True)
    counter: dict[str, torch.Tensor] = {"count": torch.zeros((), device=device)}
    reduce = GradientAllReduce(model, guard, counter)
    batch_size, seed = options["batch_size"], options["seed"]
    nodes = g.train_idx.cpu()
    share_rows = -(-batch_size // world)
    envelope = options["envelope"]
    if isinstance(envelope, list):
        envelope = Envelope(envelope)
    mode = "graph" if device.type == "cuda" else "static"  # the all-reduce rides the step
    eng = Engine(
        g,
        model,
        options["fanouts"],
        share_rows,
        envelope,
        mode=mode,
        device=device,
        seed=seed,
        optimizer=optim.adam(lr=options["lr"]),
        kernel=options["kernel"],
        hooks=StepHooks(
            batches=lambda epoch: shares(epoch_order(nodes, seed, epoch), batch_size, rank, world),
            loss=_sum_loss(counter),
            reduce=reduce,
            guard=guard,
            poll_every=options["poll_every"],
        ),
    )
    reduce.params = [p for p in eng.model.parameters() if p.requires_grad]  # on the device now
    records = []
    for epoch in range(options["epochs"]):
        dist.barrier()
        start = time.perf_counter()
        stats = eng.train_epoch()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds = time.perf_counter() - start
        row = torch.tensor([seconds, stats.loss], dtype=torch.float64, device=device)
        gathered = [torch.empty_like(row) for _ in range(world)]
        dist.all_gather(gathered, row)
        # Every process's loss is already the global batches' mean (equal on all of them).
        record = {
            "epoch": epoch,
            "seconds": float(max(float(r[0]) for r in gathered)),
            "loss": float(gathered[0][1]),
            "iterations": stats.iterations,
            "overflows": stats.overflows,
            "rewound_batches": stats.rewound_batches,
            "host_syncs": stats.host_syncs,
            "envelope_sizes": stats.envelope_sizes,
        }
        if rank == 0 and options["evaluate"] and g.val_idx is not None and g.val_idx.numel():
            record["val_acc"] = eng.evaluate("val")
        records.append(record)
    if rank == 0:
        result = {
            "format": "zg.parallel.history",
            "workers": world,
            "backend": dist.get_backend(),
            "device": str(device),
            "options": {k: v for k, v in options.items()},
            "epochs": records,
            "bytes_sent_per_worker": reduce.bytes_sent,
            "captured": eng.cuda_graph is not None,
            "kernel": eng.kernel,
            "seconds_per_epoch": sorted(r["seconds"] for r in records)[len(records) // 2],
        }
        with open(os.path.join(out, "history.json"), "w") as f:
            json.dump(result, f)
        torch.save(
            {k: v.cpu() for k, v in eng.model.state_dict().items()}, os.path.join(out, "model.pt")
        )


def train(
    g: Graph,
    workers: int = 2,
    epochs: int = 3,
    batch_size: int = 1024,
    fanouts: Sequence[int] = (15, 10, 5),
    *,
    model: str = "sage",
    hidden_dim: int = 256,
    dropout: float = 0.0,
    lr: float = 3e-3,
    envelope: Any = "profiled",
    seed: int = 0,
    poll_every: int = 8,
    threads: int | None = None,
    evaluate: bool = True,
    kernel: str = "torch",
    backend: str | None = None,
    timeout: float = 300.0,
    run_timeout: float | None = None,
    model_path: str | None = None,
) -> dict[str, Any]:
    """Data-parallel ZeroGNN training with ``workers`` real processes; returns the history.

    Args:
        g: the graph (every process holds all of it). workers: P. epochs, batch_size (global
            seeds per iteration), fanouts (input layer first): as for :class:`zg.Engine`.
        model, hidden_dim, dropout, lr: the model (:func:`zg.models.build`) and DeviceAdam.
        envelope: "profiled", "worst_case" (each process sizes it for its share) or a list of
            sizes, one per block (an explicit, possibly too small, envelope: it grows on overflow).
        seed: the run's seed, an int in [0, 2**63 - 1] (the kit's one seed rule,
            :func:`zg._checks.seed_arg`; refused here, before any process starts).
        poll_every: iterations between the host's reads of the overflow flag.
        threads: torch threads per process (default: cores / P). evaluate: rank 0 reports
            validation accuracy after every epoch. kernel: each process's Engine kernels
            (:data:`zg.kernels.KERNELS`; default "torch"; the history records what ran). backend: gloo / nccl / None (auto: nccl with
            one GPU per process). timeout, run_timeout: see :func:`zg.grappa.launch.spawn`.
        model_path: where to save the final parameters (optional; its folder must exist and
            be writable, checked before any process starts).
    Returns:
        {"epochs": [{epoch, seconds (slowest process), loss, iterations, overflows,
        rewound_batches, host_syncs, val_acc}], "seconds_per_epoch", "bytes_sent_per_worker",
        "captured", "kernel" (what ran), "workers", "backend", "device", "options"}.
    """
    # Every argument is checked here, before any process starts.
    if not isinstance(g, Graph):
        raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
    if g.train_idx is None or g.train_idx.numel() == 0:
        raise ValueError("g needs a non-empty train_idx to train")
    int_arg(workers, "workers", low=1)
    int_arg(epochs, "epochs", low=1)
    int_arg(batch_size, "batch_size", low=1)
    if batch_size < workers:
        raise ValueError(
            f"batch_size={batch_size} is smaller than workers={workers}: every "
            "process needs a share of each batch"
        )
    fanouts = check_fanouts(fanouts)
    real_arg(lr, "lr", low=0.0, low_open=True)
    real_arg(dropout, "dropout", low=0.0, high=0.999)
    choice_arg(model, "model", tuple(models.MODELS))
    int_arg(hidden_dim, "hidden_dim", low=1)
    seed = seed_arg(seed)
    int_arg(poll_every, "poll_every", low=1)
    if threads is not None:
        int_arg(threads, "threads", low=1)
    bool_arg(evaluate, "evaluate")
    kernels.check(kernel)
    if backend is not None:
        choice_arg(backend, "backend", ("gloo", "nccl"))
    if isinstance(envelope, (list, tuple)):
        envelope = [int_arg(v, f"envelope[{i}]", low=1) for i, v in enumerate(envelope)]
        if len(envelope) != len(fanouts):
            raise ValueError(f"envelope has {len(envelope)} sizes but fanouts has {len(fanouts)}")
    elif envelope not in ("profiled", "worst_case"):
        raise ValueError(
            f"envelope must be 'profiled', 'worst_case' or a list of sizes, got {envelope!r}"
        )
    if model_path is not None:  # checked now, not after the whole run
        model_path = str(output_file_arg(model_path, "model_path"))
    options = dict(
        epochs=epochs,
        batch_size=batch_size,
        fanouts=fanouts,
        model=model,
        hidden_dim=hidden_dim,
        dropout=dropout,
        lr=lr,
        envelope=envelope,
        seed=seed,
        poll_every=poll_every,
        threads=threads,
        evaluate=bool(evaluate),
        kernel=kernel,
    )
    out = tempfile.mkdtemp(prefix="zg-parallel-")
    try:
        spawn(
            _worker,
            workers,
            args=(g.to("cpu"), options, out),
            timeout=timeout,
            run_timeout=run_timeout,
            backend=backend,
        )
        with open(os.path.join(out, "history.json")) as f:
            result = json.load(f)
        if model_path is not None:
            shutil.copyfile(os.path.join(out, "model.pt"), model_path)
    finally:
        shutil.rmtree(out, ignore_errors=True)
    return result
