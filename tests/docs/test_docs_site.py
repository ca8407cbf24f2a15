"""The docs site (`make docs`, `make docs-check`): staging rewrites links for the site, a broken
link fails both the build and the check, and nothing is loaded from the network."""

import re
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import build_docs  # noqa: E402
import docs_check  # noqa: E402

REPORT = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>00_tour</title></head><body>
<h1 id="00-%C2%B7-A-tour">00 · A tour<a class="anchor-link" href="#00-%C2%B7-A-tour">¶</a></h1>
<p>See <a href="../CLAIMS.md#zerognn">the ledger</a>, <a href="../docs/glossary.md">terms</a>
and <a href="../zg/engine.py">the engine</a>.</p>
<script>var s = '<a href="../CLAIMS.md">not markup</a>';</script>
</body></html>
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def repo(tmp_path):
    """A small repository: README, CLAIMS, docs/ (one subfolder), a notebook with its report,
    repository files outside the site."""
    root = tmp_path / "repo"
    write(
        root / "README.md",
        "# zg home\n\n"
        "Terms: [glossary](docs/glossary.md), [envelope](docs/glossary.md#envelope).\n"
        "The [tour](notebooks/00_tour.ipynb); the [bench](bench/engine.py); "
        "[`zg/engine.py`](zg/engine.py); [the course](docs/course/); [refs](#references).\n"
        "Code stays: `[x](docs/glossary.md)`, and [out](https://example.org/a.md).\n\n"
        "```\n[fenced](docs/glossary.md)\n```\n\n## References\n",
    )
    write(
        root / "CLAIMS.md",
        "# Claims ledger\n\n## ZeroGNN\n\nTerms: [glossary](docs/glossary.md).\n",
    )
    write(
        root / "docs" / "glossary.md",
        "# Glossary\n\nSee [CLAIMS.md](../CLAIMS.md) and [home](../README.md).\n\n## Envelope\n",
    )
    write(
        root / "docs" / "course" / "README.md",
        "# Instructor pack\n\n[the labs](../../labs/README.md), "
        "[running](running_the_course.md), [notebook 01](../../notebooks/01_missing.ipynb).\n",
    )
    write(root / "docs" / "course" / "running_the_course.md", "# Running the course\n")
    write(root / "bench" / "engine.py", "")
    write(root / "zg" / "engine.py", "")
    write(root / "labs" / "README.md", "# Labs\n")
    write(root / "notebooks" / "00_tour.ipynb", "{}")
    write(root / "notebooks" / "01_missing.ipynb", "{}")  # no report: not in the site
    write(root / "reports" / "00_tour.html", REPORT)
    return root


def test_staging_rewrites_links_for_the_site(repo, tmp_path):
    staged = build_docs.stage(repo, tmp_path / "stage", repo / "reports")
    out = staged.out
    home = (out / "index.md").read_text()
    assert "[glossary](glossary.md)" in home  # docs/x.md from the home page
    assert "[envelope](glossary.md#envelope)" in home  # the anchor is kept
    assert "[tour](notebooks/00_tour.html)" in home  # the notebook: its report
    assert "[the course](course/README.md)" in home  # a folder: its README
    assert "the `bench/engine.py`" not in home and "bench (`bench/engine.py`)" in home
    assert "; `zg/engine.py`;" in home  # a code-text link to a repository file: code text
    assert "[refs](#references)" in home and "[out](https://example.org/a.md)" in home
    assert "`[x](docs/glossary.md)`" in home and "[fenced](docs/glossary.md)" in home
    glossary = (out / "glossary.md").read_text()
    assert "[CLAIMS.md](CLAIMS.md)" in glossary and "[home](index.md)" in glossary
    assert "[glossary](glossary.md)" in (out / "CLAIMS.md").read_text()
    course = (out / "course" / "README.md").read_text()
    assert "the labs (`labs/README.md`)" in course
    assert "notebook 01 (`notebooks/01_missing.ipynb`)" in course
    assert "[running](running_the_course.md)" in course
    # The report: its markup links point at the built pages; the one outside the site is text.
    report = (out / "notebooks" / "00_tour.html").read_text()
    assert 'href="../CLAIMS.html#zerognn"' in report and 'href="../glossary.html"' in report
    assert 'href="../zg/engine.py"' not in report and "not in this site" in report
    assert "'<a href=\"../CLAIMS.md\">not markup</a>'" in report  # script text untouched
    assert 'href="#00-%C2%B7-A-tour"' in report
    # The notebooks page lists the report with its title; the nav comes from the files.
    page = (out / "notebooks" / "index.md").read_text()
    assert "[00_tour](00_tour.html) | 00 · A tour |" in page
    assert staged.nav == [
        {"Home": "index.md"},
        {"Claims ledger": "CLAIMS.md"},
        {"Glossary": "glossary.md"},
        {
            "Course": [
                {"Instructor pack": "course/README.md"},
                {"Running the course": "course/running_the_course.md"},
            ]
        },
        {"Notebooks": "notebooks/index.md"},
    ]


