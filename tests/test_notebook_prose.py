"""Numbers written by hand in the notebooks' prose are the committed results' numbers.

Most notebook numbers are printed by code from bench/results/*.json; the few a paragraph states
in words are recomputed here from the same JSON, so a re-run that changes them fails this test
until the prose is updated (the kit shows only measured numbers)."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DIAGNOSIS = ROOT / "bench" / "results" / "grappa_diagnosis.json"
LONG = "csbm20k 100 epochs, seed 0"


def markdown_cell(notebook, starts_with):
    cells = json.loads((ROOT / "notebooks" / notebook).read_text())["cells"]
    found = [''.join(c["source"]) for c in cells
             if c["cell_type"] == "markdown" and ''.join(c["source"]).startswith(starts_with)]
    assert len(found) == 1, f"{notebook}: expected one markdown cell starting {starts_with!r}, found {len(found)}"
    return " ".join(found[0].split())                  # one line: the prose wraps anywhere


def pct(x):
    return f"{100 * x:.1f}"


@pytest.mark.skipif(not DIAGNOSIS.exists(), reason="grappa_diagnosis.json is not committed")
def test_notebook_07_long_run_paragraph_matches_the_committed_diagnosis():
    datasets = json.loads(DIAGNOSIS.read_text())["datasets"]
    if LONG not in datasets:
        pytest.skip(f"{LONG!r} is not in grappa_diagnosis.json")
    runs = {r["run"]: r for r in datasets[LONG]["runs"] if r["seed"] == 0}
    text = markdown_cell("07_coverage_correction.ipynb", "**How to read the diagnosis.**")
    iso = runs["isolated"]["test_curve"]
    peak = max(range(len(iso)), key=iso.__getitem__)
    assert f"peaks at epoch {peak + 1} ({pct(iso[peak])} % test accuracy)" in text
    assert f"falls to {pct(runs['isolated']['final_test_acc'])} % by epoch {len(iso)}" in text
    grappa = {name: r for name, r in runs.items() if name.startswith("grappa/")}
    assert set(grappa) == {"grappa/mean", "grappa/node", "grappa/batch", "grappa/shrink", "grappa/reference"}
    # "every Grappa estimator ends within 2.5 points of its epoch-10 level (lo-hi %)"
    drift = max(abs(r["final_test_acc"] - r["test_curve"][9]) for r in grappa.values())
    assert drift <= 0.025 and "within 2.5 points of its epoch-10 level" in text
    finals = sorted(r["final_test_acc"] for r in grappa.values())
    assert f"({pct(finals[0])}-{pct(finals[-1])} %)" in text
    single = runs["single"]["final_test_acc"]
    gaps = [round(100 * (single - f)) for f in finals]
    assert f"{min(gaps)}-{max(gaps)} points below single-process training ({pct(single)} %)" in text
    # "grappa/mean ends highest, 12 points above isolated; the four coverage-corrected ones end
    # lo-hi points below grappa/mean"
    best = max(grappa, key=lambda n: grappa[n]["final_test_acc"])
    assert best == "grappa/mean" and "`grappa/mean` (no coverage correction) ends highest" in text
    above = 100 * (grappa[best]["final_test_acc"] - runs["isolated"]["final_test_acc"])
    assert f"{round(above)} points above it" in text
    below = sorted(100 * (grappa[best]["final_test_acc"] - r["final_test_acc"])
                   for n, r in grappa.items() if n != best)
    assert f"end {below[0]:.1f}-{below[-1]:.1f} points below `grappa/mean`" in text
