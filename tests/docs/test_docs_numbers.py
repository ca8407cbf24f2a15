"""The docs' measured numbers come from the result files, never from a keyboard.

README.md and docs/*.md quote measurements only inside generated blocks that
``tools/render_docs.py`` fills from bench/results/ (``--check`` fails when one is stale or names a
missing file or metric); outside them a number next to a unit of measurement is an error, unless
it is a setting or a fact of the design on the short allow-list below. The same scan covers the
instructor pages (labs/README.md, docs/course/*.md) and the notebooks' Markdown cells. The README
stays a front door: at most 10 KiB."""

import io
import json
import re
from pathlib import Path

import pytest

from tests.script_loader import load_script
from zg.experiments import results

ROOT = Path(__file__).resolve().parents[2]
render_docs, _restore = load_script(ROOT / "tools" / "render_docs.py", "render_docs")
_restore()
build_report, _restore = load_script(ROOT / "tools" / "build_report.py", "build_report")
_restore()
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What the number scan reads: the docs, the instructor pages and the notebooks' Markdown cells.
SCANNED = [
    *DOCS,
    ROOT / "labs" / "README.md",
    *sorted((ROOT / "docs" / "course").glob("*.md")),
    *sorted((ROOT / "notebooks").glob("*.ipynb")),
]
README_LIMIT = 10 * 1024

