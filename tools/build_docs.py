#!/usr/bin/env python
"""Build the static docs site into site/ (what `make docs` runs).

    python tools/build_docs.py                      # stage, then mkdocs build --strict
    python tools/build_docs.py --stage-only         # only write build/docs_src/
    python tools/build_docs.py --require-reports    # fail when reports/ is empty (.ci/run)

The site is made of README.md (its home page), CLAIMS.md, every file under docs/ (whatever
pages are there: the nav is generated from the files and their first-heading titles) and the
executed notebooks of `make report` (reports/*.html, copied in as they are, under notebooks/,
and listed on a "Notebooks" page with their titles; each report gets the site's navigation, a bar
at its top linking the home page, the claims, the Notebooks page, the previous and next notebook
and every other one: :func:`report_nav`). With no report in reports/ (a fresh clone) the site is
built without them: the Notebooks page says so and names `make report ZG_SCALE=small`, the links
to notebooks become code text, and a note on stderr says the same. ``--require-reports`` (what
.ci/run passes, after `make test` wrote the reports) stops instead. It never runs the notebooks
itself (that takes minutes, and which size to build is the caller's choice).

Staging (build/docs_src/) places the sources where the site wants them and rewrites their
Markdown links so each resolves in the site:

    README.md               -> index.md
    CLAIMS.md               -> CLAIMS.md
    docs/<path>             -> <path>                (so docs/x.md is x.md from the home page,
                                                      and ../CLAIMS.md from docs/ is CLAIMS.md)
    notebooks/NN_name.ipynb -> notebooks/NN_name.html  (the executed report)

A link to a repository file that is not in the site (bench/engine.py, labs/README.md, a
notebook with no report) becomes code text, ``path``, so the site has no broken link. Links
inside code (fenced blocks, inline code) are left alone. mkdocs then builds mkdocs.yml in
strict mode with every link validation at "warn": a link or anchor that does not resolve fails
the build. Nothing is fetched from the network at build or view time (see mkdocs.yml).

Exit status: 0 when the site was built; 1 when staging or the build failed.
"""

from __future__ import annotations

import argparse
import html
import posixpath
import re
import shutil
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# A Markdown inline link or image: [text](target "title"). The text may hold one level of
# brackets ([`a[0]`](x)); the target is <...> or has no spaces.
LINK = re.compile(
    r"(?P<bang>!?)\[(?P<text>(?:[^\[\]]|\[[^\[\]]*\])*)\]"
    r"\(\s*(?P<target><[^<>\n]*>|[^()\s]+)(?P<title>\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)"
)
# A reference definition: [label]: target "title"
# (A definition cannot interrupt a paragraph: it follows a blank line or starts the text.)
REFERENCE = re.compile(
    r"(?:\A|(?<=\n\n))(?P<lead> {0,3}\[[^\]]+\]:[ \t]*)(?P<target><[^<>\n]*>|\S+)"
)
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`).+?(?<!`)\1(?!`)", re.DOTALL)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
HEADING = re.compile(r"^#\s+(.+?)\s*#*\s*$")

NOTEBOOKS_DIR = "notebooks"  # where the reports land in the site
NOTEBOOKS_PAGE = f"{NOTEBOOKS_DIR}/index.md"


@dataclass
class Staged:
    """What staging wrote: the page map, the generated nav and every link it changed."""

    out: Path
    sources: dict = field(default_factory=dict)  # repository path -> staged path
    nav: list = field(default_factory=list)
    rewritten: list = field(default_factory=list)  # (staged page, old target, new target)
    unlinked: list = field(default_factory=list)  # (staged page, target) now code text
    reports: list = field(default_factory=list)  # (staged path, title)


def page_title(text: str, fallback: str) -> str:
    """The first level-1 heading outside code blocks, else ``fallback``."""
    for line in _outside_fences(text):
        match = HEADING.match(line)
        if match:
            return re.sub(r"[`*_]", "", match.group(1)).strip()
    return fallback


