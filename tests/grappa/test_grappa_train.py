"""zg.grappa.train with real worker processes (gloo on loopback, 1-4 processes, bounded time):
the history JSON, reproducibility, what every trainer sends, bad configurations, torchrun."""

import json
import math
import os
import sys
from pathlib import Path

import processes
import pytest
from graphs import tiny

import zg
from zg import grappa
from zg.grappa.comm import wire_bytes

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
SMALL = dict(
    batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240, lr=0.02
)


def num_params(g, hidden=16, layers=2):
    return sum(
        p.numel()
        for p in zg.models.build("sage", g.feat_dim, hidden, g.num_classes, layers).parameters()
    )


@pytest.mark.slow
def test_history_json_contents(tmp_path):
    g = tiny()
    path = tmp_path / "history.json"
    hist = grappa.train(
        g,
        workers=2,
        estimator="batch",
        repartition_every=1,
        epochs=3,
        seed=0,
        history_path=str(path),
        **SMALL,
    )
    saved = json.loads(path.read_text())
    assert hist["path"] == str(path) and {k: v for k, v in hist.items() if k != "path"} == saved
    assert saved["format"] == "zg.grappa.history" and saved["workers"] == 2
    assert saved["backend"] == "gloo"
    assert saved["config"]["estimator"] == "batch" and saved["config"]["trainer"] == "grappa"
    iterations = math.ceil(g.train_idx.numel() / 64)
    grad_bytes = iterations * wire_bytes("all_reduce", 4 * num_params(g), 2)
    epochs = saved["epochs"]
    assert [e["epoch"] for e in epochs] == [0, 1, 2]
    assert [e["super_epoch"] for e in epochs] == [0, 1, 2]  # repartitioned each epoch
    for e in epochs:
        assert e["iterations"] == iterations
        assert math.isfinite(e["loss"]) and e["loss"] > 0
        assert 0 <= e["val_acc"] <= 1 and 0 <= e["test_acc"] <= 1
        assert e["seconds"] > 0 and len(e["worker_seconds"]) == 2 and e["eval_seconds"] >= 0
        assert e["bytes_by_kind"]["gradients"] == [grad_bytes, grad_bytes]
        assert e["bytes_by_kind"]["scalars"] == [iterations * 24] * 2  # 3 float64 to 1 peer
        assert e["bytes_by_kind"]["features"] == [0, 0] and e["bytes_by_kind"]["parameters"] == [
            0,
            0,
        ]
        assert e["bytes_sent"] == [grad_bytes + iterations * 24] * 2
        assert e["rounds"] == [iterations * (2 + 1)] * 2
        assert all(0 <= c <= 1 for c in e["mean_coverage"])
    assert epochs[-1]["loss"] < epochs[0]["loss"]
    assert saved["bytes_sent_per_worker"] == [3 * (grad_bytes + iterations * 24)] * 2
    assert saved["bytes_per_epoch_per_worker"] == grad_bytes + iterations * 24
    stats = saved["partition"]["stats"]
    assert [s["super_epoch"] for s in stats] == [0, 1, 2]
    assert all(sum(p["nodes"] for p in s["parts"]) == g.num_nodes for s in stats)
    final = saved["final"]
    assert final["val_acc"] == epochs[-1]["val_acc"]
    assert final["best_val_acc"] == max(e["val_acc"] for e in epochs)


@pytest.mark.slow
def test_same_seed_same_run():
    g = tiny()
    runs = [
        grappa.train(
            g, workers=2, estimator="shrink", repartition_every=1, epochs=2, seed=s, **SMALL
        )
        for s in (3, 3, 4)
    ]
    keys = ("loss", "val_acc", "test_acc", "bytes_sent", "shrink_lambda")
    same = [[e[k] for k in keys] for e in runs[0]["epochs"]]
    assert same == [[e[k] for k in keys] for e in runs[1]["epochs"]]
    assert same != [[e[k] for k in keys] for e in runs[2]["epochs"]]


@pytest.mark.slow
def test_train_many_reuses_processes_and_gives_the_same_runs():
    g = tiny()
    runs = [
        dict(workers=2, estimator="batch", repartition_every=1, epochs=2, seed=0, **SMALL),
        dict(workers=2, trainer="psgd_pa", epochs=2, seed=1, **SMALL),
    ]
    many = grappa.train_many(g, runs)
    for run, hist in zip(runs, many):
        alone = grappa.train(g, **run)
        assert [e["loss"] for e in hist["epochs"]] == [e["loss"] for e in alone["epochs"]]
        assert hist["bytes_sent_per_worker"] == alone["bytes_sent_per_worker"]
        assert hist["config"]["trainer"] == run.get("trainer", "grappa")
    with pytest.raises(ValueError, match="workers"):
        grappa.train_many(g, [dict(workers=2, epochs=1), dict(workers=3, epochs=1)])
    with pytest.raises(TypeError, match="runs"):
        grappa.train_many(g, [])