# A measured-looking number: a ratio ("1.62x"), a spread ("± 0.05"), or a number (or range) next
# to a unit of time, memory, bandwidth or accuracy ("0.94 ms", "3.7 s", "272 MiB", "75.4 %",
# "1.3 points"), or a bare decimal with two or more places ("0.733").
MEASURED = re.compile(
    r"(?<![\w.\-/])[-−+]?\d+(?:\.\d+)?(?:\s?[-–]\s?\d+(?:\.\d+)?)?"
    r"\s?(?:x\b|×|%|ms\b|µs\b|us\b|s\b|s per\b|seconds?\b|min\b|minutes?\b|h\b|hours?\b"
    r"|KiB\b|MiB\b|GiB\b|KB\b|MB\b|GB\b|GB/s|MB/s|B/s|points?\b|pts\b|bytes?\b)"
    r"|±\s?\d"
    r"|(?<![\w.\-/])\d\.\d{2,}\b(?!\.\d)"
)
# Regions other tools write and check (``--check``), as render_docs does its blocks: the labs'
# contract table (zg_course/contract_table.py) and the mutation scores (zg_course/mutants.py).
GENERATED = re.compile(
    r"<!-- (contract clauses|mutation scores): begin -->.*?<!-- \1: end -->", re.DOTALL
)
# Versions, links and inline code are not measurements.
NOT_PROSE = re.compile(
    r"`[^`\n]*`"  # inline code: flags, file names, settings
    r"|\]\([^)]*\)|<https?://[^>]*>|https?://\S+"  # link targets
    r"|\b(?:Python|torch|dgl|DGL|numba|nbgrader|ogb|torchdata|torch_geometric|graphdatascience)"
    r"[ =<>]*\d+(?:\.\d+)*"
)
# Numbers that are settings or facts of the design, not measurements: (file, phrase, why).
ALLOWED = [
    ("docs/cpu_performance.md", "1.5x faster than DGL", "the target the bench checks"),
    ("docs/cpu_performance.md", "above its 32 MiB", "glibc's mmap threshold, a setting"),
    ("docs/cpu_performance.md", "within 1.10x of the floor", "the target bench/floor.py checks"),
    ("docs/gpu.md", "within 1.05x of the floor", "the target bench/floor.py checks on a GPU"),
    ("docs/gpu.md", "at a 120 s", "the --budget bench/gpu_session.sh passes, a setting"),
    ("docs/install.md", "at most 10 %", "the labs-check pass threshold"),
    ("docs/data.md", "8 bytes per edge", "the size of an int64 edge id"),
    ("docs/files.md", "8 bytes per edge", "the size of an int64 edge id"),
    ("docs/files.md", "8 bytes per edge", "the size of an int64 edge id (second mention)"),
    ("docs/files.md", "4 bytes", "the size of a float32"),
    ("docs/glossary.md", "default 0.99", "the envelope quantile, a setting"),
    ("docs/glossary.md", "default 5 %", "the envelope margin, a setting"),
    ("docs/grappa.md", "lr 0.003", "the public code's learning rate, a setting"),
    ("docs/grappa_diagnosis.md", "lr 0.003", "a learning rate the check sets"),
    ("docs/grappa_diagnosis.md", "lr 0.01", "the default learning rate"),
    ("docs/grappa_diagnosis.md", "L = 0.003 and 0.03", "the learning rates the check sets"),
    ("docs/grappa_diagnosis.md", "0.01 (default)", "the default learning rate"),
    ("docs/grappa_diagnosis.md", "0.003 0.03", "learning rates in the reproduce script"),
    ("docs/grappa_diagnosis.md", "3x smaller step", "the ratio of two learning-rate settings"),
    ("docs/grappa_diagnosis.md", "3x larger one", "the ratio of two learning-rate settings"),
    ("docs/grappa_diagnosis.md", "at most 1 point below", "the acceptance check's threshold"),
    # The instructor pages. "Work" is a lab's intended student time, an estimate the pages say is
    # not measured; how long grading takes is measured into labs/timings.json, never typed.
    *(
        (page, f"~{minutes} min", "a lab's intended student time, an estimate (said so)")
        for page in ("labs/README.md", "docs/course/README.md")
        for minutes in (10, 35, 40, 45, 50, 60)
    ),
    ("labs/README.md", "at most 10 %", "the labs-check pass threshold"),
    ("labs/README.md", "2 x 2 worker", "a count of worker processes"),
    ("labs/README.md", "the 95 % t interval", "the confidence level the lab sets"),
    ("labs/README.md", "90 % of its non-equivalent", "the mutation score threshold"),
    ("docs/course/README.md", "2 x 2 gloo", "a count of worker processes"),
    ("docs/course/mutation_scores.md", "at least 20 s", "zg_course.mutants.deadline's floor"),
    ("docs/course/mutation_scores.md", "fewer than 90 %", "the mutation score threshold"),
    ("docs/course/running_the_course.md", "is 300 s", "nbgrader's cell timeout, a setting"),
    ("docs/course/running_the_course.md", "at most 10 %", "the labs-check pass threshold"),
    ("docs/course/running_the_course.md", ", 8 GiB)", "the sandbox's --memory default"),
    ("docs/course/running_the_course.md", "with 0 points", "the score given, not a time"),
    ("docs/reliability.md", "with 0 points", "the score given, not a time"),
    ("docs/reliability.md", "less than 40 MiB", "the bound the sandbox's memory test checks"),
    ("docs/course/running_the_course.md", "2 x 2 gloo", "a count of worker processes"),
    # The notebooks' Markdown: the thresholds their asserts check and the settings they run.
    ("notebooks/00_tour.ipynb", "at least 10 points above", "the assert's threshold"),
    ("notebooks/02_envelopes.ipynb", "plus 5 %", "the envelope margin, a setting"),
    ("notebooks/02_envelopes.ipynb", "with a 5 % margin", "the envelope margin, a setting"),
    ("notebooks/02_envelopes.ipynb", "+ 5 %", "the envelope margin, a setting"),
    ("notebooks/02_envelopes.ipynb", "within 1.5x of the oracle", "the assert's bound"),
    ("notebooks/02_envelopes.ipynb", "at most 2 %", "the assert's threshold"),
    ("notebooks/02_envelopes.ipynb", "50 % of the oracle's mean batch", "the assert's bound"),
    ("notebooks/04_profiling_zerognn.ipynb", "within 1.10x of the floor", "the CPU target"),
    ("notebooks/04_profiling_zerognn.ipynb", "within 1.05x of it", "the GPU target"),
    ("notebooks/05_partitions_and_isolation.ipynb", "a 10x larger", "the full scale's graph size"),
    ("notebooks/05_partitions_and_isolation.ipynb", "**75 %**", "arithmetic: (P - 1)/P, P = 4"),
    ("notebooks/05_partitions_and_isolation.ipynb", "at least 2x fewer", "the assert's bound"),
    ("notebooks/05_partitions_and_isolation.ipynb", "60 % of the nodes", "the training split"),
    ("notebooks/07_coverage_correction.ipynb", "at most 80 %", "the assert's bound"),
    ("notebooks/07_coverage_correction.ipynb", "within 5 points", "the assert's threshold"),
    ("notebooks/07_coverage_correction.ipynb", "3x lower and 3x higher", "learning-rate settings"),
    ("notebooks/07_coverage_correction.ipynb", "default (0.01)", "the default learning rate"),
    (
        "notebooks/08_repartitioning_and_scale.ipynb",
        "sends at least 1.5x",
        "the assert's bound",
    ),
    ("notebooks/08_repartitioning_and_scale.ipynb", "within 8\npoints", "the assert's threshold"),
    ("notebooks/09_together.ipynb", "allows 10 points", "the check's threshold"),
]