def _outside_fences(text: str):
    fence = None
    for line in text.splitlines():
        match = FENCE.match(line)
        if fence is None and match:
            fence = match.group(1)[0] * len(match.group(1))
        elif fence is not None and line.strip().startswith(fence):
            fence = None
        elif fence is None:
            yield line


class _ReportTitle(HTMLParser):
    """The text of a report's first <h1> (nbconvert adds a pilcrow anchor-link: dropped)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0  # inside the first h1
        self.skip = 0  # inside its anchor link
        self.parts = []
        self.done = False

    def handle_starttag(self, tag, attrs):
        if self.done:
            return
        if tag == "h1":
            self.depth += 1
        elif self.depth and tag == "a" and "anchor-link" in (dict(attrs).get("class") or ""):
            self.skip += 1

    def handle_endtag(self, tag):
        if self.done:
            return
        if tag == "a" and self.skip:
            self.skip -= 1
        elif tag == "h1" and self.depth:
            self.depth -= 1
            self.done = not self.depth

    def handle_data(self, data):
        if self.depth and not self.skip and not self.done:
            self.parts.append(data)


def report_title(path: Path) -> str:
    parser = _ReportTitle()
    with path.open(encoding="utf-8", errors="replace") as f:
        while not parser.done:
            chunk = f.read(1 << 16)
            if not chunk:
                break
            parser.feed(chunk)
    title = " ".join("".join(parser.parts).replace("\u00b6", "").split())
    return title or path.stem


def site_path(repo_path: str, sources: dict) -> str | None:
    """Where a repository path lands in the site (a folder means its README or index)."""
    if repo_path in sources:
        return sources[repo_path]
    for index in ("index.md", "README.md"):
        candidate = posixpath.join(repo_path, index) if repo_path not in ("", ".") else index
        if candidate in sources:
            return sources[candidate]
    return None


def is_external(target: str) -> bool:
    """True for what is not a path in the repository: a URL, a mail link, a same-page anchor."""
    bare = target[1:-1] if target.startswith("<") and target.endswith(">") else target
    return not bare or bare.startswith(("#", "//")) or bool(SCHEME.match(bare))


def repo_path(target: str, page_repo: str) -> str | None:
    """The repository path a relative link of ``page_repo`` names (no anchor, no query);
    None when it leaves the repository."""
    bare = target[1:-1] if target.startswith("<") and target.endswith(">") else target
    path = bare.partition("#")[0].partition("?")[0]
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo), path))
    return None if resolved == ".." or resolved.startswith("../") else resolved


def rewrite_target(target: str, page_repo: str, page_staged: str, sources: dict, root: Path):
    """The target as the staged page must write it; None when it is a repository file or
    folder that is not in the site.

    ``page_repo``: the page's repository path (docs/glossary.md); ``page_staged``: its staged
    path (glossary.md). External links, mail links and same-page anchors come back unchanged,
    and so does a link to nothing at all (a typo, a page not written yet): strict mode then
    fails the build on it rather than hide it.
    """
    if is_external(target):
        return target
    bare = target[1:-1] if target.startswith("<") and target.endswith(">") else target
    _, hash_, fragment = bare.partition("#")
    query = bare.partition("#")[0].partition("?")[2]
    resolved = repo_path(target, page_repo)
    if resolved is None:
        return target  # outside the repository: broken, for strict mode to name
    staged = site_path(resolved, sources)
    if staged is None:
        return None if (root / resolved).exists() else target
    relative = posixpath.relpath(staged, posixpath.dirname(page_staged) or ".")
    return relative + (("?" + query) if query else "") + (hash_ + fragment)


def _code_text(text: str, target: str) -> str:
    """A link to something outside the site, as code text that names the file."""
    bare = target
    plain = text.strip()
    if plain.strip("`") == bare:
        return f"`{bare}`"
    return f"{text} (`{bare}`)" if plain else f"`{bare}`"


def rewrite_links(
    text: str, page_repo: str, page_staged: str, sources: dict, staged: Staged, root: Path
):
    """``text`` with every Markdown link outside code rewritten for the site."""

    def inline(match):
        old = match.group("target")
        new = rewrite_target(old, page_repo, page_staged, sources, root)
        if new == old:
            return match.group(0)
        if new is None:
            staged.unlinked.append((page_staged, old))
            path = repo_path(old, page_repo)
            if match.group("bang"):  # an image not in the site: its alt text and path
                return _code_text(match.group("text") or "image", path)
            return _code_text(match.group("text"), path)
        staged.rewritten.append((page_staged, old, new))
        title = match.group("title") or ""
        return f"{match.group('bang')}[{match.group('text')}]({new}{title})"

    def reference(match):
        old = match.group("target")
        new = rewrite_target(old, page_repo, page_staged, sources, root)
        if new == old:
            return match.group(0)
        if new is None:
            # A definition has no text to keep: leave it; strict mode names it if it is used.
            staged.unlinked.append((page_staged, old))
            return match.group(0)
        staged.rewritten.append((page_staged, old, new))
        return match.group("lead") + new

    def outside_code(pattern, replace, chunk: str) -> str:
        # A link that starts inside a code span is code; code inside a link's text is not.
        spans = [m.span() for m in INLINE_CODE.finditer(chunk)]
        out, last, pos = [], 0, 0
        while (match := pattern.search(chunk, pos)) is not None:
            span = next((sp for sp in spans if sp[0] <= match.start() < sp[1]), None)
            if span is not None:
                pos = span[1]
                continue
            out += [chunk[last : match.start()], replace(match)]
            last = pos = match.end()
        return "".join(out) + chunk[last:]

    def prose(chunk: str) -> str:
        return outside_code(REFERENCE, reference, outside_code(LINK, inline, chunk))

    # Fenced code blocks pass through untouched; the prose between them is rewritten.
    lines, out, buffer, fence = text.splitlines(keepends=True), [], [], None
    for line in lines:
        match = FENCE.match(line)
        if fence is None and match:
            out.append(prose("".join(buffer)))
            buffer = []
            fence = match.group(1)[0] * len(match.group(1))
            out.append(line)
        elif fence is not None:
            out.append(line)
            if line.strip().startswith(fence) and not line.strip().strip(fence[0]):
                fence = None
        else:
            buffer.append(line)
    out.append(prose("".join(buffer)))
    return "".join(out)


def built_url(staged_path: str) -> str:
    """The site URL of a staged file: pages become .html (a README or index: index.html)."""
    stem, ext = posixpath.splitext(staged_path)
    if ext.lower() != ".md":
        return staged_path
    folder, name = posixpath.split(stem)
    if name in ("README", "index"):
        name = "index"
    return posixpath.join(folder, name + ".html")


class _AnchorTags(HTMLParser):
    """Offsets and raw text of every <a href> start tag (markup only, not text in scripts)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = []  # (offset, raw tag, href)
        self._line_starts = None

    def locate(self, text: str):
        starts, pos = [0], 0
        for line in text.splitlines(keepends=True):
            pos += len(line)
            starts.append(pos)
        self._line_starts = starts
        self.feed(text)
        self.close()
        return self.tags

    def handle_starttag(self, tag, attrs):
        if tag != "a":
            return
        href = dict(attrs).get("href")
        if href is None:
            return
        line, col = self.getpos()
        self.tags.append((self._line_starts[line - 1] + col, self.get_starttag_text(), href))


