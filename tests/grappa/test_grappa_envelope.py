"""Grappa workers that run the ZeroGNN fixed-shape step (``step_shapes="envelope"``): no host
syncs in a worker's step, and the one overflow policy across workers: an overflow on any worker
stops every worker's step, all resume from the first overflowed batch, so a tiny envelope
trains exactly as the never-overflowing worst case."""

import pytest
import torch
from graphs import tiny

import zg
from zg import grappa
from zg.grappa.config import TrainConfig
from zg.grappa.local import LocalData

pytestmark = pytest.mark.timeout(300)

SMALL = dict(
    batch_size=48, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240, lr=0.02
)


def local_data(g, sampler, rank=0, workers=2):
    cfg = TrainConfig(workers=workers, step_shapes=sampler, **SMALL).validated()
    part = grappa.partition(g, workers, method="random", seed=0)
    local = LocalData(cfg, g, part, rank, workers, torch.device("cpu"), cfg.estimator_object)
    local.start_super_epoch(0)
    return local


def test_envelope_worker_step_has_no_host_syncs():
    from zg import experiments as ex

    audits = ex.worker_syncs(tiny(), workers=2, fanouts=[5, 5], batch_size=48)
    assert audits["envelope"]["host_syncs"] == 0 and audits["envelope"]["dynamic_shape_ops"] == 0
    assert audits["dynamic"]["host_syncs"] > 0


def test_envelope_worker_node_sets_are_exact():
    """The worker's envelope sampler draws exactly the nodes the dynamic sampler draws on its
    local graph, batch by batch: rows map back to the seeds."""
    g = tiny()
    env = local_data(g, "envelope", rank=1)
    sampler = zg.EnvelopeSampler(
        env.graph, SMALL["fanouts"], env.rows, envelope=env.envelope, seed=env.seed
    )
    exact = zg.DynamicSampler(env.graph, SMALL["fanouts"], seed=env.seed)
    for it, seeds in enumerate(env.batches(3)):
        mb = sampler.sample(seeds, 3, it)
        assert not bool(mb.overflowed)  # profiled + margin
        top = mb.blocks[-1]
        assert torch.equal(top.src_nodes[: seeds.numel()], seeds)  # dst rows come first
        ref = exact.sample(seeds, 3, it)
        for got, want in zip(mb.node_sets(), ref.node_sets()):
            assert torch.equal(got, want)


def dropout_ignores_padding() -> bool:
    """Whether this torch build's CPU dropout gives the first rows the same mask, and leaves
    the generator in the same state, whatever the number of (padding) rows after them. Where
    it does not, a bigger envelope draws different dropout masks: same distribution, other
    numbers, so runs with different envelope sizes agree only with dropout off."""
    masks, states = [], []
    for rows in (64, 100):
        torch.manual_seed(0)
        masks.append(torch.nn.functional.dropout(torch.ones(rows, 16), 0.5)[:64])
        states.append(torch.rand(4))
    return torch.equal(*masks) and torch.equal(*states)


@pytest.mark.slow
@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_tiny_envelope_rewinds_and_matches_the_worst_case(tmp_path, dropout):
    if dropout and not dropout_ignores_padding():
        pytest.skip("this torch build's CPU dropout masks depend on the padded size")
    g = tiny()
    common = dict(
        workers=2,
        estimator="batch",
        repartition_every=2,
        epochs=4,
        seed=3,
        step_shapes="envelope",
        dropout=dropout,
        **SMALL,
    )
    tiny_run = dict(
        common, envelope_quantile=0.01, envelope_margin=0.0, model_path=str(tmp_path / "tiny.pt")
    )
    worst_run = dict(common, envelope="worst_case", model_path=str(tmp_path / "worst.pt"))
    tiny_hist, worst_hist = grappa.train_many(g, [tiny_run, worst_run])
    overflows = [e["envelope_overflows"] for e in tiny_hist["epochs"]]
    rewound = [e["rewound_batches"] for e in tiny_hist["epochs"]]
    assert sum(overflows) >= 1, overflows  # it did overflow
    assert sum(rewound) >= sum(overflows)  # each rewinds >= 1 batch
    assert all(
        e["envelope_overflows"] == 0 and e["rewound_batches"] == 0 for e in worst_hist["epochs"]
    )
    for a, b in zip(tiny_hist["epochs"], worst_hist["epochs"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)
        assert a["iterations"] == b["iterations"]
    assert tiny_hist["final"]["test_acc"] == worst_hist["final"]["test_acc"]
    p, q = torch.load(tmp_path / "tiny.pt"), torch.load(tmp_path / "worst.pt")
    diff = max(float((p[name] - q[name]).abs().max()) for name in p)
    assert diff <= 1e-5, diff


def assert_tiny_matches_worst_case(g, common, tmp_path):
    """A tiny profiled envelope (it overflows) ends within 1e-5 of the worst case's parameters."""
    runs = [
        dict(
            common, envelope_quantile=0.01, envelope_margin=0.0, model_path=str(tmp_path / "a.pt")
        ),
        dict(common, envelope="worst_case", model_path=str(tmp_path / "b.pt")),
    ]
    a, _ = grappa.train_many(g, runs)
    assert sum(e["envelope_overflows"] for e in a["epochs"]) >= 1
    p, q = torch.load(tmp_path / "a.pt"), torch.load(tmp_path / "b.pt")
    assert max(float((p[n] - q[n]).abs().max()) for n in p) <= 1e-5


@pytest.mark.slow
def test_overflow_on_one_worker_stops_every_worker(tmp_path):
    """Each worker profiles its own tiny envelope, so the workers overflow at different batches;
    every worker still ends with the worst-case run's parameters, so each skipped and reran the
    batches the other's overflow stopped (the flag itself: test_grappa_distributed.py's
    test_overflow_flag_rides_the_gradient_all_reduce)."""
    g = tiny()
    common = dict(
        workers=2,
        estimator="mean",
        repartition_every=None,
        epochs=2,
        seed=5,
        step_shapes="envelope",
        dropout=0.0,
        **SMALL,
    )
    assert_tiny_matches_worst_case(g, common, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("trainer", ["isolated", "psgd_pa", "single"])
def test_every_envelope_trainer_matches_its_worst_case(tmp_path, trainer):
    g = tiny()
    common = dict(
        trainer=trainer,
        workers=1 if trainer == "single" else 2,
        epochs=2,
        seed=1,
        step_shapes="envelope",
        dropout=0.0,
        **SMALL,
    )
    if trainer == "psgd_pa":
        common["average_every"] = 2
    assert_tiny_matches_worst_case(g, common, tmp_path)


def test_envelope_sampler_configs_fail_clearly():
    with pytest.raises(ValueError, match="step_shapes"):
        TrainConfig(step_shapes="fixed").validated()
    with pytest.raises(ValueError, match="step_shapes='envelope'"):
        TrainConfig(step_shapes="envelope", batching="full").validated()
    with pytest.raises(ValueError, match="step_shapes='envelope'"):
        TrainConfig(step_shapes="envelope", trainer="feature_fetch").validated()
    with pytest.raises(ValueError, match="envelope_quantile"):
        TrainConfig(step_shapes="envelope", envelope_quantile=0.0).validated()
    with pytest.raises(ValueError, match="envelope"):
        TrainConfig(step_shapes="envelope", envelope="tight").validated()
