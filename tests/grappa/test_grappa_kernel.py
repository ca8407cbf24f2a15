"""TrainConfig.kernel: which kernels each worker's Engine runs (zg.kernels.KERNELS). The library
defaults to the readable torch code, the command line (``python -m zg.grappa``, ``zg grappa``)
to "auto"; a config saved before the field existed is still read; the history records the
kernel that ran."""

import dataclasses
import json

import pytest
from graphs import tiny

import zg
from zg import grappa
from zg.grappa import __main__ as grappa_main
from zg.grappa.checkpoint import RESUMABLE_CHANGES
from zg.grappa.config import Runtime, TrainConfig

pytestmark = pytest.mark.timeout(300)

SMALL = dict(
    batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, run_timeout=240
)


def test_the_library_default_is_torch():
    assert TrainConfig().kernel == "torch"
    assert TrainConfig(trainer="single").validated().kernel == "torch"
    assert "kernel" in [f.name for f in dataclasses.fields(Runtime)]
    assert TrainConfig.from_dict({"epochs": 2}).kernel == "torch"
    for kernel in zg.kernels.KERNELS:
        if kernel == "fused" and not zg.kernels.available():
            continue
        assert TrainConfig(kernel=kernel).validated().kernel == kernel


@pytest.mark.parametrize("bad", ["numba", "", "Torch", None, 1, ["torch"]])
def test_a_bad_kernel_is_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match="kernel") as info:
        TrainConfig(kernel=bad).validated()
    assert "'auto', 'fused', 'torch'" in str(info.value)
    with pytest.raises(ValueError, match="kernel"):
        TrainConfig.from_dict({"kernel": bad})
    with pytest.raises(ValueError, match="kernel"):
        grappa.train(tiny(), workers=2, epochs=1, kernel=bad, **SMALL)  # before any process


def test_fused_does_not_go_with_nccl():
    if not zg.kernels.available():
        pytest.skip("numba is not installed")
    with pytest.raises(ValueError, match="kernel='fused'.*backend='nccl'"):
        TrainConfig(kernel="fused", backend="nccl").validated()


def test_a_config_saved_before_the_field_is_read():
    old = TrainConfig(trainer="isolated").to_dict()
    del old["kernel"]
    saved = TrainConfig.saved_form(old)
    assert saved["kernel"] == "auto"  # what the worker's Engine ran then (its own default)
    assert TrainConfig.from_dict(saved).kernel == "auto"
    assert TrainConfig.from_dict(old).kernel == "torch"  # a config file without it: the default
    round_trip = TrainConfig.from_dict(TrainConfig(kernel="auto").to_dict())
    assert round_trip.kernel == "auto"
    # A resumed run may change it: the kernels compute the same values.
    assert "kernel" in RESUMABLE_CHANGES


# ----------------------------------------------------------------------------- the command lines


def _capture(monkeypatch):
    """Replace the launch by a recorder: the configs the command line would run."""
    seen = []

    def launch(g, prepared):
        seen.extend(cfg for cfg, *_ in prepared)
        final = {"val_acc": 0.5, "test_acc": 0.5}
        return [{"final": final, "bytes_per_epoch_per_worker": 0.0, "epochs": []}]

    monkeypatch.setattr(grappa_main, "launch_prepared", launch)
    return seen


def _config(tmp_path, **values):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"dataset": "cora", "workers": 2, "epochs": 1, **values}))
    return str(path)


def test_python_m_zg_grappa_defaults_to_the_librarys_kernel(monkeypatch, tmp_path, capsys):
    seen = _capture(monkeypatch)
    assert grappa_main.main(["--config", _config(tmp_path)]) == 0
    assert seen[-1].kernel == grappa_main.COMMAND_LINE_KERNEL == grappa.TrainConfig().kernel
    assert grappa_main.main(["--config", _config(tmp_path, kernel="auto")]) == 0
    assert seen[-1].kernel == "auto"  # opted into
    assert grappa_main.main(["--config", _config(tmp_path, kernel="torch")]) == 0
    assert seen[-1].kernel == "torch"  # the config's own value
    assert (
        grappa_main.main(["--config", _config(tmp_path, kernel="torch"), "--kernel", "auto"]) == 0
    )
    assert seen[-1].kernel == "auto"  # the flag wins over the file
    with pytest.raises(SystemExit) as info:
        grappa_main.main(["--config", _config(tmp_path), "--kernel", "numba"])
    assert info.value.code == 2 and "--kernel" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        grappa_main.main(["--config", _config(tmp_path, kernel="numba")])
    assert info.value.code == 2 and "kernel must be one of" in capsys.readouterr().err


def test_zg_grappa_defaults_to_the_librarys_kernel(monkeypatch, capsys):
    from zg.cli import main

    seen = _capture(monkeypatch)
    assert main(["grappa", "--dataset", "cora", "--workers", "2", "--epochs", "1"]) == 0
    assert seen[-1].kernel == grappa.TrainConfig().kernel == "torch"
    assert main(["grappa", "--dataset", "cora", "--workers", "2", "--kernel", "auto"]) == 0
    assert seen[-1].kernel == "auto"


# ----------------------------------------------------------------------------- the history


@pytest.mark.slow
def test_the_history_records_the_kernel_that_ran():
    g = tiny()
    runs = [
        dict(workers=2, epochs=1, seed=0, kernel="torch", **SMALL),
        dict(workers=2, epochs=1, seed=0, kernel="auto", step_shapes="envelope", **SMALL),
        dict(workers=2, epochs=1, seed=0, kernel="auto", batching="full", **SMALL),
    ]
    torch_run, auto_run, full_run = grappa.train_many(g, runs)
    assert torch_run["config"]["kernel"] == "torch" and torch_run["kernel"] == "torch"
    ran = zg.kernels.resolve("auto", "cpu")
    assert auto_run["config"]["kernel"] == "auto"
    # The Engine's settings.kernel: "auto" until the Engine records the resolved kernel.
    assert auto_run["kernel"] in ("auto", ran)
    assert full_run["kernel"] == ran  # no Engine with batching="full": resolved by the worker
