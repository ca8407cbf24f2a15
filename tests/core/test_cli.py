"""The ``zg`` command (zg.cli, ``python -m zg``): info, train, grappa, bench, report.

Real processes where the process boundary matters (exit status, stdout/stderr, torchrun);
``zg.cli.main`` in-process for the many flag checks. Cora with small settings throughout.
"""

import dataclasses
import importlib.metadata
import importlib.util
import json
import os
import resource
import signal
import sys
from pathlib import Path

import processes
import pytest
import torch

import zg
from zg import cli, datasets
from zg.grappa.train import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--fanouts", "5,5", "--hidden", "16", "--batch-size", "70", "--no-progress"]
GRAPPA_SMALL = [
    "--dataset",
    "cora",
    "--workers",
    "2",
    "--epochs",
    "1",
    "--batch-size",
    "64",
    "--hidden-dim",
    "16",
    "--fanouts",
    "5,5",
    "--timeout",
    "60",
]


def zg_process(*args, cwd, timeout=240, env=None, command=None, **popen):
    """``python -m zg ARGS`` (this checkout first on the path) -> CompletedProcess."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    command = command or [sys.executable, "-m", "zg"]
    return processes.run(
        command + [str(a) for a in args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        **popen,
    )


def exits_with_2(capsys, argv):
    """Run zg in-process with flags that must be refused: exit status 2 -> the message."""
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# ----------------------------------------------------------------------------- zg info


@pytest.mark.slow
def test_info_in_a_real_process(tmp_path):
    done = zg_process("info", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert torch.__version__ in out and "CUDA devices" in out and "threads" in out
    dgl = importlib.metadata.version("dgl") if importlib.util.find_spec("dgl") else "not installed"
    assert f"DGL           {dgl}" in out
    assert "numba" in out and "machine" in out and "cores" in out


def test_info_json_has_the_machine_note(capsys):
    assert cli.main(["info", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["torch"] == torch.__version__ and report["zg"] == zg.__version__
    assert report["cuda_available"] == torch.cuda.is_available()
    assert len(report["cuda_devices"]) == (
        torch.cuda.device_count() if torch.cuda.is_available() else 0
    )
    assert report["threads"]["torch_intra_op"] == torch.get_num_threads()
    assert set(report["machine"]) >= {
        "cpu",
        "cores",
        "memory_gib",
        "torch",
        "date",
    }  # zg.experiments.machine_note()
    assert report["repository"] == str(ROOT)


# ----------------------------------------------------------------------------- zg train


@pytest.mark.slow
def test_train_cora_in_a_real_process(tmp_path):
    out = tmp_path / "out.json"
    done = zg_process(
        "train", "--dataset", "cora", "--epochs", 2, *SMALL, "--json", out, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for column in (
        "seconds",
        "host syncs/iter",
        "overflows",
        "replays",
        "loss",
        "val acc",
        "test acc",
    ):
        assert column in done.stdout
    history = json.loads(out.read_text())
    assert history["format"] == "zg.train.history" and len(history["epochs"]) == 2
    assert history["config"]["fanouts"] == [5, 5] and history["graph"]["name"] == "cora"
    for row in history["epochs"]:
        assert {
            "seconds",
            "iterations",
            "host_syncs",
            "overflows",
            "replays",
            "loss",
            "val_acc",
            "test_acc",
        } <= set(row)
        assert 0.0 <= row["val_acc"] <= 1.0 and 0.0 <= row["test_acc"] <= 1.0
        assert row["iterations"] == 2  # 140 train nodes, batch 70
    assert history["final"]["host_syncs_per_iteration"] == 0  # the envelope step
    assert history["final"]["val_acc"] == history["epochs"][-1]["val_acc"]
    assert history["machine"]["cores"] == os.cpu_count()
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left


@pytest.mark.slow
def test_bad_fanouts_in_a_real_process(tmp_path):
    done = zg_process("train", "--fanouts", "x", cwd=tmp_path, timeout=120)
    assert done.returncode == 2
    assert "--fanouts" in done.stderr and "15,10,5" in done.stderr
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--fanouts", "0,5"], "--fanouts: '0,5': every fanout must be an integer >= 1"),
        (["--fanouts", ""], "--fanouts"),
        (["--model", "mlp"], "--model: invalid choice: 'mlp' (choose from 'sage', 'gcn', 'gat')"),
        (["--mode", "fast"], "choose from 'auto', 'dynamic', 'eager', 'static', 'graph'"),
        (["--layers", "2", "--fanouts", "5,5,5"], "--layers 2 but --fanouts 5,5,5 has 3 entries"),
        (["--pipeline", "dynamic"], "--pipeline and --capture are replaced by --mode"),
        (["--capture"], "--pipeline and --capture are replaced by --mode"),
        (["--mode", "graph", "--device", "cpu"], "--mode graph captures a CUDA Graph"),
        (["--device", "tpu"], "--device 'tpu'"),
        (
            ["--dataset", "pubmed"],
            "--dataset 'pubmed': unknown dataset; choose one of cora, ogbn-arxiv",
        ),
        (["--dataset", "missing.npz"], "--dataset missing.npz: no such file or folder"),
        (["--batch-size", "0"], "--batch-size: must be an integer >= 1, got 0"),
        (["--epochs", "two"], "--epochs: 'two' is not an integer"),
        (["--lr", "0"], "--lr: must be a finite number > 0"),
        (["--lr", "1e-320"], "--lr: must be a finite number > 0 and a normal float"),
        (["--seed", "-1"], "--seed: seed must be in [0, 9223372036854775807], got -1"),
        (["--seed", "99999999999999999999"], "--seed: seed must be in [0, 9223372036854775807]"),
        (["--epochs", "2", "--eval-every", "3"], "--eval-every 3 is more than --epochs 2"),
        (
            ["--json", "{tmp}/no/such/folder/out.json"],
            "the folder {tmp}/no/such/folder does not exist",
        ),
        (["--json", "{tmp}"], "is a folder"),
        (["--dataset", "{tmp}/g.npz", "--root", "{tmp}"], "--root applies to the named datasets"),
        (["--dataset", "cora", "--root", "{tmp}/nowhere"], "--root {tmp}/nowhere: no such folder"),
    ],
)
def test_train_refuses_bad_flags_before_anything_runs(tmp_path, capsys, argv, expected):
    datasets.save_npz(zg.Graph.from_edges([0], [1], num_nodes=2), tmp_path / "g.npz")
    before = sorted(tmp_path.iterdir())
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    err = exits_with_2(capsys, ["train", *argv])
    assert expected.replace("{tmp}", str(tmp_path)) in err
    assert sorted(tmp_path.iterdir()) == before  # nothing written


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--layers", "100000"], "--layers: must be an integer in [1, 64], got 100000;"),
        (["--layers", "65"], "--layers: must be an integer in [1, 64], got 65;"),
        (["--layers", "9" * 100_000], "(100,000 characters) is not an integer"),
        (["--fanouts", ",".join(["10"] * 100_000)], "has 100,000 fanouts; a model has at most 64"),
        (["--fanouts", "x" * 100_000], "(100,000 characters) is not a list of fanouts"),
        (["--batch-size", "-" + "9" * 5000], "--batch-size"),
    ],
)
def test_huge_train_flags_give_a_short_error(capsys, argv, expected):
    """The probe: --layers 100000 printed a 700 KB error. Now --layers is bounded as zg
    grappa's num_layers is, and every message quotes at most a short piece of the value."""
    err = exits_with_2(capsys, ["train", *argv])
    assert expected in err
    assert len(err) < 2000 and len(err.strip().splitlines()[-1]) < 300


