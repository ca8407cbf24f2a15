"""bench/grappa_diagnosis.py --pool: the runs every dataset has, pooled over their seeds, with the
summary recomputed (means by hand), and the mismatches it refuses."""

import copy
import statistics
from pathlib import Path

import pytest
from script_loader import load_script

ROOT = Path(__file__).resolve().parents[2]
EPOCHS = 3


@pytest.fixture(scope="module")
def diagnosis():
    module, restore = load_script(ROOT / "bench" / "grappa_diagnosis.py", "bench_grappa_diagnosis")
    yield module
    restore()


def record(run, seed, level):
    """A run whose curves and evaluations are its level plus small per-epoch steps."""
    curve = [level + 0.01 * e + 0.001 * seed for e in range(EPOCHS)]
    return {
        "run": run,
        "seed": seed,
        "val_curve": curve,
        "test_curve": [c - 0.005 for c in curve],
        "loss_curve": [1.0] * EPOCHS,
        "final_test_acc": curve[-1] - 0.005,
        "test_acc_at_best_val": curve[-1] - 0.005,
        "eval": {
            "full": level,
            "sampled": level - 0.01,
            **({} if run == "single" else {"local": level + 0.02}),
        },
        "mean_coverage": 1.0,
    }


def dataset(seeds, runs):
    settings = {
        "fanouts": [10, 10],
        "batch_size": 256,
        "epochs": EPOCHS,
        "lr": 0.01,
        "workers": 4,
        "method": "random",
        "halo": False,
        "seeds": list(seeds),
    }
    return {
        "graph": "Graph(csbm)",
        "epochs": EPOCHS,
        "settings": settings,
        "machine": {"date": "x"},
        "argv": ["--seeds", *map(str, seeds)],
        "runs": [record(run, s, level) for s in seeds for run, level in runs.items()],
    }


def test_pool_keeps_the_common_runs_and_recomputes_the_means(diagnosis):
    a = dataset([0], {"single": 0.9, "isolated": 0.6, "grappa/mean": 0.7})
    b = dataset([1, 2], {"single": 0.8, "isolated": 0.5})
    pooled = diagnosis.pool_datasets({"a": a, "b": b}, ["a", "b"])
    assert set(pooled["summary"]) == {"single", "isolated"}  # grappa/mean: seed 0 only
    assert pooled["settings"]["seeds"] == [0, 1, 2]
    assert [(r["run"], r["seed"]) for r in pooled["runs"]] == [
        ("single", 0),
        ("single", 1),
        ("single", 2),
        ("isolated", 0),
        ("isolated", 1),
        ("isolated", 2),
    ]
    finals = {
        run: [r["final_test_acc"] for r in a["runs"] + b["runs"] if r["run"] == run]
        for run in ("single", "isolated")
    }
    for run, values in finals.items():
        got = pooled["summary"][run]["final_test_acc"]
        assert got["n"] == 3
        assert got["mean"] == pytest.approx(statistics.mean(values))
        assert got["std"] == pytest.approx(statistics.stdev(values))
    gap = 100 * (statistics.mean(finals["single"]) - statistics.mean(finals["isolated"]))
    assert pooled["summary"]["isolated"]["gap_points_final"] == pytest.approx(gap)
    assert pooled["summary"]["isolated"]["val_curve"][1]["mean"] == pytest.approx(
        statistics.mean(r["val_curve"][1] for r in a["runs"] + b["runs"] if r["run"] == "isolated")
    )
    assert pooled["summary"]["isolated"]["eval_local"]["mean"] == pytest.approx(
        (0.62 + 0.52 + 0.52) / 3
    )
    assert pooled["pooled_from"] == ["a", "b"] and pooled["gradient_error"] is None
    # b's runs are all in the pooled dataset, a's grappa/mean is not: only b may be dropped.
    assert diagnosis.redundant_sources({"a": a, "b": b}, ["a", "b"], pooled) == ["b"]


def test_pool_refuses_what_does_not_pool(diagnosis):
    a = dataset([0], {"single": 0.9, "isolated": 0.6})
    b = dataset([1, 2], {"single": 0.8, "isolated": 0.5})
    with pytest.raises(ValueError, match="at least two"):
        diagnosis.pool_datasets({"a": a}, ["a"])
    with pytest.raises(ValueError, match="no dataset"):
        diagnosis.pool_datasets({"a": a, "b": b}, ["a", "c"])
    other = copy.deepcopy(b)
    other["settings"]["lr"] = 0.03
    with pytest.raises(ValueError, match="lr"):
        diagnosis.pool_datasets({"a": a, "b": other}, ["a", "b"])
    longer = copy.deepcopy(b)
    longer["epochs"] = EPOCHS + 1
    with pytest.raises(ValueError, match="another graph or length"):
        diagnosis.pool_datasets({"a": a, "b": longer}, ["a", "b"])
    with pytest.raises(ValueError, match="occurs twice"):
        diagnosis.pool_datasets({"a": a, "b": copy.deepcopy(a)}, ["a", "b"])
    no_single = dataset([1], {"isolated": 0.5})
    with pytest.raises(ValueError, match="single"):
        diagnosis.pool_datasets({"a": a, "b": no_single}, ["a", "b"])
