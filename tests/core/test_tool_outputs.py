"""The repository's tools write where a user points them only through the kit's writer.

Each tool of tools/ and bench/ that writes at a path given on its command line checks that
path before doing any work (``zg._io.command_output_arg`` / ``zg._checks.output_folder_arg``)
and writes through ``zg._io.write_text`` (atomic, a link kept). Here each tool's ``main`` is
given a directory, a named pipe and a dangling link where it expects a file (or a regular
file, a named pipe and a dangling link where it expects a folder): it must stop with exit
status 2 and one error line naming the flag, before any real work (no browser, no grading,
no build), leaving the path as it was. A FIFO that were opened for writing would block: an
alarm turns that into a failure instead of a hang.
"""

import os
import stat
import sys
from pathlib import Path

import pytest
import special_paths

from zg._io import command_output_arg, write_text

ROOT = Path(__file__).resolve().parents[2]

# (script, argv before the path, flag, argv after the path, what the flag names)
TOOLS = [
    ("tools/figure_check.py", ["--json"], "--json", [], "file"),
    ("tools/figure_check.py", ["--markdown"], "--markdown", [], "file"),
    ("tools/lab_live_check.py", ["--json"], "--json", [], "file"),
    ("zg_course/contract_table.py", ["--write"], "--write", [], "file"),
    ("zg_course/check.py", ["--timings"], "--timings", [], "file"),
    ("tools/build_report.py", ["x.ipynb", "--execute-only", "--timings"], "--timings", [], "file"),
    ("tools/build_report.py", ["x.ipynb", "--out"], "--out", [], "folder"),
    ("tools/student_dist.py", ["--out"], "--out", [], "folder"),
    ("bench/grappa_peer.py", ["--work"], "--work", [], "folder"),
]


def run_main(script: str, argv: list[str]) -> None:
    """``main(argv)`` of a repo script, imported as a module of its own (registered while it
    runs: dataclasses look their module up); sys.path and sys.modules put back after."""
    import importlib.util

    name = f"tool_under_test_{Path(script).stem}"
    saved = list(sys.path)
    spec = importlib.util.spec_from_file_location(name, ROOT / script)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        module.main(argv)
    finally:
        sys.path[:] = saved
        sys.modules.pop(name, None)


def make(kind: str, tmp_path: Path) -> Path:
    return special_paths.make(kind, tmp_path / f"out-{kind}")


def snapshot(path: Path):
    st_ = os.lstat(path)
    return (stat.S_IFMT(st_.st_mode), os.readlink(path) if path.is_symlink() else None)


@pytest.mark.parametrize("script, before, flag, after, names", TOOLS, ids=lambda v: str(v))
@pytest.mark.parametrize("bad", ["wrong", "fifo", "dangling"])
def test_a_tool_refuses_a_bad_output_path_before_any_work(
    tmp_path, capsys, monkeypatch, alarm, script, before, flag, after, names, bad
):
    kind = bad if bad != "wrong" else ("directory" if names == "file" else "file")
    path = make(kind, tmp_path)
    was = snapshot(path)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        run_main(script, [*before, str(path), *after])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2, err
    assert err and flag in err[-1] and str(path) in err[-1], err
    assert "Traceback" not in "\n".join(err)
    assert snapshot(path) == was
    if kind == "file":
        assert path.read_text() == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # nothing else written


def test_write_text_keeps_a_link_and_refuses_what_is_not_a_file(tmp_path):
    target = tmp_path / "t.json"
    target.write_text("old")
    link = tmp_path / "l.json"
    link.symlink_to(target)
    write_text(link, "new", name="--json")
    assert link.is_symlink() and target.read_text() == "new"
    for kind in ("directory", "fifo", "dangling"):
        with pytest.raises(ValueError, match=r"^--json "):
            write_text(make(kind, tmp_path), "x", name="--json")
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_command_output_arg_is_one_line_and_exit_2(tmp_path, capsys):
    import argparse

    parser = argparse.ArgumentParser(prog="tool")
    assert command_output_arg(parser, None, "--json") is None
    assert command_output_arg(parser, str(tmp_path / "new.json"), "--json") == tmp_path / "new.json"
    with pytest.raises(SystemExit) as exit_:
        command_output_arg(parser, str(tmp_path), "--json")
    assert exit_.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("tool: error: --json ") and "is a directory" in last
