"""Text from a result file is written into a page as text (issue 46, item 6): the renderers
(tools/render_docs.py, tools/claims.py) escape HTML, their own block markers and Markdown, so a
value can neither break a block or a table nor inject a link or HTML; a result path that is a
folder is one problem line, not a traceback; pages are written through the kit's one writer."""

import io
import os
import re
import stat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.script_loader import load_script
from zg.experiments import results

ROOT = Path(__file__).resolve().parents[2]
render_docs, _restore = load_script(ROOT / "tools" / "render_docs.py", "render_docs")
_restore()

PAGE = (
    "# T\n\n<!-- zg:headline engine -->\n<!-- /zg:headline -->\n\n"
    "Inline: <!-- zg:metric engine speed -->old<!-- /zg:metric -->.\n\n"
    "<!-- zg:table engine:speed -->\n<!-- /zg:table -->\n\nThe end.\n"
)
HOSTILE = [
    "<!-- /zg:table -->",
    "<!-- /zg:headline --><!-- zg:metric engine speed -->",
    "<script>alert(1)</script>",
    "[click](https://example.com)",
    "![img](x.png)",
    "*bold* _em_ `code` \\",
    "a | b\n| c",
    "&lt; &amp;",
]


def tree(tmp_path: Path, where: str, unit: str = "x", cpu: str = "cpu", compared: str = "DGL"):
    res = tmp_path / "bench" / "results"
    res.mkdir(parents=True, exist_ok=True)
    doc = results.make(
        "engine",
        settings={},
        rows=[],
        headline=[
            results.headline("speed", 1.5, unit, std=0.1, n=3, compared_to=compared, where=where)
        ],
        machine={"cores": 2, "cpu": cpu, "cuda": None, "date": "2026-01-01T00:00:00"},
        command=None,
        source={"commit": None, "modified": None},
    )
    results.write(res / "engine.json", doc)
    page = tmp_path / "README.md"
    page.write_text(PAGE)
    return page, res


def visible(markdown: str) -> str:
    """What a reader sees of escaped text: backslash escapes and the three entities undone."""
    text = re.sub(r"\\(.)", r"\1", markdown)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value=st.one_of(
        st.sampled_from(HOSTILE),
        st.text(alphabet=st.sampled_from(list("<>!-/[]()*_`|\\&#zg: \n")), max_size=40),
    ),
    field=st.sampled_from(["where", "unit", "cpu", "compared"]),
)
def test_a_hostile_value_stays_text(tmp_path_factory, value, field):
    tmp = tmp_path_factory.mktemp("t")
    page, res = tree(
        tmp, **{"where": "csbm", field: value} if field != "where" else {"where": value}
    )
    out = io.StringIO()
    render_docs.run([page], res, check=False, out=out)
    text = page.read_text()
    # The page keeps exactly its three blocks, its prose, and nothing of the value is markup.
    blocks = list(render_docs.BLOCK.finditer(text))
    assert [b["kind"] for b in blocks] == ["headline", "metric", "table"], text
    assert text.startswith("# T\n\n") and text.endswith("\n\nThe end.\n")
    outside = render_docs.BLOCK.sub("", text)
    assert "<!--" not in outside, text
    for block in blocks:
        body = block["body"]
        assert "<" not in body and ">" not in body, body  # no HTML, no marker
        assert "](" not in body.replace("\\](", ""), body  # no link
    flat = " ".join(value.split())
    if flat:
        assert flat in visible(text.replace("\\|", "|")), (flat, text)
    # Rendering again changes nothing, and --check finds the page current.
    status = render_docs.run([page], res, check=True, out=io.StringIO())
    assert status == 0


def test_a_table_row_keeps_its_cells(tmp_path):
    page, res = tree(tmp_path, where="a | b | c")
    render_docs.run([page], res, check=False, out=io.StringIO())
    rows = [line for line in page.read_text().splitlines() if line.startswith("| `speed`")]
    assert rows and all(len(re.split(r"(?<!\\)\|", row)) == 6 for row in rows[:1]), rows


def test_a_result_path_that_is_a_folder_is_one_problem_line(tmp_path):
    page, res = tree(tmp_path, where="csbm")
    (res / "other.json").mkdir()
    page.write_text(PAGE + "<!-- zg:headline other -->\n<!-- /zg:headline -->\n")
    out = io.StringIO()
    assert render_docs.run([page], res, check=True, out=out) == 1
    assert f"{res / 'other.json'} is a folder, not a result file" in out.getvalue()
    out = io.StringIO()
    assert render_docs.run([tmp_path], res, check=True, out=out) == 1
    assert f"{tmp_path}: a folder, not a Markdown file" in out.getvalue()


def test_render_docs_writes_through_the_one_writer(tmp_path):
    """A page behind a link: the link stays, the page it names is rewritten, its mode kept."""
    page, res = tree(tmp_path, where="csbm")
    os.chmod(page, 0o640)
    link = tmp_path / "linked.md"
    link.symlink_to(page)
    assert render_docs.run([link], res, check=False, out=io.StringIO()) == 0
    assert os.path.islink(link) and "1.50x ± 0.10 (n=3)" in page.read_text()
    assert stat.S_IMODE(os.stat(page).st_mode) == 0o640
    fifo = tmp_path / "fifo.md"
    os.mkfifo(fifo)
    out = io.StringIO()
    assert render_docs.run([fifo], res, check=False, out=out) == 1  # not a regular file


@pytest.mark.parametrize("value", HOSTILE)
def test_claims_escapes_what_it_reads_from_result_files(value):
    claims, restore = load_script(ROOT / "tools" / "claims.py", "claims_for_escaping")
    restore()
    text = claims.text(value)
    assert "<" not in text and ">" not in text and "](" not in text.replace("\\](", "")
    assert "\n" not in text
