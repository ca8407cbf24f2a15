"""The one gradient exchange (zg.grappa.exchange), in real gloo processes.

* It gives the combined gradient the DDP communication hook gives (the authors' form, which
  Lab 6 teaches: :func:`zg_course.hook.estimator_hook`), for every estimator, on the same
  batches, with the same bytes.
* A Grappa worker's steady static step, the exchange included, makes no host read and keeps
  the exchange's buffer (and the Engine's static buffers) at the same addresses across
  iterations: the contract a CUDA Graph capture needs (on CUDA with NCCL the same step is
  captured; ``tests/grappa/test_grappa_exchange.py::test_the_worker_step_is_captured_on_cuda``).
* No DDP communication hook is registered anywhere in the package but Lab 6's helper.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import zg
from zg.grappa.comm import CommLedger
from zg.grappa.estimators import ESTIMATORS, Estimator, batch_stats
from zg.grappa.exchange import GradientExchange
from zg.grappa.launch import spawn
from zg_course.hook import HookState, estimator_hook

pytestmark = [pytest.mark.timeout(240)]
ROOT = Path(__file__).resolve().parents[2]


def tiny_graph():
    return zg.datasets.csbm(num_nodes=60, avg_degree=4, num_classes=3, feat_dim=5, seed=3)


def rank_batch(g, p):
    gen = torch.Generator().manual_seed(100 + p)
    seeds = torch.randperm(g.num_nodes, generator=gen)[: 4 + 3 * p]  # unequal batch sizes
    mb = zg.DynamicSampler(g, [3, 3], seed=p).sample(seeds)
    w = torch.rand(seeds.numel(), generator=gen) * 5 + 0.2
    return mb.blocks, g.x[mb.input_nodes], g.y[seeds], w


def _exchange_vs_hook_worker(rank, world, out_dir):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    g = tiny_graph()
    hooked = zg.models.SAGE(5, 8, 3, num_layers=2, dropout=0.0)
    plain = copy.deepcopy(hooked)
    ddp = DistributedDataParallel(hooked, broadcast_buffers=False)
    hook_ledger, exchange_ledger = CommLedger(world), CommLedger(world)
    state = HookState(hook_ledger)
    ddp.register_comm_hook(state, estimator_hook)
    exchange = GradientExchange(plain, exchange_ledger)
    blocks, x, y, w = rank_batch(g, rank)
    results = {}
    for name in ESTIMATORS:
        est = Estimator(name, shrink=0.25 if name == "shrink" else "auto")
        stats = None
        if est.needs_stats:
            rows = [torch.empty(3, dtype=torch.float64) for _ in range(world)]
            dist.all_gather(rows, batch_stats(w))
            stats = torch.stack(rows)
        factors, scale, _ = est.combine_device(
            w, torch.ones_like(w, dtype=torch.bool), rank, world, stats
        )
        state.scale = scale
        hooked.zero_grad()
        (F.cross_entropy(ddp(blocks, x), y, reduction="none") * factors).sum().backward()
        exchange.scale = scale
        plain.zero_grad()
        (F.cross_entropy(plain(blocks, x), y, reduction="none") * factors).sum().backward()
        exchange()
        results[name] = {
            "hook": torch.cat([p.grad.reshape(-1) for p in hooked.parameters()]),
            "exchange": torch.cat([p.grad.reshape(-1) for p in plain.parameters()]),
            "hook_comm": hook_ledger.take(),
            "exchange_comm": exchange_ledger.take(),
        }
    torch.save(results, os.path.join(out_dir, f"{rank}.pt"))


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_the_exchange_gives_the_hooks_combined_gradient(tmp_path, world):
    spawn(_exchange_vs_hook_worker, world, args=(str(tmp_path),), timeout=30, run_timeout=120)
    results = [torch.load(tmp_path / f"{r}.pt") for r in range(world)]
    for name in ESTIMATORS:
        for r in range(world):
            got, want = results[r][name]["exchange"], results[r][name]["hook"]
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7, msg=f"{name} rank {r}")
            assert torch.equal(got, results[0][name]["exchange"])  # identical on every worker
            sent, hooked = results[r][name]["exchange_comm"], results[r][name]["hook_comm"]
            assert sent["payload"]["gradients"] == hooked["payload"]["gradients"]
            assert sent["bytes"] == hooked["bytes"]


def _static_step_worker(rank, world, out_dir):
    from zg.audit import SyncAudit
    from zg.grappa import partition
    from zg.grappa.config import TrainConfig
    from zg.grappa.worker import _Worker

    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    cfg = TrainConfig(
        workers=world,
        step_shapes="envelope",
        batch_size=24,
        hidden_dim=16,
        num_layers=2,
        fanouts=[4, 4],
        kernel="torch",
    ).validated()
    part = partition(g, world, method="random", seed=0)
    worker = _Worker(cfg, g, part, rank, world, torch.device("cpu"))
    worker.enter(0)
    engine = worker.engine
    engine.train_epoch()  # warm: every buffer made
    addresses = []
    audits = []
    for b in range(3):
        addresses.append(
            (
                worker.exchange.flat.data_ptr(),
                engine.counter.data_ptr(),
                engine.loss_buf.data_ptr(),
                engine.epoch_table.data_ptr(),
            )
        )
        with SyncAudit() as audit:
            engine.run_batch(b % len(engine.batches(engine.epoch)))
        audits.append((audit.host_syncs, audit.dynamic_shape_ops, dict(audit.per_op)))
    torch.save(
        {"addresses": addresses, "audits": audits, "iterations": worker.iterations},
        os.path.join(out_dir, f"{rank}.pt"),
    )


@pytest.mark.slow
@pytest.mark.parametrize("world", [2])
def test_a_workers_static_step_with_its_exchange_is_capturable(tmp_path, world):
    """No host read in a steady iteration of a Grappa worker's static step, the exchange (a
    gloo all-reduce) and the estimator's scalar all_gather included; the exchanged buffer and
    the Engine's static buffers keep their addresses."""
    spawn(_static_step_worker, world, args=(str(tmp_path),), timeout=30, run_timeout=180)
    for r in range(world):
        seen = torch.load(tmp_path / f"{r}.pt")
        assert len(set(seen["addresses"])) == 1, seen["addresses"]
        for syncs, dynamic, per_op in seen["audits"]:
            assert syncs == 0 and dynamic == 0, per_op


