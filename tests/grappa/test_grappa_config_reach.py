"""What TrainConfig.validated() accepts, the workers accept (issue 46, item 4 and the third
probe's list).

* Generated configs: every one ``validated()`` accepts passes the checks its workers' first step
  makes (trainer role, estimator, timeouts, kernel, fanouts, model, optimizer, partition,
  envelope profiling), called directly without starting a process.
* ``preset="reference"`` with a huge ``num_layers``: refused naming num_layers, nothing of that
  size allocated.
* ``zg grappa`` / ``python -m zg.grappa``: ``backend="nccl"`` without CUDA is a usage error
  (exit 2); a graph without a test split prints "no test split", not a traceback.
"""

import json
import resource

import pytest
import torch
from graphs import tiny
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg import kernels
from zg import models as zg_models
from zg.grappa.config import BATCHINGS, MAX_THREADS, STEP_SHAPES, UNSET, TrainConfig
from zg.grappa.estimators import ESTIMATORS, WEIGHTINGS
from zg.grappa.launch import _timeout
from zg.grappa.partition import METHODS, SCHEDULES, partition
from zg.grappa.roles import role_for
from zg.grappa.trainers import TRAINERS
from zg.optim import make_optimizer
from zg.rng import worker_seed
from zg.sampling import check_fanouts
from zg.step import OverflowGuard

CPU = torch.device("cpu")
FEAT, CLASSES = 8, 3


@pytest.fixture(scope="module")
def g():
    return tiny(256)


def _model(cfg):
    """The worker's model (zg.models.build, with every check it makes), on the meta device
    when large: its parameters then take no memory, so a generated hidden_dim allocates
    nothing here."""
    small = cfg.hidden_dim <= 64 and cfg.num_layers <= 4
    with torch.device("cpu" if small else "meta"):
        return zg_models.build(
            cfg.model, FEAT, cfg.hidden_dim, CLASSES, cfg.num_layers, dropout=cfg.dropout
        )


def first_step(cfg, g):
    """What a worker checks of its config before and in its first step (zg.grappa.worker,
    roles, local, launch), with this process's graph; raises what the worker would raise."""
    role_for(cfg.trainer_object)
    assert cfg.estimator_object is not None
    _timeout(cfg.timeout)
    if cfg.run_timeout is not None:
        _timeout(cfg.run_timeout)
    kernels.resolve(cfg.kernel, CPU)
    if cfg.threads is not None:  # pin_threads: torch.set_num_threads takes a C int
        kept = torch.get_num_threads()
        try:
            torch.set_num_threads(cfg.threads)
        finally:
            torch.set_num_threads(kept)
    check_fanouts(cfg.fanouts)
    OverflowGuard(cfg.num_layers, CPU)
    model = _model(cfg)
    on_meta = next(model.parameters()).is_meta
    make_optimizer(torch.nn.Linear(1, 1) if on_meta else model, "adam", cfg.lr, cfg.weight_decay)
    # The partition (random chunks: METIS may leave a chunk of a tiny graph empty, which
    # depends on the graph, not the config).
    part = partition(
        g, cfg.workers, "random", cfg.seed, num_chunks=cfg.num_chunks, halo=cfg.halo,
        schedule=cfg.schedule,
    )  # fmt: skip
    assert part.num_parts == cfg.workers
    if cfg.step_shapes == "envelope" and cfg.batching == "minibatch":
        rows = max(1, min(cfg.batch_size, g.train_idx.numel()) // cfg.workers)
        zg.Envelope.profile(
            g, cfg.fanouts, rows, num_batches=2, quantile=cfg.envelope_quantile,
            margin=cfg.envelope_margin, seed=worker_seed(cfg.seed, 0, 0),
        )  # fmt: skip


def _floats(low, high):
    return st.floats(min_value=low, max_value=high, allow_nan=False)


# Each field: values a run commonly has, and values at or past its bounds. A generated config
# takes the common kind for every field but up to three, which take the edge kind: so many
# configs pass validated() and reach the workers' checks, with edges in every combination.
FIELDS = {
    "trainer": (st.sampled_from(list(TRAINERS)), st.sampled_from(list(TRAINERS))),
    "workers": (st.just(UNSET) | st.integers(1, 4), st.integers(1, 8)),
    "estimator": (st.just(UNSET), st.sampled_from(list(ESTIMATORS))),
    "weighting": (st.sampled_from(WEIGHTINGS), st.sampled_from(WEIGHTINGS)),
    "repartition_every": (st.just(UNSET), st.none() | st.integers(0, 6)),
    "epochs": (st.integers(1, 4), st.integers(1, 10**6)),
    "seed": (st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)),
    "method": (st.sampled_from(METHODS), st.sampled_from(METHODS)),
    "num_chunks": (st.none(), st.integers(1, 12)),
    "halo": (st.booleans(), st.booleans()),
    "schedule": (st.sampled_from(SCHEDULES), st.sampled_from(SCHEDULES)),
    "batching": (st.just("minibatch"), st.sampled_from(BATCHINGS)),
    "model": (st.sampled_from(list(zg_models.MODELS)), st.sampled_from(list(zg_models.MODELS))),
    "hidden_dim": (st.integers(1, 64), st.integers(1, 2**16) | st.integers(1, 2**40)),
    "num_layers": (st.integers(1, 3), st.integers(1, 64)),
    "dropout": (_floats(0.0, 0.9), _floats(0.9, 1.0)),
    "batch_size": (st.integers(1, 512), st.integers(1, 10**9)),
    "lr": (_floats(1e-6, 1.0), _floats(1.0, 2e4)),
    "weight_decay": (_floats(0.0, 1.0), _floats(1.0, 2e4)),
    "average_every": (st.none(), st.integers(1, 10**6)),
    "step_shapes": (st.sampled_from(STEP_SHAPES), st.sampled_from(STEP_SHAPES)),
    "envelope_quantile": (_floats(0.5, 1.0), _floats(0.0, 1.0)),
    "envelope_margin": (_floats(0.0, 1.0), _floats(0.0, 20.0)),
    "timeout": (_floats(1.0, 1e3), _floats(0.0, 2e7)),
    "run_timeout": (st.none(), _floats(0.0, 2e7)),
    "threads": (st.none() | st.integers(1, 8), st.integers(1, 2**40)),
    "kernel": (st.sampled_from(kernels.KERNELS), st.sampled_from(kernels.KERNELS)),
    "eval_every": (st.integers(1, 5), st.integers(1, 10**6)),
}


