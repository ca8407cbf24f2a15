"""zg.grappa.gradient_error and the full-neighbourhood machinery it rests on."""

import pytest
import torch
import torch.nn.functional as F

import zg
from zg import grappa
from zg.grappa.estimators import Estimator
from zg.grappa.gradient import combined_gradients, exact_gradient


def setup(seed=0, layers=2):
    g = zg.datasets.csbm(num_nodes=120, avg_degree=5, num_classes=3, feat_dim=6, seed=seed)
    torch.manual_seed(seed)
    model = zg.models.SAGE(6, 8, 3, num_layers=layers, dropout=0.5)
    return g, model


def flat(params):
    return torch.cat([p.reshape(-1) for p in params]).double()


def test_exact_gradient_equals_full_fanout_sampling():
    """Independent path: the dynamic sampler with fanout >= max degree takes every neighbour."""
    g, model = setup(layers=3)
    model.eval()
    k = int(g.in_degrees().max())
    mb = zg.DynamicSampler(g, [k, k, k]).sample(g.train_idx)
    loss = F.cross_entropy(model(mb.blocks, g.x[mb.input_nodes]), g.y[g.train_idx])
    expected = flat(torch.autograd.grad(loss, list(model.parameters())))
    assert torch.allclose(exact_gradient(g, model), expected, rtol=1e-4, atol=1e-6)


def test_one_worker_has_no_error():
    g, model = setup()
    err = grappa.gradient_error(g, model, grappa.partition(g, 1), estimator="all")
    for name, e in err.items():
        assert e["cosine"] > 1 - 1e-6 and e["variance"] < 1e-10, name
        if name == "reference":
            # Not normalised: one worker (d_loc = d) gives mean_v d/(d+1) times g*.
            d = g.in_degrees()[g.train_idx].double()
            assert e["relative_error"] == pytest.approx(1 - float((d / (d + 1)).mean()), rel=1e-4)
            continue
        assert e["relative_error"] < 1e-5 and e["bias"] < 1e-5, name


def test_combined_gradients_match_per_seed_hand_computation():
    g, model = setup(seed=1)
    model.eval()
    part = grappa.partition(g, 3, seed=2)
    params = list(model.parameters())
    per_seed, coverage, owner = [], [], []  # one row per training seed
    for p in range(3):
        local = part.local_graph(g, p, 1)
        logits = grappa.fullgraph.full_forward(model, local.graph)
        cov = grappa.local_coverage(local, 2)
        for v in local.graph.train_idx.tolist():
            loss = F.cross_entropy(logits[v : v + 1], local.graph.y[v : v + 1])
            per_seed.append(flat(torch.autograd.grad(loss, params, retain_graph=True)))
            coverage.append(float(cov[v]))
            owner.append(p)
    grads, cov, owner = torch.stack(per_seed), torch.tensor(coverage), torch.tensor(owner)
    w = 1.0 / cov.clamp(min=0.05).double()
    n = torch.bincount(owner).double()
    W_p = torch.zeros(3, dtype=torch.float64).index_add_(0, owner, w)
    by_hand = {
        "mean": (grads / (3 * n[owner])[:, None]).sum(0),
        "node": (grads * (w / w.sum())[:, None]).sum(0),
        "batch": (grads * (W_p[owner] / W_p.sum() / n[owner])[:, None]).sum(0),
    }
    got = combined_gradients(g, model, part, [Estimator(n) for n in by_hand], super_epoch=1)
    for name, expected in by_hand.items():
        assert torch.allclose(got[name], expected, rtol=1e-4, atol=1e-7), name