def prose(text: str) -> str:
    """``text`` without its generated blocks and what is not prose, line breaks kept."""
    text = render_docs.BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    text = GENERATED.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return NOT_PROSE.sub(lambda m: " " * len(m.group(0)), text)


def source_text(path: Path) -> str:
    """A page's text; of a notebook, its Markdown cells, one after the other, without the
    "Running time" line (build_report writes it from notebooks/timings.json and
    test_notebook_timings checks it against that file)."""
    if path.suffix != ".ipynb":
        return path.read_text()
    cells = json.loads(path.read_text())["cells"]
    text = "\n\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return build_report.RUNNING_TIME.sub(lambda m: " " * len(m.group(0)), text)


def typed_numbers(path: Path, allowed=ALLOWED) -> list[str]:
    """Every measured-looking number in ``path`` outside generated blocks, as "file:line: ..."
    (of a notebook, the line of its Markdown cells read one after the other)."""
    rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    text = prose(source_text(path))
    spans = []
    for file, phrase, _why in allowed:
        if file == rel:
            start = 0
            while (i := text.find(phrase, start)) >= 0:
                spans.append((i, i + len(phrase)))
                start = i + 1
    found = []
    for m in MEASURED.finditer(text):
        if any(a <= m.start() and m.end() <= b for a, b in spans):
            continue
        line = text.count("\n", 0, m.start()) + 1
        context = " ".join(text[max(0, m.start() - 30) : m.end() + 15].split())
        found.append(f"{rel}:{line}: {m.group(0)!r} in '...{context}...'")
    return found


def test_render_docs_check_passes_on_the_tree():
    out = io.StringIO()
    status = render_docs.run(DOCS + LAB_SOURCES, results.RESULTS_DIR, check=True, out=out)
    assert status == 0, "run python tools/render_docs.py:\n" + out.getvalue()


def test_the_readme_is_a_front_door():
    size = len((ROOT / "README.md").read_bytes())
    assert size <= README_LIMIT, f"README.md is {size} bytes, over {README_LIMIT}: move it to docs/"


@pytest.mark.parametrize("path", SCANNED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_hand_typed_measured_number_outside_a_generated_block(path):
    found = typed_numbers(path)
    assert not found, (
        "a measured number in prose must come from a result file: put it in a zg:headline, "
        "zg:table or zg:metric block (tools/render_docs.py), link CLAIMS.md, or (a setting) "
        "add it to ALLOWED with a reason:\n" + "\n".join(found)
    )


def test_every_allowed_phrase_is_still_there():
    """An allow-list entry whose phrase is gone is stale and must be removed."""
    for file, phrase, why in ALLOWED:
        assert phrase in prose(source_text(ROOT / file)), f"{file}: {phrase!r} ({why}) is gone"


def test_the_scan_reads_the_instructor_pages_and_the_notebooks():
    scanned = {p.relative_to(ROOT).as_posix() for p in SCANNED}
    assert {"README.md", "labs/README.md", "docs/course/README.md"} <= scanned
    assert "notebooks/10_gpu.ipynb" in scanned and "docs/cpu_performance.md" in scanned


def test_every_docs_page_is_linked_from_the_readme():
    readme = (ROOT / "README.md").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in readme, f"README.md does not link docs/{page.name}"


def test_relative_links_between_the_pages_resolve():
    link = re.compile(r"\]\((?!https?:|mailto:|#)([^)#\s]+)(?:#[^)]*)?\)")
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page in DOCS
        for target in link.findall(page.read_text())
        if not (page.parent / target).exists()
    ]
    assert not broken, broken


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


# The renderer itself, on fixture result files in a temporary tree.


def fixture_tree(tmp_path, value=1.06):
    res = tmp_path / "bench" / "results"
    res.mkdir(parents=True)
    doc = results.make(
        "engine",
        settings={"batch_size": 1024},
        rows=[],
        headline=[
            results.headline(
                "envelope_vs_dgl", value, "x", std=0.05, n=3, compared_to="DGL", where="csbm"
            )
        ],
        machine={"cores": 2, "cpu": "test cpu", "cuda": None, "date": "2026-01-01T00:00:00"},
        command=None,
        source={"commit": None, "modified": None},
    )
    results.write(res / "engine.json", doc)
    (tmp_path / "docs").mkdir()
    readme = tmp_path / "README.md"
    readme.write_text(
        "# T\n\n<!-- zg:headline engine -->\n<!-- /zg:headline -->\n\n"
        "Inline: <!-- zg:metric engine envelope_vs_dgl -->old<!-- /zg:metric -->.\n\n"
        "<!-- zg:table engine:envelope_vs_dgl -->\n<!-- /zg:table -->\n"
    )
    return readme, res