def test_a_link_to_nothing_is_left_for_strict_mode_to_fail(repo, tmp_path):
    write(repo / "docs" / "glossary.md", "# Glossary\n\n[gone](not_written_yet.md)\n")
    staged = build_docs.stage(repo, tmp_path / "stage", repo / "reports")
    assert "[gone](not_written_yet.md)" in (staged.out / "glossary.md").read_text()


def test_staging_refuses_no_reports_and_page_collisions(repo, tmp_path):
    shutil.rmtree(repo / "reports")
    with pytest.raises(FileNotFoundError, match=r"make report ZG_SCALE=small"):
        build_docs.stage(repo, tmp_path / "stage", repo / "reports")
    staged = build_docs.stage(repo, tmp_path / "stage", repo / "reports", require_reports=False)
    assert "No executed notebook" in (staged.out / "notebooks" / "index.md").read_text()
    assert "(`notebooks/00_tour.ipynb`)" in (staged.out / "index.md").read_text()
    write(repo / "docs" / "index.md", "# Another home\n")
    with pytest.raises(ValueError, match=r"docs/index.md and README.md"):
        build_docs.stage(repo, tmp_path / "stage", repo / "reports", require_reports=False)


def site_page(site: Path, rel: str, body: str) -> None:
    write(site / rel, f"<html><head><meta charset='utf-8'></head><body>{body}</body></html>")


def test_the_link_check_fails_a_broken_link_and_a_missing_anchor(tmp_path):
    site = tmp_path / "site"
    site_page(
        site,
        "index.html",
        "<h1 id='top'>x</h1><a href='sub/a.html#here'>a</a>"
        "<a href='#top'>t</a><a href='sub/'>folder</a><a href='https://x.org/'>e</a>",
    )
    site_page(site, "sub/a.html", "<h2 id='here'>a</h2><a href='../index.html'>home</a>")
    site_page(site, "sub/index.html", "<img src='../logo.png'>")
    write(site / "logo.png", "")
    report = docs_check.check_links(site, ["index.html", "sub/a.html", "sub/index.html"])
    assert report.broken == {}
    assert (report.internal, report.anchors, report.external) == (5, 2, 1)
    site_page(
        site,
        "sub/a.html",
        "<a href='../missing.html'>m</a><a href='../index.html#gone'>"
        "g</a><a href='../../outside.html'>o</a><script src='https://cdn.example/x.js'>"
        "</script>",
    )
    broken = docs_check.check_links(site, ["index.html", "sub/a.html"]).broken
    assert list(broken) == ["index.html", "sub/a.html"]  # index's #here is gone with the page
    joined = " | ".join(broken["sub/a.html"])
    assert "../missing.html: no such file" in joined
    assert "no id 'gone' on index.html" in joined
    assert "leaves the site" in joined
    assert "loads from the network" in joined


def test_the_browser_check_catches_js_errors_and_network_requests():
    chromium = docs_check.find_chromium()
    if chromium is None:
        pytest.skip("no chromium on PATH (Debian's package runs the site check)")
    assert docs_check.self_test(chromium, budget_ms=5000, timeout=120) == []


def test_the_config_loads_nothing_from_the_network(require):
    yaml = require("yaml")
    text = (ROOT / "mkdocs.yml").read_text()
    config = yaml.safe_load(text)
    allowed = {config.get("repo_url")} - {None}
    urls = set(re.findall(r"https?://[^\s'\"]+", text))
    assert urls <= allowed, f"mkdocs.yml names {sorted(urls - allowed)}"
    assert config["theme"]["font"] is False  # no Google Fonts
    assert config["use_directory_urls"] is False and config["strict"] is True
    plugins = [p if isinstance(p, str) else next(iter(p)) for p in config.get("plugins", [])]
    # search fetches its index (fails from file://); offline brings a shim from unpkg.com.
    assert not {"search", "offline", "privacy", "social"} & set(plugins)
    assert "analytics" not in config.get("extra", {}) and config["extra"]["generator"] is False
    for key in ("extra_javascript", "extra_css"):
        assert not [u for u in config.get(key, []) if re.match(r"(https?:)?//", str(u))]


