"""Fill the generated blocks of README.md, docs/*.md and the labs' Markdown cells (model answers
that quote a measurement) from the result files in bench/results/.

A measured number in the docs is never typed: it sits in a generated block that this script
rewrites from the file the bench wrote (:mod:`zg.experiments.results`). Two kinds of block:

    <!-- zg:headline engine -->
    (a Markdown table of engine.json's headline metrics and the machine it ran on)
    <!-- /zg:headline -->

    <!-- zg:metric engine envelope_vs_dgl_sage_b1024 -->1.06x ± 0.05 (n=3)<!-- /zg:metric -->

    <!-- zg:table engine:envelope_vs_dgl_sage_b1024 sampling:fused_vs_dgl_sampling -->
    (a Markdown table of chosen metrics from several files, each with its file and machine)
    <!-- /zg:table -->

Two more kinds come from the code itself, not from a result file (``tools/route.py``):

    <!-- zg:route batch -->
    (one walk through the code, docs/route.md: each function with `zg/file.py:line` of its def)
    <!-- /zg:route -->

    <!-- zg:modules -->
    (every module of the package with its docstring's first sentence, docs/layout.md)
    <!-- /zg:modules -->

Every value read from a result file is written as text (``tools/markdown_text.py``): HTML, the
block markers above and Markdown syntax in a value are escaped, so a value can neither end or
open a block nor break a table or add a link. Pages are written through the kit's one writer
(``zg._io.atomic_write``: a linked page keeps its link, a page keeps its mode).

Usage:

    python tools/render_docs.py            # rewrite every block in README.md and docs/*.md
    python tools/render_docs.py --check    # exit 1 if a block is stale or names a missing
                                           # file, metric or function (each problem on its
                                           # own line)

``--root`` (the tree whose README.md and docs/*.md are read) and ``--results`` (the folder of
result files) default to this checkout; ``FILE ...`` limits the run to those Markdown files.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from zg.experiments import results
from zg.experiments.machine import machine_label, machine_short


def _load_route():
    """tools/route.py (the walks of docs/route.md), a script beside this one."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("zg_route", Path(__file__).with_name("route.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


route = _load_route()

# One block: an opening marker naming the kind and its arguments, the body, the closing marker.
BLOCK = re.compile(
    r"<!-- zg:(?P<kind>[a-z_]+)(?P<args>(?: [^ >]+)*) -->(?P<body>.*?)<!-- /zg:(?P=kind) -->",
    re.DOTALL,
)
OPENING = re.compile(r"<!-- zg:([a-z_]+)[^>]*-->")
CLOSING = re.compile(r"<!-- /zg:([a-z_]+) -->")
# kind -> number of arguments (None: 1 or more)
KINDS = {"headline": 1, "metric": 2, "table": None, "route": 1, "modules": 0}
FROM_CODE = ("route", "modules")  # rendered from the code (tools/route.py), not a result file


class Problem(NamedTuple):
    """One thing wrong with a block: where, and what."""

    path: Path
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


def _load_tool(name: str):
    """A script beside this one (tools/<name>.py), loaded by path: tools/ is not a package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"zg_{name}", Path(__file__).with_name(f"{name}.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Every value from a result file is written through these two (tools/markdown_text.py): HTML,
# the block markers and Markdown syntax in a value are escaped, shown as text.
_markdown = _load_tool("markdown_text")
cell, code = _markdown.cell, _markdown.code


def headline_table(doc: dict, name: str) -> str:
    """The body of a ``zg:headline`` block: one row per headline metric, then the machine."""
    if not doc["headline"]:
        raise ValueError(f"{name}: the result file has no headline metrics")
    lines = [
        "| metric | value ± std (n) | compared to | where |",
        "|---|---|---|---|",
    ]
    for m in doc["headline"]:
        lines.append(
            f"| {code(m['name'])} | {cell(results.fmt(m))} | {cell(m['compared_to'] or '')} "
            f"| {cell(m['where'])} |"
        )
    source = code(f"bench/results/{name}.json")
    lines += ["", f"Machine: {cell(machine_label(doc['machine']))} ({source})."]
    return "\n" + "\n".join(lines) + "\n"


def load_cached(name: str, results_dir: Path, cache: dict) -> dict:
    """The result file ``name`` of ``results_dir``, read once; a path that is a folder or not a
    regular file is a ValueError naming it (so a problem line, not a traceback)."""
    if name not in cache:
        path = results_dir / f"{name}.json"
        if path.is_dir():
            raise ValueError(f"{path} is a folder, not a result file")
        if path.exists() and not path.is_file():
            raise ValueError(f"{path} is not a regular file, so not a result file")
        cache[name] = results.load(path)
    return cache[name]


def metrics_table(args: list[str], results_dir: Path, cache: dict) -> str:
    """The body of a ``zg:table`` block: one row per ``file:metric`` argument."""
    if not args:
        raise ValueError("zg:table takes one or more file:metric arguments, got none")
    lines = [
        "| metric | value ± std (n) | compared to | where | result file, machine |",
        "|---|---|---|---|---|",
    ]
    for arg in args:
        name, sep, metric_name = arg.partition(":")
        if not sep or not name or not metric_name:
            raise ValueError(f"zg:table argument {arg!r} is not file:metric")
        doc = load_cached(name, results_dir, cache)
        m = results.metric(doc, metric_name)
        lines.append(
            f"| {code(m['name'])} | {cell(results.fmt(m))} | {cell(m['compared_to'] or '')} "
            f"| {cell(m['where'])} | {code(name + '.json')}, {cell(machine_short(doc['machine'], doc['detail']))} |"
        )
    return "\n" + "\n".join(lines) + "\n"


def render_block(kind: str, args: list[str], results_dir: Path, cache: dict) -> str:
    """The body a block of ``kind`` with ``args`` should hold; raises naming what is missing."""
    if kind not in KINDS:
        raise ValueError(f"unknown block kind zg:{kind} (known: {', '.join(sorted(KINDS))})")
    if kind == "table":
        return metrics_table(args, results_dir, cache)
    if kind in FROM_CODE and len(args) != KINDS[kind]:
        raise ValueError(f"zg:{kind} takes {KINDS[kind]} argument(s), got {args}")
    if kind == "route":
        return route.render_walk(args[0])
    if kind == "modules":
        return route.render_modules()
    if len(args) != KINDS[kind]:
        raise ValueError(
            f"zg:{kind} takes {KINDS[kind]} argument(s) (file{' metric' * (kind == 'metric')}), "
            f"got {args}"
        )
    name = args[0]
    doc = load_cached(name, results_dir, cache)
    if kind == "headline":
        return headline_table(doc, name)
    return cell(results.fmt(results.metric(doc, args[1])))


def render_text(
    text: str, path: Path, results_dir: Path, cache: dict | None = None
) -> tuple[str, list[Problem], int]:
    """``text`` with every block re-rendered, the problems found, and how many blocks it has.

    A block whose file or metric is missing keeps its old body and is reported."""
    cache = {} if cache is None else cache
    problems: list[Problem] = []
    out, pos, count = [], 0, 0
    for match in BLOCK.finditer(text):
        count += 1
        line = text.count("\n", 0, match.start()) + 1
        kind, args = match["kind"], match["args"].split()
        out.append(text[pos : match.start("body")])
        try:
            body = render_block(kind, args, results_dir, cache)
        except (OSError, KeyError, ValueError) as e:  # OSError: a file that cannot be read
            message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
            problems.append(Problem(path, line, f"zg:{kind} {' '.join(args)}: {message}"))
            body = match["body"]
        out.append(body)
        pos = match.end("body")
    out.append(text[pos:])
    # Markers outside a complete block: an opening without its closing, or the reverse.
    opened = sum(1 for _ in OPENING.finditer(text))
    closed = sum(1 for _ in CLOSING.finditer(text))
    if opened != count or closed != count:
        problems.append(
            Problem(
                path,
                1,
                f"{opened} opening and {closed} closing zg markers but {count} complete blocks "
                "(a marker is misspelt or unclosed)",
            )
        )
    return "".join(out), problems, count


def default_files(root: Path) -> list[Path]:
    """README.md, docs/*.md, and the graded labs (their model answers quote result files)."""
    labs = sorted(
        p for p in (root / "labs" / "source").glob("*/*.ipynb") if p.stem == p.parent.name
    )
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), *labs]


