#!/usr/bin/env python
"""Open every page of the built docs site in headless Chromium and check it (`make docs-check`).

    python tools/docs_check.py                 # site/ (what `make docs` builds)
    python tools/docs_check.py path/to/site --jobs 2

For every HTML page of the site:

1. Links, read from the page's markup: every internal link (``href`` or ``src`` that is not a
   URL: a page, a stylesheet, a script, an image, ``#anchor`` or ``page.html#anchor``) must
   name a file of the site, and its anchor an ``id`` (or ``<a name>``) on that page. A link
   that leaves the site folder (``../x``) is broken too. Links to other sites are counted,
   not followed (no network).
2. Nothing from the network in the markup: no ``<script src>``, stylesheet, image or frame
   from http(s) (tools/build_report.py's test).
3. In Chromium, with tools/report_check.py's error collector first in ``<head>`` (a copy of
   the whole site is instrumented, so relative links still resolve): the page loads, no JS
   error, no request to the network, and every plotly figure draws (an ``svg.main-svg`` in
   each ``div.plotly-graph-div``); a notebook report (``notebooks/*.html`` other than the
   list) must have at least one figure.

Before the site, a self-test checks a tiny site with a good page and a page with a broken
link, a missing anchor, a JS error and a request to the network: the checker must pass the
first and catch all four on the second, else the run fails (``--no-self-test`` skips it).

Prints one line per failed page and a one-line summary. Exit status 0 when every page passed,
1 when one failed, 2 when the checker could not run (no Chromium, failed self-test, no site).
"""

from __future__ import annotations

import argparse
import os
import posixpath
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from build_docs import is_external
from build_report import REMOTE_LOAD
from report_check import find_chromium, instrument, render

# Attributes that name another resource, per tag.
LINK_ATTRS = {
    "a": "href",
    "area": "href",
    "link": "href",
    "script": "src",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "embed": "src",
    "video": "src",
    "audio": "src",
}


