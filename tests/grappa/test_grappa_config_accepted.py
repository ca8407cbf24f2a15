"""Validated means accepted: whatever ``TrainConfig.validated()`` accepts, a worker's
construction path accepts too (its model, its optimizer, its estimator's node weights and their
stats, the estimator's factors and scales), all called in this process as a worker calls them;
no process is started. And a refusal names its field structurally (``exc.config_field``), which
is what the command line turns into a flag.
"""

import dataclasses
import math

import pytest
import torch
from graphs import tiny
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from zg import cli
from zg.grappa import TrainConfig
from zg.grappa.estimators import masked_batch_stats, reference_weights
from zg.grappa.worker import worker_model
from zg.optim import make_optimizer

GRAPH = tiny()

# Numbers at and around the edges a float32 worker meets: subnormals, float32's limits.
EDGY = st.sampled_from(
    [0.0, 5e-324, 1e-320, 1e-310, 2.3e-308, 1e-45, 1e-44, 1e-39, 1.2e-38, 6e-30, 1e-20, 1e-8]
    + [1e-3, 0.05, 0.5, 1.0, 2.0, 1e4, 1e4 + 1, 1e30, 1e39]
)
PLAIN = st.floats(min_value=0.0, max_value=1.0)
NUMBER = st.one_of(EDGY, PLAIN, PLAIN, PLAIN, st.floats(allow_nan=True))  # mostly in range


@st.composite
def configs(draw):
    return dict(
        estimator=draw(
            st.sampled_from(["mean", "node", "batch", "shrink", "uniform", "reference"])
        ),
        weighting=draw(st.sampled_from(["inverse", "coverage"])),
        coverage_floor=draw(NUMBER),
        shrink=draw(st.one_of(st.just("auto"), PLAIN, NUMBER)),
        workers=draw(st.integers(1, 6)),
        lr=draw(NUMBER),
        weight_decay=draw(NUMBER),
        dropout=draw(st.sampled_from([0.0, 0.5, 0.999])),
        model=draw(st.sampled_from(["sage", "gcn", "gat"])),
        hidden_dim=draw(st.integers(1, 8)),
        num_layers=2,
        fanouts=[3, 3],
    )


def _worker_builds(cfg: TrainConfig, coverage: torch.Tensor) -> None:
    """What a worker builds and computes from the config alone, as it does it."""
    model = worker_model(cfg, GRAPH, torch.device("cpu"))
    optimizer = make_optimizer(model, "adam", cfg.lr, cfg.weight_decay)
    model(*_one_batch(model)).sum().backward()
    optimizer.step()
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    est = cfg.estimator_object
    if est.name == "reference":
        degrees = torch.arange(coverage.numel())
        weights = reference_weights(degrees % 3, degrees)
    else:
        weights = est.node_weights(coverage)  # float32, as local_weights gives
    assert weights.dtype == torch.float32 and bool(torch.isfinite(weights).all())
    assert math.isfinite(float(weights.sum()))  # a batch's weights, summed in float32
    valid = torch.ones(weights.shape, dtype=torch.bool)
    stats = torch.stack([masked_batch_stats(weights, valid)] * cfg.workers)
    for rank in range(cfg.workers):
        factors, scale, _ = est.combine_device(
            weights, valid, rank, cfg.workers, stats if est.needs_stats else None
        )
        assert bool(torch.isfinite(factors).all()) and bool((factors >= 0).all())
        assert math.isfinite(float(scale)) and float(scale) >= 0


def _one_batch(model):
    import zg

    sampler = zg.DynamicSampler(GRAPH, [3, 3], seed=0)
    mb = sampler.sample(GRAPH.train_idx[:8])
    return mb.blocks, GRAPH.x.index_select(0, mb.input_nodes)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=configs(),
    coverage=st.lists(
        st.sampled_from([0.0, 1e-45, 1e-38, 1e-6, 0.01, 0.5, 1.0]), min_size=1, max_size=32
    ),
)
def test_whatever_validated_accepts_a_worker_builds_and_runs(values, coverage):
    try:
        cfg = TrainConfig(**values).validated()
    except (TypeError, ValueError) as exc:
        # A refusal names its field, structurally, and only a field it was given: the one its
        # message is about when the message begins with a field's name.
        field = getattr(exc, "config_field", None)
        assert field in values, exc
        first = str(exc).split(" ")[0].split("=")[0]
        assert first not in values or first == field, (field, exc)
        return
    _worker_builds(cfg, torch.tensor(coverage, dtype=torch.float32))