def rewrite_html_links(
    text: str, page_repo: str, page_staged: str, sources: dict, staged: Staged, root: Path
) -> str:
    """A report's <a href> links rewritten for the site, as rewrite_links does for Markdown.

    A link to a page becomes a link to its .html; a link to a repository file outside the site
    loses its href (plain text, with the path in its title); anything else is left as it is."""
    out, last = [], 0
    for offset, raw, href in _AnchorTags().locate(text):
        if is_external(href):
            continue
        new = rewrite_target(href, page_repo, page_staged, sources, root)
        if new is None:
            staged.unlinked.append((page_staged, href))
            title = (
                f' title="{html.escape(repo_path(href, page_repo))} (a file of the repository, '
                'not in this site)"'
            )
            tag = re.sub(
                r"\shref\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)",
                lambda _, title=title: title,
                raw,
                count=1,
            )
        else:
            path, hash_, fragment = new.partition("#")
            resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page_staged), path))
            url = posixpath.relpath(built_url(resolved), posixpath.dirname(page_staged) or ".")
            new = url + hash_ + fragment
            if new == href:
                continue
            staged.rewritten.append((page_staged, href, new))
            tag = raw.replace(href, html.escape(new), 1) if href in raw else raw
        out.append(text[last:offset])
        out.append(tag)
        last = offset + len(raw)
    out.append(text[last:])
    return "".join(out)