@st.composite
def configs(draw):
    edges = draw(st.sets(st.sampled_from(sorted(FIELDS)), max_size=3))
    values = {name: draw(FIELDS[name][name in edges]) for name in FIELDS}
    values = {k: v for k, v in values.items() if v is not UNSET}
    layers = values["num_layers"]
    values["fanouts"] = draw(st.lists(st.integers(1, 12), min_size=layers, max_size=layers))
    return values


CONFIGS = configs()


@given(values=CONFIGS)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_every_config_validated_accepts_passes_its_workers_first_checks(g, values):
    try:
        cfg = TrainConfig(**values).validated()
    except (TypeError, ValueError, MemoryError):
        return  # refused up front, naming the field: what the config check is for
    first_step(cfg, g)


@pytest.mark.parametrize(
    "field, value, extra",
    [
        ("lr", 1e5, {}),
        ("weight_decay", 2e4, {}),
        ("threads", MAX_THREADS + 1, {}),
        ("threads", 2**40, {}),
        ("num_chunks", 3, {"workers": 2}),
        ("num_chunks", 1, {"workers": 2}),
        ("num_chunks", 4, {"workers": 2, "schedule": "partner_sweep"}),
    ],
)
def test_values_the_workers_refuse_are_refused_by_validated(field, value, extra):
    with pytest.raises(ValueError, match=field):
        TrainConfig(**{field: value, **extra}).validated()


def test_a_model_that_cannot_fit_is_refused_naming_its_size():
    with pytest.raises(MemoryError, match="hidden_dim=1099511627776"):
        TrainConfig(hidden_dim=2**40).validated()
    with pytest.raises(MemoryError, match="num_layers=3"):
        TrainConfig(hidden_dim=2**22, num_layers=3, fanouts=[5, 5, 5]).validated()