@pytest.mark.parametrize(
    "values, field",
    [
        (dict(lr=1e-320), "lr"),
        (dict(coverage_floor=1e-44), "coverage_floor"),
        (dict(coverage_floor=1e-30), "coverage_floor"),
        (dict(model="mlp"), "model"),
        (dict(hidden_dim=10**12, model="gcn"), "hidden_dim"),
        (dict(estimator="nope"), "estimator"),
        (dict(weight_decay=-1.0), "weight_decay"),
        (dict(coverage_floor=0.0), "coverage_floor"),
        (dict(coverage_floor=2.0), "coverage_floor"),
        (dict(shrink=1.5), "shrink"),
        (dict(shrink="none"), "shrink"),
        (dict(weighting="sqrt"), "weighting"),
    ],
)
def test_a_refusal_carries_its_field(values, field):
    with pytest.raises((TypeError, ValueError, MemoryError)) as caught:
        TrainConfig(**values).validated()
    assert caught.value.config_field == field


def test_the_command_line_names_a_flag_only_from_the_refusing_field():
    """After the start, a message that merely contains a field's name (a worker's failure
    mentioning the model) is not blamed on that flag; a limit that ran out (``field=value``
    first) is; a refusal carrying config_field is, whatever its words."""
    failed = cli._grappa_flags(started=True)
    assert failed("zg grappa: worker 1 failed: the model's loss is nan") == (
        "worker 1 failed: the model's loss is nan"
    )
    assert failed("run_timeout=0.5 s: the run did not end").startswith("--run-timeout: ")
    assert failed("model's loss is nan").startswith("model's")  # a word, not model=...
    before = cli._grappa_flags()
    labelled = None
    try:
        TrainConfig(coverage_floor=1e-44).validated()
    except ValueError:  # the refusal being handled is what names the flag
        labelled = before("zg grappa: any words")
    assert labelled is not None and labelled.startswith("--coverage-floor: ")


@pytest.mark.parametrize(
    "argv, flag",
    [(["--coverage-floor", "1e-44"], "--coverage-floor"), (["--lr", "1e-320"], "--lr")],
)
def test_zg_grappa_refuses_before_starting_naming_the_flag(capsys, argv, flag):
    with pytest.raises(SystemExit) as caught:
        cli.main(["grappa", "--dataset", "cora", *argv])
    assert caught.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]  # after argparse's usage lines
    assert last.startswith(f"zg grappa: error: {flag}: ") and "--model" not in last


def test_validating_draws_no_random_numbers():
    """validated() builds an optimizer and runs the estimator's arithmetic: neither may move
    torch's global generator (a model built after it must not change)."""
    torch.manual_seed(0)
    before = torch.get_rng_state()
    TrainConfig(estimator="shrink", workers=3).validated()
    assert torch.equal(torch.get_rng_state(), before)


# ----------------------------------------------------------------------------- a flag is a cause

FIELD_NAMES = [f.name for f in dataclasses.fields(TrainConfig)]


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(FIELD_NAMES) | st.text("abcdefgh =_:;,.'", min_size=1, max_size=8),
        min_size=1,
        max_size=8,
    ),
    started=st.booleans(),
)
def test_a_message_that_names_a_field_does_not_make_it_the_cause(words, started):
    """The contract of the command line's flag names (zg.cli._grappa_flags): a flag is named
    only from the refusal's ``config_field`` (or, after the start, a message that begins
    ``field=value``); the words of a message never make a field the cause."""
    message = " ".join(words)
    flagged = cli._grappa_flags(started=started)
    try:
        raise ValueError(message)  # the refusal being handled carries no config_field
    except ValueError:
        out = flagged(message)
    first = message.split("=", 1)[0] if "=" in message else None
    if message.startswith("--"):
        assert out == message
    elif started and first in FIELD_NAMES:
        assert out.startswith(f"{cli._flag(first)}: ")
    else:
        assert out == message, (message, out)