def check(readme, res):
    out = io.StringIO()
    return render_docs.run([readme], res, check=True, out=out), out.getvalue()


def test_the_renderer_fills_blocks_and_then_they_are_current(tmp_path):
    readme, res = fixture_tree(tmp_path)
    status, out = check(readme, res)
    assert status == 1 and "zg:headline engine is stale" in out and "zg:metric" in out, out
    assert render_docs.run([readme], res, check=False, out=io.StringIO()) == 0
    text = readme.read_text()
    assert "Inline: <!-- zg:metric engine envelope_vs_dgl -->1.06x ± 0.05 (n=3)<!--" in text
    assert "| `envelope_vs_dgl` | 1.06x ± 0.05 (n=3) | DGL | csbm |" in text
    assert "Machine: test cpu, 2 cores" in text and "`engine.json`, 2 cores, no GPU" in text
    assert check(readme, res) == (0, "render_docs: 3 blocks in 1 files are current\n")
    assert render_docs.run([readme], res, check=False, out=io.StringIO()) == 0
    assert readme.read_text() == text  # rendering twice changes nothing


def test_a_changed_result_makes_the_block_stale(tmp_path):
    readme, res = fixture_tree(tmp_path)
    render_docs.run([readme], res, check=False, out=io.StringIO())
    doc = results.load(res / "engine.json")
    doc["headline"][0]["value"] = 1.31
    results.write(res / "engine.json", doc)
    status, out = check(readme, res)
    assert status == 1
    assert f"{readme}:3: zg:headline engine is stale" in out, out
    assert "zg:metric engine envelope_vs_dgl is stale" in out, out
    assert "zg:table engine:envelope_vs_dgl is stale" in out, out


def test_a_missing_metric_or_file_is_named(tmp_path):
    readme, res = fixture_tree(tmp_path)
    render_docs.run([readme], res, check=False, out=io.StringIO())
    readme.write_text(
        readme.read_text()
        + "<!-- zg:metric engine no_such_metric -->1<!-- /zg:metric -->\n"
        + "<!-- zg:headline no_such_file -->\n<!-- /zg:headline -->\n"
    )
    status, out = check(readme, res)
    assert status == 1
    assert "zg:metric engine no_such_metric: engine: no headline metric 'no_such_metric'" in out
    assert "zg:headline no_such_file: no result file" in out and "no_such_file.json" in out
    # the write mode reports the same and leaves those blocks as they were
    before = readme.read_text()
    assert render_docs.run([readme], res, check=False, out=io.StringIO()) == 1
    assert readme.read_text() == before


def test_a_malformed_block_is_an_error(tmp_path):
    readme, res = fixture_tree(tmp_path)
    readme.write_text("<!-- zg:headline engine -->\nno closing marker\n")
    status, out = check(readme, res)
    assert status == 1 and "unclosed" in out, out
    readme.write_text("<!-- zg:metric engine -->x<!-- /zg:metric -->\n")
    status, out = check(readme, res)
    assert status == 1 and "takes 2 argument(s)" in out, out
    readme.write_text("<!-- zg:plot engine -->x<!-- /zg:plot -->\n")
    status, out = check(readme, res)
    assert status == 1 and "unknown block kind zg:plot" in out, out


def test_the_number_scan_finds_typed_numbers_and_spares_settings(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "A step is 1.62x faster (± 0.05), 0.94 ms per batch, 272 MiB, 75.4 % accurate,\n"
        "1.3 points below, c_r within 0.689-0.733. Python 3.11, torch 2.13.0, `--budget 200`,\n"
        "<!-- zg:metric engine x -->1.06x ± 0.05 (n=3)<!-- /zg:metric --> and 3 seeds.\n"
    )
    found = "\n".join(typed_numbers(page))
    for typed in ("1.62x", "± 0", "0.94 ms", "272 MiB", "75.4 %", "1.3 points", "0.689"):
        assert repr(typed) in found or typed in found, (typed, found)
    assert "1.06x" not in found and "3.11" not in found and "2.13" not in found
    assert "200" not in found and "3 seeds" not in found
    spared = typed_numbers(page, allowed=[("page.md", "1.62x faster", "a target")])
    assert len(spared) == len(typed_numbers(page)) - 1
    assert not any(f.split(" in ")[0].endswith("'1.62x'") for f in spared), spared