@pytest.mark.parametrize("layers", [65, 10**9, 2**62])
def test_the_reference_preset_refuses_a_huge_depth_by_name_before_allocating(layers):
    """Under a 2 GiB address-space limit: the old path built ``[10] * num_layers`` first."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = 2 << 30
    try:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pytest.skip("cannot lower the address-space limit here")
    try:
        with pytest.raises(ValueError, match=f"num_layers must be in \\[1, 64\\], got {layers}"):
            TrainConfig.from_dict({"preset": "reference", "num_layers": layers})
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert TrainConfig.from_dict({"preset": "reference", "num_layers": 64}).fanouts == [10] * 64


# ----------------------------------------------------------------------------- the command lines


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available: nccl can run")
def test_nccl_without_cuda_is_a_usage_error(tmp_path, capsys):
    from zg.cli import main as zg_main
    from zg.grappa.__main__ import main as grappa_main

    config = tmp_path / "c.json"
    spec = {"name": "csbm", "num_nodes": 200, "avg_degree": 4, "num_classes": 3, "feat_dim": 4}
    config.write_text(json.dumps({"dataset": spec, "backend": "nccl", "epochs": 1}))
    with pytest.raises(SystemExit) as exit_:
        grappa_main(["--config", str(config)])
    assert exit_.value.code == 2
    assert "backend='nccl'" in capsys.readouterr().err
    plain = tmp_path / "p.json"
    plain.write_text(json.dumps({"dataset": spec, "epochs": 1}))
    with pytest.raises(SystemExit) as exit_:
        zg_main(["grappa", "--config", str(plain), "--backend", "nccl"])
    assert exit_.value.code == 2
    assert "--backend" in capsys.readouterr().err


FINALS = [
    {"val_acc": 0.5, "test_acc": None},
    {"val_acc": 0.5, "test_acc": float("nan")},
    {"val_acc": None, "test_acc": None},
]


@pytest.mark.parametrize("final", FINALS)
def test_the_final_line_says_no_test_split(final, capsys):
    from zg.cli import _report_grappa
    from zg.grappa.__main__ import print_final

    history = {
        "final": final,
        "bytes_per_epoch_per_worker": 1234.0,
        "epochs": [{"epoch": 0, "val_acc": final["val_acc"], "test_acc": None, "loss": 1.0}],
    }
    print_final(history, "h.json")
    _report_grappa(history, None)
    out = capsys.readouterr().out
    assert "no test split" in out and "1,234 bytes/epoch/worker" in out
    if final["val_acc"] is not None:
        assert "val 0.5000" in out


def test_a_graph_without_a_test_split_runs_to_its_final_line(tmp_path, capsys):
    """The regression end to end: one worker, one epoch, on a graph with no test_idx."""
    from zg.cli import main as zg_main

    g = tiny(200)
    bare = zg.Graph(
        g.indptr, g.indices, x=g.x, y=g.y, train_idx=g.train_idx, val_idx=g.val_idx,
        num_classes=g.num_classes,
    )  # fmt: skip
    npz = tmp_path / "no_test.npz"
    zg.datasets.save_npz(bare, npz)
    config = tmp_path / "c.json"
    config.write_text(
        json.dumps(
            {"dataset": {"npz": str(npz)}, "trainer": "single", "epochs": 1, "kernel": "torch"}
        )
    )
    assert zg_main(["grappa", "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert "no test split" in out and "Traceback" not in out


# ----------------------------------------------------------------------------- Grappa checkpoints

PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=4)
    | st.builds(torch.zeros, st.integers(0, 3)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
CHECKPOINT_FIELDS = [
    "format", "version", "config", "graph", "world", "next_epoch", "step", "records", "model",
    "optimizer", "seconds", "resumed_at",
]  # fmt: skip


@pytest.fixture(scope="module")
def grappa_checkpoint(g, tmp_path_factory):
    from zg._io import graph_fingerprint
    from zg.grappa.checkpoint import CHECKPOINT_VERSION

    cfg = TrainConfig(workers=2, epochs=3).validated()
    model = zg_models.build("sage", g.feat_dim, cfg.hidden_dim, g.num_classes, cfg.num_layers)
    opt = make_optimizer(model, "adam", cfg.lr)
    copies = cfg.trainer_object.replicas(2)
    state = {
        "format": "zg.grappa.checkpoint",
        "version": CHECKPOINT_VERSION,
        "config": cfg.to_dict(),
        "graph": graph_fingerprint(g),
        "world": 2,
        "next_epoch": 1,
        "step": 4,
        "records": [{"epoch": 0}],
        "model": [model.state_dict()] * copies,
        "optimizer": [opt.state_dict()] * copies,
        "seconds": 1.5,
        "resumed_at": [],
    }
    return cfg, state, tmp_path_factory.mktemp("grappa_ckpt")


@given(field=st.sampled_from(CHECKPOINT_FIELDS), value=PLAIN)
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_crafted_grappa_checkpoint_is_a_checkpoint_error(g, grappa_checkpoint, field, value):
    """Any value the loader accepts, in any field: the documented CheckpointError (or, for a
    value that happens to be valid, the checkpoint), never another class."""
    from zg.grappa.checkpoint import CheckpointError, read_checkpoint

    cfg, state, folder = grappa_checkpoint
    path = folder / "checkpoint.pt"
    torch.save(state, path)
    assert read_checkpoint(str(path), cfg, g, 2) is not None
    torch.save({**state, field: value}, path)
    try:
        read_checkpoint(str(path), cfg, g, 2)
    except CheckpointError:
        pass


@pytest.mark.parametrize(
    "field, value",
    [("next_epoch", True), ("world", 2.0), ("seconds", float("nan")), ("resumed_at", [5])],
)
def test_grappa_checkpoint_fields_of_the_wrong_kind_are_refused(g, grappa_checkpoint, field, value):
    from zg.grappa.checkpoint import CheckpointError, read_checkpoint

    cfg, state, folder = grappa_checkpoint
    path = folder / "bad.pt"
    torch.save({**state, field: value}, path)
    with pytest.raises(CheckpointError):
        read_checkpoint(str(path), cfg, g, 2)