def stage(root: Path, out: Path, reports: Path, require_reports: bool = True) -> Staged:
    """Write the site's sources into ``out`` (emptied first); return what was staged.

    ``root``: the repository (README.md, CLAIMS.md, docs/); ``reports``: the folder of executed
    notebooks (reports/*.html). Raises FileNotFoundError when a source is missing and
    ValueError when two sources would land on the same site path.
    """
    root, out, reports = Path(root), Path(out), Path(reports)
    for name in ("README.md", "CLAIMS.md"):
        if not (root / name).is_file():
            raise FileNotFoundError(f"root: {root / name} does not exist")
    report_files = sorted(reports.glob("*.html")) if reports.is_dir() else []
    if require_reports and not report_files:
        raise FileNotFoundError(
            f"reports: no executed notebooks in {reports}/ (reports/*.html); run "
            "`make report ZG_SCALE=small` first (the CI size, several minutes), or "
            "`make report` for the full size"
        )
    staged = Staged(out=out)
    sources = staged.sources
    sources["README.md"] = "index.md"
    sources["CLAIMS.md"] = "CLAIMS.md"
    docs = root / "docs"
    doc_files = sorted(p for p in docs.rglob("*") if p.is_file()) if docs.is_dir() else []
    for path in doc_files:
        relative = path.relative_to(docs).as_posix()
        if any(part.startswith(".") for part in path.relative_to(docs).parts):
            continue  # editor and OS droppings (.DS_Store, .ipynb_checkpoints)
        sources[f"docs/{relative}"] = relative
    for path in report_files:
        sources[f"notebooks/{path.stem}.ipynb"] = f"{NOTEBOOKS_DIR}/{path.name}"
    sources["(notebooks page)"] = NOTEBOOKS_PAGE
    seen = {}
    for repo_path, target in sources.items():
        key = target.lower()
        if key.endswith("/readme.md"):
            key = key[: -len("readme.md")] + "index.md"
        elif key == "readme.md":
            key = "index.md"
        if key in seen:
            raise ValueError(
                f"docs: {repo_path} and {seen[key]} would both be the site page {target}; "
                "rename one"
            )
        seen[key] = repo_path

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    report_titles = {f"{NOTEBOOKS_DIR}/{p.name}": report_title(p) for p in report_files}
    titles = {}
    for repo_path, target in sources.items():
        dest = out / target
        dest.parent.mkdir(parents=True, exist_ok=True)
        if repo_path == "(notebooks page)":
            continue
        src = root / repo_path if not repo_path.startswith("notebooks/") else None
        if src is None:  # a report: copied as it is, its links rewritten for the site
            report = reports / Path(target).name
            text = report.read_text(encoding="utf-8", errors="replace")
            text = rewrite_html_links(text, repo_path, target, sources, staged, root)
            dest.write_text(with_nav(text, report_nav(target, report_titles)), encoding="utf-8")
            staged.reports.append((target, report_titles[target]))
            continue
        if src.suffix.lower() != ".md":
            shutil.copyfile(src, dest)
            continue
        text = src.read_text(encoding="utf-8")
        titles[target] = page_title(text, Path(target).stem.replace("_", " "))
        dest.write_text(
            rewrite_links(text, repo_path, target, sources, staged, root), encoding="utf-8"
        )
    (out / NOTEBOOKS_PAGE).write_text(notebooks_page(staged.reports), encoding="utf-8")
    titles[NOTEBOOKS_PAGE] = "Notebooks"
    staged.nav = make_nav(titles)
    return staged


