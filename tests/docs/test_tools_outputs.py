"""The grading and notebook tools check their paths when their arguments are parsed and write
only through the kit's writer (``zg._io.write_text``: atomic, a link kept and its target
replaced, only a regular file ever replaced).

``zg_course/sandbox.py --json``, ``zg_course/grade.py --json``, ``zg_course/mutants.py
--write``, ``zg_course/variants.py --write`` and ``tools/colab_cell.py --out`` are given a
directory, a named pipe and a dangling link where they write: each stops with exit status 2
and one error line naming the flag and the path, before any grading (the submission, the lab or
the course named does not even exist, so any work would fail otherwise), leaving the path as it
was. The inputs they read (a lab's notebook, a notebook to change, the Markdown file a table
goes into) are read only if they are regular files. Real files, FIFOs (os.mkfifo) and symbolic
links; an alarm turns a FIFO opened by mistake into a failure instead of a hang.
"""

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from special_paths import make

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "labs" / "source" / "00_setup" / "00_setup.ipynb"


def run_main(script: str, argv: list[str]):
    """``main(argv)`` of a tool, imported as a module of its own; sys.path and sys.modules are
    put back after."""
    import importlib.util

    name = f"tool_outputs_{Path(script).stem}"
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location(name, ROOT / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        return module.main(argv)
    finally:
        sys.path[:] = saved
        sys.modules.pop(name, None)


def snapshot(path: Path):
    info = os.lstat(path)
    return (
        stat.S_IFMT(info.st_mode),
        info.st_ino,
        os.readlink(path) if path.is_symlink() else None,
    )


def refused(capsys, exit_, flag: str, path: Path) -> str:
    """The one error line of a refusal at parse time: exit status 2, naming flag and path."""
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert exit_.value.code == 2, (captured.out, err)
    assert err and flag in err[-1] and str(path) in err[-1], err
    assert "Traceback" not in captured.err
    return err[-1]


# (script, argv with {out} where the output path goes, flag); every other argument names
# something that does not exist (a submission, a course), so no work can have been done.
TOOLS = [
    ("zg_course/sandbox.py", ["{tmp}/01_host_syncs.ipynb", "--json", "{out}"], "--json"),
    ("zg_course/grade.py", ["{tmp}/lab.ipynb", "--json", "{out}"], "--json"),
    ("zg_course/mutants.py", ["--course", "{tmp}/no-course", "--write", "{out}"], "--write"),
    ("zg_course/variants.py", ["--course", "{tmp}/no-course", "--write", "{out}"], "--write"),
]


@pytest.mark.parametrize("script, argv, flag", TOOLS, ids=[t[0] for t in TOOLS])
@pytest.mark.parametrize("bad", ["directory", "fifo", "dangling"])
def test_a_grading_tool_refuses_a_bad_output_before_any_grading(
    tmp_path, capsys, monkeypatch, alarm, script, argv, flag, bad
):
    (tmp_path / "lab.ipynb").write_text('{"cells": []}')  # zg_course.grade's notebook: a real file
    out = make(bad, tmp_path / "out")
    was = snapshot(out)
    monkeypatch.chdir(tmp_path)
    argv = [a.format(tmp=tmp_path, out=out) for a in argv]
    with pytest.raises(SystemExit) as exit_:
        run_main(script, argv)
    refused(capsys, exit_, flag, out)
    assert snapshot(out) == was
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["lab.ipynb", "out"])


def test_the_grader_refuses_a_notebook_that_is_a_fifo(tmp_path, capsys, alarm):
    notebook = make("fifo", tmp_path / "lab.ipynb")
    with pytest.raises(SystemExit) as exit_:
        run_main("zg_course/grade.py", [str(notebook), "--json", str(tmp_path / "r.json")])
    line = refused(capsys, exit_, "notebook", notebook)
    assert "named pipe" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.ipynb"]


