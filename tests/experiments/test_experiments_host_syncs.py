"""zg.experiments.host_syncs: each hop's metadata, against the dynamic sampler, and the host
syncs of both samplers on the same batch (notebook 01)."""

import pytest

import zg
from zg import experiments as ex
from zg.envelope import Envelope
from zg.sampling import DynamicSampler

FANOUTS = [4, 3]


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=2000, avg_degree=8, num_classes=4, feat_dim=16, seed=0)


@pytest.fixture(scope="module")
def seeds(graph):
    return graph.train_idx[:64]


def test_measure_hop_metadata_matches_the_dynamic_sampler(graph, seeds):
    rows = ex.measure_hop_metadata(graph, [5, 4, 3], seeds, seed=2, epoch=1, batch=3)
    mb = DynamicSampler(graph, [5, 4, 3], seed=2).sample(seeds, 1, 3)
    assert [r["hop"] for r in rows] == [1, 2, 3]
    assert [r["fanout"] for r in rows] == [3, 4, 5]  # seeds outward
    assert [r["distinct_nodes"] for r in rows] == mb.counts.flip(0).tolist()
    assert rows[0]["frontier"] == seeds.numel()
    for this_hop, next_hop in zip(rows, rows[1:]):
        assert next_hop["frontier"] == this_hop["distinct_nodes"]
    for r in rows:
        assert r["slots"] == r["frontier"] * r["fanout"]
        assert 0 < r["sampled_edges"] <= r["slots"]
        assert r["new_nodes"] == r["distinct_nodes"] - r["frontier"] >= 0


def test_audit_samplers_counts_the_waits(graph, seeds):
    audits = ex.audit_samplers(graph, FANOUTS, seeds)
    assert audits["same_sample"]
    assert audits["envelope"]["host_syncs"] == 0 and audits["envelope"]["dynamic_shape_ops"] == 0
    assert audits["envelope"]["per_op"] == {}
    assert audits["dynamic"]["host_syncs"] == 3 * len(FANOUTS)  # mask, unique, filter per hop
    assert audits["dynamic"]["per_op"] == {"index": 2 * len(FANOUTS), "_unique2": len(FANOUTS)}
    assert "SyncAudit" in audits["dynamic"]["report"]
    # A too-small envelope truncates the sample: then it is not the same sample.
    tiny = Envelope([seeds.numel()] * len(FANOUTS))
    assert not ex.audit_samplers(graph, FANOUTS, seeds, envelope=tiny)["same_sample"]
