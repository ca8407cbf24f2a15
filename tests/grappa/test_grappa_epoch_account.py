"""zg.grappa.account: every Grappa epoch's account (seconds per part, per worker) in the history:
its keys, parts that are never negative and sum to the epoch's seconds, strict JSON, each part
where it belongs (evaluation on rank 0 when due, repartitioning when a super-epoch starts,
checkpointing when one is written, exchange where gradients or parameters cross), and clocks
that add no host sync to a step. Structure only: no wall-clock target is tested."""

import json
import math

import pytest
import torch
from graphs import tiny

from zg import grappa
from zg.grappa.account import (
    PARTS,
    STEP_PARTS,
    AccountClock,
    AccountTimes,
    account_record,
    account_summary,
)

pytestmark = pytest.mark.timeout(300)

SMALL = dict(
    batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240, lr=0.02
)


def strict_json(text: str):
    def refuse(name):
        raise ValueError(f"non-strict JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def check_accounts(history: dict) -> None:
    workers = history["workers"]
    for record in history["epochs"]:
        account = record["account"]
        assert set(account) == {"seconds", "parts"}
        assert tuple(account["parts"]) == PARTS
        assert len(account["seconds"]) == workers
        for part, values in account["parts"].items():
            assert len(values) == workers and all(v >= 0 for v in values), part
        for w in range(workers):
            total = sum(account["parts"][p][w] for p in PARTS)
            assert math.isclose(total, account["seconds"][w], rel_tol=1e-9, abs_tol=1e-12)
        assert record["seconds"] == max(account["seconds"]) > 0
        assert any(account["parts"][p][w] > 0 for p in STEP_PARTS for w in range(workers))


@pytest.mark.slow
def test_every_epoch_has_an_account_in_a_strict_json_history(tmp_path):
    g = tiny()
    path = tmp_path / "history.json"
    hist = grappa.train(
        g,
        workers=2,
        estimator="batch",
        repartition_every=2,
        epochs=4,
        eval_every=2,
        checkpoint_dir=str(tmp_path / "ckpt"),
        checkpoint_every=3,
        seed=0,
        history_path=str(path),
        **SMALL,
    )
    saved = strict_json(path.read_text())
    check_accounts(saved)
    epochs = saved["epochs"]
    for e in epochs:
        parts = e["account"]["parts"]
        evaluated = e["val_acc"] is not None
        assert (parts["evaluation"][0] > 0) == evaluated and parts["evaluation"][1] == 0.0
        if evaluated:
            assert parts["evaluation"][0] == e["eval_seconds"]
        regrouped = e["epoch"] % 2 == 0  # super-epochs start at epochs 0 and 2
        assert all((v > 0) == regrouped for v in parts["repartitioning"])
        # Written after epochs 2 (every 3) and 3 (the last), each in the epoch after it
        checkpointed = e["epoch"] == 3
        assert all((v > 0) == checkpointed for v in parts["checkpointing"])
        assert all(v > 0 for v in parts["exchange"])  # the hook's all-reduce, every step
    assert hist["seconds_per_epoch"] == sorted(e["seconds"] for e in epochs)[len(epochs) // 2]
    summary = account_summary(saved)
    assert set(summary) == {
        "seconds",
        "parts",
        "step_seconds",
        "step_seconds_by_worker",
        "evaluation_seconds",
        "epochs",
    }
    by_worker = summary["step_seconds_by_worker"]
    assert len(by_worker) == saved["workers"] and all(v > 0 for v in by_worker)
    assert summary["step_seconds"] == pytest.approx(sum(by_worker) / len(by_worker))
    assert summary["epochs"] == 3 and tuple(summary["parts"]) == PARTS
    assert summary["step_seconds"] > 0 and summary["evaluation_seconds"] > 0


@pytest.mark.slow
def test_the_other_trainers_keep_the_same_account():
    g = tiny()
    runs = grappa.train_many(
        g,
        [
            dict(trainer="psgd_pa", workers=2, epochs=2, average_every=1, seed=0, **SMALL),
            dict(workers=2, epochs=2, batching="full", seed=0, **SMALL),
            dict(workers=2, epochs=2, step_shapes="envelope", seed=0, **SMALL),
        ],
    )
    for hist in runs:
        check_accounts(hist)
    psgd, full, envelope = runs
    # psgd_pa: no DDP hook, its parameter averaging is its exchange
    assert all(v > 0 for e in psgd["epochs"] for v in e["account"]["parts"]["exchange"])
    # batching="full": one step on the whole local graph, no sampling stage
    for e in full["epochs"]:
        parts = e["account"]["parts"]
        assert all(v == 0 for v in parts["sampling"]) and all(v > 0 for v in parts["forward"])
    for e in envelope["epochs"]:
        assert all(v > 0 for v in e["account"]["parts"]["sampling"])


def test_the_clock_splits_backward_where_the_hook_is_handed_the_gradient():
    seconds = {}
    clock = AccountClock(torch.device("cpu"), into=seconds)
    clock("forward")
    clock.hand_off()
    clock("backward")
    assert seconds["backward"] >= 0 and seconds["exchange"] >= 0
    clock.start()
    clock("backward")  # no hand-off this time (no DDP): all of it is backward
    assert set(seconds) >= {"forward", "backward", "exchange"}


def test_a_captured_steps_exchange_hands_off_to_no_clock():
    """With the clock not lent (a captured step), the exchange's hand-off reaches no clock: on
    CUDA it would record a timing event inside a capture (a re-capture happens mid-epoch)."""
    times = AccountTimes(torch.device("cpu"))
    clock = times.begin()
    times.lend_clock = False
    times.hand_off()
    assert clock._handed is None
    times.lend_clock = True
    times.hand_off()
    assert clock._handed is not None


def test_the_record_never_has_negative_other_and_always_sums():
    rows = [[0.1] * (len(PARTS) - 1), [0.01] * (len(PARTS) - 1)]
    account = account_record([0.5, 0.5], rows)
    assert account["seconds"] == [pytest.approx(0.9), 0.5]  # worker 0: parts beyond the clock
    assert account["parts"]["other"][0] == 0.0
    assert math.isclose(account["parts"]["other"][1], 0.5 - 0.09)
    for w in range(2):
        total = sum(account["parts"][p][w] for p in PARTS)
        assert math.isclose(total, account["seconds"][w])
    with pytest.raises(ValueError, match="workers"):
        account_record([0.5], rows)


def test_account_summary_refuses_what_is_not_a_history():
    with pytest.raises(TypeError, match="history"):
        account_summary([])
    with pytest.raises(ValueError, match="account"):
        account_summary({"epochs": [{"epoch": 0}]})


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda",
            marks=[
                pytest.mark.cuda,
                pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
            ],
        ),
    ],
)
def test_the_account_adds_no_host_sync_to_the_envelope_step(device):
    """A worker's Engine with the account's observer: the envelope step still makes no host
    sync (the clock laps with perf_counter on the CPU and CUDA events on a GPU)."""
    from zg.engine import Engine, StepHooks
    from zg.grappa.config import TrainConfig
    from zg.grappa.local import LocalData
    from zg.models import build
    from zg.observe import AuditSyncs

    g = tiny()
    part = grappa.partition(g, 2, method="random", seed=0)
    cfg = TrainConfig(
        workers=2, step_shapes="envelope", fanouts=[5, 5], num_layers=2, batch_size=48, seed=0
    ).validated()
    device = torch.device(device)
    local = LocalData(cfg, g, part, 0, 2, device, cfg.estimator_object)
    local.start_super_epoch(0)
    torch.manual_seed(0)
    model = build("sage", g.feat_dim, 16, g.num_classes, 2).to(device)
    engine = Engine(
        local.graph,
        model,
        cfg.fanouts,
        local.rows,
        envelope=local.envelope,
        mode="static",
        device=device,
        seed=local.seed,
        hooks=StepHooks(nodes=local.train_nodes, batches=local.batches),
        kernel="torch",
    )
    times = AccountTimes(device)
    engine.observers = [AuditSyncs(2), times]
    engine.train_epoch()  # warm-up
    stats = engine.train_epoch()
    assert stats.host_syncs == 0
    assert {"forward", "backward", "step"} <= set(times.seconds)
    assert all(v >= 0 for v in times.seconds.values())
    assert set(times.seconds) <= {
        "sample",
        "compact",
        "gather",
        "forward",
        "loss",
        "backward",
        "step",
    }