def test_no_ddp_hook_is_registered_in_the_package():
    """One exchange: register_comm_hook and DistributedDataParallel appear nowhere in zg, and
    in the course package only in Lab 6's helper (zg_course/labs.py)."""
    for word in ("register_comm_hook", "DistributedDataParallel"):
        found = sorted(
            p.relative_to(ROOT).as_posix()
            for package in ("zg", "zg_course")
            for p in (ROOT / package).rglob("*.py")
            if word in p.read_text()
        )
        assert found == ["zg_course/labs.py"], (word, found)


def test_a_captures_warm_up_leaves_the_epochs_table_as_it_was():
    """A captured step writes its batch's numbers into row ``counter`` of the epoch's table;
    a capture's warm-up steps run batch 0 again with the guard's ``enabled`` off, and must
    leave every row as it was (a re-capture after an overflow happens mid-epoch)."""
    from zg.grappa.worker import _EstimatorLoss

    loss = object.__new__(_EstimatorLoss)  # record() reads only what capture_into sets
    counter = torch.zeros((), dtype=torch.int64)
    enabled = torch.ones((), dtype=torch.bool)
    loss.capture_into(counter, 3, enabled)

    def numbers(value):
        loss.current = {
            "loss_sum": torch.tensor(value, dtype=torch.float64),
            "count": torch.tensor(4.0, dtype=torch.float64),
            "scale": torch.tensor(0.5, dtype=torch.float64),
        }

    numbers(2.0)
    loss.record()
    kept = loss.table.clone()
    assert kept[0, :2].tolist() == [2.0, 4.0] and kept[1:].isnan().all()
    enabled.fill_(False)  # warming up: batch 0 again, other numbers
    numbers(9.0)
    loss.record()
    assert torch.equal(loss.table.nan_to_num(-1), kept.nan_to_num(-1))
    enabled.fill_(True)
    counter.fill_(1)
    loss.record()
    assert loss.table[1, 0].item() == 9.0 and loss.table[0, 0].item() == 2.0


SMALL = dict(
    workers=2,
    epochs=3,
    seed=1,
    batch_size=48,
    hidden_dim=16,
    num_layers=2,
    fanouts=[4, 4],
    step_shapes="envelope",
    timeout=60,
    run_timeout=240,
)


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["grappa", "data_parallel"])
def test_the_captured_steps_bookkeeping_gives_the_same_history(trainer):
    """capture=True: the step writes its numbers into a device table (a replayed graph rewrites
    the same tensors every iteration); on the CPU the same step runs uncaptured, so its history
    must equal the uncaptured run's: the same losses, accuracies and bytes."""
    from zg import grappa

    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    runs = [grappa.train(g, trainer=trainer, capture=c, **SMALL) for c in (False, True)]
    plain, twin = runs
    assert [e["loss"] for e in twin["epochs"]] == [e["loss"] for e in plain["epochs"]]
    assert [e["val_acc"] for e in twin["epochs"]] == [e["val_acc"] for e in plain["epochs"]]
    assert twin["bytes_sent_per_worker"] == plain["bytes_sent_per_worker"]
    assert twin.get("worker_scale") == plain.get("worker_scale")
    assert not twin["captured"]  # the CPU runs the captured step's twin


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("envelope", [None, [60, 45]], ids=["profiled", "tiny"])
def test_the_worker_step_is_captured_on_cuda(envelope):
    """On CUDA with nccl (one worker per GPU: one here), the worker's static step, the exchange
    and the estimator's all_gather included, is captured as one CUDA Graph and replayed; the
    history equals the uncaptured run's up to float tolerance (GPU atomics). A tiny envelope
    overflows: the step is captured again mid-epoch (its clock running) and the history still
    equals the uncaptured run's (the warm-up steps leave the epoch's table as it was)."""
    from zg import grappa

    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    options = dict(SMALL, workers=1, trainer="grappa", backend="nccl", num_chunks=2)
    if envelope is not None:
        options["envelope"] = envelope
    plain = grappa.train(g, capture=False, **options)
    captured = grappa.train(g, capture=True, **options)
    assert captured["captured"] and not plain["captured"]
    overflows = [e["envelope_overflows"] for e in captured["epochs"]]
    assert overflows == [e["envelope_overflows"] for e in plain["epochs"]]
    if envelope is not None:
        assert sum(overflows) >= 1, overflows
    for a, b in zip(captured["epochs"], plain["epochs"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4, abs=1e-5)
    assert captured["bytes_sent_per_worker"] == plain["bytes_sent_per_worker"]