# The bar a report page opens with: the site's own links, so a reader who arrived at a notebook
# can get back to the site (a report is a page of its own, outside the theme's frame).
NAV_STYLE = (
    "position:sticky;top:0;z-index:1000;display:flex;flex-wrap:wrap;gap:0.3em 1em;"
    "align-items:baseline;padding:0.45em 1em;background:#3f51b5;color:#fff;"
    "font:14px/1.4 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif"
)
NAV_LINK = "color:#fff;text-decoration:none"
BODY = re.compile(r"<body\b[^>]*>", re.IGNORECASE)


def report_nav(target: str, titles: dict) -> str:
    """The navigation bar of the report staged at ``target`` (notebooks/NN_name.html):
    links to the home page, the claims ledger, the Notebooks page, the previous and the next
    report, and every report by its number (its title on hover; this one marked as current).
    ``titles``: every staged report's path -> title, in the site's order."""
    names = list(titles)
    if target not in titles:
        raise ValueError(f"target: {target!r} is not one of the staged reports {names}")
    here = names.index(target)

    def link(href: str, text: str, title: str = "", current: bool = False) -> str:
        extra = f' title="{html.escape(title)}"' if title else ""
        if current:
            extra += ' aria-current="page"'
            style = NAV_LINK + ";font-weight:bold;text-decoration:underline"
        else:
            style = NAV_LINK
        return f'<a href="{html.escape(href)}" style="{style}"{extra}>{html.escape(text)}</a>'

    def rel(path: str) -> str:
        return posixpath.relpath(path, posixpath.dirname(target) or ".")

    parts = [
        link(rel("index.html"), "zg docs", "the site's home page"),
        link(rel("CLAIMS.html"), "Claims"),
        link(rel(built_url(NOTEBOOKS_PAGE)), "Notebooks", "every notebook, with its title"),
    ]
    if here > 0:
        parts.append(link(rel(names[here - 1]), "← previous", titles[names[here - 1]]))
    if here + 1 < len(names):
        parts.append(link(rel(names[here + 1]), "next →", titles[names[here + 1]]))
    numbers = " ".join(
        link(rel(name), Path(name).stem.split("_")[0], titles[name], current=name == target)
        for name in names
    )
    parts.append(f'<span aria-label="every notebook">notebook {numbers}</span>')
    return (
        f'<nav class="zg-site-nav" aria-label="site" style="{NAV_STYLE}">'
        + "".join(parts)
        + "</nav>"
    )


def with_nav(text: str, nav: str) -> str:
    """A report's HTML with ``nav`` first in its body (at the start when it has no body tag)."""
    match = BODY.search(text)
    at = match.end() if match else 0
    return text[:at] + "\n" + nav + "\n" + text[at:]


def notebooks_page(reports: list) -> str:
    lines = [
        "# Notebooks",
        "",
        "The notebooks of `notebooks/`, executed top to bottom by `make report` "
        "(tools/build_report.py) and copied here as they are: each is a self-contained page "
        "with its figures (plotly.js inline, nothing loaded from the network). Run them "
        "yourself with `make lab`.",
        "",
    ]
    if not reports:
        lines += [
            "No executed notebook was in reports/ when this site was built, so this site has "
            "no notebook pages. Run `make report ZG_SCALE=small` (the CI size, several minutes) "
            "or `make report` (the full size), then `make docs` again.",
            "",
        ]
        return "\n".join(lines)
    lines += ["| notebook | title |", "|---|---|"]
    for target, title in reports:
        name = Path(target).name
        cell = html.escape(title, quote=False).replace("|", "\\|")
        lines.append(f"| [{Path(name).stem}]({name}) | {cell} |")
    return "\n".join(lines) + "\n"


