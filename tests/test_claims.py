"""CLAIMS.md is generated from the committed bench/results/*.json by tools/claims.py: it must be
up to date, list both papers' claims with a status, and say "not shown" where a result is absent."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_tool():
    spec = importlib.util.spec_from_file_location("claims", ROOT / "tools" / "claims.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_claims_md_is_up_to_date_with_the_committed_json():
    tool = load_tool()
    assert (ROOT / "CLAIMS.md").read_text() == tool.render(), (
        "CLAIMS.md is out of date with bench/results/*.json: run `python tools/claims.py`"
    )


def test_every_claim_has_a_place_a_number_and_a_status():
    tool = load_tool()
    sources = {c["source"] for c in tool.CLAIMS}
    assert {"ZeroGNN", "Grappa"} <= sources
    assert {f"notebook 0{i}" for i in range(10)} <= sources, (
        "every notebook's claims are in the ledger"
    )
    for c in tool.CLAIMS:
        number, status = c["number"]()
        assert c["test"] and number, c["claim"]
        assert status in (tool.MEASURED, tool.PROJECTED, tool.NOT_SHOWN), (c["claim"], status)


def test_absent_results_are_not_shown(tmp_path, monkeypatch):
    tool = load_tool()
    monkeypatch.setattr(tool, "RESULTS", tmp_path)  # no JSON at all
    statuses = {c["claim"]: c["number"]()[1] for c in tool.CLAIMS if c["file"]}
    assert set(statuses.values()) == {tool.NOT_SHOWN}, statuses
    text = tool.render()
    assert "5.28x" in text and "**not shown**" in text and "file absent" in text


def test_gpu_claims_stay_not_shown_without_a_cuda_result(tmp_path, monkeypatch):
    """Every GPU claim reads gpu_check_cuda.json: in a results folder with everything but that
    file, the GPU-only claims are not shown and the rest say they were measured on the CPU;
    with the committed file they are measured by its own machine."""
    import shutil

    tool = load_tool()
    gpu = [c for c in tool.CLAIMS if c["file"] == "gpu_check_cuda.json"]
    assert gpu, "the claims table has GPU claims"
    committed = tool.RESULTS / "gpu_check_cuda.json"
    if committed.exists():
        assert all(c["number"]()[1] != tool.NOT_SHOWN for c in gpu)
    for f in tool.RESULTS.glob("*.json"):
        if f.name != "gpu_check_cuda.json":
            shutil.copy(f, tmp_path / f.name)
    monkeypatch.setattr(tool, "RESULTS", tmp_path)
    shown = {c["claim"]: c["number"]() for c in gpu}
    # Without the CUDA file a claim is not shown, or shown from the CPU run and saying so.
    for claim, (text, status) in shown.items():
        assert status == tool.NOT_SHOWN or "on CPU" in text, (claim, text, status)
    assert sum(status == tool.NOT_SHOWN for _, status in shown.values()) >= 3, shown