def test_the_account_figure_stacks_one_bar_per_setting():
    viz = pytest.importorskip("zg.viz")
    rows = [
        {"label": "reference", "parts": {p: 0.01 * (i + 1) for i, p in enumerate(PARTS)}},
        {"label": "single", "parts": {p: 0.001 for p in PARTS}},
    ]
    fig = viz.epoch_account(rows)
    assert [t.name for t in fig.data] == list(PARTS) and fig.layout.barmode == "stack"
    assert list(fig.data[0].x) == ["reference", "single"]
    assert fig.data[0].y[0] == pytest.approx(10.0)  # milliseconds
    with pytest.raises(ValueError, match="parts"):
        viz.epoch_account([rows[0], {"label": "x", "parts": {"sampling": 1.0}}])


# --- The CUDA path: laps are CUDA events, read once at the end of the epoch ----------------------
# These run where a GPU is (`pytest -m cuda`, bench/gpu_check.sh); skipped on a CPU-only machine.

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.cuda
@needs_cuda
def test_on_cuda_the_clock_laps_with_events_and_splits_backward_at_the_hand_off():
    seconds = {}
    device = torch.device("cuda", torch.cuda.current_device())
    clock = AccountClock(device, into=seconds)
    assert clock.cuda
    x = torch.randn(512, 512, device=device)
    y = x @ x
    clock("forward")
    y = y @ x
    clock.hand_off()
    y = y @ x
    clock("backward")  # split: "backward" up to the hand-off, "exchange" after it
    assert seconds == {}  # nothing is read before finish(): no host sync per lap
    clock.finish()
    assert set(seconds) == {"forward", "backward", "exchange"}
    assert all(v > 0 for v in seconds.values())
    del y


@pytest.mark.cuda
@needs_cuda
@pytest.mark.slow
def test_on_cuda_a_grappa_run_over_nccl_keeps_its_account(tmp_path):
    """One worker over nccl on the GPU (the launch path a GPU machine takes): every epoch has an
    account that sums, with an exchange (the hook's all-reduce) and evaluation where due."""
    g = tiny()
    hist = grappa.train(  # random chunks: a GPU machine need not have pymetis
        g,
        workers=1,
        backend="nccl",
        method="random",
        epochs=3,
        eval_every=2,
        seed=0,
        kernel="torch",
        **SMALL,
    )
    check_accounts(hist)
    for e in hist["epochs"]:
        parts = e["account"]["parts"]
        assert parts["forward"][0] > 0 and parts["backward"][0] > 0
        assert (parts["evaluation"][0] > 0) == (e["val_acc"] is not None)