def make_nav(titles: dict) -> list:
    """mkdocs nav from the staged pages: home, claims, top-level pages by file name, each
    folder as a section (its index or README first), the notebooks page last."""
    first = ["index.md", "CLAIMS.md"]
    nav = [{"Home": "index.md"}, {titles["CLAIMS.md"]: "CLAIMS.md"}]
    sections = {}
    for target in sorted(titles, key=lambda t: (t.count("/") > 0, t.lower())):
        if target in first or target == NOTEBOOKS_PAGE:
            continue
        folder, _, name = target.rpartition("/")
        if not folder:
            nav.append({titles[target]: target})
            continue
        sections.setdefault(folder, []).append(target)
    for folder, pages in sorted(sections.items()):
        pages.sort(key=lambda t: (Path(t).stem not in ("index", "README"), t.lower()))
        label = folder.replace("_", " ").replace("/", " / ").capitalize()
        nav.append({label: [{titles[t]: t} for t in pages]})
    nav.append({titles[NOTEBOOKS_PAGE]: NOTEBOOKS_PAGE})
    return nav


def build_site(config: Path, staged: Staged, site: Path) -> None:
    """mkdocs build (strict) of ``config`` with the staged sources and the generated nav.
    Raises mkdocs.exceptions.Abort when a warning (a broken link, a missing anchor) occurs."""
    import logging

    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    logger = logging.getLogger("mkdocs")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("docs: mkdocs %(levelname)s: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    cfg = load_config(
        str(config),
        docs_dir=str(staged.out.resolve()),
        site_dir=str(Path(site).resolve()),
        nav=staged.nav,
        strict=True,
    )
    build(cfg)
    # mkdocs' 404 page is for a server at the domain root (its links start with /); from the
    # file system, or a server under a path, they lead nowhere.
    (Path(site) / "404.html").unlink(missing_ok=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    ap.add_argument("--reports", type=Path, default=None, help="default: <root>/reports")
    ap.add_argument("--stage", type=Path, default=None, help="default: <root>/build/docs_src")
    ap.add_argument("--site", type=Path, default=None, help="default: <root>/site")
    ap.add_argument("--config", type=Path, default=None, help="default: <root>/mkdocs.yml")
    ap.add_argument("--stage-only", action="store_true", help="write the staging folder only")
    ap.add_argument(
        "--require-reports",
        action="store_true",
        help="fail when reports/ holds no executed notebook (default: build the site without)",
    )
    args = ap.parse_args(argv)
    root = args.root
    reports = args.reports or root / "reports"
    try:
        staged = stage(
            root, args.stage or root / "build" / "docs_src", reports, args.require_reports
        )
    except (FileNotFoundError, ValueError) as exc:
        print(f"docs: {exc}", file=sys.stderr)
        return 1
    if not staged.reports:
        print(
            f"docs: note: no executed notebook in {reports}/, so the site has no notebook "
            "pages; run `make report ZG_SCALE=small` (several minutes), then `make docs`",
            file=sys.stderr,
            flush=True,
        )
    pages = sum(1 for _ in staged.out.rglob("*.md"))
    print(
        f"docs: staged {pages} pages and {len(staged.reports)} notebook reports into "
        f"{staged.out} ({len(staged.rewritten)} links rewritten, {len(staged.unlinked)} links "
        "to files outside the site made code text)",
        flush=True,
    )
    if args.stage_only:
        return 0
    from mkdocs.exceptions import Abort

    site = args.site or root / "site"
    try:
        build_site(args.config or root / "mkdocs.yml", staged, site)
    except Abort as exc:
        print(f"docs: the build failed: {exc}", file=sys.stderr)
        return 1
    print(f"docs: built {site}/ (open {site}/index.html)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
