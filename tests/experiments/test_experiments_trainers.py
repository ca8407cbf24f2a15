"""zg.experiments.trainers: summary rows from a training history, averaging over seeds, and bad
runs refused before any process starts (notebook 06)."""

import pytest
from graphs import tiny
from hypothesis import given, settings
from hypothesis import strategies as st

from zg import experiments as ex


def fake_history(trainer="grappa", workers=2, val=(0.5, 0.6, 0.7, 0.8), kinds=None):
    kinds = kinds or {
        "gradients": [10, 10],
        "scalars": [1, 1],
        "features": [0, 0],
        "parameters": [0, 0],
    }
    epochs = [
        {
            "epoch": i,
            "val_acc": v,
            "test_acc": v - 0.1,
            "mean_coverage": [0.5, 0.7][:workers],
            "bytes_by_kind": {k: [b * (i + 1) for b in per] for k, per in kinds.items()},
        }
        for i, v in enumerate(val)
    ]
    return {
        "config": {"trainer": trainer},
        "workers": workers,
        "epochs": epochs,
        "seconds_per_epoch": 0.1,
        "final": {
            "test_acc": val[-1] - 0.1,
            "val_acc": val[-1],
            "best_val_acc": max(val),
            "test_acc_at_best_val": max(val) - 0.1,
        },
    }


def test_bytes_sent_and_trainer_rows_from_a_history():
    h = fake_history()
    assert ex.bytes_sent(h) == {
        "gradients": [100, 100],
        "scalars": [10, 10],
        "features": [0, 0],
        "parameters": [0, 0],
    }
    (row,) = ex.trainer_rows({"mine": h})
    assert row["run"] == "mine" and row["trainer"] == "grappa" and row["workers"] == 2
    assert row["late_val_acc"] == pytest.approx(0.75)  # mean of the later half
    assert row["mean_coverage"] == pytest.approx(0.6)
    assert row["gradients_per_epoch"] == pytest.approx(25.0) and row[
        "scalars_per_epoch"
    ] == pytest.approx(2.5)
    assert row["test_acc_at_best_val"] == pytest.approx(0.7)
    with pytest.raises(TypeError):
        ex.bytes_sent({"no": "epochs"})
    with pytest.raises(ValueError):
        ex.trainer_rows({})


def test_run_trainers_rejects_bad_runs_before_starting_anything():
    g = tiny()
    with pytest.raises(TypeError, match="runs"):
        ex.run_trainers(g, "grappa")
    with pytest.raises(TypeError, match="trainer"):
        ex.run_trainers(g, [{"estimator": "batch"}])
    with pytest.raises(ValueError, match="labelled"):
        ex.run_trainers(g, ["isolated", {"trainer": "isolated"}])
    with pytest.raises(ValueError, match="trainer"):
        ex.run_trainers(g, ["nonsense"], workers=2, epochs=1)


def test_average_rows():
    a = [
        {"run": "x", "trainer": "grappa", "acc": 0.5, "bytes": 10},
        {"run": "y", "trainer": "single", "acc": 1.0, "bytes": 0},
    ]
    b = [
        {"run": "y", "trainer": "single", "acc": 0.5, "bytes": 0},
        {"run": "x", "trainer": "grappa", "acc": 0.7, "bytes": 20},
    ]
    rows = ex.average_rows([a, b])
    assert [r["run"] for r in rows] == ["x", "y"]
    assert rows[0]["acc"] == pytest.approx(0.6) and rows[0]["bytes"] == 15 and rows[0]["seeds"] == 2
    assert rows[1]["acc"] == pytest.approx(0.75) and rows[1]["trainer"] == "single"
    assert ex.average_rows([a]) == [{**r, "seeds": 1} for r in a]
    with pytest.raises(ValueError, match="missing"):
        ex.average_rows([a, b[:1]])
    with pytest.raises(ValueError, match="differs"):
        ex.average_rows([a, [{**b[0]}, {**b[1], "trainer": "isolated"}]])
    with pytest.raises(ValueError):
        ex.average_rows([])


