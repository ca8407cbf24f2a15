"""Lab 9's model answer says what its committed full-size table says.

The model answer's numbers are zg:metric blocks rendered from ``bench/results/lab9_full.json``
(``bench/lab9_full.py``: the lab's own measurement at full size, with the model solution); its
qualitative sentences are checked here against the same file, so a re-run that changes the
verdict fails until the answer is rewritten.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "labs" / "source" / "09_replicate_a_claim" / "09_replicate_a_claim.ipynb"
RESULT = ROOT / "bench" / "results" / "lab9_full.json"
SETTINGS = ("random", "metis_halo", "reference")


def metrics() -> dict[str, float]:
    return {h["name"]: h["value"] for h in json.loads(RESULT.read_text())["headline"]}


def answer() -> str:
    nb = json.loads(LAB.read_text())
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "q_verdict":
            return re.sub(r"\s+", " ", "".join(cell["source"]))
    raise AssertionError("Lab 9 has no q_verdict cell")


def test_the_answer_cites_the_committed_table_for_every_setting():
    text = answer()
    for s in SETTINGS:
        for name in (f"gap_{s}", f"interval_low_{s}", f"interval_high_{s}"):
            assert f"<!-- zg:metric lab9_full {name} -->" in text, name


def test_every_interval_holds_zero_as_the_answer_says():
    m = metrics()
    assert "Every interval holds zero" in answer()
    for s in SETTINGS:
        assert m[f"excludes_zero_{s}"] == 0.0, s
        assert m[f"interval_low_{s}"] <= 0.0 <= m[f"interval_high_{s}"], s


def test_the_means_and_the_gradient_error_order_the_settings_as_the_answer_says():
    m = metrics()
    text = answer()
    assert "random chunks furthest below single, the kit's defaults closest to it" in text
    gaps = {s: m[f"gap_{s}"] for s in SETTINGS}
    assert min(gaps, key=gaps.get) == "random" and max(gaps, key=gaps.get) == "metis_halo"
    assert "The gradient error orders the settings as the mean gaps do" in text
    by_gap = sorted(SETTINGS, key=gaps.get)  # furthest below single first
    for when in ("init", "trained"):
        errors = [m[f"rel_error_{when}_{s}"] for s in by_gap]
        assert errors == sorted(errors, reverse=True), (when, by_gap, errors)


def test_the_exact_gradient_nearly_vanishes_at_the_checkpoint_as_the_answer_says():
    m = metrics()
    assert "the exact gradient has nearly vanished" in answer()
    assert m["exact_gradient_norm_trained"] < 0.05 * m["exact_gradient_norm_init"]