def test_the_scan_finds_a_typed_timing_in_a_notebook_or_an_instructor_page(tmp_path):
    cells = [
        ("markdown", "* *Running time:* about 1.5 minutes (shared cores; quiet cores take less)"),
        ("code", "print(f'{142:.0f} s')"),
        ("markdown", "The check took 142 s wall and 77 s of CPU; captured 2.2x to 21.4x faster."),
    ]
    nb = {
        "cells": [
            {"cell_type": kind, "source": src.splitlines(keepends=True), "metadata": {}}
            for kind, src in cells
        ]
    }
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(json.dumps(nb))
    found = "\n".join(typed_numbers(notebook))
    for typed in ("142 s", "77 s", "2.2x", "21.4x"):
        assert repr(typed) in found, (typed, found)
    assert "1.5 minutes" not in found  # the Running time line is read from notebooks/timings.json
    assert "nb.ipynb:3:" in found, found  # the line within the Markdown cells
    page = tmp_path / "README.md"
    page.write_text(
        "Measured: 168 s wall, 91 s CPU.\n<!-- mutation scores: begin -->\n| lab | 98% |\n"
        "<!-- mutation scores: end -->\n"
    )
    found = typed_numbers(page)
    assert [f.split(" in ")[0] for f in found] == ["README.md:1: '168 s'", "README.md:1: '91 s'"]


# The labs' model answers and marking notes (the instructor's side of every hand-graded question):
# measurements come from zg:metric blocks (tools/render_docs.py renders them into the notebooks);
# what is left is points, arithmetic of the design, and definitions. (lab, phrase, why)
LAB_SOURCES = sorted(
    p for p in (ROOT / "labs" / "source").glob("*/*.ipynb") if p.stem == p.parent.name
)
LAB_ALLOWED = [
    ("02_fixed_shape_sampler", "2 x", "arithmetic: two node-indexed arrays"),
    ("02_fixed_shape_sampler", "8 x", "arithmetic: 8 bytes per int64"),
    ("02_fixed_shape_sampler", "1.6 GB", "arithmetic: 100M nodes x 2 arrays x 8 bytes"),
    ("02_fixed_shape_sampler", "1.6\nGB", "the same product, across a line break"),
    ("02_fixed_shape_sampler", "1024 x", "arithmetic: a batch of 1024"),
    ("02_fixed_shape_sampler", "11 x", "arithmetic: the slots of one row"),
    ("02_fixed_shape_sampler", "90 KB", "arithmetic: the per-hop buffers at that batch"),
    ("05_coverage_by_propagation", "30 %", "the definition read for a coverage of 0.3"),
    ("05_coverage_by_propagation", "70 %", "the definition read for a coverage of 0.3"),
    ("06_estimator_weights", "4 x", "the formula: 4 bytes per float32 parameter"),
    ("09_replicate_a_claim", "95 %", "the confidence level of the interval, a setting"),
    ("09_replicate_a_claim", "t = 4.303", "the t table's value for 2 degrees of freedom (T975)"),
]


def model_answers(path: Path) -> str:
    """The text of a lab's hand-graded answer cells (model answer and marking notes), with the
    marking notes' point allocations ("2 points", "1 point") left out."""
    cells = json.loads(path.read_text())["cells"]
    out = []
    for cell in cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "markdown" and meta.get("solution") and meta.get("grade"):
            out.append("".join(cell["source"]))
    text = prose("\n\n".join(out))
    return re.sub(r"\b\d+(?:\.\d+)? points?\b", " ", text)


@pytest.mark.parametrize("path", LAB_SOURCES, ids=lambda p: p.stem)
def test_no_typed_measurement_in_a_model_answer(path):
    text = model_answers(path)
    for lab, phrase, _why in LAB_ALLOWED:
        if lab == path.stem:
            text = text.replace(phrase, " " * len(phrase))
    found = [
        " ".join(text[max(0, m.start() - 40) : m.end() + 15].split())
        for m in MEASURED.finditer(text)
    ]
    assert not found, (
        f"{path.stem}: a measured number in a model answer must come from a result file (a "
        "zg:metric block, rendered by tools/render_docs.py), or be added to LAB_ALLOWED with "
        "a reason:\n" + "\n".join(found)
    )
