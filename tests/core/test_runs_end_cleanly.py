"""Findings of a hostile-input probe (issue 28) that live in the run machinery: checkpoints that
must know their graph, interrupts and SIGTERM that must stop every worker, command-line runs
that must end in one line naming the flag, a closed stdout pipe, output paths checked by
trying, and worker errors that must reach the caller as themselves.

Anything that involves a signal, a pipe or a possible hang runs in its own process under a
timeout, so a regression fails here instead of hanging the suite.
"""

import ast
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import processes
import pytest
import torch

import zg
from zg import grappa, models, parallel
from zg._io import graph_fingerprint
from zg.cli import main as zg_main
from zg.grappa.checkpoint import CHECKPOINT_FILE, CheckpointError

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(
    batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240, lr=0.02
)


def env_for(tmp_path, **extra):
    """The environment of a child python: this checkout first, a private TMPDIR, one thread.
    torch's compiler cache goes beside the TMPDIR, not in it: recent torch makes that folder
    when an optimizer is built (unless an earlier compile in this process named it), and the
    checks below want to see only what the kit leaves behind."""
    tmp = tmp_path / "tmpdir"
    tmp.mkdir(exist_ok=True)
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        TMPDIR=str(tmp),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torchinductor"),
        OMP_NUM_THREADS="1",
        DGLBACKEND="pytorch",
        **extra,
    )
    return env, tmp


def probe_graph(snr=5.0):
    return zg.datasets.csbm(
        num_nodes=600, num_classes=3, feat_dim=8, avg_degree=6, feature_snr=snr, seed=0
    )


# ----------------------------------------------------------------------------- 1: a checkpoint knows its graph


@pytest.mark.slow
def test_a_reused_checkpoint_dir_refuses_another_graph_of_the_same_sizes(tmp_path):
    """The probe's case: the same call on the same sizes but other features used to return the
    first run's history without training."""
    folder = tmp_path / "ckpt"
    first = grappa.train(
        probe_graph(5.0), workers=2, epochs=2, seed=0, checkpoint_dir=str(folder), **SMALL
    )
    assert (folder / CHECKPOINT_FILE).exists() and len(first["epochs"]) == 2
    with pytest.raises(
        CheckpointError, match=r"another graph \(features: [0-9a-f]+ there, [0-9a-f]+ here\)"
    ):
        grappa.train(
            probe_graph(0.0), workers=2, epochs=2, seed=0, checkpoint_dir=str(folder), **SMALL
        )
    # The same graph again resumes (here: is already finished) and returns the same history.
    again = grappa.train(
        probe_graph(5.0), workers=2, epochs=2, seed=0, checkpoint_dir=str(folder), **SMALL
    )
    assert [e["loss"] for e in again["epochs"]] == [e["loss"] for e in first["epochs"]]


def _variants(g):
    """(field that must differ, a graph equal to g in every count but one kind of content)."""
    n = g.num_nodes
    indices = g.indices.clone()
    # Move one edge's source (within range, same count): the structure alone changes.
    indices[0] = (indices[0] + 1) % n
    moved = zg.Graph(
        g.indptr,
        indices,
        x=g.x,
        y=g.y,
        train_idx=g.train_idx,
        val_idx=g.val_idx,
        test_idx=g.test_idx,
        num_classes=g.num_classes,
    )
    x = g.x.clone()
    x[3, 2] += 1e-3
    feats = zg.Graph(
        g.indptr,
        g.indices,
        x=x,
        y=g.y,
        train_idx=g.train_idx,
        val_idx=g.val_idx,
        test_idx=g.test_idx,
        num_classes=g.num_classes,
    )
    y = g.y.clone()
    y[int(g.train_idx[0])] = (y[int(g.train_idx[0])] + 1) % g.num_classes
    labels = zg.Graph(
        g.indptr,
        g.indices,
        x=g.x,
        y=y,
        train_idx=g.train_idx,
        val_idx=g.val_idx,
        test_idx=g.test_idx,
        num_classes=g.num_classes,
    )
    train = g.train_idx.clone()
    outside = int(g.test_idx[0])
    train[0] = outside
    test = g.test_idx.clone()
    test[0] = int(g.train_idx[0])
    splits = zg.Graph(
        g.indptr,
        g.indices,
        x=g.x,
        y=g.y,
        train_idx=train,
        val_idx=g.val_idx,
        test_idx=test,
        num_classes=g.num_classes,
    )
    return [("structure", moved), ("features", feats), ("labels", labels), ("splits", splits)]