def test_train_and_grappa_bound_layers_alike():
    from zg.grappa._checks import MAX_LAYERS

    assert cli.MAX_LAYERS == MAX_LAYERS == 64
    assert cli._layers("64") == 64


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the message on a machine without CUDA"
)
def test_train_refuses_cuda_where_there_is_none(capsys):
    assert "CUDA is not available here" in exits_with_2(capsys, ["train", "--device", "cuda"])


def test_train_refuses_a_graph_it_cannot_train_on(tmp_path, capsys):
    datasets.save_npz(zg.Graph.from_edges([0, 1], [1, 0], num_nodes=3), tmp_path / "bare.npz")
    err = exits_with_2(
        capsys,
        ["train", "--dataset", str(tmp_path / "bare.npz"), "--json", str(tmp_path / "out.json")],
    )
    assert "has no features (x), labels (y), a train split, a val split" in err
    assert not (tmp_path / "out.json").exists()


@pytest.mark.slow
def test_train_on_files_and_folders(tmp_path, capsys):
    """A graph from save_npz and from save_folder (memory-mapped), other models and pipelines."""
    g = datasets.load("cora")
    datasets.save_npz(g, tmp_path / "cora.npz")
    datasets.save_folder(g, tmp_path / "cora-folder")
    for dataset, extra in [
        (tmp_path / "cora.npz", ["--model", "gcn"]),
        (tmp_path / "cora-folder", ["--mode", "dynamic", "--model", "gat", "--layers", "2"]),
    ]:
        out = tmp_path / "out.json"
        assert (
            cli.main(
                [
                    "train",
                    "--dataset",
                    str(dataset),
                    "--epochs",
                    "1",
                    *SMALL,
                    *extra,
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
        history = json.loads(out.read_text())
        assert history["config"]["dataset"] == str(dataset) and len(history["epochs"]) == 1
    assert history["config"]["mode"] == "dynamic" and history["epochs"][0]["host_syncs"] > 0
    assert "val acc" in capsys.readouterr().out


def test_train_keeps_every_epoch_stats_field(tmp_path, monkeypatch):
    """Fields the Engine may add to EpochStats later reach the JSON without a change here."""

    @dataclasses.dataclass
    class Extended(zg.EpochStats):
        new_measurement: float = 1.5

    train_epoch = zg.Engine.train_epoch

    def extended(self, *args, **kwargs):
        return Extended(**dataclasses.asdict(train_epoch(self, *args, **kwargs)))

    monkeypatch.setattr(zg.Engine, "train_epoch", extended)
    out = tmp_path / "out.json"
    assert cli.main(["train", "--epochs", "1", *SMALL, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["epochs"][0]["new_measurement"] == 1.5


def test_train_ogb_dataset_from_root(require, tmp_path, capsys):
    """zg train --dataset ogbn-arxiv --root DIR, on a small graph in OGB's layout (offline)."""
    from zg import ogbn

    with ogbn._importing_ogb():
        require("ogb.nodeproppred")
    from test_ogbn import write_csv_dataset

    write_csv_dataset(tmp_path / "ogb", "ogbn-arxiv", "time", years=True)
    out = tmp_path / "out.json"
    assert (
        cli.main(
            [
                "train",
                "--dataset",
                "ogbn-arxiv",
                "--root",
                str(tmp_path / "ogb"),
                "--epochs",
                "1",
                *SMALL,
                "--json",
                str(out),
            ]
        )
        == 0
    )
    history = json.loads(out.read_text())
    assert history["graph"]["name"] == "ogbn-arxiv" and history["graph"]["num_nodes"] == 60
    # Files missing and downloads refused: exit status 1, one line naming dataset and folder.
    capsys.readouterr()
    assert (
        cli.main(
            [
                "train",
                "--dataset",
                "ogbn-products",
                "--root",
                str(tmp_path / "ogb"),
                "--no-download",
            ]
        )
        == 1
    )
    err = capsys.readouterr().err
    assert err.startswith("zg train: error: --dataset ogbn-products: ogbn-products:")
    assert str(tmp_path / "ogb" / "ogbn_products") in err and "Traceback" not in err


# ----------------------------------------------------------------------------- zg grappa


def grappa_parser():
    return cli.build_parser()._subparsers._group_actions[0].choices["grappa"]


def test_grappa_has_one_flag_per_train_config_field():
    actions = {a.dest: a for a in grappa_parser()._actions}
    assert "dataset" in actions and "root" in actions  # the command line's, not the config's
    for field in dataclasses.fields(TrainConfig):
        assert field.name in actions, f"no flag for TrainConfig.{field.name}"
        assert "--" + field.name.replace("_", "-") in actions[field.name].option_strings
    assert "--json" in actions["history_path"].option_strings


def test_grappa_flags_convert_to_config_values(tmp_path):
    parser = cli.build_parser()
    args = parser.parse_args(
        [
            "grappa",
            "--fanouts",
            "5,5",
            "--num-chunks",
            "none",
            "--repartition-every",
            "0",
            "--halo",
            "--shrink",
            "0.5",
            "--lr",
            "0.02",
            "--backend",
            "gloo",
            "--run-timeout",
            "none",
            "--no-progress",
            "--json",
            str(tmp_path / "h.json"),
        ]
    )
    values = cli._grappa_values(args, args.subparser)
    assert values == {
        "fanouts": [5, 5],
        "num_chunks": None,
        "repartition_every": 0,
        "halo": True,
        "shrink": 0.5,
        "lr": 0.02,
        "backend": "gloo",
        "run_timeout": None,
        "progress": False,
        "history_path": str(tmp_path / "h.json"),
        "dataset": "cora",
    }
    cfg = TrainConfig.from_dict(
        {k: v for k, v in values.items() if k != "dataset"}
    )  # a valid config
    assert cfg.shrink == 0.5 and cfg.halo is True
    args = parser.parse_args(
        ["grappa", "--shrink", "auto", "--dataset", "ogbn-arxiv", "--root", str(tmp_path)]
    )
    values = cli._grappa_values(args, args.subparser)
    assert values["shrink"] == "auto"
    assert values["dataset"] == {
        "name": "ogbn-arxiv",
        "symmetrize": True,
        "download": True,
        "root": str(tmp_path),
    }


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--estimator", "nope"], "--estimator: unknown estimator 'nope'; choose one of"),
        (["--workers", "0"], "--workers: workers must be >= 1"),
        (["--trainer", "x"], "--trainer: unknown trainer 'x'; choose one of ['grappa'"),
        (["--fanouts", "x"], "--fanouts: 'x' is not a list of fanouts"),
        (["--epochs", "1.5"], "--epochs: invalid int value"),
        (["--num-layers", "3", "--fanouts", "5,5"], "fanouts has 2 entries but num_layers=3"),
        (["--dataset", "pubmed"], "--dataset 'pubmed': unknown dataset"),
        (["--json", "{tmp}/missing/h.json"], "the folder {tmp}/missing does not exist"),
        (
            ["--config", "{tmp}/missing.json"],
            "--config {tmp}/missing.json: cannot read a JSON config",
        ),
    ],
)
def test_grappa_refuses_bad_flags(tmp_path, capsys, argv, expected):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    err = exits_with_2(capsys, ["grappa", *argv])
    assert expected.replace("{tmp}", str(tmp_path)) in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_grappa_runs_with_flags_over_a_config(tmp_path, capsys):
    """Workers started by zg (torch.multiprocessing); a flag overrides the config file."""
    (tmp_path / "cfg.json").write_text(json.dumps({"dataset": "cora", "epochs": 3, "workers": 2}))
    out = tmp_path / "history.json"
    assert (
        cli.main(
            ["grappa", "--config", str(tmp_path / "cfg.json"), *GRAPPA_SMALL, "--json", str(out)]
        )
        == 0
    )
    history = json.loads(out.read_text())
    assert history["workers"] == 2 and len(history["epochs"]) == 1  # --epochs 1 wins
    assert history["config"]["fanouts"] == [5, 5] and history["config"]["hidden_dim"] == 16
    printed = capsys.readouterr().out
    assert "bytes sent/worker" in printed and f"history written to {out}" in printed


@pytest.mark.slow
def test_grappa_under_torchrun(tmp_path):
    """The same command under torchrun: one process per worker, rank 0 reports."""
    torchrun = Path(sys.executable).with_name("torchrun")
    command = (
        [str(torchrun)] if torchrun.exists() else [sys.executable, "-m", "torch.distributed.run"]
    )
    out = tmp_path / "history.json"
    done = zg_process(
        "grappa",
        *GRAPPA_SMALL,
        "--json",
        out,
        cwd=tmp_path,
        timeout=300,
        command=command + ["--standalone", "--nproc-per-node=2", "-m", "zg"],
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    history = json.loads(out.read_text())
    assert history["workers"] == 2 and len(history["epochs"]) == 1
    assert "bytes sent/worker" in done.stdout and done.stdout.count("val acc") == 1  # rank 0 only


# ----------------------------------------------------------------------------- zg bench, zg report


@pytest.mark.slow
def test_bench_lists_and_runs_the_scripts(tmp_path, capsys):
    assert cli.main(["bench", "--list"]) == 0
    listed = capsys.readouterr().out
    for name in ("engine", "sampling", "grappa", "mmap_load"):
        assert name in listed
    assert "_machine" not in listed
    err = exits_with_2(capsys, ["bench", "nope"])
    assert "unknown benchmark 'nope'; choose one of" in err and "engine" in err
    done = zg_process("bench", "engine", "--help", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Engine benchmark" in done.stdout and "--batch-sizes" in done.stdout


def test_bench_and_report_need_a_checkout(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ZG_REPO", str(tmp_path))
    err = exits_with_2(capsys, ["bench", "engine"])
    assert f"bench not found in {tmp_path}" in err and "ZG_REPO" in err
    err = exits_with_2(capsys, ["report"])
    assert f"tools/build_report.py not found in {tmp_path}" in err


def test_report_checks_its_flags(tmp_path, capsys):
    assert "invalid choice: 'huge'" in exits_with_2(capsys, ["report", "--scale", "huge"])
    err = exits_with_2(capsys, ["report", str(tmp_path / "missing.ipynb")])
    assert "missing.ipynb: not a notebook file" in err
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------- the console script


def test_console_script_is_declared():
    import tomllib

    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"zg": "zg.cli:main"}
    module, _, function = scripts["zg"].partition(":")
    assert getattr(__import__(module, fromlist=[function]), function) is cli.main


@pytest.mark.slow
@pytest.mark.skipif(
    not Path(sys.executable).with_name("zg").exists(),
    reason="the zg console script is not installed in this environment "
    "(pip install --no-deps -e .; make test does it)",
)
def test_console_script_runs(tmp_path):
    done = zg_process(
        "info", cwd=tmp_path, timeout=120, command=[str(Path(sys.executable).with_name("zg"))]
    )
    assert done.returncode == 0, done.stderr
    assert torch.__version__ in done.stdout
    bad = zg_process(
        "train",
        "--fanouts",
        "x",
        cwd=tmp_path,
        timeout=120,
        command=[str(Path(sys.executable).with_name("zg"))],
    )
    assert bad.returncode == 2 and "--fanouts" in bad.stderr


@pytest.mark.parametrize("command", ["train", "grappa"])
def test_json_never_overwrites_the_input(tmp_path, capsys, command):
    """--json naming the dataset (a slip of tab completion) used to train, then replace the
    graph with the history; now it exits 2 before anything runs and the input is untouched."""
    g = datasets.load("cora")
    npz = tmp_path / "cora.npz"
    datasets.save_npz(g, npz)
    folder = tmp_path / "cora-folder"
    datasets.save_folder(g, folder)
    before = npz.read_bytes()
    for dataset, out in [(npz, npz), (folder, folder / "x.npy"), (folder, folder / "history.json")]:
        err = exits_with_2(capsys, [command, "--dataset", str(dataset), "--json", str(out)])
        assert "would destroy the input" in err, err
    assert npz.read_bytes() == before
    assert not (folder / "history.json").exists() and not list(
        tmp_path.glob("**/.zg-write-check-*")
    )


# ----------------------------------------------------------------------------- failures after the start


def _file_size_limit(nbytes):
    def limit():  # in the child: a full disk for files over nbytes (EFBIG, not a signal)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return limit


@pytest.mark.slow
def test_zg_train_on_a_full_disk_ends_in_one_line_and_leaves_no_file(tmp_path):
    out = tmp_path / "h.json"
    done = zg_process(
        "train",
        "--dataset",
        "cora",
        "--epochs",
        "1",
        "--no-progress",
        "--json",
        out,
        cwd=tmp_path,
        preexec_fn=_file_size_limit(400),
    )
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert lines[0].startswith("zg train: error: ") and str(out) in lines[0]
    assert "File too large" in lines[0] and "free some space" in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".h.json*")), "nothing half-written"


def test_zg_train_with_a_non_finite_loss_ends_in_one_line(tmp_path, capsys):
    """Features that overflow float32 in the first layer: the Engine's FloatingPointError, said
    in one line with exit status 1 (no traceback), and no history written."""
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    g.x.mul_(3e37)
    zg.datasets.save_npz(g, tmp_path / "g.npz")
    out = tmp_path / "h.json"
    argv = ["train", "--dataset", str(tmp_path / "g.npz"), "--epochs", "2", "--no-progress"]
    assert cli.main(argv + ["--json", str(out), "--kernel", "torch"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("zg train: error: FloatingPointError: "), err
    assert not out.exists()