class _PageLinks(HTMLParser):
    """The ids (anchors) a page defines and the links it makes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (tag, target)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.add(attrs["id"])
        if tag == "a" and attrs.get("name"):
            self.ids.add(attrs["name"])
        attr = LINK_ATTRS.get(tag)
        if attr and attrs.get(attr) is not None:
            self.links.append((tag, attrs[attr].strip()))

    handle_startendtag = handle_starttag


def parse_page(path: Path) -> _PageLinks:
    parser = _PageLinks()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    parser.close()
    return parser


@dataclass
class LinkReport:
    internal: int = 0
    anchors: int = 0
    external: int = 0
    broken: dict = field(default_factory=dict)  # page -> [problem]


def check_links(site: Path, pages: list) -> LinkReport:
    """Every internal link of ``pages`` (paths relative to ``site``) resolved statically."""
    parsed = {}

    def page_info(rel: str) -> _PageLinks:
        if rel not in parsed:
            parsed[rel] = parse_page(site / rel)
        return parsed[rel]

    report = LinkReport()
    for rel in pages:
        problems = []
        info = page_info(rel)
        for tag, target in info.links:
            if not target or target == "#":
                continue
            if is_external(target) and not target.startswith("#"):
                report.external += 1
                continue
            path, _, fragment = target.partition("#")
            path = unquote(path.partition("?")[0])
            report.internal += 1
            if path:
                resolved = posixpath.normpath(posixpath.join(posixpath.dirname(rel), path))
                if resolved == ".." or resolved.startswith("../"):
                    problems.append(f"<{tag}> {target}: leaves the site")
                    continue
                file = site / resolved
                if file.is_dir():
                    resolved = posixpath.join(resolved, "index.html")
                    file = site / resolved
                if not file.is_file():
                    problems.append(f"<{tag}> {target}: no such file in the site ({resolved})")
                    continue
            else:
                resolved = rel
            if fragment:
                report.anchors += 1
                if not resolved.endswith((".html", ".htm")):
                    continue
                # As a browser does: the fragment as written, else percent-decoded (nbconvert
                # writes its heading ids percent-encoded, and its links the same way).
                ids = page_info(resolved).ids
                if fragment not in ids and unquote(fragment) not in ids:
                    problems.append(f"<{tag}> {target}: no id {fragment!r} on {resolved}")
        text = (site / rel).read_text(encoding="utf-8", errors="replace")
        problems += [
            f"loads from the network: {m.group(0)[:120]}" for m in REMOTE_LOAD.finditer(text)
        ]
        if problems:
            report.broken[rel] = problems
    return report


def is_report(rel: str) -> bool:
    """A notebook report: notebooks/<name>.html, not the list page."""
    return rel.startswith("notebooks/") and rel.count("/") == 1 and rel != "notebooks/index.html"


def check_site(site: Path, chromium: str, budget_ms: int, timeout: float, jobs: int) -> dict:
    """Links, markup and Chromium checks of every page of ``site``; see the module docstring."""
    site = Path(site)
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html"))
    links = check_links(site, pages)
    problems = {rel: list(found) for rel, found in links.broken.items()}
    with tempfile.TemporaryDirectory(prefix="zg-docs-check-") as tmp:
        copy = Path(tmp) / "site"
        shutil.copytree(site, copy)
        for rel in pages:
            page = copy / rel
            page.write_text(
                instrument(page.read_text(encoding="utf-8", errors="replace")), encoding="utf-8"
            )
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = dict(
                zip(
                    pages,
                    pool.map(lambda rel: render(copy / rel, chromium, budget_ms, timeout), pages),
                )
            )
    figures = 0
    for rel, result in results.items():
        figures += result.get("rendered", 0)
        found = list(result["problems"])
        if is_report(rel) and result.get("figures", 0) < 1:
            found.append("a notebook report with no plotly figure")
        if found:
            problems.setdefault(rel, []).extend(found)
    return {
        "pages": len(pages),
        "links": links,
        "figures": figures,
        "problems": problems,
        "ok": bool(pages) and not problems,
    }


def self_test(chromium: str, budget_ms: int, timeout: float) -> list:
    """Problems with the checker itself: it must pass a good site and catch a broken page."""
    good = (
        "<html><head><meta charset='utf-8'></head><body><h1 id='top'>Good</h1>"
        "<a href='#top'>top</a> <a href='bad.html'>bad</a> <a href='https://example.org/'>x</a>"
        "</body></html>"
    )
    bad = (
        "<html><head><meta charset='utf-8'></head><body><h1 id='here'>Bad</h1>"
        "<a href='missing.html'>missing</a> <a href='index.html#nowhere'>anchor</a>"
        "<script>notDefinedAnywhere();</script>"
        "<script>fetch('http://zg-docs-check.invalid/a').catch(function () {});</script>"
        "</body></html>"
    )
    out = []
    with tempfile.TemporaryDirectory(prefix="zg-docs-selftest-") as tmp:
        site = Path(tmp)
        (site / "index.html").write_text(good, encoding="utf-8")
        (site / "bad.html").write_text(bad, encoding="utf-8")
        result = check_site(site, chromium, budget_ms, timeout, jobs=2)
    found = result["problems"]
    if "index.html" in found:
        out.append(f"self-test: the good page failed: {found['index.html']}")
    joined = " | ".join(found.get("bad.html", []))
    for what, needle in (
        ("the broken link", "missing.html: no such file"),
        ("the missing anchor", "no id 'nowhere'"),
        ("the JS error", "notDefinedAnywhere"),
        ("the request to the network", "network: requested http://zg-docs-check.invalid/a"),
    ):
        if needle not in joined:
            out.append(f"self-test: {what} was not caught: {joined or 'no problem reported'}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("site", nargs="?", type=Path, default=Path("site"), help="default: site/")
    ap.add_argument("--chromium", default=None, help="the browser (default: chromium on PATH)")
    ap.add_argument("--budget-ms", type=int, default=10000, help="Chromium's --virtual-time-budget")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per page, wall clock")
    ap.add_argument(
        "--jobs",
        type=int,
        default=min(4, os.cpu_count() or 1),
        help="pages open at once (default: the CPU count, at most 4)",
    )
    ap.add_argument("--no-self-test", action="store_true")
    args = ap.parse_args(argv)
    if args.jobs < 1:
        ap.error(f"--jobs must be at least 1, got {args.jobs}")
    if not (args.site / "index.html").is_file():
        print(
            f"docs-check: no site in {args.site}/ (no index.html); run `make docs` first",
            file=sys.stderr,
        )
        return 2
    chromium = find_chromium(args.chromium)
    if chromium is None:
        print(
            "docs-check: no chromium found; install Debian's package (apt-get install -y chromium)",
            file=sys.stderr,
        )
        return 2
    if not args.no_self_test:
        problems = self_test(chromium, args.budget_ms, args.timeout)
        if problems:
            print("docs-check: the checker failed its self-test:", file=sys.stderr)
            for p in problems:
                print(f"  {p}", file=sys.stderr)
            return 2
        print(
            "docs-check: self-test passed (a broken link, a missing anchor, a JS error and a "
            "network request are caught)"
        )
    result = check_site(args.site, chromium, args.budget_ms, args.timeout, args.jobs)
    for rel, found in sorted(result["problems"].items()):
        print(f"docs-check: {args.site / rel}: FAILED")
        for p in found:
            print(f"    {p}")
    links = result["links"]
    failed = len(result["problems"])
    print(
        f"docs-check: {result['pages']} pages, {links.internal} internal links "
        f"({links.anchors} with an anchor), {result['figures']} plotly figures checked; "
        f"{links.external} external links not followed; "
        + ("passed" if result["ok"] else f"{failed} page(s) FAILED")
    )
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