def test_the_fingerprint_tells_each_kind_of_content_apart():
    g = probe_graph()
    mine = graph_fingerprint(g)
    assert graph_fingerprint(probe_graph()) == mine  # equal content, equal print
    for field, other in _variants(g):
        theirs = graph_fingerprint(other)
        assert {k for k in mine if mine[k] != theirs[k]} == {field}, field


def test_an_engine_checkpoint_refuses_another_graph_naming_what_differs(tmp_path):
    g = probe_graph()

    def engine(graph):
        torch.manual_seed(0)
        return zg.Engine(
            graph, models.build("sage", graph.feat_dim, 16, graph.num_classes, 2), [5, 5], 64
        )

    eng = engine(g)
    eng.train_epoch()
    path = eng.save(tmp_path / "e.pt")
    for field, other in _variants(g):
        target = engine(other)
        before = {k: v.clone() for k, v in target.model.state_dict().items()}
        with pytest.raises(ValueError, match=rf"another graph \({field}: "):
            target.load(path)
        assert all(torch.equal(before[k], v) for k, v in target.model.state_dict().items())
        assert target.epoch == 0
    assert engine(probe_graph()).load(path).epoch == 1  # the same graph resumes


# ----------------------------------------------------------------------------- 3: see tests/core/test_parallel.py
# (the history's loss against the single-process Engine's, test_two_processes_train_exactly_as_one)


# ----------------------------------------------------------------------------- 4: interrupts and SIGTERM


def _marked(marker: str):
    """Pids of live processes whose environment carries ``marker`` (the run's children too)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if marker.encode() in f.read():
                    with open(f"/proc/{entry}/stat") as s:
                        if s.read().split(") ")[-1].split()[0] != "Z":  # not a zombie
                            found.append(int(entry))
        except OSError:
            continue
    return found


RUN_FOREVER = """
import sys, zg
from zg import grappa
if __name__ == "__main__":
    g = zg.datasets.csbm(num_nodes=600, num_classes=3, feat_dim=8, avg_degree=6, seed=0)
    grappa.train(g, workers=2, epochs=100000, seed=0, checkpoint_dir=sys.argv[1],
                 checkpoint_every=1, history_path=sys.argv[2], batch_size=64, hidden_dim=16,
                 num_layers=2, fanouts=[5, 5], timeout=60, lr=0.02, progress=True)
"""


def _interruptible():
    """In the child, before exec: SIGINT back to its default. A process started in the
    background by a non-interactive shell (a CI runner, nohup) inherits SIGINT ignored, and
    Python then leaves it ignored instead of raising KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _finish(proc, marker):
    """The child's output once it ends; if it does not end within 60 s, it and every process
    carrying its marker are killed (a failing test must not leave a run training) and the
    test fails."""
    try:
        return proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        processes.kill_group(proc)
        for pid in [proc.pid] + _marked(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        proc.communicate()
        pytest.fail("the interrupted run did not stop within 60 s")


def _start_and_wait_for_training(command, tmp_path, marker, checkpoint):
    env, tmp = env_for(tmp_path, ZG_PROBE_MARK=marker)
    proc = subprocess.Popen(
        command,
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_interruptible,
        start_new_session=True,  # its own group: a deadline can kill the run and its workers
    )
    deadline = time.monotonic() + 180
    while not checkpoint.exists():  # an epoch is done: the workers train
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never wrote its first checkpoint"
        time.sleep(0.2)
    assert len(_marked(marker)) >= 3  # the caller and its two workers
    return proc, tmp


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, -signal.SIGINT), (signal.SIGTERM, 143)])
def test_a_signal_to_the_caller_alone_stops_every_worker(tmp_path, sig, status):
    """What JupyterLab's "interrupt kernel" and a job scheduler's SIGTERM do: the signal reaches
    the calling process only. Every worker must be gone within seconds, no temporary folder
    left (the progress bar's included: the run shows one, as a person's does), and the history
    (which says the run finished) never written."""
    marker = uuid.uuid4().hex
    script = tmp_path / "run.py"
    script.write_text(RUN_FOREVER)
    history = tmp_path / "history.json"
    proc, tmp = _start_and_wait_for_training(
        [sys.executable, str(script), str(tmp_path / "ckpt"), str(history)],
        tmp_path,
        marker,
        tmp_path / "ckpt" / CHECKPOINT_FILE,
    )
    sent = time.monotonic()
    os.kill(proc.pid, sig)
    out, err = _finish(proc, marker)
    assert time.monotonic() - sent < 20, "the caller took too long to stop"
    # SIGINT: an uncaught KeyboardInterrupt (Python then ends by SIGINT); SIGTERM: SystemExit(143).
    assert proc.returncode == status, err[-2000:]
    if sig == signal.SIGINT:
        assert "KeyboardInterrupt" in err
    deadline = time.monotonic() + 15
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _marked(marker) == [], "workers kept running after the caller stopped"
    assert not history.exists()
    # No zg-spawn-errors-* or zg-grappa-* folder, no torch.multiprocessing error pickle.
    assert os.listdir(tmp) == []


