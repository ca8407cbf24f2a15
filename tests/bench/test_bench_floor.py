"""bench/floor.py at a tiny size: it writes a result in the one format whose headline metrics are
its own function's, the floor's parts lie inside the floor's clocked pass, every ratio is the
median of the per-round ratios, zg captured is skipped (never stood in for) without a GPU, and
the DGL row is skipped cleanly where DGL does not import. No test reads a wall-clock figure."""

import statistics
import sys
from pathlib import Path

import pytest
import torch
from script_loader import load_script

from zg.experiments import results

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--nodes", "600", "--batch-size", "32", "--hidden", "16", "--fanouts", "4", "3",
    "--batches", "2", "--repeats", "2",
]  # fmt: skip
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def floor():
    module, restore = load_script(ROOT / "bench" / "floor.py", "bench_floor")
    yield module
    restore()


@pytest.fixture
def run(floor, tmp_path, monkeypatch):
    """main(argv) writing into tmp_path instead of bench/results; returns the loaded document."""
    monkeypatch.setattr(sys.modules["_machine"], "RESULTS", tmp_path)

    def go(*argv):
        path = floor.main([*TINY, *argv, "--name", "floor_test"])
        assert path.parent == tmp_path
        return results.load(path)

    return go


def check_schema(doc):
    """What tests/bench/test_results_schema.py asks of every committed file."""
    import _headlines

    assert doc["bench"] == "floor" and doc["headline"]
    assert _headlines.headlines(doc) == doc["headline"]
    for m in doc["headline"]:
        results.fmt(m)
        assert m["std"] is None or m["n"] >= 2
        assert not m["higher_is_better"] and m["unit"] == "x"


@pytest.mark.slow
def test_a_tiny_run_measures_every_side_against_the_floor(run, floor, capsys, require):
    require("dgl")
    doc = run("--seeds", "0", "1")
    check_schema(doc)
    rows = {r["key"]: r for r in doc["rows"]}
    assert list(rows) == ["floor", "dgl", "zg_dynamic", "zg_envelope", "zg_captured"]
    names = [m["name"] for m in doc["headline"]]
    assert names == ["floor_ratio_dgl", "floor_ratio_dynamic", "floor_ratio_envelope"]
    assert all(m["n"] == 2 for m in doc["headline"])
    # the zg sides ran kernel="auto", and the file says what that was
    assert doc["settings"]["kernel"] in ("fused", "torch")
    assert rows["zg_envelope"]["kernel"] == rows["floor"]["kernel"] == doc["settings"]["kernel"]
    assert rows["dgl"]["kernel"] == "dgl"
    # zg captured: CUDA only, skipped with its reason, printed, never measured on a CPU
    if not torch.cuda.is_available():
        assert "CUDA" in rows["zg_captured"]["skipped"] and "seconds" not in rows["zg_captured"]
        assert "zg captured: skipped" in capsys.readouterr().out
        target = next(k for k in doc["detail"]["targets"] if k.startswith("zg captured"))
        assert doc["detail"]["targets"][target] is None
    for seed in doc["detail"]["per_seed"]:
        f = seed["floor"]
        rounds = len(f["seconds_all"])
        assert rounds == 2 and len(f["clocked_seconds_all"]) == rounds
        assert list(f["parts"]) == ["gather", "forward", "loss", "backward", "step"]
        for i in range(rounds):
            laps = [f["parts_all"][s][i] for s in f["parts"]]
            # the laps tile the steps inside the clocked pass: non-negative, summing to no more
            assert all(v >= 0 for v in laps) and f["parts_all"]["forward"][i] > 0
            assert sum(laps) <= f["clocked_seconds_all"][i] * (1 + 1e-9)
        for key in ("dgl", "zg_dynamic", "zg_envelope"):
            p = seed[key]
            assert p["ratios_all"] == [a / b for a, b in zip(p["seconds_all"], f["seconds_all"])]
            assert p["ratio_to_floor"] == statistics.median(p["ratios_all"])
        assert seed["zg_envelope"]["envelope"] and not seed["zg_envelope"]["overflowed"]
    # across seeds: mean and sample std of the per-seed figures
    env = rows["zg_envelope"]["ratio_to_floor"]
    assert env["values"] == [s["zg_envelope"]["ratio_to_floor"] for s in doc["detail"]["per_seed"]]
    assert env["std"] == pytest.approx(statistics.stdev(env["values"]))
    overhead = rows["zg_envelope"]["overhead_seconds"]["values"]
    assert overhead == [
        s["zg_envelope"]["seconds"] - s["floor"]["seconds"] for s in doc["detail"]["per_seed"]
    ]


@pytest.mark.slow
def test_without_dgl_the_dgl_row_is_skipped_cleanly(run, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "dgl", None)  # `import dgl` raises ImportError
    doc = run("--seeds", "0")
    check_schema(doc)
    rows = {r["key"]: r for r in doc["rows"]}
    assert rows["dgl"]["skipped"] == "DGL does not import here" and "seconds" not in rows["dgl"]
    assert "DGL: skipped (DGL does not import here)" in capsys.readouterr().out
    assert [m["name"] for m in doc["headline"]] == ["floor_ratio_dynamic", "floor_ratio_envelope"]
    assert all(m["std"] is None and m["n"] == 1 for m in doc["headline"])  # one seed: no spread
    assert "dgl" not in doc["detail"]["per_seed"][0]


def test_settings_and_targets(floor):
    quick = floor.parse_args(["--quick", "--device", "cpu"])
    assert quick.name == "floor_quick" and quick.seeds == [0] and quick.nodes == 5_000
    assert floor.parse_args(["--device", "cpu"]).name == "floor"
    assert floor.parse_args(["--device", "cuda"]).name == "floor_cuda"
    assert "zg_captured" in floor.skipped_pipelines(floor.parse_args(["--device", "cpu"]))

    def row(key, ratio):
        return {"key": key, "ratio_to_floor": {"mean": ratio, "std": None, "n": 1}}

    met = floor.judge([row("zg_envelope", 1.08)], "cpu")
    assert list(met.values()) == [True, None]  # the captured target is a GPU one
    missed = floor.judge([row("zg_envelope", 1.2), row("zg_captured", 1.01)], "cpu")
    assert list(missed.values()) == [False, None]  # a CPU run never judges the GPU target
    on_gpu = floor.judge([row("zg_envelope", 1.2), row("zg_captured", 1.01)], "cuda")
    assert list(on_gpu.values()) == [None, True]