def _refusal(call):
    with pytest.raises((TypeError, ValueError)) as caught:
        call()
    return caught.value


def test_the_plans_and_the_outputs_refusals_carry_their_cause(tmp_path):
    """Each refusal of a plan (before any worker starts) names the field that caused it as its
    config_field, so the command line shows that flag and no other."""
    from zg.grappa import partition as make_part
    from zg.grappa._checks import check_output_paths
    from zg.grappa.plan import check_plan
    from zg.grappa.train import _prepare

    g = tiny()
    cfg = TrainConfig(
        workers=2, batch_size=1, trainer="data_parallel", step_shapes="envelope"
    ).validated()
    part = make_part(g, 2, seed=0)
    assert _refusal(lambda: check_plan(g, cfg, part)).config_field == "batch_size"
    big = TrainConfig(workers=2, batch_size=1).validated()  # 180 iterations, ~90 seeds each
    assert _refusal(lambda: check_plan(g, big, part)).config_field == "batch_size"
    three = TrainConfig(workers=3).validated()
    assert _refusal(lambda: check_plan(g, three, part)).config_field == "workers"
    many = dict(workers=g.num_nodes + 1, trainer="isolated")
    assert _refusal(lambda: _prepare(g, many)).config_field == "workers"
    (tmp_path / "file").write_text("x")
    for field, args in [
        ("history_path", (str(tmp_path), None, None)),
        ("model_path", (None, str(tmp_path), None)),
        ("checkpoint_dir", (None, None, str(tmp_path / "file"))),
    ]:
        assert _refusal(lambda args=args: check_output_paths(*args)).config_field == field
    same = str(tmp_path / "h.json")
    clash = _refusal(lambda: check_output_paths(same, same, None))
    assert getattr(clash, "config_field", None) is None  # two fields: neither alone


@pytest.mark.parametrize(
    "options, field",
    [
        (dict(workers=2, num_chunks=1), "num_chunks"),  # fewer chunks than workers
        (dict(workers=2, num_chunks=3), "num_chunks"),  # not a multiple
        (dict(workers=2, num_chunks=4, schedule="partner_sweep"), "num_chunks"),
        (dict(kernel="fused", backend="nccl"), "kernel"),
        (dict(trainer="single", workers=2), "workers"),
        (dict(trainer="single", num_chunks=4), "num_chunks"),
        (dict(trainer="isolated", estimator="grappa"), "estimator"),
        (dict(trainer="feature_fetch", batching="full"), "batching"),
        (dict(trainer="feature_fetch", step_shapes="envelope"), "step_shapes"),
        (dict(trainer="data_parallel", step_shapes="dynamic"), "step_shapes"),
        (dict(num_layers=3, fanouts=[5, 5]), "fanouts"),
        (dict(capture=True, step_shapes="dynamic"), "capture"),
        # either may change (the message offers both): neither is named alone
        (dict(step_shapes="envelope", batching="full"), None),
    ],
)
def test_a_conflict_between_fields_is_blamed_on_the_one_to_change(options, field):
    """A config refused for two fields that disagree carries the one the message tells the user
    to change as its config_field (the flag `zg grappa` names), whatever the message says."""
    refusal = _refusal(lambda: TrainConfig(**options).validated())
    assert getattr(refusal, "config_field", None) == field


@pytest.mark.parametrize("num_chunks, field", [(None, "workers"), (64, "num_chunks")])
def test_a_partition_left_with_an_empty_chunk_is_blamed_on_what_made_the_chunks(num_chunks, field):
    """metis on a graph with fewer nodes than chunks leaves a chunk empty: the refusal
    (an EmptyPartitionError, a ValueError) names num_chunks, or workers when the chunks are the
    workers' parts."""
    from zg.grappa.partition import EmptyPartitionError
    from zg.grappa.plan import make_partition

    g = tiny()
    workers = 64 if num_chunks is None else 2
    cfg = TrainConfig(workers=workers, num_chunks=num_chunks, method="metis", batch_size=workers)
    with pytest.raises(EmptyPartitionError) as caught:
        make_partition(g, cfg.validated())
    assert caught.value.config_field == field
