"""The course documents cite what exists: the syllabus's notebooks, sections and labs, the
install page's lab count, and the glossary's words for what the course teaches."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SYLLABUS = ROOT / "docs" / "course" / "README.md"
LABS = sorted(p.name for p in (ROOT / "labs" / "source").iterdir() if p.is_dir())
NUMBER_WORDS = "zero one two three four five six seven eight nine ten eleven twelve".split()


def headings(notebook: Path) -> list[str]:
    nb = json.loads(notebook.read_text())
    return [
        line
        for cell in nb["cells"]
        if cell["cell_type"] == "markdown"
        for line in "".join(cell["source"]).splitlines()
        if line.startswith("#")
    ]


def test_every_notebook_section_and_lab_the_syllabus_cites_exists():
    text = SYLLABUS.read_text()
    rows = [line for line in text.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) >= 10, "the syllabus table has a row per week"
    notebooks = {p.stem: p for p in (ROOT / "notebooks").glob("*.ipynb")}
    cited_sections = 0
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`(\d\d_\w+)`", cells[2]):
            assert name in notebooks, f"syllabus cites notebook {name}, which does not exist"
        for number, section in re.findall(r"`(\d\d)` §(\w+)", cells[2]):
            (notebook,) = [p for stem, p in notebooks.items() if stem.startswith(number + "_")]
            assert any(h.startswith(f"## {section} ·") for h in headings(notebook)), (
                f"syllabus cites {notebook.name} §{section}, which has no such section"
            )
            cited_sections += 1
        for lab in re.findall(r"`(\d\d_\w+)`", cells[3]):
            assert lab in LABS, f"syllabus cites lab {lab}, which does not exist"
    assert cited_sections >= 1


def test_floyds_sampling_is_taught_where_the_syllabus_says():
    text = SYLLABUS.read_text()
    row = next(line for line in text.splitlines() if "Floyd" in line)
    number, section = re.search(r"`(\d\d)` §(\w+)", row).groups()
    (notebook,) = (ROOT / "notebooks").glob(f"{number}_*.ipynb")
    nb = json.loads(notebook.read_text())
    inside, section_cells = False, []
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and text.startswith("## "):
            inside = text.startswith(f"## {section} ·")
        if inside:
            section_cells.append((cell["cell_type"], text))
    taught = [kind for kind, text in section_cells if "Floyd" in text]
    assert "markdown" in taught and "code" in taught, (
        f"{notebook.name} §{section} teaches Floyd's sampling in prose and in code"
    )


def test_the_install_page_counts_the_labs_there_are():
    text = (ROOT / "docs" / "install.md").read_text()
    counts = re.findall(r"the (\w+) graded labs", text)
    assert counts, "docs/install.md says how many graded labs there are"
    for word in counts:
        assert word == NUMBER_WORDS[len(LABS)], (
            f"docs/install.md says {word}; there are {len(LABS)}"
        )


def test_the_glossary_covers_the_words_the_course_uses():
    text = (ROOT / "docs" / "glossary.md").read_text()
    for word in ("Preset", "Partner sweep", "c_r", "Envelope", "Coverage", "Estimator"):
        assert re.search(rf"^\*\*{re.escape(word)}[ .(]", text, re.M), f"glossary lacks {word}"


def _points(lab: str) -> tuple[float, float]:
    """(autograded, hand-graded) points a lab's source notebook declares."""
    nb = json.loads((ROOT / "labs" / "source" / lab / f"{lab}.ipynb").read_text())
    auto = manual = 0.0
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade"):
            continue
        if cell["cell_type"] == "code" and not meta.get("solution"):
            auto += float(meta.get("points", 0))
        elif cell["cell_type"] == "markdown":
            manual += float(meta.get("points", 0))
    return auto, manual


def test_the_point_tables_match_the_labs():
    """docs/course/README.md and labs/README.md give each lab's "autograded + by hand" points:
    the ones its notebook declares."""
    for doc in (SYLLABUS, ROOT / "labs" / "README.md"):
        text = doc.read_text()
        for lab in LABS:
            row = next((ln for ln in text.splitlines() if ln.startswith(f"| `{lab}` |")), None)
            assert row, f"{doc.name}: no row for {lab}"
            found = re.search(r"\| (\d+) \+ (\d+) \|", row)
            assert found, f"{doc.name}: {lab}'s row has no 'N + M' points"
            auto, manual = _points(lab)
            assert (int(found[1]), int(found[2])) == (auto, manual), (doc.name, lab, auto, manual)