def test_write_table_reads_and_replaces_only_a_regular_file(tmp_path, alarm):
    import zg_course.mutants as mutants

    begin, end = mutants.BEGIN, mutants.END
    pipe = make("fifo", tmp_path / "scores.fifo")
    with pytest.raises(ValueError, match=r"^--write .*named pipe"):
        mutants.write_table(pipe, "| table |")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)
    folder = make("directory", tmp_path / "scores.dir")
    with pytest.raises(ValueError, match=r"^--write .*directory"):
        mutants.write_table(folder, "| table |")

    # A link to a Markdown file: the link is kept, its target replaced whole (a fresh file, not
    # written in place), the text around the markers kept, the table taken as it is.
    doc = tmp_path / "doc.md"
    doc.write_text(f"# Scores\n\n{begin}\nold\n{end}\n\nafter\n")
    link = tmp_path / "link.md"
    link.symlink_to(doc)
    inode = os.stat(doc).st_ino
    table = "| lab | part \\d |\n|---|---|"
    mutants.write_table(link, table)
    assert link.is_symlink() and os.readlink(link) == str(doc)
    assert doc.read_text() == f"# Scores\n\n{begin}\n{table}\n{end}\n\nafter\n"
    assert os.stat(doc).st_ino != inode
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


@pytest.fixture
def notebook(tmp_path):
    """A copy of Lab 0's notebook in a folder of its own (colab_cell writes OUT/<folder>/)."""
    (tmp_path / "src" / "lab").mkdir(parents=True)
    return Path(shutil.copy(LAB, tmp_path / "src" / "lab" / "nb.ipynb"))


@pytest.mark.parametrize("bad", ["file", "fifo", "dangling"])
def test_colab_cell_refuses_an_out_that_is_no_folder(tmp_path, capsys, alarm, notebook, bad):
    out = make(bad, tmp_path / "out")
    was = snapshot(out)
    with pytest.raises(SystemExit) as exit_:
        run_main("tools/colab_cell.py", ["--out", str(out), str(notebook)])
    refused(capsys, exit_, "--out", out)
    assert snapshot(out) == was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "src"]


@pytest.mark.parametrize("bad", ["directory", "fifo", "dangling"])
def test_colab_cell_refuses_a_target_that_is_no_file_before_writing_any(
    tmp_path, capsys, alarm, notebook, bad
):
    """Two notebooks, the second's target bad: refused before the first is written."""
    other = tmp_path / "src" / "other"
    other.mkdir()
    second = Path(shutil.copy(LAB, other / "nb.ipynb"))
    (tmp_path / "out" / "other").mkdir(parents=True)
    target = make(bad, tmp_path / "out" / "other" / "nb.ipynb")
    was = snapshot(target)
    with pytest.raises(SystemExit) as exit_:
        run_main(
            "tools/colab_cell.py", ["--out", str(tmp_path / "out"), str(notebook), str(second)]
        )
    refused(capsys, exit_, "--out", target)
    assert snapshot(target) == was
    assert not (tmp_path / "out" / "lab").exists()  # the first notebook was not written either


def test_colab_cell_reads_only_regular_notebooks_and_keeps_a_link(
    tmp_path, capsys, alarm, notebook
):
    pipe = make("fifo", tmp_path / "src" / "lab" / "in.ipynb")
    with pytest.raises(SystemExit) as exit_:
        run_main("tools/colab_cell.py", ["--out", str(tmp_path / "out"), str(pipe)])
    assert "named pipe" in refused(capsys, exit_, "notebook", pipe)
    assert not (tmp_path / "out").exists()

    # The target is a link: kept, and its target replaced whole by the new notebook (the kit's
    # rule for every path it writes, docs/reliability.md), never written in place.
    elsewhere = tmp_path / "elsewhere.ipynb"
    elsewhere.write_text("old")
    (tmp_path / "out" / "lab").mkdir(parents=True)
    link = tmp_path / "out" / "lab" / "nb.ipynb"
    link.symlink_to(elsewhere)
    inode = os.stat(elsewhere).st_ino
    assert run_main("tools/colab_cell.py", ["--out", str(tmp_path / "out"), str(notebook)]) == 0
    assert link.is_symlink() and os.readlink(link) == str(elsewhere)
    cells = json.loads(elsewhere.read_text())["cells"]
    assert any(c.get("id") == "colab-install" for c in cells)
    assert os.stat(elsewhere).st_ino != inode
    assert sorted(p.name for p in (tmp_path / "out" / "lab").iterdir()) == ["nb.ipynb"]