@pytest.mark.slow
def test_zg_grappa_interrupted_exits_130_and_writes_no_json(tmp_path):
    marker = uuid.uuid4().hex
    out = tmp_path / "h.json"
    proc, tmp = _start_and_wait_for_training(
        [
            sys.executable,
            "-m",
            "zg",
            "grappa",
            "--dataset",
            "cora",
            "--epochs",
            "100000",
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
            "--checkpoint-every",
            "1",
            "--json",
            str(out),
            "--no-progress",
        ],
        tmp_path,
        marker,
        tmp_path / "ckpt" / CHECKPOINT_FILE,
    )
    os.kill(proc.pid, signal.SIGINT)
    _, err = _finish(proc, marker)
    assert proc.returncode == 130 and "zg grappa: interrupted" in err
    assert "Traceback" not in err
    deadline = time.monotonic() + 15
    while _marked(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _marked(marker) == []
    assert not out.exists() and os.listdir(tmp) == []


# ----------------------------------------------------------------------------- 8: zg grappa, one line


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["--workers", "100000"], "--workers"),
        (["--batch-size", "1"], "--batch-size"),
        (["--num-chunks", "3"], "--num-chunks"),
        (["--num-chunks", "2000"], "--num-chunks"),
        (["--seed", "99999999999999999999"], "--seed"),
    ],
)
def test_zg_grappa_refuses_an_impossible_plan_with_exit_2_naming_the_flag(capsys, argv, flag):
    with pytest.raises(SystemExit) as stop:
        zg_main(["grappa", "--dataset", "cora", "--epochs", "1"] + argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2
    assert err.strip().splitlines()[-1].startswith(f"zg grappa: error: {flag}: "), err
    assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv, flag",
    [(["--run-timeout", "0.5"], "--run-timeout"), (["--timeout", "0.001"], "--timeout")],
)
def test_zg_grappa_timeouts_end_in_one_line_naming_the_flag(tmp_path, argv, flag):
    env, _ = env_for(tmp_path)
    done = processes.run(
        [
            sys.executable,
            "-m",
            "zg",
            "grappa",
            "--dataset",
            "cora",
            "--epochs",
            "50",
            "--no-progress",
        ]
        + argv,
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(f"zg grappa: error: {flag}: "), (
        done.stderr
    )


def test_a_timeout_too_short_to_start_names_timeout_from_python():
    g = probe_graph()
    with pytest.raises(TimeoutError, match=r"^timeout=0.001 s: "):
        grappa.train(g, workers=2, epochs=1, **dict(SMALL, timeout=0.001))


# ----------------------------------------------------------------------------- 10: a reader that leaves


@pytest.mark.slow
def test_zg_train_finishes_and_writes_json_when_stdout_is_closed_early(tmp_path):
    """``zg train --json H | head -n 1``: the run must finish and write H."""
    env, _ = env_for(tmp_path)
    out = tmp_path / "h.json"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "zg",
            "train",
            "--dataset",
            "cora",
            "--epochs",
            "4",
            "--no-progress",
            "--json",
            str(out),
        ],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        first = proc.stdout.readline()
        proc.stdout.close()  # what head does after one line
        _, err = proc.communicate(timeout=200)
        err = err.decode()
    finally:
        processes.kill_group(proc)
    assert first
    assert proc.returncode == 0, err[-2000:]
    assert "BrokenPipeError" not in err and "Traceback" not in err
    assert len(json.loads(out.read_text())["epochs"]) == 4


# ----------------------------------------------------------------------------- 11: output paths, tried