@pytest.mark.slow
@pytest.mark.parametrize(
    "trainer,workers", [("isolated", 2), ("psgd_pa", 2), ("feature_fetch", 3), ("single", 1)]
)
def test_every_trainer_counts_what_it_sends(trainer, workers):
    g = tiny()
    # A baseline corrects nothing and never repartitions: asking it to is refused, naming both.
    for setting in (dict(estimator="node"), dict(repartition_every=1)):
        ((name, value),) = setting.items()
        with pytest.raises(ValueError, match=rf"trainer='{trainer}'.*got {name}={value!r}"):
            grappa.train(g, workers=workers, epochs=2, seed=0, trainer=trainer, **setting, **SMALL)
    hist = grappa.train(g, workers=workers, epochs=2, seed=0, trainer=trainer, **SMALL)
    iterations = math.ceil(g.train_idx.numel() / 64)
    grads = wire_bytes("all_reduce", 4 * num_params(g), workers)
    assert hist["workers"] == workers and hist["config"]["trainer"] == trainer
    assert hist["config"]["estimator"] == "mean" and hist["config"]["repartition_every"] is None
    for e in hist["epochs"]:
        kinds = e["bytes_by_kind"]
        assert e["super_epoch"] == 0  # baselines never repartition
        assert kinds["scalars"] == [0] * workers  # "mean": no scalars
        if trainer == "psgd_pa":
            assert kinds["gradients"] == [0] * workers  # one average per epoch
            assert kinds["parameters"] == [grads] * workers
        else:
            assert kinds["gradients"] == [iterations * grads] * workers
            assert kinds["parameters"] == [0] * workers
        if trainer == "feature_fetch":
            assert all(b > 0 for b in kinds["features"])
            assert all(c == 1.0 for c in e["mean_coverage"])
        else:
            assert kinds["features"] == [0] * workers
    if trainer == "single":
        assert hist["bytes_sent_per_worker"] == [0]
        assert all(c == 1.0 for c in hist["epochs"][0]["mean_coverage"])
    assert 0 <= hist["final"]["test_acc"] <= 1


@pytest.mark.slow
def test_full_graph_mode_with_four_workers_and_a_halo():
    g = tiny()
    hist = grappa.train(
        g,
        workers=4,
        estimator="node",
        repartition_every=2,
        epochs=4,
        seed=1,
        batching="full",
        halo=True,
        method="random",
        **SMALL,
    )
    assert [e["iterations"] for e in hist["epochs"]] == [1] * 4
    assert [e["super_epoch"] for e in hist["epochs"]] == [0, 0, 1, 1]
    grads = wire_bytes("all_reduce", 4 * num_params(g), 4)
    assert all(e["bytes_by_kind"]["gradients"] == [grads] * 4 for e in hist["epochs"])
    assert all(p["replication"] >= 1 for p in hist["partition"]["stats"][0]["parts"])
    assert hist["partition"]["halo"] is True
    assert hist["epochs"][-1]["loss"] < hist["epochs"][0]["loss"]


@pytest.mark.slow
def test_paper_ablations_and_the_reference_estimator_train():
    """Fixed partitions (no repartitioning) with every estimator, and "unweighted" = "mean",
    in one process group; "reference" and "mean" send no scalars. The ablations are settings
    (repartition_every=None, estimator="mean"); the old ablation= keyword maps to them with a
    DeprecationWarning naming the replacement."""
    g = tiny()
    runs = [
        dict(workers=2, estimator=est, ablation="fixed_partitions", epochs=2, seed=0, **SMALL)
        for est in grappa.ESTIMATORS
    ]
    runs += [
        dict(workers=2, ablation="unweighted", repartition_every=1, epochs=2, seed=0, **SMALL),
        dict(workers=2, estimator="mean", repartition_every=1, epochs=2, seed=0, **SMALL),
        dict(workers=2, estimator="reference", repartition_every=1, epochs=2, seed=0, **SMALL),
    ]
    with pytest.warns(DeprecationWarning) as caught:
        hists = grappa.train_many(g, runs)
    messages = {str(w.message) for w in caught if w.category is DeprecationWarning}
    assert (
        "ablation='fixed_partitions' is deprecated; pass repartition_every=None instead" in messages
    )
    assert "ablation='unweighted' is deprecated; pass estimator='mean' instead" in messages
    for est, hist in zip(grappa.ESTIMATORS, hists):
        assert hist["config"]["estimator"] == est and hist["config"]["repartition_every"] is None
        assert [e["super_epoch"] for e in hist["epochs"]] == [0, 0], est
        assert all(math.isfinite(e["loss"]) for e in hist["epochs"])
        assert 0 <= hist["final"]["test_acc"] <= 1
    unweighted, mean, reference = hists[len(grappa.ESTIMATORS) :]
    assert unweighted["config"]["estimator"] == "mean" and "ablation" not in unweighted["config"]
    assert [e["loss"] for e in unweighted["epochs"]] == [e["loss"] for e in mean["epochs"]]
    assert [e["super_epoch"] for e in reference["epochs"]] == [0, 1]
    for hist in (mean, reference):
        assert all(e["bytes_by_kind"]["scalars"] == [0, 0] for e in hist["epochs"])
    assert reference["epochs"][-1]["loss"] < reference["epochs"][0]["loss"]
    with pytest.raises(ValueError, match="ablation"):
        grappa.train(g, workers=2, epochs=1, ablation="no_halo")
    with pytest.raises(ValueError, match="ablation"):
        grappa.train(g, workers=2, epochs=1, trainer="isolated", ablation="unweighted")
    with pytest.raises(
        ValueError, match="ablation='unweighted' means estimator='mean'.*estimator='batch'"
    ):
        grappa.train(g, workers=2, epochs=1, estimator="batch", ablation="unweighted")


