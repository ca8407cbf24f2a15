"""Hostile input to Grappa: fuzzed configs, train() options, config files and checkpoints end in a
clear error naming what is wrong (ValueError / TypeError, exit status 2 on the command line,
CheckpointError), never in another exception, a hang, a started worker or a half-written file.

Invalid configs are rejected before any process starts, so these tests start none (except the
one fixture run that produces a real checkpoint to corrupt).
"""

import json
import os
import sys
from dataclasses import fields
from pathlib import Path

import processes
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import zg
from zg import grappa
from zg.grappa.__main__ import main
from zg.grappa._checks import check_output_paths
from zg.grappa.estimators import ESTIMATORS
from zg.grappa.train import CheckpointError, TrainConfig, read_checkpoint

pytestmark = pytest.mark.timeout(300)

FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
ROOT = Path(__file__).resolve().parents[2]
FIELDS = [f.name for f in fields(TrainConfig)]
SMALL = dict(
    batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240, lr=0.02
)

junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(-3, 30), max_size=4),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)


# ----------------------------------------------------------------------------- TrainConfig.from_dict


@FUZZ
@given(
    values=st.dictionaries(st.sampled_from(FIELDS + ["colour", "epoch_count"]), junk, max_size=6)
)
def test_from_dict_rejects_bad_values_naming_the_field(values):
    unknown = sorted(set(values) - set(FIELDS))
    try:
        cfg = TrainConfig.from_dict(values)
    except (TypeError, ValueError, MemoryError) as exc:  # MemoryError: a model too large here
        message = str(exc)
        if unknown:
            assert message.startswith("unknown config key") and str(unknown) in message
        else:
            assert any(name in message for name in values), message
        return
    assert not unknown
    assert cfg.validated() == cfg  # validating twice: no change


@FUZZ
@given(
    values=st.one_of(
        st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3)
    )
)
def test_from_dict_needs_an_object(values):
    with pytest.raises(TypeError, match="config must be a dict"):
        TrainConfig.from_dict(values)


# ----------------------------------------------------------------------------- train() options

not_int = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True), st.text(max_size=4))
not_str = st.one_of(st.integers(), st.floats(allow_nan=True), st.lists(st.integers(), max_size=2))
not_bool = st.one_of(st.integers(), st.text(max_size=3), st.none())
not_number = st.one_of(
    st.booleans(), st.text(max_size=4), st.none(), st.lists(st.floats(), max_size=2)
)
bad_float = st.sampled_from([float("nan"), float("inf"), -float("inf")])


def bad_choice(choices):
    return st.one_of(not_str, st.text(max_size=10).filter(lambda s: s not in choices))