def test_bias_and_variance_decompose_the_error():
    g, model = setup(seed=2)
    state = {k: v.clone() for k, v in model.state_dict().items()}
    model.train()
    parts = grappa.random_partitions(g, 4, count=3, seed=0)
    err = grappa.gradient_error(
        g, model, parts, estimator=["mean", "batch", "shrink"], super_epochs=[0, 1]
    )
    for e in err.values():
        assert e["draws"] == 6 and len(e["per_draw"]) == 6
        assert e["relative_mse"] == pytest.approx(e["bias"] ** 2 + e["variance"], rel=1e-6)
        assert 0 < e["relative_error"] and -1 <= e["cosine"] <= 1
    assert model.training  # mode restored
    assert all(torch.equal(v, state[k]) for k, v in model.state_dict().items())  # untouched
    both = grappa.gradient_error(
        g,
        model,
        parts,
        estimator=["mean", "batch", "shrink"],
        super_epochs=[0, 1],
        weighting=["inverse", "coverage"],
    )
    assert set(both) == {"inverse", "coverage"}
    for name, e in err.items():  # inverse is the default
        assert both["inverse"][name]["relative_error"] == pytest.approx(e["relative_error"])
    assert both["coverage"]["mean"]["relative_error"] == pytest.approx(
        err["mean"]["relative_error"]
    )
    single = grappa.gradient_error(g, model, parts[0], estimator="batch")
    assert single["draws"] == 1 and single["variance"] == 0.0
    assert single["relative_error"] == pytest.approx(single["bias"])


def test_gradient_error_bad_arguments():
    g, model = setup()
    part = grappa.partition(g, 2)
    with pytest.raises(ValueError, match="estimator"):
        grappa.gradient_error(g, model, part, estimator="median")
    with pytest.raises(ValueError, match="estimator"):
        grappa.gradient_error(g, model, part, estimator=[])
    with pytest.raises(TypeError, match="part"):
        grappa.gradient_error(g, model, "random")
    with pytest.raises(TypeError, match="model"):
        grappa.gradient_error(g, torch.nn.Linear(2, 2), part)
    with pytest.raises(ValueError, match="super_epochs"):
        grappa.gradient_error(g, model, part, super_epochs=[])
    with pytest.raises(ValueError, match="weighting"):
        grappa.gradient_error(g, model, part, weighting="sqrt")
    with pytest.raises(ValueError, match="weighting"):
        grappa.gradient_error(g, model, part, weighting=[])
    with pytest.raises(ValueError, match="reference"):
        grappa.gradient_error(g, model, part, reference=torch.zeros(3))


def test_gradient_error_checks_the_model_against_the_graph():
    """The Engine's checks (zg.settings.check_model_fits): too few output classes was an
    IndexError from inside cross_entropy, a wrong input width a message naming a layer."""
    g, _ = setup()
    part = grappa.partition(g, 2)
    with pytest.raises(ValueError, match="model has 2 output classes but g's labels have"):
        grappa.gradient_error(g, zg.models.SAGE(6, 8, 2, num_layers=2), part)
    with pytest.raises(ValueError, match="model takes 9 input features but g has feat_dim=6"):
        grappa.gradient_error(g, zg.models.SAGE(9, 8, 3, num_layers=2), part)
    with pytest.raises(TypeError, match="model has .*float64.* parameters but g.x is"):
        grappa.gradient_error(g, zg.models.SAGE(6, 8, 3, num_layers=2).double(), part)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("where", ["all", "one"])
def test_gradient_error_refuses_a_non_finite_reference(bad, where):
    g, model = setup()
    part = grappa.partition(g, 2)
    reference = exact_gradient(g, model)
    if where == "all":
        reference = torch.full_like(reference, bad)
    else:
        reference[3] = bad
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match="reference holds .* NaN or inf value"):
        grappa.gradient_error(g, model, part, reference=reference)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_gradient_error_reference_must_be_a_real_finite_tensor():
    """A list or a complex tensor is a TypeError naming reference; a finite one gives the
    result of the full-graph pass it replaces."""
    g, model = setup()
    part = grappa.partition(g, 2)
    n = sum(p.numel() for p in model.parameters())
    with pytest.raises(TypeError, match="reference must be the flat exact gradient"):
        grappa.gradient_error(g, model, part, reference=[0.0] * n)
    with pytest.raises(TypeError, match="got a torch.complex128 tensor"):
        grappa.gradient_error(g, model, part, reference=torch.zeros(n, dtype=torch.complex128))
    reference = exact_gradient(g, model.eval())  # gradient_error measures in eval mode
    model.train()
    assert grappa.gradient_error(g, model, part, reference=reference) == grappa.gradient_error(
        g, model, part
    )