@pytest.mark.slow
def test_the_site_builds_offline_and_a_broken_link_fails_it(require, repo, tmp_path):
    require("mkdocs")
    require("material")
    from mkdocs.exceptions import Abort

    staged = build_docs.stage(repo, tmp_path / "stage", repo / "reports")
    site = tmp_path / "site"
    build_docs.build_site(ROOT / "mkdocs.yml", staged, site)
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert "index.html" in pages and "notebooks/00_tour.html" in pages
    assert "404.html" not in pages
    assert docs_check.check_links(site, pages).broken == {}
    # The theme's pages and assets load nothing from the network.
    for path in site.rglob("*.html"):
        assert not build_docs_remote_loads(path.read_text()), path
    for css in site.rglob("*.css"):
        assert not re.search(
            r"url\(\s*[\"']?(https?:)?//|@import\s+[\"']?(url\()?\s*[\"']?https?:", css.read_text()
        ), css
    write(repo / "docs" / "glossary.md", "# Glossary\n\n[gone](not_written_yet.md)\n")
    staged = build_docs.stage(repo, tmp_path / "stage", repo / "reports")
    with pytest.raises(Abort):
        build_docs.build_site(ROOT / "mkdocs.yml", staged, tmp_path / "site2")
    write(repo / "docs" / "glossary.md", "# Glossary\n\n[bad anchor](../CLAIMS.md#no-such)\n")
    staged = build_docs.stage(repo, tmp_path / "stage", repo / "reports")
    with pytest.raises(Abort):
        build_docs.build_site(ROOT / "mkdocs.yml", staged, tmp_path / "site3")


def build_docs_remote_loads(text: str) -> list:
    from build_report import REMOTE_LOAD

    return REMOTE_LOAD.findall(text)


def test_the_real_site_builds(require, tmp_path):
    """The repository's own pages build in strict mode (every link resolves); the reports are
    included when `make report` has run."""
    require("mkdocs")
    require("material")
    staged = build_docs.stage(ROOT, tmp_path / "stage", ROOT / "reports", require_reports=False)
    site = tmp_path / "site"
    build_docs.build_site(ROOT / "mkdocs.yml", staged, site)
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    assert {"index.html", "CLAIMS.html", "notebooks/index.html"} <= set(pages)
    assert docs_check.check_links(site, pages).broken == {}


def test_every_report_page_carries_the_site_navigation(repo, tmp_path):
    """A notebook's page links back to the site: home, claims, the Notebooks page, its
    neighbours and every other notebook (issue 48: the report pages had no way back)."""
    second = REPORT.replace("00_tour", "01_where").replace("00 · A tour", "01 · Where")
    write(repo / "notebooks" / "01_where.ipynb", "{}")
    write(repo / "reports" / "01_where.html", second)
    staged = build_docs.stage(repo, tmp_path / "stage", repo / "reports")
    first = (staged.out / "notebooks" / "00_tour.html").read_text()
    nav = re.search(r'<nav class="zg-site-nav".*?</nav>', first, re.DOTALL)
    assert nav is not None, "the report has no site navigation"
    assert first.index("<body>") < nav.start() < first.index("<h1"), "the bar opens the body"
    hrefs = re.findall(r'href="([^"]+)"', nav.group(0))
    assert hrefs[:3] == ["../index.html", "../CLAIMS.html", "index.html"]
    assert "01_where.html" in hrefs and "00_tour.html" in hrefs  # every notebook, this one too
    assert 'aria-current="page"' in nav.group(0) and 'title="01 · Where"' in nav.group(0)
    assert "next →" in nav.group(0) and "← previous" not in nav.group(0)
    last = (staged.out / "notebooks" / "01_where.html").read_text()
    assert "← previous" in last and "next →" not in last
    # the bar's links resolve in the built site (docs_check follows every <a href>)
    site = tmp_path / "site"
    for page, body in (
        ("index.html", ""),
        ("CLAIMS.html", "<h2 id='zerognn'>ZeroGNN</h2>"),
        ("glossary.html", ""),
        ("notebooks/index.html", ""),
    ):
        site_page(site, page, body)
    for name in ("00_tour.html", "01_where.html"):
        shutil.copy(staged.out / "notebooks" / name, site / "notebooks" / name)
    reports = ["notebooks/00_tour.html", "notebooks/01_where.html"]
    assert docs_check.check_links(site, reports).broken == {}
    (site / "CLAIMS.html").unlink()  # the check can fail: a bar's link to nothing is named
    assert "../CLAIMS.html: no such file" in " ".join(
        docs_check.check_links(site, reports).broken["notebooks/00_tour.html"]
    )
    with pytest.raises(ValueError, match="target"):
        build_docs.report_nav("notebooks/99_none.html", {"notebooks/00_tour.html": "t"})
