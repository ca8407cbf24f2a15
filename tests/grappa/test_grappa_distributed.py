"""Real torch.distributed processes (gloo, loopback): the DDP hook's combined gradient against a
hand-computed combination, parameter averaging, feature fetching, the launcher's timeouts,
worker exceptions that reach the caller as themselves, and scripts without a main guard.

Workers are module-level functions (spawned processes import this module by name) that write
what they saw to files; the assertions run in the parent.
"""

import copy
import os
import sys
import time
from pathlib import Path

import processes
import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

import zg
from zg.errors import WorkerFailed, ZgError
from zg.grappa import CheckpointError
from zg.grappa.collectives import average_parameters as _average_parameters
from zg.grappa.collectives import gather_stats as _gather_stats
from zg.grappa.comm import CommLedger, wire_bytes
from zg.grappa.estimators import ESTIMATORS, Estimator, batch_stats
from zg.grappa.launch import spawn
from zg.grappa.remote import FeatureTable, fetch_features
from zg_course.hook import HookState, estimator_hook

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def tiny_graph():
    return zg.datasets.csbm(num_nodes=60, avg_degree=4, num_classes=3, feat_dim=5, seed=3)


def rank_batch(g, p):
    """Worker p's deterministic batch: seeds, sampled blocks, features, labels, node weights."""
    gen = torch.Generator().manual_seed(100 + p)
    seeds = torch.randperm(g.num_nodes, generator=gen)[: 4 + 3 * p]  # unequal batch sizes
    mb = zg.DynamicSampler(g, [3, 3], seed=p).sample(seeds)
    w = torch.rand(seeds.numel(), generator=gen) * 5 + 0.2
    return mb.blocks, g.x[mb.input_nodes], g.y[seeds], w


def flat_grad(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def _hook_worker(rank, world, out_dir):
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(0)
    g = tiny_graph()
    model = zg.models.SAGE(5, 8, 3, num_layers=2, dropout=0.0)
    reference = copy.deepcopy(model)  # for the hand computation
    ledger = CommLedger(world)
    ddp = DistributedDataParallel(model, broadcast_buffers=False)
    state = HookState(ledger)
    ddp.register_comm_hook(state, estimator_hook)
    batches = [rank_batch(g, p) for p in range(world)]  # every rank knows all
    results = {}
    for name in ESTIMATORS:
        est = Estimator(name, shrink=0.25 if name == "shrink" else "auto")
        all_stats = torch.stack([batch_stats(w) for *_, w in batches])
        # By hand: G = sum_p s_p grad(sum_v f_v l_v) over every worker's batch, in one process.
        expected = 0
        for p, (blocks, x, y, w) in enumerate(batches):
            factors, scale, _ = est.combine(w, p, world, all_stats)
            reference.zero_grad()
            (F.cross_entropy(reference(blocks, x), y, reduction="none") * factors).sum().backward()
            expected = expected + scale * flat_grad(reference)
        # Through real DDP, the real hook and the real scalar all_gather.
        blocks, x, y, w = batches[rank]
        stats = _gather_stats(batch_stats(w), world, ledger) if est.needs_stats else None
        factors, state.scale, _ = est.combine(w, rank, world, stats)
        model.zero_grad()
        (F.cross_entropy(ddp(blocks, x), y, reduction="none") * factors).sum().backward()
        results[name] = {
            "got": flat_grad(model).clone(),
            "expected": expected,
            "stats": stats,
            "all_stats": all_stats,
            "comm": ledger.take(),
        }
    results["num_params"] = sum(p.numel() for p in model.parameters())
    torch.save(results, os.path.join(out_dir, f"{rank}.pt"))


@pytest.mark.slow
@pytest.mark.parametrize("world", [2, 3])
def test_hook_combined_gradient_equals_hand_computed_combination(tmp_path, world):
    spawn(_hook_worker, world, args=(str(tmp_path),), timeout=30, run_timeout=120)
    results = [torch.load(tmp_path / f"{r}.pt") for r in range(world)]
    num_params = results[0]["num_params"]
    for name in ESTIMATORS:
        for r in range(world):
            got, expected = results[r][name]["got"], results[r][name]["expected"]
            assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6), (name, r)
            assert torch.equal(got, results[0][name]["got"])  # identical on every worker
            comm = results[r][name]["comm"]
            # One bucket: the whole gradient in one all_reduce, counted by the ring model.
            assert comm["payload"]["gradients"] == 4 * num_params
            assert comm["bytes"]["gradients"] == wire_bytes("all_reduce", 4 * num_params, world)
            assert comm["bytes"]["features"] == 0 and comm["bytes"]["parameters"] == 0
            if name in ("mean", "reference"):  # s_p from its own batch
                assert comm["bytes"]["scalars"] == 0
            else:
                assert comm["bytes"]["scalars"] == (world - 1) * 24  # 3 float64 to P-1 peers
                assert torch.equal(results[r][name]["stats"], results[r][name]["all_stats"])


