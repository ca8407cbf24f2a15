"""docs/grappa.md's account section says what bench/results/grappa_epoch.json says.

Its numbers are zg:metric blocks rendered from the file; the words around them that compare an
evaluation with one step ("less than the one step", "more than one") are checked here against
the same file, so a re-run that changes the comparison fails until the sentence is rewritten.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "grappa.md"
RESULT = ROOT / "bench" / "results" / "grappa_epoch.json"


def metrics() -> dict[str, dict]:
    return {h["name"]: h for h in json.loads(RESULT.read_text())["headline"]}


def after(name: str) -> str:
    """The prose from the metric block ``name`` to the end of its sentence."""
    text = re.sub(r"\s+", " ", DOC.read_text())
    match = re.search(
        rf"<!-- zg:metric grappa_epoch {name} -->[^<]*<!-- /zg:metric -->([^.]*)", text
    )
    assert match, f"docs/grappa.md cites no {name}"
    return match.group(1)


@pytest.mark.parametrize(
    "name, words, below_one",
    [
        ("evaluation_over_step_cora", "less than the one step", True),
        ("evaluation_over_step_products_like", "more than one", False),
    ],
)
def test_an_evaluation_weighed_against_a_step_as_the_file_says(name, words, below_one):
    assert words in after(name)
    value = metrics()[name]["value"]
    assert (value < 1.0) is below_one, (name, value)


def test_the_cora_evaluation_is_below_a_step_by_more_than_its_spread():
    """The sentence's "less than" holds for the mean and one sample std above it."""
    h = metrics()["evaluation_over_step_cora"]
    assert h["n"] >= 3 and h["value"] + h["std"] < 1.0