# For each option, values that are invalid for it whatever the other options are.
INVALID = {
    "workers": st.one_of(st.integers(-(10**6), 0), st.integers(301, 10**12), not_int),
    "estimator": bad_choice(ESTIMATORS + ("uniform",)),
    "ablation": bad_choice(grappa.ABLATIONS),
    "weighting": bad_choice(("inverse", "coverage")),
    "coverage_floor": st.one_of(
        st.floats(max_value=0.0), st.floats(min_value=1.0001), bad_float, not_number
    ),
    "shrink": st.one_of(
        st.floats(min_value=1.0001),
        st.floats(max_value=-0.0001),
        bad_float,
        st.text(max_size=4).filter(lambda s: s != "auto"),
    ),
    "repartition_every": st.one_of(
        st.integers(max_value=-1), not_int.filter(lambda v: v is not None)
    ),
    "epochs": st.one_of(st.integers(max_value=0), not_int),
    "seed": st.one_of(st.integers(max_value=-1), st.integers(min_value=2**63), not_int),
    "method": bad_choice(grappa.METHODS),
    "num_chunks": st.one_of(st.integers(max_value=0), not_int.filter(lambda v: v is not None)),
    "halo": not_bool,
    "batching": bad_choice(("minibatch", "full")),
    "model": bad_choice(tuple(zg.models.MODELS)),
    "hidden_dim": st.one_of(st.integers(max_value=0), not_int),
    "num_layers": st.one_of(st.integers(max_value=0), st.integers(65, 10**18), not_int),
    "dropout": st.one_of(
        st.floats(min_value=1.0), st.floats(max_value=-0.001), bad_float, not_number
    ),
    "fanouts": st.one_of(
        st.lists(st.integers(-5, 0), min_size=2, max_size=2),
        st.just([]),
        st.integers(),
        st.text(max_size=3),
        st.lists(st.integers(1, 9), min_size=3, max_size=5),
    ),
    "step_shapes": bad_choice(("dynamic", "envelope")),
    "batch_size": st.one_of(st.integers(max_value=0), not_int),
    "lr": st.one_of(st.floats(max_value=0.0), bad_float, not_number),
    "weight_decay": st.one_of(st.floats(max_value=-1e-9), bad_float, not_number),
    "eval_every": st.one_of(st.integers(max_value=0), not_int),
    "backend": st.one_of(not_str, st.text(max_size=6).filter(lambda s: s not in ("gloo", "nccl"))),
    "timeout": st.one_of(
        st.floats(max_value=0.0), st.floats(min_value=1.1e7), bad_float, not_number
    ),
    "threads": st.one_of(st.integers(max_value=0), not_int.filter(lambda v: v is not None)),
    "history_path": st.one_of(
        st.integers(), st.just(""), st.lists(st.text(max_size=2), max_size=2)
    ),
    "checkpoint_dir": st.one_of(st.integers(), st.just(""), st.booleans()),
    "checkpoint_every": st.one_of(
        st.integers(max_value=0), not_int.filter(lambda v: v is not None)
    ),
    "progress": not_bool.filter(lambda v: v is not None),  # None: auto (a terminal)
    "partition": st.one_of(st.text(max_size=4), st.integers(), st.lists(st.integers(), max_size=2)),
    "colour": st.text(max_size=4),  # not an option at all
}


@FUZZ
@given(
    bad=st.dictionaries(
        st.sampled_from(sorted(INVALID)), st.none(), min_size=1, max_size=3
    ).flatmap(lambda keys: st.fixed_dictionaries({k: INVALID[k] for k in keys}))
)
def test_train_rejects_invalid_options_before_starting_workers(graph, bad):
    options = {"workers": 2, "epochs": 1, "seed": 0, **SMALL, **bad}
    with pytest.raises((TypeError, ValueError)) as info:
        grappa.train(graph, **options)
    message = str(info.value)
    assert any(name in message for name in bad), message


# ----------------------------------------------------------------------------- python -m zg.grappa

VALID = {
    "dataset": "cora",
    "trainer": "grappa",
    "estimator": "batch",
    "epochs": 2,
    "batch_size": 70,
    "hidden_dim": 16,
    "timeout": 60.0,
    "seed": 0,
}
TEXT = json.dumps(VALID, indent=1).encode()


def would_train(data: bytes) -> bool:
    """Whether ``data`` is a config the command would really run (then the fuzzer skips it)."""
    try:
        values = json.loads(data.decode("utf-8"))
        dataset = values.pop("dataset", None)
        TrainConfig.from_dict(values)
    except Exception:
        return False
    return isinstance(dataset, str) and dataset.lower() == "cora"


def run_main(path, out):
    with pytest.raises(SystemExit) as info:
        main(["--config", str(path), "--out", str(out)])
    return info.value.code


