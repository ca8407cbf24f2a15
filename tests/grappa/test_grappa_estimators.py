"""zg.grappa.estimators: the formulas, the batch closed form, shrinkage, and bad input."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from zg.grappa.estimators import (
    ESTIMATORS,
    Estimator,
    batch_stats,
    reference_weights,
    shrink_lambda,
    worker_scales,
)


def draw_batches(sizes, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(n, generator=gen) * 0.9 + 0.05 for n in sizes]  # coverages in [0.05, 0.95]


def weights_of(est, c):
    """Node weights: coverage weights, or for "reference" the values themselves read as its
    degree ratios r_v (drawn in [0.05, 0.95] like coverages)."""
    return c.to(torch.float32) if est.name == "reference" else est.node_weights(c)


def effective_node_weights(est, coverages):
    """The weight each seed's loss gradient gets in G = sum_p s_p sum_v f_v grad l_v."""
    weights = [weights_of(est, c) for c in coverages]
    stats = torch.stack([batch_stats(w) for w in weights])
    P = len(coverages)
    out = []
    for p, w in enumerate(weights):
        factors, scale, _ = est.combine(w, p, P, stats)
        out.append(scale * factors.double())
    return out, weights


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=5),
    seed=st.integers(0, 1000),
    weighting=st.sampled_from(["inverse", "coverage"]),
    lam=st.floats(0, 1),
)
def test_every_estimator_weights_sum_to_one(sizes, seed, weighting, lam):
    coverages = draw_batches(sizes, seed)
    for name in ESTIMATORS:
        est = Estimator(name, weighting, shrink=lam if name == "shrink" else "auto")
        eff, _ = effective_node_weights(est, coverages)
        if name == "reference":  # the paper's scaling is not normalised: sum = mean_p(mean r_p)
            expected = sum(float(c.double().mean()) for c in coverages) / len(coverages)
            assert float(torch.cat(eff).sum()) == pytest.approx(expected, abs=1e-6)
        else:
            assert float(torch.cat(eff).sum()) == pytest.approx(1.0, abs=1e-6)


def test_each_estimator_matches_its_formula():
    coverages = draw_batches([3, 5, 4], seed=1)
    n = torch.tensor([3.0, 5.0, 4.0], dtype=torch.float64)
    w = [1.0 / c.clamp(min=0.05).double() for c in coverages]
    W_p = torch.stack([x.sum() for x in w])
    W = W_p.sum()
    expected = {
        "mean": [torch.full((int(k),), 1.0 / (3 * k)) for k in n],
        "node": [x / W for x in w],
        "batch": [torch.full((int(k),), float(W_p[p] / W / k)) for p, k in enumerate(n)],
    }
    expected["uniform"] = [torch.full((int(k),), 1.0 / float(n.sum())) for k in n]
    # reference: the coverages read as r_v; every seed of worker p gets mean(r_p) / (P n_p).
    expected["reference"] = [
        torch.full((int(k),), float(coverages[p].double().mean()) / (3 * k))
        for p, k in enumerate(n)
    ]
    lam = 0.3
    expected["shrink"] = [
        torch.full((int(k),), float(((1 - lam) * W_p[p] / W + lam * k / n.sum()) / k))
        for p, k in enumerate(n)
    ]
    for name, exp in expected.items():
        est = Estimator(name, shrink=lam if name == "shrink" else "auto")
        eff, _ = effective_node_weights(est, coverages)
        for got, want in zip(eff, exp):
            assert torch.allclose(got, want.double(), atol=1e-6), name


def test_batch_weight_is_the_least_squares_fit_of_the_node_weights():
    coverages = draw_batches([4, 7, 2, 5], seed=3)
    est = Estimator("batch")
    node, _ = effective_node_weights(Estimator("node"), coverages)
    batch, _ = effective_node_weights(est, coverages)
    # beta_p = per-seed weight of batch p; compare with numerical least squares per batch.
    for omega, b in zip(node, batch):
        beta = float(b[0])
        assert torch.allclose(b, torch.full_like(b, beta))
        lstsq = torch.linalg.lstsq(
            torch.ones(omega.numel(), 1, dtype=torch.float64), omega[:, None]
        ).solution
        assert beta == pytest.approx(float(lstsq), rel=1e-6)  # factors are float32
        loss = lambda x: float(((omega - x) ** 2).sum())  # noqa: E731, B023 (used at once)
        assert loss(beta) <= min(loss(beta * 1.01), loss(beta * 0.99))


def test_batch_equals_node_when_weights_are_constant_within_batches():
    coverages = [torch.full((3,), 0.2), torch.full((5,), 0.7), torch.full((2,), 0.4)]
    node, _ = effective_node_weights(Estimator("node"), coverages)
    batch, _ = effective_node_weights(Estimator("batch"), coverages)
    for a, b in zip(node, batch):
        assert torch.allclose(a, b, atol=1e-7)


def test_shrink_interpolates_between_batch_and_uniform():
    coverages = draw_batches([4, 6, 3], seed=5)
    weights = [Estimator().node_weights(c) for c in coverages]
    stats = torch.stack([batch_stats(w) for w in weights])
    batch, _ = worker_scales(Estimator("batch"), stats)
    zero, _ = worker_scales(Estimator("shrink", shrink=0.0), stats)
    one, _ = worker_scales(Estimator("shrink", shrink=1.0), stats)
    assert torch.allclose(zero, batch)
    assert torch.allclose(one, stats[:, 0] / stats[:, 0].sum())  # uniform node weights
    assert torch.allclose(one, worker_scales(Estimator("uniform"), stats)[0])
    auto, info = worker_scales(Estimator("shrink"), stats)
    assert 0.0 <= info["lambda"] <= 1.0
    assert torch.allclose(auto, (1 - info["lambda"]) * batch + info["lambda"] * one)