def _averaging_and_fetch_worker(rank, world, out_dir):
    torch.manual_seed(rank)  # different parameters
    model = zg.models.SAGE(4, 6, 2, num_layers=2)
    before = [p.detach().clone() for p in model.parameters()]
    ledger = CommLedger(world)
    _average_parameters(model, world, ledger)
    g = tiny_graph()
    owner = torch.arange(g.num_nodes) % world
    owner[:7] = 0  # uneven ownership
    table = FeatureTable(g.x, owner, rank)
    gen = torch.Generator().manual_seed(rank)
    fetched = []
    for size in (0 if rank == 1 else 3, 17, 40):  # empty requests too
        nodes = torch.randperm(g.num_nodes, generator=gen)[:size]
        fetched.append((nodes, fetch_features(table, nodes, world, ledger)))
    torch.save(
        {
            "before": before,
            "after": [p.detach() for p in model.parameters()],
            "fetched": fetched,
            "comm": ledger.take(),
            "owner": owner,
        },
        os.path.join(out_dir, f"{rank}.pt"),
    )


@pytest.mark.slow
def test_parameter_averaging_and_feature_fetching(tmp_path):
    world = 3
    spawn(_averaging_and_fetch_worker, world, args=(str(tmp_path),), timeout=30, run_timeout=120)
    results = [torch.load(tmp_path / f"{r}.pt") for r in range(world)]
    for i, _p0 in enumerate(results[0]["after"]):
        mean = sum(r["before"][i] for r in results) / world
        for r in results:
            assert torch.allclose(r["after"][i], mean, atol=1e-6)
    g = tiny_graph()
    owner = results[0]["owner"]
    all_requests = [[nodes for nodes, _ in r["fetched"]] for r in results]
    for rank, r in enumerate(results):
        for nodes, x in r["fetched"]:
            assert torch.equal(x, g.x[nodes])  # exactly the right rows
        # Bytes: counts to P-1 peers, 8 per id asked of others, the rows others asked of me.
        asked = sum(int((owner[n] != rank).sum()) for n in all_requests[rank])
        served = sum(
            int((owner[n] == rank).sum())
            for q in range(world)
            if q != rank
            for n in all_requests[q]
        )
        expected = 3 * ((world - 1) * 8) + 8 * asked + served * g.feat_dim * 4
        assert r["comm"]["bytes"]["features"] == expected
        n_params = sum(p.numel() for p in r["after"])
        assert r["comm"]["bytes"]["parameters"] == wire_bytes("all_reduce", 4 * n_params, world)


def _sleepy_worker(rank, world):
    if rank == 0:
        time.sleep(60)
    dist.barrier()


def _failing_worker(rank, world):
    if rank == 1:
        raise RuntimeError("worker 1 failed on purpose")
    dist.barrier()


def _silent_peer_worker(rank, world):
    if rank == 1:  # joined the group, never enters a collective
        while True:
            time.sleep(3600)
    dist.all_reduce(torch.ones(8))


@pytest.mark.slow
def test_a_silent_peer_times_out_the_others():
    """gloo enforces init_process_group(timeout=...) on every collective (checked on torch 2.2
    and 2.13): rank 0 fails after 3 s naming the timeout, long before run_timeout, and the
    launcher then takes the silent rank down."""
    with pytest.raises(Exception, match=r"Timed out waiting 3000ms"):
        spawn(_silent_peer_worker, 2, timeout=3, run_timeout=200)