def test_epoch_time_rows_from_committed_results():
    results = {
        "machine": {},
        "rows": [
            {
                "dataset": "cora",
                "layers": 2,
                "trainer": "single",
                "setting": "comparison",
                "workers": 1,
                "seed": seed,
                "measured_epoch_seconds": s,
            }
            for seed, s in enumerate((1.0, 3.0))
        ]
        + [
            {
                "dataset": "cora",
                "layers": 2,
                "trainer": "grappa",
                "estimator": "batch",
                "repartition": True,
                "method": "metis",
                "setting": "comparison",
                "workers": P,
                "seed": 0,
                "measured_epoch_seconds": s,
            }
            for P, s in ((4, 0.5), (2, 0.8))
        ]
        + [
            {
                "dataset": "cora",
                "layers": 3,
                "trainer": "single",
                "setting": "comparison",
                "workers": 1,
                "measured_epoch_seconds": 9.0,
            }
        ],
    }
    rows = ex.epoch_time_rows(results, dataset="cora", layers=2)
    assert [(r["run"], r["workers"]) for r in rows] == [
        ("single", 1),
        ("grappa (batch, repartitioned)", 2),
        ("grappa (batch, repartitioned)", 4),
    ]
    assert rows[0]["seconds_mean"] == 2.0 and rows[0]["runs"] == 2
    assert rows[0]["seconds_std"] == pytest.approx(2**0.5)  # the sample std of 1 and 3
    assert rows[2]["seconds_mean"] == 0.5 and rows[2]["seconds_std"] is None  # one run: no spread
    with pytest.raises(ValueError, match="no committed run"):
        ex.epoch_time_rows(results, dataset="csbm", layers=2)
    # a run of another setting is not drawn on the comparison's lines
    other = dict(results["rows"][2], setting="default", seed=1, measured_epoch_seconds=99.0)
    rows = ex.epoch_time_rows({"rows": [*results["rows"], other]}, dataset="cora", layers=2)
    assert [r["seconds_mean"] for r in rows if r["workers"] == 4] == [0.5]
    committed = ex.load_grappa_results()
    if committed is not None:  # the committed bench file parses into rows for both depths
        for layers in (2, 3):
            assert {
                r["run"] for r in ex.epoch_time_rows(committed, dataset="cora", layers=layers)
            } >= {"single"}


@given(
    field=st.sampled_from(ex.trainers.RUN_SETTING_FIELDS),
    values=st.lists(
        st.one_of(st.booleans(), st.integers(0, 3), st.sampled_from(["a", "b"]), st.none()),
        min_size=2,
        max_size=4,
    ),
)
@settings(max_examples=80, deadline=None)
def test_epoch_time_rows_pool_only_one_setting_over_distinct_seeds(field, values):
    """Runs averaged into one point are one setting over distinct seeds: when the matching runs
    differ in any setting field, or repeat a seed, the rows are refused naming it (never a mean
    of two settings, as a line of 1 comparison run and 3 default runs with halo once was)."""
    base = {"dataset": "d", "layers": 2, "trainer": "t", "workers": 2}
    runs = [("line", {"trainer": "t"})]
    group = [
        dict(base, **{field: v}, seed=i, measured_epoch_seconds=1.0 + i)
        for i, v in enumerate(values)
    ]
    differ = len({repr(v) for v in values}) > 1
    if field == "trainer":  # the line's own match: only the matching runs are pooled
        group = [r for r in group if r["trainer"] == "t"]
        differ = False
        if not group:
            return
    if differ:
        with pytest.raises(ValueError, match=f"differ in {field!r}"):
            ex.epoch_time_rows({"rows": group}, dataset="d", layers=2, runs=runs)
    else:
        (row,) = ex.epoch_time_rows({"rows": group}, dataset="d", layers=2, runs=runs)
        assert row["runs"] == len(group)
        twice = [*group, dict(group[0], measured_epoch_seconds=7.0)]
        with pytest.raises(ValueError, match="repeat a seed"):
            ex.epoch_time_rows({"rows": twice}, dataset="d", layers=2, runs=runs)


def test_depth_rows_mean_and_std_over_seeds():
    histories = {
        (L, s): {
            "single": fake_history("single", 1, val=(0.5, 0.6 + 0.1 * s + 0.01 * L)),
            "grappa": fake_history("grappa", 2, val=(0.4, 0.5 + 0.1 * s)),
        }
        for L in (2, 3)
        for s in (0, 1)
    }
    rows = ex.depth_rows(histories, metric="best_val_acc")
    assert [(r["trainer"], r["layers"]) for r in rows] == [
        ("single", 2),
        ("single", 3),
        ("grappa", 2),
        ("grappa", 3),
    ]
    single2 = rows[0]
    assert single2["seeds"] == 2 and single2["values"] == pytest.approx([0.62, 0.72])
    assert single2["mean"] == pytest.approx(0.67) and single2["std"] == pytest.approx(0.05 * 2**0.5)
    with pytest.raises(ValueError, match="not a trainer_rows column"):
        ex.depth_rows(histories, metric="nope")
    with pytest.raises(ValueError, match="pairs"):
        ex.depth_rows({2: histories[(2, 0)]})
