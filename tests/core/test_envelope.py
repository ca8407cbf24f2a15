"""Envelope sizing policies, growth and the memory model."""

import pytest
import torch

import zg
from zg.envelope import Envelope, block_bytes, worst_case_sizes
from zg.sampling import DynamicSampler


def graph(n=3000, e=30000, seed=0):
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, n, (e,), generator=gen), torch.randint(0, n, (e,), generator=gen)
    return zg.Graph.from_edges(src, dst, n, duplicates="remove", train_idx=torch.arange(2000))


def test_worst_case_is_rows_times_fanout_plus_one_capped_by_n():
    assert worst_case_sizes(10**7, [15, 10, 5], 1024) == [
        1024 * 6 * 11 * 16,
        1024 * 6 * 11,
        1024 * 6,
    ]
    assert worst_case_sizes(10**6, [15, 10, 5], 1024) == [10**6, 1024 * 6 * 11, 1024 * 6]
    assert worst_case_sizes(50_000, [15, 10, 5], 1024) == [50_000, 50_000, 6144]
    env = Envelope.worst_case(graph(), [4, 3], 100)
    assert env.sizes == [min(3000, 100 * 4 * 5), 400] and env.policy == "worst_case"


def test_profiled_envelope_covers_the_observed_counts_and_stays_below_worst_case():
    g = graph()
    env = Envelope.profile(g, [5, 4, 3], 64, num_batches=16, quantile=1.0, margin=0.05, seed=1)
    observed = env.observed
    assert observed.shape == (16, 3)
    worst = worst_case_sizes(g.num_nodes, [5, 4, 3], 64)
    for i, size in enumerate(env.sizes):
        assert size >= int(observed[:, i].max())
        assert size <= worst[i]
        want = min(worst[i], int(torch.ceil(observed[:, i].max().double() * 1.05)))
        assert size == max(want, env.sizes[i + 1] if i + 1 < 3 else 64)
    # Counts come from real DGL-style sampling: they agree with the dynamic sampler's.
    dyn = DynamicSampler(g, [5, 4, 3], seed=1)
    nodes = g.train_idx[torch.randperm(2000, generator=torch.Generator().manual_seed(1))[:64]]
    assert torch.equal(dyn.sample(nodes, epoch=-1, batch=0).counts, observed[0])


def test_profile_is_reproducible():
    g = graph()
    a = Envelope.profile(g, [5, 4], 64, num_batches=8, seed=3)
    b = Envelope.profile(g, [5, 4], 64, num_batches=8, seed=3)
    assert a.sizes == b.sizes and torch.equal(a.observed, b.observed)


def test_grow_reaches_worst_case_and_covers_observed():
    g = graph()
    env = Envelope.profile(g, [5, 4, 3], 64, num_batches=8)
    worst = Envelope.worst_case(g, [5, 4, 3], 64)
    grown = env.grow(observed=[x + 500 for x in env.sizes])
    assert all(
        s >= min(o, w) for s, o, w in zip(grown.sizes, [x + 500 for x in env.sizes], worst.sizes)
    )
    for _ in range(20):
        grown = grown.grow()
    assert grown.sizes == worst.sizes
    with pytest.raises(ValueError, match="factor must be > 1"):
        env.grow(factor=1.0)
    with pytest.raises(ValueError, match="grow needs"):
        Envelope([10, 5]).grow()


def test_memory_model_orders_oracle_envelope_worst():
    g = graph(n=20000, e=200000)
    env = Envelope.profile(g, [10, 5], 256, num_batches=8)
    mm = env.memory_model(feat_dim=64, hidden_dim=32, num_classes=5)
    totals = mm["totals"]
    assert (
        totals["oracle_mean"] <= totals["oracle_max"] <= totals["envelope"] <= totals["worst_case"]
    )
    # The formula, by hand, for the envelope's input block.
    s0, s1 = env.sizes
    assert mm["envelope"][0] == {
        "index": s1 * 10 * 9 + s0 * 8,
        "features": s0 * 64 * 4,
        "activations": s1 * 32 * 4,
        "total": s1 * 10 * 9 + s0 * 8 + s0 * 64 * 4 + s1 * 32 * 4,
    }
    assert block_bytes([5], [2], [3], 4, 8, 2)[0]["activations"] == 2 * 2 * 4


@pytest.mark.parametrize(
    "sizes, error, match",
    [
        ([], TypeError, "non-empty list"),
        ([10, 0], ValueError, r"sizes\[1\] must be >= 1"),
        ([10, 2.5], TypeError, r"sizes\[1\] must be an int"),
    ],
)
def test_explicit_sizes_are_validated(sizes, error, match):
    with pytest.raises(error, match=match):
        Envelope(sizes)


def test_profile_arguments_are_validated():
    g = graph()
    with pytest.raises(ValueError, match="quantile"):
        Envelope.profile(g, [3], 8, quantile=1.5)
    with pytest.raises(ValueError, match="margin"):
        Envelope.profile(g, [3], 8, margin=-0.1)
    with pytest.raises(ValueError, match=r"fanouts\[0\]"):
        Envelope.profile(g, [0], 8)


def test_envelopes_follow_the_clamped_fanout():
    """A fanout above the largest in-degree D samples D neighbours (zg.sampling.effective_fanouts),
    so the worst case, the profile and the memory model are those of fanout D: an Engine with
    fanouts [10**6] allocates what fanouts [D] would."""
    g = graph()
    top = int(g.in_degrees().max())
    huge = Envelope.worst_case(g, [10**6, 10**6], 64)
    assert huge.sizes == Envelope.worst_case(g, [top, top], 64).sizes
    assert huge.sizes == worst_case_sizes(g.num_nodes, [top, top], 64) and huge.max_degree == top
    assert (
        Envelope.profile(g, [10**6, 10**6], 64, num_batches=4).sizes
        == Envelope.profile(g, [top, top], 64, num_batches=4).sizes
    )
    assert (
        huge.memory_model(8, 16, 3)["worst_case"]
        == Envelope.worst_case(g, [top, top], 64).memory_model(8, 16, 3)["worst_case"]
    )
    assert huge.grow(observed=[10**9, 10**9]).sizes == huge.sizes  # capped by the worst case


def test_an_envelope_larger_than_any_batch_is_refused():
    g = graph()
    with pytest.raises(ValueError, match=r"larger than any batch can fill: at most num_nodes=3000"):
        Envelope([10**9, 64]).check([5, 5], 64, g.num_nodes)