@pytest.mark.slow
def test_launcher_never_hangs():
    start = time.monotonic()
    with pytest.raises(TimeoutError, match="run_timeout"):
        spawn(_sleepy_worker, 2, timeout=30, run_timeout=4)
    with pytest.raises(Exception, match="failed on purpose"):
        spawn(_failing_worker, 2, timeout=10, run_timeout=60)
    assert time.monotonic() - start < 60  # a hang guard, not a timing


def _flag_worker(rank, world, out_dir):
    """Rank 1's envelope overflows at iteration 1; the flag rides the gradient all-reduce."""
    from types import SimpleNamespace

    from torch.nn.parallel import DistributedDataParallel

    from zg.step import OverflowGuard

    torch.manual_seed(0)
    g = tiny_graph()
    model = zg.models.SAGE(5, 8, 3, num_layers=2, dropout=0.0)
    ledger = CommLedger(world)
    guard = OverflowGuard(2, torch.device("cpu"), distributed=True)
    ddp = DistributedDataParallel(model, broadcast_buffers=False)
    ddp.register_comm_hook(HookState(ledger, guard=guard), estimator_hook)
    blocks, x, y, _ = rank_batch(g, rank)
    seen = []
    for it in range(3):
        hit = torch.tensor(rank == 1 and it == 1)
        guard.observe(SimpleNamespace(overflowed=hit, wanted=torch.tensor([7, 5])), it)
        local_before = bool(guard.overflowed)
        model.zero_grad()
        F.cross_entropy(ddp(blocks, x), y).backward()
        seen.append(
            {
                "before": local_before,
                "apply": bool(guard.apply()),
                "first": int(guard.first),
                "local": bool(guard.local),
            }
        )
    seen.append(
        {
            "payload": ledger.take()["payload"]["gradients"],
            "num_params": sum(p.numel() for p in model.parameters()),
        }
    )
    torch.save(seen, os.path.join(out_dir, f"{rank}.pt"))


@pytest.mark.slow
def test_overflow_flag_rides_the_gradient_all_reduce(tmp_path):
    spawn(_flag_worker, 2, args=(str(tmp_path),), timeout=30, run_timeout=120)
    for rank in range(2):
        seen = torch.load(tmp_path / f"{rank}.pt")
        # Before backward no worker knows; after it every worker skips from iteration 1 on.
        assert [s["before"] for s in seen[:3]] == [False, False, True]
        assert [s["apply"] for s in seen[:3]] == [True, False, False]
        assert all(s["first"] == (1 if i >= 1 else -1) for i, s in enumerate(seen[:3]))
        assert seen[2]["local"] == (rank == 1)  # only rank 1 grows its envelope
        # One float more per iteration on the gradient all-reduce, no other collective.
        assert seen[3]["payload"] == 3 * (4 * seen[3]["num_params"] + 4)


# ----------------------------------------------------------------------------- worker errors


class PickyError(ZgError):
    """A zg-style exception whose constructor wants more than a message: not replayable."""

    def __init__(self, code, text):
        super().__init__(f"{code}: {text}")


RAISED = {
    "checkpoint": lambda: CheckpointError(
        "checkpoint /x/checkpoint.pt was written by a run with a "
        "different config (lr: 0.02 there, 0.05 here)"
    ),
    "value": lambda: ValueError("fanouts[0] must be >= 1, got 0"),
    "timeout": lambda: TimeoutError("worker 1: a collective waited longer than timeout=4.0 s"),
    "runtime": lambda: RuntimeError("an ordinary bug in worker 1\nsecond line of its message"),
    "disk_full": lambda: OSError(
        "could not write history_path '/x/h.json': No space left on device; the path is unchanged"
    ),
    "missing": lambda: FileNotFoundError("dataset folder /x/graph is gone"),
    "memory": lambda: MemoryError(
        "SAGE with layer widths [8, 10000000000, 3] needs at least 800 GiB"
    ),
    "picky": lambda: PickyError(7, "cannot be rebuilt from its message"),
}