def _unwritable_folder():
    """A folder nobody can create files in, root included (os.access says yes to root)."""
    folder = Path("/sys")
    if not folder.is_dir():
        pytest.skip("no /sys here")
    try:
        (folder / f"zg-probe-{uuid.uuid4().hex}").touch()
    except OSError:
        return folder
    pytest.skip("/sys is writable here")


def test_output_paths_are_tried_not_asked_of_os_access(tmp_path, capsys):
    ro = _unwritable_folder()
    from zg._checks import output_file_arg, output_folder_arg

    with pytest.raises(ValueError, match="out .* is not writable"):
        output_file_arg(ro / "h.json", "out")
    with pytest.raises(ValueError, match="checkpoint_dir .* is not writable"):
        output_folder_arg(ro / "ckpt", "checkpoint_dir")
    for argv in (
        ["train", "--dataset", "cora", "--epochs", "1", "--json", str(ro / "h.json")],
        ["grappa", "--dataset", "cora", "--epochs", "1", "--json", str(ro / "h.json")],
        ["grappa", "--dataset", "cora", "--epochs", "1", "--checkpoint-dir", str(ro / "c")],
    ):
        with pytest.raises(SystemExit) as stop:
            zg_main(argv)
        assert stop.value.code == 2, argv
        last = capsys.readouterr().err.strip().splitlines()[-1]
        assert ("cannot write" in last or "is not writable" in last) and str(ro) in last, last
    assert list(tmp_path.iterdir()) == []


def test_parallel_train_checks_model_path_before_any_process_starts(tmp_path, monkeypatch):
    import zg.grappa.launch as launch

    def never(*args, **kwargs):
        raise AssertionError("a process was started")

    monkeypatch.setattr(launch, "spawn", never)
    g = probe_graph()
    cases = [
        (tmp_path / "missing" / "m.pt", "does not exist"),
        (tmp_path, "is a directory"),
        (_unwritable_folder() / "m.pt", "is not writable"),
    ]
    for path, problem in cases:
        with pytest.raises(ValueError, match=f"model_path .*{problem}"):
            parallel.train(
                g, workers=2, epochs=1, batch_size=64, fanouts=[4, 4], model_path=str(path)
            )


# ----------------------------------------------------------------------------- 12: a worker's own exception


@pytest.mark.slow
def test_a_workers_floating_point_error_reaches_the_caller_as_itself(tmp_path):
    """Resuming from a checkpoint whose parameters are NaN: the worker's FloatingPointError
    (the Engine's non-finite loss) must arrive as FloatingPointError, not ProcessRaisedException."""
    g = probe_graph()
    folder = tmp_path / "ckpt"
    grappa.train(
        g, workers=2, epochs=2, seed=0, checkpoint_dir=str(folder), checkpoint_every=1, **SMALL
    )
    path = folder / CHECKPOINT_FILE
    state = torch.load(path, weights_only=True)
    state["next_epoch"], state["records"] = 1, state["records"][:1]  # resume at epoch 1
    for replica in state["model"]:
        for value in replica.values():
            if value.is_floating_point():
                value.fill_(float("nan"))
    torch.save(state, path)
    with pytest.raises(FloatingPointError, match="loss") as caught:
        grappa.train(g, workers=2, epochs=2, seed=0, checkpoint_dir=str(folder), **SMALL)
    assert caught.value.worker_rank in (0, 1)


# ----------------------------------------------------------------------------- no test can hang


def _process_calls(tree):
    """(line, function name, keyword names) of every subprocess call in a test module."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "subprocess"
        ):
            yield node.lineno, node.func.attr, {k.arg for k in node.keywords}


def test_every_process_a_test_starts_dies_with_its_deadline():
    """A test starts processes through ``processes.run`` (a deadline that kills the process
    group), or with ``subprocess.Popen(..., start_new_session=True)`` and a kill of that group;
    never ``subprocess.run`` / ``call`` / ``check_output``, whose timeout kills only the child
    and leaves its workers (a hang there would hold the suite)."""
    tests = Path(__file__).resolve().parents[1]
    offenders = []
    for path in sorted(tests.rglob("*.py")):
        if path.name == "processes.py":
            continue
        for line, name, keywords in _process_calls(ast.parse(path.read_text())):
            where = f"{path.relative_to(tests)}:{line}"
            if name in ("run", "call", "check_call", "check_output"):
                offenders.append(f"{where} subprocess.{name}")
            elif name == "Popen" and "start_new_session" not in keywords:
                offenders.append(f"{where} subprocess.Popen without start_new_session")
    assert not offenders, offenders
