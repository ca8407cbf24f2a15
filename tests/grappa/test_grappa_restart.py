"""Failure and restart of Grappa training with real processes: a worker killed with SIGKILL in the
middle of an epoch (torchrun restarts everyone, who resume from the last checkpoint; the result
equals an uninterrupted run's), checkpoints that are corrupt or belong to another run (a clear
error on every rank, nothing trained), and a peer that never answers (the others fail with an
error naming the timeout instead of hanging).

Faults are injected by a worker plugin the tests install (tests/grappa_fault_plugin.py, loaded by
every worker through ``ZG_GRAPPA_WORKER_PLUGIN``, see :mod:`zg.grappa.worker`): ``ZG_GRAPPA_FAULT=
"kill|stall:EPOCH:ITERATION:RANK"``, once only with ``ZG_GRAPPA_FAULT_ONCE=<marker file>``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import processes
import pytest
import torch
from graphs import tiny
from grappa_fault_plugin import FAULT_ENV, FAULT_ONCE_ENV, PLUGIN

import zg
from zg import grappa
from zg.grappa.train import CheckpointError, read_checkpoint
from zg.grappa.worker import PLUGIN_ENV

ROOT = Path(__file__).resolve().parents[2]
TORCHRUN = Path(sys.executable).with_name("torchrun")
SMALL = dict(
    batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240, lr=0.02
)
# What must be identical between an interrupted-and-resumed run and an uninterrupted one.
SAME = (
    "epoch",
    "super_epoch",
    "loss",
    "val_acc",
    "test_acc",
    "bytes_sent",
    "bytes_by_kind",
    "rounds",
)


def same_parts(history):
    return [{k: e.get(k) for k in SAME} for e in history["epochs"]]


def torchrun(tmp_path, config, name, extra_env=None, max_restarts=0, timeout=400):
    """``torchrun --standalone --nproc-per-node=2 -m zg.grappa`` -> (exit code, output, history path)."""
    command = (
        [str(TORCHRUN)] if TORCHRUN.exists() else [sys.executable, "-m", "torch.distributed.run"]
    )
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(config))
    out = tmp_path / f"{name}-history.json"
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, FAULT_ONCE_ENV)}
    env.update(
        {
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1",
            PLUGIN_ENV: PLUGIN,
            **(extra_env or {}),
        }
    )
    done = processes.run(
        command
        + [
            "--standalone",
            "--nproc-per-node=2",
            f"--max-restarts={max_restarts}",
            "--monitor-interval=1",
            "-m",
            "zg.grappa",
            "--config",
            str(path),
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, done.stdout[-4000:] + done.stderr[-6000:], out


# ----------------------------------------------------------------------------- kill and restart


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_torchrun_restarts_a_killed_worker_and_the_run_resumes_exactly(tmp_path):
    """Cora, 2 workers, 6 epochs, a checkpoint every super-epoch (2 epochs). Rank 1 is killed with
    SIGKILL in the middle of epoch 3; torchrun (--max-restarts=1) restarts both workers, which
    resume at epoch 2 from the checkpoint written after epoch 1."""
    base = {
        "dataset": "cora",
        "trainer": "grappa",
        "estimator": "batch",
        "epochs": 6,
        "repartition_every": 2,
        "batch_size": 35,
        "hidden_dim": 16,
        "fanouts": [5, 5],
        "lr": 0.02,
        "timeout": 60.0,
        "seed": 0,
    }
    code, log, out = torchrun(
        tmp_path,
        {
            **base,
            "checkpoint_dir": str(tmp_path / "ckpt-ref"),
            "model_path": str(tmp_path / "ref.pt"),
        },
        "reference",
    )
    assert code == 0, log
    reference = json.loads(out.read_text())
    marker = tmp_path / "killed-once"
    code, log, out = torchrun(
        tmp_path,
        {
            **base,
            "checkpoint_dir": str(tmp_path / "ckpt"),
            "model_path": str(tmp_path / "resumed.pt"),
        },
        "killed",
        extra_env={FAULT_ENV: "kill:3:1:1", FAULT_ONCE_ENV: str(marker)},
        max_restarts=1,
    )
    assert code == 0, log
    assert marker.exists()  # the kill did happen
    resumed = json.loads(out.read_text())
    assert reference["resumed_at_epochs"] == [] and resumed["resumed_at_epochs"] == [2], log
    # Every epoch exactly once, in order, and the same numbers as without the failure.
    assert [e["epoch"] for e in resumed["epochs"]] == list(range(6))
    assert same_parts(resumed) == same_parts(reference)
    assert resumed["final"] == reference["final"]
    assert resumed["bytes_sent_per_worker"] == reference["bytes_sent_per_worker"]
    a, b = torch.load(tmp_path / "ref.pt"), torch.load(tmp_path / "resumed.pt")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    print(
        f"final test accuracy: uninterrupted {reference['final']['test_acc']:.4f}, "
        f"killed and resumed {resumed['final']['test_acc']:.4f}"
    )


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("trainer", ["psgd_pa", "feature_fetch"])
def test_a_killed_run_started_again_resumes_exactly(tmp_path, monkeypatch, trainer):
    """Under zg's own launcher a dead worker ends train() with an error; calling it again with
    the same checkpoint_dir resumes. psgd_pa keeps one model and Adam state per worker."""
    g = tiny()
    run = dict(workers=2, trainer=trainer, epochs=4, seed=1, checkpoint_every=1, **SMALL)
    reference = grappa.train(g, **run)
    monkeypatch.setenv(PLUGIN_ENV, PLUGIN)
    monkeypatch.setenv(FAULT_ENV, "kill:2:0:1")
    monkeypatch.setenv(FAULT_ONCE_ENV, str(tmp_path / "killed-once"))
    with pytest.raises(Exception, match="SIGKILL|signal 9|exit code"):
        grappa.train(g, checkpoint_dir=str(tmp_path), **run)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    assert state["next_epoch"] == 2 and [r["epoch"] for r in state["records"]] == [0, 1]
    assert len(state["model"]) == (2 if trainer == "psgd_pa" else 1)
    if trainer == "psgd_pa":  # parameters averaged at the epoch's end, Adam states not
        adam = [state["optimizer"][r]["state"] for r in range(2)]
        assert any(not torch.equal(adam[0][i]["exp_avg"], adam[1][i]["exp_avg"]) for i in adam[0])
    resumed = grappa.train(g, checkpoint_dir=str(tmp_path), **run)
    assert resumed["resumed_at_epochs"] == [2]
    assert same_parts(resumed) == same_parts(reference)
    assert resumed["final"] == reference["final"]


# ----------------------------------------------------------------------------- bad checkpoints


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished 2-worker run with its checkpoint: (graph, run options, checkpoint folder, history)."""
    folder = tmp_path_factory.mktemp("ckpt")
    g = tiny()
    run = dict(workers=2, estimator="batch", repartition_every=1, epochs=2, seed=0, **SMALL)
    history = grappa.train(g, checkpoint_dir=str(folder), **run)
    return g, run, folder, history