@FUZZ
@given(
    cut=st.integers(0, len(TEXT) - 2),
    flips=st.lists(st.tuples(st.integers(0, len(TEXT) - 1), st.integers(0, 255)), max_size=3),
)
def test_command_line_on_truncated_or_corrupt_config(tmp_path_factory, capsys, cut, flips):
    data = bytearray(TEXT)
    for at, value in flips:
        data[at] = value
    data = bytes(data[:cut]) if not flips else bytes(data)
    assume(not would_train(data))
    folder = tmp_path_factory.mktemp("cli")
    (folder / "cfg.json").write_bytes(data)
    assert run_main(folder / "cfg.json", folder / "history.json") == 2
    err = capsys.readouterr().err
    assert "--config" in err and str(folder / "cfg.json") in err
    assert not (folder / "history.json").exists()
    assert sorted(p.name for p in folder.iterdir()) == ["cfg.json"]  # nothing else written


@pytest.mark.parametrize(
    "text,expected",
    [
        ("[1, 2]", "config must be a dict"),
        ("null", "config must be a dict"),
        ('{"dataset": "cora", "epochs": 0}', "epochs must be >= 1"),
        ('{"dataset": "citeseer"}', "unknown dataset"),
        ('{"dataset": {"npz": "/nonexistent/g.npz"}}', "dataset"),
        ('{"dataset": "cora", "lr": NaN}', "lr must be finite"),
        ('{"dataset": "cora", "timeout": 1e400}', "timeout must be finite"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"a": ' * 50_000 + "1" + "}" * 50_000, "nested too deeply"),
        ('{"dataset": "cora", "fanouts": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
        ('{"dataset": {"name": ["cora"]}}', "dataset's 'name' must be a str, got list"),
        ('{"dataset": {"npz": {"path": 1}}}', "dataset's 'npz' must be a str, got dict"),
        ('{"dataset": "cora", "fanouts": [[15], [10]]}', "fanouts[0] must be an int"),
    ],
)
def test_command_line_names_what_is_wrong(tmp_path, capsys, text, expected):
    (tmp_path / "cfg.json").write_text(text)
    assert run_main(tmp_path / "cfg.json", tmp_path / "out.json") == 2
    assert expected in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()
    assert run_main(tmp_path / "missing.json", tmp_path / "out.json") == 2


JSON_LEAVES = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=4)
NESTED = st.recursive(
    JSON_LEAVES,
    lambda inner: (
        st.lists(inner, min_size=1, max_size=3)
        | st.dictionaries(st.text(max_size=3), inner, min_size=1, max_size=3)
    ),
    max_leaves=10,
).filter(lambda v: isinstance(v, (list, dict)))


@FUZZ
@given(field=st.sampled_from(FIELDS + ["dataset"]), value=NESTED)
def test_command_line_names_the_field_a_wrongly_typed_value_sits_in(
    tmp_path_factory, capsys, field, value
):
    """Any nested list or object in any field of the config file: exit status 2 and a message
    naming the file and the field (a TypeError or RecursionError traceback before)."""
    values = {**VALID, field: value}
    data = json.dumps(values).encode()
    assume(not would_train(data))
    folder = tmp_path_factory.mktemp("typed")
    (folder / "cfg.json").write_bytes(data)
    assert run_main(folder / "cfg.json", folder / "out.json") == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(folder / "cfg.json") in err
    assert field in err, err
    assert not (folder / "out.json").exists()


@pytest.mark.slow
def test_command_line_in_a_real_process_reports_without_a_traceback(tmp_path):
    (tmp_path / "cfg.json").write_bytes(TEXT[: len(TEXT) // 2])
    done = processes.run(
        [
            sys.executable,
            "-m",
            "zg.grappa",
            "--config",
            str(tmp_path / "cfg.json"),
            "--out",
            str(tmp_path / "out.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "cannot read a JSON config" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out.json").exists()


# ----------------------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def checkpoint(graph, tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpt")
    run = dict(workers=2, trainer="psgd_pa", epochs=1, seed=0, **SMALL)
    grappa.train(graph, checkpoint_dir=str(folder), **run)
    cfg = TrainConfig(**run, checkpoint_dir=str(folder)).validated()
    return (folder / "checkpoint.pt").read_bytes(), cfg


@pytest.mark.slow
@FUZZ
@given(
    cut=st.integers(0, 200_000),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
)
def test_read_checkpoint_on_truncated_or_corrupt_bytes(
    graph, checkpoint, tmp_path_factory, cut, flips
):
    raw, cfg = checkpoint
    data = bytearray(raw[:cut])
    for at, value in flips:
        if data:
            data[at % len(data)] = value
    path = tmp_path_factory.mktemp("bad") / "checkpoint.pt"
    path.write_bytes(bytes(data))
    try:
        state = read_checkpoint(str(path), cfg, graph, 2)
    except CheckpointError as exc:
        assert str(path) in str(exc)
        return
    # Only changes to tensor bytes can leave a readable, consistent checkpoint.
    assert state["next_epoch"] == 1 and len(state["model"]) == 2


# ----------------------------------------------------------------------------- output paths


def _read_only_folder(tmp_path):
    """A real folder this process cannot write into (root ignores permission bits: /proc/self)."""
    if os.geteuid() == 0:
        return "/proc/self"
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    return str(folder)


def test_check_output_paths_names_the_field_and_the_problem(tmp_path):
    (tmp_path / "file").write_text("x")
    (tmp_path / "ckpt" / "checkpoint.pt").mkdir(parents=True)
    ro = _read_only_folder(tmp_path)
    cases = [
        (dict(history_path=str(tmp_path)), ValueError, "history_path .* is a directory"),
        (dict(model_path=str(tmp_path)), ValueError, "model_path .* is a directory"),
        (
            dict(checkpoint_dir=str(tmp_path / "file")),
            ValueError,
            "checkpoint_dir .* is a file, not a folder",
        ),
        (
            dict(model_path=str(tmp_path / "missing" / "m.pt")),
            ValueError,
            "model_path .* does not exist",
        ),
        (
            dict(history_path=str(tmp_path / "file" / "h.json")),
            ValueError,
            "history_path .* is a file, not a folder",
        ),
        (
            dict(checkpoint_dir=str(tmp_path / "file" / "c")),
            ValueError,
            "checkpoint_dir .* is a file, not a folder",
        ),
        (dict(checkpoint_dir=str(tmp_path / "ckpt")), ValueError, "checkpoint.pt' is a directory"),
        (
            dict(history_path=os.path.join(ro, "h.json")),
            ValueError,
            "history_path .* is not writable",
        ),
        (dict(model_path=os.path.join(ro, "m.pt")), ValueError, "model_path .* is not writable"),
        (
            dict(checkpoint_dir=os.path.join(ro, "c")),
            ValueError,
            "checkpoint_dir .* is not writable",
        ),
        (
            dict(history_path=str(tmp_path / "same"), model_path=str(tmp_path / "same")),
            ValueError,
            "history_path and model_path name the same file",
        ),
        (dict(history_path=3), TypeError, "history_path must be a path"),
        (dict(checkpoint_dir=True), TypeError, "checkpoint_dir must be a path"),
    ]
    before = sorted(p.name for p in tmp_path.rglob("*"))
    for kwargs, error, match in cases:
        with pytest.raises(error, match=match):
            check_output_paths(**kwargs)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing created
    # Fine: new files in existing folders, history and checkpoint folders still to be made.
    check_output_paths(
        str(tmp_path / "h.json"), str(tmp_path / "m.pt"), str(tmp_path / "new" / "c")
    )
    check_output_paths(str(tmp_path / "a" / "b" / "h.json"), None, str(tmp_path / "ckpt2"))
    check_output_paths(str(tmp_path / "file"), None, None)  # an existing file: replaced


@pytest.mark.parametrize("how", ["symlink", "hardlink", "dotted", "folder-link"])
def test_two_outputs_naming_one_file_by_other_names_are_refused(tmp_path, how):
    """The probe: ``--json h.json`` a symbolic link to ``--model-path m.pt`` passed the check
    (it compared os.path.abspath), the run finished, one output overwrote the other and the
    command failed on a utf-8 decode naming nothing. Both sides are now followed to their
    final targets (and a hard link counts as the file), before anything runs."""
    model = tmp_path / "m.pt"
    model.write_bytes(b"old model")
    if how == "symlink":
        history = tmp_path / "h.json"
        history.symlink_to(model)
    elif how == "hardlink":
        history = tmp_path / "h.json"
        os.link(model, history)
    elif how == "dotted":
        (tmp_path / "sub").mkdir()
        history = tmp_path / "sub" / ".." / "m.pt"
    else:
        (tmp_path / "alias").symlink_to(tmp_path, target_is_directory=True)
        history = tmp_path / "alias" / "m.pt"
    with pytest.raises(ValueError, match=r"history_path and model_path name the same file"):
        check_output_paths(str(history), str(model), None)
    # The checkpoint file inside checkpoint_dir, reached through a link, counts too.
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (tmp_path / "link.pt").symlink_to(ckpt / "checkpoint.pt")
    (ckpt / "checkpoint.pt").write_bytes(b"")
    with pytest.raises(ValueError, match=r"model_path and checkpoint_dir name the same file"):
        check_output_paths(None, str(tmp_path / "link.pt"), str(ckpt))
    assert model.read_bytes() == b"old model"


def test_an_output_reaching_an_input_through_a_link_is_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    graph = data / "g.npz"
    graph.write_bytes(b"graph")
    (tmp_path / "h.json").symlink_to(graph)
    (tmp_path / "d").symlink_to(data, target_is_directory=True)
    cases = [
        (dict(history_path=str(tmp_path / "h.json")), "history_path .* is the run's input"),
        (dict(model_path=str(tmp_path / "d" / "m.pt")), "model_path .* is the run's input"),
        (dict(checkpoint_dir=str(tmp_path / "d" / "c")), "checkpoint_dir .* is the run's input"),
    ]
    for kwargs, match in cases:
        with pytest.raises(ValueError, match=match):
            check_output_paths(**kwargs, inputs=[str(data)])
    os.link(graph, tmp_path / "hard.npz")
    with pytest.raises(ValueError, match="model_path .* is the run's input"):
        check_output_paths(None, str(tmp_path / "hard.npz"), None, inputs=[str(graph)])
    assert graph.read_bytes() == b"graph"


@pytest.mark.parametrize("field", ["out", "history_path", "model_path", "checkpoint_dir"])
def test_command_line_checks_output_paths_before_training(tmp_path, capsys, field):
    (tmp_path / "file").write_text("x")
    config = dict(VALID)
    out = tmp_path / "history.json"
    if field == "out":
        out = tmp_path  # a directory
    elif field == "checkpoint_dir":
        config[field] = str(tmp_path / "file")
    else:
        config[field] = str(tmp_path)
    (tmp_path / "cfg.json").write_text(json.dumps(config))
    if field == "history_path":  # --out would replace it: leave --out away
        with pytest.raises(SystemExit) as info:
            main(["--config", str(tmp_path / "cfg.json")])
        assert info.value.code == 2
    else:
        assert run_main(tmp_path / "cfg.json", out) == 2
    err = capsys.readouterr().err
    assert ("--out" if field == "out" else field) in err and str(tmp_path) in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.json", "file"]  # no stray file


@pytest.mark.slow
def test_command_line_out_directory_in_a_real_process(tmp_path):
    (tmp_path / "cfg.json").write_text(json.dumps(VALID))
    done = processes.run(
        [
            sys.executable,
            "-m",
            "zg.grappa",
            "--config",
            str(tmp_path / "cfg.json"),
            "--out",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert (
        "--out" in done.stderr
        and "is a directory" in done.stderr
        and "Traceback" not in done.stderr
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.json"]


def test_train_checks_output_paths_before_starting_workers(graph, tmp_path):
    with pytest.raises(ValueError, match="history_path .* is a directory"):
        grappa.train(graph, workers=2, epochs=1, seed=0, history_path=str(tmp_path), **SMALL)
    assert list(tmp_path.iterdir()) == []
