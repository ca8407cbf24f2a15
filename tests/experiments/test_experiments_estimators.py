"""zg.experiments.estimators: the error rows and the shrink sweep against the estimators' own
gradient_error, recomputed from scratch (notebook 07)."""

import pytest
import torch

import zg
from zg import experiments as ex
from zg import grappa

pytestmark = pytest.mark.timeout(300)


def small(seed=0, n=200):
    g = zg.datasets.csbm(num_nodes=n, avg_degree=6, num_classes=3, feat_dim=8, seed=seed)
    torch.manual_seed(seed)
    model = zg.models.SAGE(8, 8, 3, num_layers=2)
    return g, model


def test_error_rows_flatten_gradient_error():
    g, model = small()
    parts = grappa.random_partitions(g, 2, count=2)
    err = grappa.gradient_error(g, model, parts, estimator="all", weighting=["inverse", "coverage"])
    rows = ex.error_rows(err, partition="random")
    assert len(rows) == 2 * len(grappa.ESTIMATORS)
    for row in rows:
        e = err[row["weighting"]][row["estimator"]]
        assert (
            row["partition"] == "random"
            and row["bias"] == e["bias"]
            and row["variance"] == e["variance"]
        )
        assert row["relative_mse"] == pytest.approx(
            row["bias_squared"] + row["variance"], rel=1e-9, abs=1e-12
        )
    one = grappa.gradient_error(g, model, parts, estimator=["mean", "batch"])
    assert [r["estimator"] for r in ex.error_rows(one, weighting="inverse")] == ["mean", "batch"]
    with pytest.raises(ValueError, match="weighting"):
        ex.error_rows(one)
    with pytest.raises(ValueError, match="errors"):
        ex.error_rows({})


def test_shrink_sweep_matches_gradient_error_at_every_lambda():
    g, model = small(seed=1)
    parts = grappa.random_partitions(g, 3, count=2, seed=4)
    lambdas = [0.0, 0.3, 0.75, 1.0]
    model.train()
    sweep = ex.shrink_sweep(g, model, parts, lambdas, super_epochs=[0, 1])
    assert model.training, "the model's mode is restored"
    assert sweep["draws"] == 4 and len(sweep["auto_lambda"]) == 4
    for i, lam in enumerate(lambdas):  # independent recomputation per lambda
        direct = grappa.gradient_error(g, model, parts, "shrink", shrink=lam, super_epochs=[0, 1])
        for key in ("bias", "variance", "relative_mse", "relative_error", "cosine"):
            assert sweep[key][i] == pytest.approx(direct[key], rel=1e-9, abs=1e-12), (lam, key)
    ends = grappa.gradient_error(g, model, parts, ["batch", "uniform"], super_epochs=[0, 1])
    assert sweep["bias"][0] == pytest.approx(ends["batch"]["bias"], rel=1e-12)
    assert sweep["bias"][-1] == pytest.approx(ends["uniform"]["bias"], rel=1e-12)


def test_shrink_sweep_auto_lambda_is_the_one_the_estimator_uses():
    g, model = small(seed=2)
    part = grappa.partition(g, 2, seed=1)
    sweep = ex.shrink_sweep(g, model, part, [0.0])
    lam = sweep["auto_lambda"][0]
    assert 0.0 <= lam <= 1.0
    auto = grappa.gradient_error(g, model, part, "shrink", shrink="auto")
    fixed = grappa.gradient_error(g, model, part, "shrink", shrink=lam)
    assert auto["relative_error"] == pytest.approx(fixed["relative_error"], rel=1e-9, abs=1e-12)


def test_shrink_sweep_validates():
    g, model = small()
    part = grappa.partition(g, 2)
    with pytest.raises(ValueError, match="lambdas"):
        ex.shrink_sweep(g, model, part, [1.5])
    with pytest.raises(ValueError, match="lambdas"):
        ex.shrink_sweep(g, model, part, [])
    with pytest.raises(TypeError, match="model"):
        ex.shrink_sweep(g, torch.nn.Linear(2, 2), part, [0.5])
    with pytest.raises(TypeError, match="parts"):
        ex.shrink_sweep(g, model, "random", [0.5])


def test_bias_vs_workers_matches_gradient_error_for_each_worker_count():
    g, model = small(seed=2)
    reference = grappa.exact_gradient(g, model)
    rows = ex.bias_vs_workers(
        g,
        model,
        [2, 4],
        draws=2,
        method="random",
        estimators=("mean", "batch"),
        super_epochs=(0,),
        seed=3,
        reference=reference,
    )
    assert [(r["workers"], r["estimator"]) for r in rows] == [
        (2, "mean"),
        (2, "batch"),
        (4, "mean"),
        (4, "batch"),
    ]
    for P in (2, 4):
        direct = grappa.gradient_error(
            g,
            model,
            grappa.random_partitions(g, P, count=2, method="random", seed=3),
            estimator=["mean", "batch"],
            super_epochs=(0,),
            reference=reference,
        )
        for r in (r for r in rows if r["workers"] == P):
            assert r["bias"] == direct[r["estimator"]]["bias"] and r["draws"] == 2
            assert r["partition"] == "random" and r["weighting"] == "inverse"
    with pytest.raises(ValueError, match="int >= 2"):
        ex.bias_vs_workers(g, model, [1, 2], reference=reference)
    with pytest.raises(ValueError, match="non-empty"):
        ex.bias_vs_workers(g, model, [], reference=reference)