def _raising_worker(rank, world, kind):
    if rank == 1:
        raise RAISED[kind]()
    dist.barrier()  # rank 0 waits; the launcher takes it down


@pytest.mark.slow
@pytest.mark.parametrize(
    "kind", ["checkpoint", "value", "timeout", "disk_full", "missing", "memory"]
)
def test_a_worker_exception_reaches_the_caller_as_itself(kind):
    expected = RAISED[kind]()
    with pytest.raises(type(expected)) as info:
        spawn(_raising_worker, 2, args=(kind,), timeout=30, run_timeout=120)
    assert type(info.value) is type(expected) and str(info.value) == str(expected)
    assert info.value.worker_rank == 1
    cause = info.value.__cause__  # torch's report, with the worker's traceback
    assert isinstance(cause, torch.multiprocessing.ProcessRaisedException)
    assert "_raising_worker" in str(cause)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["runtime", "picky"])
def test_other_worker_exceptions_end_in_one_line_naming_the_worker(kind):
    """Any other exception class: zg.errors.WorkerFailed, one line naming the worker, the class
    and the first line of its message; the worker's traceback kept in ``worker_traceback`` and
    torch's exception as the cause."""
    expected = RAISED[kind]()
    with pytest.raises(WorkerFailed) as info:
        spawn(_raising_worker, 2, args=(kind,), timeout=30, run_timeout=120)
    message = str(info.value)
    assert "\n" not in message
    first = str(expected).splitlines()[0]
    assert message.startswith(f"worker 1 of 2 failed with {type(expected).__qualname__}: {first}")
    assert info.value.worker_rank == 1 and info.value.exit_code is None
    assert "_raising_worker" in info.value.worker_traceback
    assert isinstance(info.value.__cause__, torch.multiprocessing.ProcessRaisedException)


def _cause_ends_last_worker(rank, world):
    """Rank 1 fails first (the cause) but its process lingers (a thread keeps it alive after
    its error is recorded); rank 0 fails a second later and ends at once, so the parent sees
    rank 0's exit first."""
    import threading

    if rank == 1:
        threading.Thread(target=time.sleep, args=(4,)).start()  # not a daemon: exit waits
        raise RuntimeError("the cause")
    time.sleep(1.5)
    raise RuntimeError("a consequence")


@pytest.mark.slow
def test_the_worker_named_is_the_cause_even_when_a_peer_ends_first():
    """The parent names the worker whose error was recorded first, not the one whose exit it
    happened to see first (under load a peer that failed because of the cause can end first)."""
    with pytest.raises(WorkerFailed) as info:
        spawn(_cause_ends_last_worker, 2, timeout=30, run_timeout=120)
    assert info.value.worker_rank == 1, str(info.value)
    assert str(info.value).startswith("worker 1 of 2 failed with RuntimeError: the cause")


UNGUARDED = """
import zg
from zg import grappa

g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
CALL
print("history with", len(history["epochs"]), "epochs")
"""
CALL = (
    "history = grappa.train(g, workers=2, epochs=1, seed=0, batch_size=64, hidden_dim=16, "
    "num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=120)"
)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_script_without_a_main_guard_is_told_to_add_one(tmp_path):
    """The README's snippet as a script: spawn re-runs the script in every worker. Without
    ``if __name__ == "__main__":`` the run ends with MainGuardError naming the fix (it used to
    end with "process 0 terminated with exit code 1"); with the guard it trains."""
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PYTHONPATH": str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }
    unguarded = tmp_path / "unguarded.py"
    unguarded.write_text(UNGUARDED.replace("CALL", CALL))
    done = processes.run(
        [sys.executable, str(unguarded)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"zg.errors.MainGuardError: worker processes were started while Python re-ran {unguarded}"
    ), done.stderr[-3000:]
    assert 'if __name__ == "__main__":' in last
    guarded = tmp_path / "guarded.py"
    guarded.write_text(
        UNGUARDED.replace("CALL", "if __name__ == '__main__':\n    " + CALL).replace(
            "\nprint(", "\n    print("
        )
    )
    done = processes.run(
        [sys.executable, str(guarded)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "history with 1 epochs" in done.stdout
