"""The numbers the README and docs/grappa_diagnosis.md quote about the reference preset are the
committed bench/results/grappa_reference.json's (recomputed with zg.experiments.reference), and
no sentence calls random chunks without a halo the paper's setting."""

import json
import re
from pathlib import Path

import pytest

from zg.experiments.reference import reference_rows, reference_summary

ROOT = Path(__file__).resolve().parents[1]
RESULT = ROOT / "bench" / "results" / "grappa_reference.json"


def one_line(path):
    return " ".join(path.read_text().split())


def reference_phrases(s):
    """What the prose writes, in the order it writes it."""
    d2, d3 = s["depths"][2], s["depths"][3]
    return [
        f"P={s['workers']}, {s['epochs']} epochs, {s['seeds']} seeds",
        f"it reaches {d2['reference']} % with 2 layers and {d3['reference']} % with 3",
        f"against {d2['single']} and {d3['single']} for single-process training under the same "
        f"settings ({d2['reference_gap']} and {d3['reference_gap']} points)",
        f"isolated workers with the same structure and no weighting reach {d2['isolated']} and {d3['isolated']}",
        f"the kit's defaults {d2['kit']} and {d3['kit']} (their own single-process runs: "
        f"{d2['single_kit']} and {d3['single_kit']})",
        f"c_r stays within {s['c_r']} over every step",
    ]


@pytest.mark.skipif(not RESULT.exists(), reason="grappa_reference.json is not committed")
@pytest.mark.parametrize("doc", ["README.md", "docs/grappa_diagnosis.md"])
def test_reference_numbers_in_the_prose_are_the_committed_ones(doc):
    result = json.loads(RESULT.read_text())
    text = one_line(ROOT / doc)
    for graph in result["detail"]["graphs"]:
        summary = reference_summary(result, graph)
        phrases = reference_phrases(summary)
        ref_steps, single_steps = summary["steps"]
        if ref_steps != single_steps:
            phrases.append(
                f"makes {ref_steps} optimizer steps per epoch there against single's {single_steps}"
            )
        for phrase in phrases:
            assert phrase in text, (
                f"{doc}: expected {phrase!r} ({graph}, from grappa_reference.json)"
            )
    assert len(reference_rows(result)) == len(result["detail"]["rows"]) * sum(
        len(g["depths"]) for g in result["detail"]["graphs"].values()
    )


def test_no_sentence_calls_random_chunks_without_a_halo_the_papers_setting():
    places = [
        ROOT / "README.md",
        ROOT / "CLAIMS.md",
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "notebooks").glob("*.ipynb")),
        *sorted((ROOT / "zg").rglob("*.py")),
        *sorted((ROOT / "bench").glob("*.py")),
    ]
    wrong = re.compile(
        r"\(the paper'?s (own )?setting\)|, the paper'?s own setting,|is the paper'?s own setting"
        r"|as the paper runs them"
    )
    found = [
        f"{p.relative_to(ROOT)}: {m.group(0)}"
        for p in places
        if p.exists()
        for m in wrong.finditer(" ".join(p.read_text(errors="replace").split()))
    ]
    assert not found, found
