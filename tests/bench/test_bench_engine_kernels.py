"""bench/engine.py --kernels at a tiny size: one run measures the zg pipelines on each kernel
path side by side (the README's two rows), every row and headline metric names the kernel that
ran, and odd seeds run the pipelines in reverse. No test reads a wall-clock figure."""

import sys
from pathlib import Path

import pytest
from script_loader import load_script

from zg.experiments import results

ROOT = Path(__file__).resolve().parents[2]
TINY = [
    "--nodes", "600", "--models", "sage", "--batch-sizes", "32", "--hidden", "16",
    "--fanouts", "4", "3", "--seeds", "0", "1", "--max-batches", "2",
]  # fmt: skip
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def engine():
    module, restore = load_script(ROOT / "bench" / "engine.py", "bench_engine")
    yield module
    restore()


def test_both_kernel_paths_in_one_run(engine, tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules["_machine"], "RESULTS", tmp_path)
    order = []
    run_seed = engine.run_seed

    def watched(*args, reverse=False, **kwargs):
        out, profiles = run_seed(*args, reverse=reverse, **kwargs)
        order.append(list(out))
        return out, profiles

    monkeypatch.setattr(engine, "run_seed", watched)
    engine.main([*TINY, "--kernels", "auto", "torch", "--name", "engine_kernels_test"])
    doc = results.load(tmp_path / "engine_kernels_test.json")
    assert doc["settings"]["kernels"] == ["auto", "torch"]
    zg_pipes = ["zg_dynamic", "zg_envelope", "zg_dynamic_torch", "zg_envelope_torch"]
    first = [p for p in order[0] if p != "dgl"]
    assert first == zg_pipes and [p for p in order[1] if p != "dgl"] == zg_pipes[::-1]
    (row,) = doc["rows"]
    assert row["zg_envelope_torch"]["kernel"] == "torch"
    assert row["zg_envelope"]["kernel"] in ("fused", "torch")  # "auto": numba where it imports
    assert row["zg_envelope_torch"]["seconds"]["n"] == 2
    names = {m["name"]: m for m in doc["headline"]}
    torch_syncs = names["host_syncs_envelope_torch_sage_b32"]
    assert torch_syncs["value"] == 0 and torch_syncs["where"].endswith("torch kernels")
    if doc["settings"]["dgl"]:
        ratio = names["envelope_torch_vs_dgl_sage_b32"]
        assert ratio["n"] == 2 and "torch kernels" in ratio["where"]
        assert "envelope_vs_dgl_sage_b32" in names
    for m in doc["headline"]:
        if m["name"].startswith(("envelope_vs_dgl", "envelope_torch", "host_syncs")):
            assert m["where"].endswith(("torch kernels", "compiled numba kernels")), m


def test_the_kernels_argument_is_checked(engine):
    with pytest.raises(SystemExit):
        engine.parse_args(["--kernels", "torch"])  # auto: the pipelines the targets judge
    with pytest.raises(SystemExit):
        engine.parse_args(["--kernels", "auto", "auto"])
    assert engine.zg_pipelines(["auto", "torch"]) == [
        "zg_dynamic",
        "zg_envelope",
        "zg_dynamic_torch",
        "zg_envelope_torch",
    ]