def hand_graph():
    """8 nodes, two workers owning 0-3 and 4-7 (one chunk each, no repartitioning)."""
    edges = [
        (0, 1),
        (2, 1),
        (5, 1),
        (1, 0),
        (4, 2),
        (6, 2),
        (0, 3),
        (1, 3),
        (2, 3),
        (5, 4),
        (0, 5),
        (1, 5),
        (6, 5),
        (7, 5),
        (7, 7),
    ]
    src, dst = torch.tensor(edges).T
    gen = torch.Generator().manual_seed(0)
    g = zg.Graph.from_edges(
        src,
        dst,
        8,
        x=torch.randn(8, 4, generator=gen),
        y=torch.tensor([0, 1, 1, 0, 1, 0, 0, 1]),
        train_idx=torch.arange(8),
        num_classes=2,
    )
    return g


def hand_partition(halo=False):
    return grappa.Partition(
        torch.tensor([0, 0, 0, 0, 1, 1, 1, 1]),
        2,
        [[[0], [1]]],
        method="random",
        seed=0,
        halo=halo,
        schedule="round_robin",
    )


@pytest.mark.parametrize("halo", [False, True])
def test_reference_estimator_by_hand(halo):
    """The paper's weighting on a graph worked out on paper: r_v = min(1, d_loc / (d + 1)),
    worker scale = mean_v r_v / P, and the combined gradient = sum_p s_p * mean-gradient_p."""
    from zg.grappa.estimators import local_weights

    g = hand_graph()
    part = hand_partition(halo)
    # global in-degrees 1 3 2 3 1 4 0 1; local in-degrees (no halo) 1 2 0 3 1 2 0 1
    if halo:  # every in-edge of an owned node is local: d / (d + 1)
        r = [[1 / 2, 3 / 4, 2 / 3, 3 / 4], [1 / 2, 4 / 5, 0.0, 1 / 2]]
    else:
        r = [[1 / 2, 2 / 4, 0 / 3, 3 / 4], [1 / 2, 2 / 5, 0.0, 1 / 2]]
    torch.manual_seed(3)
    model = zg.models.SAGE(4, 5, 2, num_layers=2)
    model.eval()
    params = list(model.parameters())
    est = Estimator("reference")
    expected = 0
    for p in range(2):
        local = part.local_graph(g, p)
        w = local_weights(est, local, 2)[: local.num_owned]
        assert torch.allclose(w, torch.tensor(r[p])), (p, w)
        # the scale the worker applies, from its own seeds only
        _, scale, _ = est.combine(w, p, 2)
        assert scale == pytest.approx(sum(r[p]) / 4 / 2, rel=1e-6)
        # per-seed gradients on the local graph, averaged over the worker's seeds
        logits = grappa.fullgraph.full_forward(model, local.graph)
        mean_grad = 0
        for v in range(4):
            loss = F.cross_entropy(logits[v : v + 1], local.graph.y[v : v + 1])
            mean_grad = mean_grad + flat(torch.autograd.grad(loss, params, retain_graph=True)) / 4
        expected = expected + (sum(r[p]) / 4) / 2 * mean_grad
    got = combined_gradients(g, model, part, [est])["reference"]
    assert torch.allclose(got, expected, rtol=1e-4, atol=1e-7)
    err = grappa.gradient_error(g, model, part, estimator="reference")
    assert err["relative_error"] > 0 and err["draws"] == 1
