"""zg.experiments.envelopes: exact per-block counts of an epoch's batches, and the overflow curve
of profiled envelopes (notebook 02)."""

import pytest
import torch

import zg
from zg import experiments as ex
from zg.envelope import Envelope
from zg.sampling import DynamicSampler

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=2000, avg_degree=8, num_classes=4, feat_dim=16, seed=0)


def test_sample_counts_are_the_exact_counts_of_an_epochs_batches(graph):
    counts = ex.sample_counts(graph, FANOUTS, 64, num_batches=5, seed=3)
    assert counts.shape == (5, len(FANOUTS)) and counts.dtype == torch.int64
    nodes = graph.train_idx
    order = torch.randperm(nodes.numel(), generator=torch.Generator().manual_seed(3))
    for b in (0, 4):
        batch_seeds = nodes[order[b * 64 : (b + 1) * 64]]
        exact = DynamicSampler(graph, FANOUTS, seed=3).sample(batch_seeds, 0, b).counts
        assert counts[b].tolist() == exact.tolist()
    assert bool((counts <= torch.tensor(Envelope.worst_case(graph, FANOUTS, 64).sizes)).all())
    with pytest.raises(ValueError):
        ex.sample_counts(graph, FANOUTS, 64, num_batches=0)
    with pytest.raises(ValueError, match="fewer than batch_size"):
        ex.sample_counts(graph, FANOUTS, 64, nodes=torch.arange(10))


def test_overflow_curve(graph):
    profile = Envelope.profile(graph, FANOUTS, 64, num_batches=16, seed=0)
    # Judged on the very batches it was profiled on, the maximum never overflows.
    exact = ex.overflow_curve(
        graph,
        FANOUTS,
        64,
        margins=[0.0],
        quantile=1.0,
        profile_batches=16,
        held_out=profile.observed,
        seed=0,
    )
    assert exact["overflow_probability"] == [0.0]
    assert exact["sizes"][0] == [
        max(int(profile.observed[:, i].max()), 64) for i in range(len(FANOUTS))
    ]
    curve = ex.overflow_curve(
        graph,
        FANOUTS,
        64,
        margins=[0.0, 0.05, 0.5],
        quantile=0.5,
        profile_batches=16,
        held_out_batches=24,
        seed=0,
    )
    p, memory = curve["overflow_probability"], curve["envelope_bytes"]
    assert curve["held_out_batches"] == 24 and len(p) == len(memory) == len(curve["sizes"]) == 3
    assert p[0] > 0 and all(a >= b for a, b in zip(p, p[1:]))  # the median overflows often
    assert all(a <= b for a, b in zip(memory, memory[1:]))
    assert curve["oracle_mean_bytes"] <= curve["oracle_max_bytes"] <= curve["worst_case_bytes"]
    assert curve["worst_case_sizes"] == Envelope.worst_case(graph, FANOUTS, 64).sizes
    with pytest.raises(ValueError, match="held_out"):
        ex.overflow_curve(graph, FANOUTS, 64, held_out=torch.zeros(3, 5, dtype=torch.int64))
    with pytest.raises(ValueError, match="margins"):
        ex.overflow_curve(graph, FANOUTS, 64, margins=[])