def render_notebook(
    text: str, path: Path, results_dir: Path, cache: dict
) -> tuple[str, list[Problem], int]:
    """A notebook's JSON with every block of its Markdown cells re-rendered (the file keeps its
    format: one-space indent, non-ASCII as is)."""
    import json

    nb = json.loads(text)
    problems, count = [], 0
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "markdown":
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        new, found, n = render_text(src, Path(f"{path} (cell {i})"), results_dir, cache)
        problems += found
        count += n
        if new != src:
            cell["source"] = new.splitlines(keepends=True)
    if not count:
        return text, problems, 0
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n", problems, count


def run(files: list[Path], results_dir: Path, check: bool, out=sys.stdout) -> int:
    """Render (or, with ``check``, compare) every file; 0 when all blocks are current."""
    cache: dict = {}
    status, blocks, stale = 0, 0, []
    for path in files:
        if not path.is_file():
            what = "a folder, not a Markdown file" if path.is_dir() else "no such Markdown file"
            print(f"{path}: {what}", file=out)
            status = 1
            continue
        text = path.read_text()
        render = render_notebook if path.suffix == ".ipynb" else render_text
        new, problems, count = render(text, path, results_dir, cache)
        blocks += count
        for p in problems:
            print(p, file=out)
            status = 1
        if new != text:
            if check:
                for line, block in changed_blocks(text, new):
                    moved = block.split()[0][3:] in FROM_CODE
                    why = "the code moved or changed: " if moved else ""
                    print(
                        f"{path}:{line}: {block} is stale ({why}run python tools/render_docs.py)",
                        file=out,
                    )
                stale.append(path)
                status = 1
            else:
                from zg._io import atomic_write  # the kit's one writer: links kept, mode kept

                atomic_write(path, lambda f, text=new: f.write(text), name="file", text=True)
                print(f"rewrote {path}", file=out)
    if status == 0:
        print(f"render_docs: {blocks} blocks in {len(files)} files are current", file=out)
    return status


def changed_blocks(old: str, new: str) -> list[tuple[int, str]]:
    """(line, "zg:kind args") of each block whose body differs between ``old`` and ``new``."""
    found = []
    for a, b in zip(BLOCK.finditer(old), BLOCK.finditer(new)):
        if a["body"] != b["body"]:
            line = old.count("\n", 0, a.start()) + 1
            found.append((line, f"zg:{a['kind']}{a['args']}"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="Markdown files (default: all)")
    parser.add_argument("--check", action="store_true", help="report stale blocks, write nothing")
    parser.add_argument("--root", type=Path, default=ROOT, help="tree holding README.md, docs/")
    parser.add_argument(
        "--results", type=Path, default=None, help="folder of result files (ROOT/bench/results)"
    )
    args = parser.parse_args(argv)
    results_dir = args.results or args.root / "bench" / "results"
    if not results_dir.is_dir():
        parser.error(f"--results: {results_dir} is not a folder")
    files = args.files or default_files(args.root)
    return run(files, results_dir, args.check)


if __name__ == "__main__":
    sys.exit(main())