def test_bad_configurations_are_rejected_before_any_process_starts():
    g = tiny()
    with pytest.raises(ValueError, match="estimator"):
        grappa.train(g, workers=2, estimator="median", epochs=1)
    with pytest.raises(ValueError, match="workers"):
        grappa.train(g, workers=301, epochs=1)  # P > nodes
    with pytest.raises(ValueError, match="workers"):
        grappa.train(g, workers=0, epochs=1)
    with pytest.raises(ValueError, match="empty partition"):  # a worker without seeds
        few = zg.Graph(g.indptr, g.indices, x=g.x, y=g.y, train_idx=[0, 1], val_idx=[2, 3])
        grappa.train(few, workers=3, epochs=1, batch_size=1)
    with pytest.raises(TypeError, match="colour"):
        grappa.train(g, workers=2, epochs=1, colour="red")
    with pytest.raises(ValueError, match="fanouts"):
        grappa.train(g, workers=2, epochs=1, fanouts=[5, 5, 5])
    with pytest.raises(ValueError, match="trainer"):
        grappa.train(g, workers=2, epochs=1, trainer="allreduce")
    with pytest.raises(ValueError, match="batching"):
        grappa.train(g, workers=2, epochs=1, trainer="feature_fetch", batching="full")
    with pytest.raises(ValueError, match="repartition_every"):
        grappa.train(g, workers=2, epochs=1, repartition_every=-1)
    with pytest.raises(ValueError, match="epochs"):
        grappa.train(g, workers=2, epochs=0)
    with pytest.raises(ValueError, match="workers"):
        grappa.train(g, workers=2, epochs=1, partition=grappa.partition(g, 3))
    with pytest.raises(TypeError, match="g must be a zg.Graph"):
        grappa.train("cora", workers=2)
    with pytest.raises(ValueError, match="val_idx"):
        grappa.train(zg.Graph(g.indptr, g.indices, x=g.x, y=g.y, train_idx=g.train_idx), workers=2)
    with pytest.raises(ValueError, match="unknown config key"):
        grappa.TrainConfig.from_dict({"dataset": "cora", "estimater": "batch"})


@pytest.mark.slow
def test_torchrun_smoke(tmp_path):
    """The same worker code under ``torchrun --standalone --nproc-per-node=2 -m zg.grappa``."""
    torchrun = Path(sys.executable).with_name("torchrun")
    command = (
        [str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
    )
    config = {
        "dataset": {
            "name": "csbm",
            "num_nodes": 300,
            "avg_degree": 6,
            "num_classes": 3,
            "feat_dim": 8,
            "seed": 0,
        },
        "trainer": "grappa",
        "estimator": "batch",
        "epochs": 2,
        "repartition_every": 1,
        "seed": 0,
        **{k: v for k, v in SMALL.items() if k != "run_timeout"},
    }
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    out = tmp_path / "history.json"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }
    done = processes.run(
        command
        + [
            "--standalone",
            "--nproc-per-node=2",
            "-m",
            "zg.grappa",
            "--config",
            str(tmp_path / "cfg.json"),
            "--out",
            str(out),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    hist = json.loads(out.read_text())
    assert hist["workers"] == 2 and len(hist["epochs"]) == 2
    assert [e["super_epoch"] for e in hist["epochs"]] == [0, 1]
    assert all(b > 0 for b in hist["bytes_sent_per_worker"])
    # The same run started by zg itself gives the same numbers (with the kernel the command
    # line defaults to, the library's: "torch").
    assert hist["config"]["kernel"] == grappa.TrainConfig().kernel == "torch"
    spawned = grappa.train(
        tiny(),
        workers=2,
        estimator="batch",
        repartition_every=1,
        epochs=2,
        seed=0,
        kernel="torch",
        **SMALL,
    )
    assert [e["loss"] for e in spawned["epochs"]] == [e["loss"] for e in hist["epochs"]]
    assert spawned["bytes_sent_per_worker"] == hist["bytes_sent_per_worker"]