def test_auto_lambda_follows_signal_and_noise():
    equal = torch.tensor([[10.0, 20.0, 40.0], [10.0, 20.0, 40.0]], dtype=torch.float64)
    assert shrink_lambda(equal) == 1.0  # no spread: uniform
    # Constant weights inside batches (no noise) but different between them: keep them.
    no_noise = torch.stack(
        [batch_stats(torch.full((50,), 1.0)), batch_stats(torch.full((50,), 5.0))]
    )
    assert shrink_lambda(no_noise) == 0.0
    # Huge within-batch noise, a small between-batch difference: shrink fully.
    gen = torch.Generator().manual_seed(0)
    noisy = torch.stack([batch_stats(torch.rand(20, generator=gen) * 100) for _ in range(4)])
    assert shrink_lambda(noisy) > 0.5


def test_weightings_and_floor():
    c = torch.tensor([0.0, 0.01, 0.5, 1.0])
    assert torch.allclose(
        Estimator(weighting="inverse", floor=0.05).node_weights(c),
        torch.tensor([20.0, 20.0, 2.0, 1.0]),
    )
    assert torch.allclose(
        Estimator(weighting="coverage", floor=0.05).node_weights(c),
        torch.tensor([0.05, 0.05, 0.5, 1.0]),
    )
    assert not Estimator("mean").needs_stats and Estimator("node").needs_stats
    assert not Estimator("reference").needs_stats  # s_p is local
    with pytest.raises(ValueError, match="reference"):
        Estimator("reference").node_weights(c)


def test_reference_weights_by_hand():
    d_loc = torch.tensor([0, 1, 2, 3, 5, 4])
    d = torch.tensor([0, 1, 4, 3, 5, 10])
    # min(1, d_loc / (d + 1)): 0/1, 1/2, 2/5, 3/4, 5/6, 4/11
    want = torch.tensor([0.0, 0.5, 0.4, 0.75, 5 / 6, 4 / 11])
    assert torch.allclose(reference_weights(d_loc, d), want)
    assert float(reference_weights(torch.tensor([7]), torch.tensor([3]))) == 1.0  # clipped at 1
    with pytest.raises(ValueError, match="global_in_degree"):
        reference_weights(d_loc, d[:3])


def test_reference_scale_is_the_mean_ratio_over_p_on_the_device_too():
    gen = torch.Generator().manual_seed(0)
    est = Estimator("reference")
    w = torch.rand(6, generator=gen)
    valid = torch.tensor([True, True, True, True, False, False])  # two padding rows
    factors, scale, info = est.combine_device(w, valid, rank=1, num_workers=4)
    assert float(scale) == pytest.approx(float(w[:4].double().mean()) / 4, rel=1e-9)
    assert torch.allclose(factors, torch.tensor([0.25] * 4 + [0.0] * 2)) and info == {}
    host_factors, host_scale, _ = est.combine(w[:4], 1, 4)
    assert host_scale == pytest.approx(float(scale), rel=1e-9)
    assert torch.allclose(host_factors, factors[:4])
    stats = torch.stack([batch_stats(w[:4]), batch_stats(w[4:])])
    scales, _ = worker_scales(est, stats)
    assert torch.allclose(scales, torch.stack([w[:4].double().mean(), w[4:].double().mean()]) / 2)


def test_bad_estimator_arguments_name_the_argument():
    with pytest.raises(ValueError, match="estimator"):
        Estimator("median")
    with pytest.raises(TypeError, match="estimator"):
        Estimator(3)
    with pytest.raises(ValueError, match="weighting"):
        Estimator("batch", weighting="sqrt")
    with pytest.raises(ValueError, match="coverage_floor"):
        Estimator("batch", floor=0.0)
    with pytest.raises(ValueError, match="shrink"):
        Estimator("shrink", shrink=1.5)
    with pytest.raises(ValueError, match="shrink"):
        Estimator("shrink", shrink="james-stein")
    with pytest.raises(ValueError, match="stats"):
        Estimator("batch").combine(torch.ones(3), 0, 2, None)
    with pytest.raises(ValueError, match="node"):
        worker_scales(Estimator("node"), torch.ones(2, 3))


@pytest.mark.parametrize("name", ["mean", "node", "batch", "shrink", "uniform"])
def test_device_combination_equals_the_host_one_and_ignores_padding(name):
    """combine_device (what a worker's step runs, no host read) gives combine's factors and
    scale on the real rows, and 0 on padding rows."""
    from zg.grappa.estimators import batch_stats, masked_batch_stats

    gen = torch.Generator().manual_seed(4)
    est = Estimator(name, shrink="auto")
    weights = [torch.rand(n, generator=gen) * 3 + 0.1 for n in (5, 9, 2)]
    stats = torch.stack([batch_stats(w) for w in weights])
    for rank, w in enumerate(weights):
        padded = torch.cat([w, torch.full((4,), 7.0)])
        valid = torch.arange(padded.numel()) < w.numel()
        assert torch.equal(masked_batch_stats(padded, valid), batch_stats(w))
        factors, scale, _ = est.combine(w, rank, 3, stats if est.needs_stats else None)
        dfactors, dscale, _ = est.combine_device(
            padded, valid, rank, 3, stats if est.needs_stats else None
        )
        assert torch.allclose(dfactors[: w.numel()], factors, rtol=1e-6)
        assert torch.equal(dfactors[w.numel() :], torch.zeros(4))
        assert float(dscale) == pytest.approx(scale, rel=1e-12)
