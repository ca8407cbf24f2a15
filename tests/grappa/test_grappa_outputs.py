"""No run writes over what it reads: ``--out``, ``history_path``, ``model_path`` and
``checkpoint_dir`` naming the config file, the dataset file or folder, or a path inside the
dataset folder are refused before anything is read or written (exit status 2, the input
untouched)."""

import json

import pytest
from graphs import tiny

from zg import datasets
from zg.cli import main as zg_main
from zg.grappa.__main__ import main as grappa_main


@pytest.fixture
def inputs(tmp_path):
    """A config file naming an npz dataset, and a graph folder, with their bytes."""
    g = tiny(200)
    npz = tmp_path / "graph.npz"
    datasets.save_npz(g, npz)
    folder = tmp_path / "graph_folder"
    datasets.save_folder(g, folder)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"dataset": {"npz": str(npz)}, "workers": 2, "epochs": 1}))
    return config, npz, folder


def _snapshot(*paths):
    out = {}
    for p in paths:
        files = [p] if p.is_file() else sorted(q for q in p.rglob("*") if q.is_file())
        out.update({str(q): q.read_bytes() for q in files})
    return out


def _refused(capsys, run, *names):
    with pytest.raises(SystemExit) as exit_:
        run()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "input" in err and all(n in err for n in names), err


@pytest.mark.parametrize("target", ["config", "npz"])
def test_out_naming_an_input_is_refused(inputs, tmp_path, capsys, target):
    config, npz, folder = inputs
    before = _snapshot(config, npz)
    out = {"config": config, "npz": npz}[target]
    _refused(
        capsys, lambda: grappa_main(["--config", str(config), "--out", str(out)]), "history_path"
    )
    _refused(capsys, lambda: zg_main(["grappa", "--config", str(config), "--json", str(out)]))
    assert _snapshot(config, npz) == before


@pytest.mark.parametrize(
    "field, value",
    [
        ("history_path", "{config}"),
        ("model_path", "{npz}"),
        ("history_path", "{folder}/history.json"),
        ("model_path", "{folder}/model.pt"),
        ("checkpoint_dir", "{folder}"),
        ("checkpoint_dir", "{folder}/ckpt"),
    ],
)
def test_a_configs_own_outputs_may_not_name_or_lie_inside_an_input(inputs, capsys, field, value):
    config, npz, folder = inputs
    before = _snapshot(config, npz, folder)
    values = json.loads(config.read_text())
    values["dataset"] = {"folder": str(folder)} if "{folder}" in value else values["dataset"]
    values[field] = value.format(config=config, npz=npz, folder=folder)
    config.write_text(json.dumps(values))
    before[str(config)] = config.read_bytes()
    _refused(capsys, lambda: grappa_main(["--config", str(config)]), field)
    assert _snapshot(config, npz, folder) == before