def config_of(run, folder, **changes):
    return grappa.TrainConfig(**{**run, "checkpoint_dir": str(folder), **changes}).validated()


@pytest.mark.slow
def test_read_checkpoint_checks_the_run(finished, tmp_path):
    g, run, folder, history = finished
    path = str(folder / "checkpoint.pt")
    state = read_checkpoint(path, config_of(run, folder), g, 2)
    assert state["next_epoch"] == 2 and state["records"] == history["epochs"]
    # What may change on a restart: paths, timeouts, threads, how often to checkpoint.
    assert (
        read_checkpoint(
            path,
            config_of(run, folder, timeout=5.0, checkpoint_every=3, history_path="h.json"),
            g,
            2,
        )
        is not None
    )
    assert read_checkpoint(str(tmp_path / "none.pt"), config_of(run, folder), g, 2) is None
    with pytest.raises(CheckpointError, match="different config.*lr: 0.02 there, 0.05 here"):
        read_checkpoint(path, config_of(run, folder, lr=0.05), g, 2)
    # More epochs extend the run from its checkpoint; fewer are another run.
    assert read_checkpoint(path, config_of(run, folder, epochs=3), g, 2)["next_epoch"] == 2
    with pytest.raises(CheckpointError, match="different config.*epochs: 2 there, 1 here"):
        read_checkpoint(path, config_of(run, folder, epochs=1), g, 2)
    with pytest.raises(CheckpointError, match="another graph"):
        other = zg.datasets.csbm(num_nodes=310, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
        read_checkpoint(path, config_of(run, folder), other, 2)
    with pytest.raises(CheckpointError, match="different config.*workers"):
        read_checkpoint(path, config_of(run, folder, workers=3), g, 3)
    raw = (folder / "checkpoint.pt").read_bytes()
    for broken in (raw[: len(raw) // 2], b"", b"not a checkpoint at all"):
        (tmp_path / "broken.pt").write_bytes(broken)
        with pytest.raises(CheckpointError, match="corrupt or truncated"):
            read_checkpoint(str(tmp_path / "broken.pt"), config_of(run, folder), g, 2)
    torch.save({"format": "something else"}, tmp_path / "alien.pt")
    with pytest.raises(CheckpointError, match="not a zg.grappa checkpoint"):
        read_checkpoint(str(tmp_path / "alien.pt"), config_of(run, folder), g, 2)


@pytest.mark.slow
def test_a_bad_checkpoint_stops_every_worker_before_training(finished, tmp_path):
    g, run, folder, history = finished
    # A finished run started again trains nothing and gives the same history.
    again = grappa.train(g, checkpoint_dir=str(folder), **run)
    assert again["resumed_at_epochs"] == [2] and same_parts(again) == same_parts(history)
    # A truncated checkpoint: every worker stops with the reason, the file is left as it was.
    broken = tmp_path / "broken"
    broken.mkdir()
    raw = (folder / "checkpoint.pt").read_bytes()[:1000]
    (broken / "checkpoint.pt").write_bytes(raw)
    # The workers' CheckpointError reaches the caller as itself (zg.grappa.launch.spawn).
    with pytest.raises(grappa.CheckpointError, match="corrupt or truncated") as info:
        grappa.train(g, checkpoint_dir=str(broken), **run)
    assert info.value.worker_rank in (0, 1) and "Traceback" in str(info.value.__cause__)
    assert (broken / "checkpoint.pt").read_bytes() == raw
    # Another run's checkpoint is refused, not resumed from.
    with pytest.raises(CheckpointError, match="different config.*seed"):
        grappa.train(g, checkpoint_dir=str(folder), **{**run, "seed": 5})
    with pytest.raises(CheckpointError, match="different config.*lr: 0.02 there, 0.05 here"):
        grappa.train(g, checkpoint_dir=str(folder), **{**run, "lr": 0.05})
    with pytest.raises(ValueError, match="checkpoint_dir"):
        grappa.train_many(
            g, [dict(run, checkpoint_dir=str(tmp_path)), dict(run, checkpoint_dir=str(tmp_path))]
        )


# ----------------------------------------------------------------------------- a silent peer


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_peer_that_never_answers_ends_the_run_with_a_timeout_error(monkeypatch):
    """Rank 1 stays in the group but stops in epoch 0, iteration 1 (it sleeps for ever): rank 0
    waits at most ``timeout`` seconds in its collective, then fails with an error naming the
    timeout, and the launcher takes the sleeper down (run_timeout is far away)."""
    monkeypatch.setenv(PLUGIN_ENV, PLUGIN)
    monkeypatch.setenv(FAULT_ENV, "stall:0:1:1")
    with pytest.raises(
        TimeoutError,
        match=r"worker 0: a collective waited longer than "
        r"timeout=4.0 s",
    ):
        grappa.train(
            tiny(), workers=2, epochs=2, seed=0, **{**SMALL, "timeout": 4.0, "run_timeout": 250}
        )


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_peer_that_never_answers_under_torchrun(tmp_path):
    config = {
        "dataset": {
            "name": "csbm",
            "num_nodes": 300,
            "avg_degree": 6,
            "num_classes": 3,
            "feat_dim": 8,
            "seed": 0,
        },
        "epochs": 2,
        "seed": 0,
        **{k: v for k, v in SMALL.items() if k != "run_timeout"},
        "timeout": 4.0,
    }
    code, log, out = torchrun(tmp_path, config, "stall", extra_env={FAULT_ENV: "stall:1:0:1"})
    assert code != 0
    assert "a collective waited longer than timeout=4.0 s" in log, log
    assert not out.exists()


def test_a_checkpoint_dir_in_use_is_refused_naming_the_holder(tmp_path):
    """Two runs sharing a checkpoint_dir at once used to overwrite each other's checkpoint: the
    folder is now held (an OS lock) for a run's lifetime, and a second run is refused before it
    starts a worker, naming the holder's pid; the lock goes with its holder."""
    import os
    import sys

    from zg.grappa.checkpoint import LOCK_FILE, CheckpointError, checkpoint_locks

    folder = tmp_path / "ckpt"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from zg.grappa.checkpoint import checkpoint_locks\n"
            f"with checkpoint_locks([{str(folder)!r}]):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(CheckpointError, match=f"in use by another run \\(pid {holder.pid}\\)"):
            grappa.train(tiny(), workers=2, epochs=1, checkpoint_dir=str(folder), **SMALL)
        assert not (folder / "checkpoint.pt").exists(), "the refused run wrote nothing"
    finally:
        processes.kill_group(holder)
        holder.wait()
    with checkpoint_locks([str(folder)]):  # released with its holder's process
        assert (folder / LOCK_FILE).read_text() == str(os.getpid())
