"""Every sentence about Grappa's reference preset (``preset="reference"``, the authors' public
configuration) agrees with the committed results and with CLAIMS.md.

Each qualitative sentence the docs, notebooks and labs say about the preset ("within about a
point of single on Cora", "far below single on the csbm graph", "a few points below at 100
epochs") is listed here with the test it must pass on ``bench/results/grappa_reference.json``;
a new result that contradicts a sentence fails here, and so does a sentence that is reworded
without updating its check (its phrase must still be found). Any other sentence that calls the
preset reproduced, or says it reaches or matches single without a qualifier, fails as well:
CLAIMS.md's verdict on the claim is "not reproduced".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULT = ROOT / "bench" / "results" / "grappa_reference.json"


def metrics() -> dict[str, float]:
    doc = json.loads(RESULT.read_text())
    return {h["name"]: h["value"] for h in doc["headline"]}


def _gaps(m: dict, row: str, graph: str) -> list[float]:
    found = [v for k, v in m.items() if re.fullmatch(rf"{row}_minus_single(_kit)?_{graph}_L\d", k)]
    assert found, f"no {row} rows for {graph} in {RESULT.name}"
    return found


ABOUT_A_POINT = 1.5  # "within about a point": every mean gap at most this far from zero
FAR_BELOW = -10.0  # "far below": every mean gap at least ten points below
NEAR_CHANCE = -50.0  # "near chance" (3 classes or more, single well above 80 %)


def cora_within_a_point(m):
    return all(abs(v) <= ABOUT_A_POINT for v in _gaps(m, "reference", "cora"))


def cora_all_three_within_a_point(m):
    rows = ("reference", "isolated", "kit")
    return all(abs(v) <= ABOUT_A_POINT for r in rows for v in _gaps(m, r, "cora"))


def csbm_far_below_and_near_chance_from_3_layers(m):
    ref = {
        k[-2:]: v for k, v in m.items() if re.fullmatch(r"reference_minus_single_csbm20k_L\d", k)
    }
    iso = {k[-2:]: v for k, v in m.items() if re.fullmatch(r"isolated_minus_single_csbm20k_L\d", k)}
    return all(v <= FAR_BELOW for v in [*ref.values(), *iso.values()]) and all(
        v <= NEAR_CHANCE for d, v in {**ref}.items() if int(d[1]) >= 3
    )


def kit_close_at_2_and_3_below_at_4(m):
    return (
        abs(m["kit_minus_single_kit_csbm20k_L2"]) <= ABOUT_A_POINT
        and abs(m["kit_minus_single_kit_csbm20k_L3"]) <= ABOUT_A_POINT
        and m["kit_minus_single_kit_csbm20k_L4"] <= -3.0
    )


def plateau_a_few_points_below_and_closer(m):
    out = True
    for depth in (2, 3):
        plateau = m[f"reference_minus_single_csbm20k_plateau_L{depth}"]
        short = m[f"reference_minus_single_csbm20k_L{depth}"]
        out &= -6.0 <= plateau <= -1.0 and plateau > short
        iso = m[f"isolated_minus_single_csbm20k_plateau_L{depth}"]
        out &= abs(iso - plateau) <= 1.0  # "isolated workers ... where the preset does"
        out &= abs(m[f"kit_minus_single_kit_csbm20k_plateau_L{depth}"]) <= 1.0  # "level with"
    return out


def csbm_far_below(m):
    return all(v <= FAR_BELOW for v in _gaps(m, "reference", "csbm20k"))


SENTENCES = [
    ("docs/grappa_diagnosis.md", "On Cora the preset, isolated workers with the same structure and the kit's defaults all end within about a point of single", cora_all_three_within_a_point),
    ("docs/grappa_diagnosis.md", "On the csbm graph the preset and isolated workers end far below single (with 3 layers near chance)", csbm_far_below_and_near_chance_from_3_layers),
    ("docs/grappa_diagnosis.md", "the preset ends a few points below single", plateau_a_few_points_below_and_closer),
    ("docs/grappa.md", "the preset ends within about a point", cora_within_a_point),
    ("docs/grappa.md", "the preset and isolated workers with the same structure end far below single at every depth measured (near chance from 3 layers)", csbm_far_below_and_near_chance_from_3_layers),
    ("docs/grappa.md", "the kit's defaults end close to their own single-process runs at 2 and 3 layers", kit_close_at_2_and_3_below_at_4),
    ("docs/grappa.md", "the preset ends a few points below single, far closer than at 40 epochs", plateau_a_few_points_below_and_closer),
    ("notebooks/06_gradient_only_training.ipynb", "the preset ends a few points below it, far closer than at 40 epochs", plateau_a_few_points_below_and_closer),
    ("labs/source/09_replicate_a_claim/09_replicate_a_claim.ipynb", "finds it far below single on a 20k-node graph", csbm_far_below),
]  # fmt: skip


def text_of(path: Path) -> str:
    if path.suffix == ".ipynb":
        nb = json.loads(path.read_text())
        return "\n\n".join(
            "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
        )
    return path.read_text()


def flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize(("path", "phrase", "check"), SENTENCES, ids=[s[1][:40] for s in SENTENCES])
def test_each_sentence_about_the_preset_holds_on_the_committed_result(path, phrase, check):
    assert phrase in flat(text_of(ROOT / path)), (
        f"{path} no longer says {phrase!r}: update SENTENCES"
    )
    assert check(metrics()), f"{path}: {phrase!r} is contradicted by {RESULT.name}"


def test_claims_calls_the_preset_not_reproduced_and_the_result_agrees():
    claims = (ROOT / "CLAIMS.md").read_text()
    row = next(
        line for line in claims.splitlines() if line.startswith("| As its public code runs it")
    )
    assert "**not reproduced**" in row, row
    m = metrics()
    # Cora within a point, csbm far below: one graph agrees and one does not, so not reproduced
    assert cora_within_a_point(m) and csbm_far_below(m)


DOCS = [
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "notebooks").glob("*.ipynb")),
    *sorted((ROOT / "labs" / "source").glob("*/*.ipynb")),
    ROOT / "README.md",
]
PRESET = re.compile(r"reference preset|preset=\"reference\"|`reference` preset|the preset\b", re.I)
OVERCLAIM = re.compile(
    r"\b(reproduces|is reproduced|reaches single|matches single|as accurate as single)\b", re.I
)
QUALIFIED = re.compile(r"\bnot\b|\bpartly\b|\bwhether\b|\bon Cora\b|\bif\b|\bclaim", re.I)


def test_no_sentence_calls_the_preset_reproduced_without_a_qualifier():
    bad = []
    for path in DOCS:
        text = re.sub(r"<!-- zg:.*?<!-- /zg:\w+ -->", "", text_of(path), flags=re.S)
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if (
                PRESET.search(sentence)
                and OVERCLAIM.search(sentence)
                and not QUALIFIED.search(sentence)
            ):
                bad.append(f"{path.relative_to(ROOT)}: {flat(sentence)[:200]}")
    assert not bad, "CLAIMS.md calls the preset not reproduced, yet:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("sentence", "flagged"),
    [
        ("The reference preset reaches single accuracy on every graph.", True),
        ('With preset="reference" Grappa reproduces the paper.', True),
        ("The reference preset does not reach single on the csbm graph.", False),
        ("On Cora the preset reaches single within a point.", False),
    ],
)
def test_the_overclaim_scan_tells_a_bare_claim_from_a_qualified_one(sentence, flagged):
    found = bool(PRESET.search(sentence) and OVERCLAIM.search(sentence))
    assert (found and not QUALIFIED.search(sentence)) == flagged
