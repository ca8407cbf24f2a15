"""One contract for every writer of the kit (docs/reliability.md, "Writers and files").

:data:`WRITERS` lists each way the kit writes a file for a user (the shared
``zg._io.atomic_write`` and every caller of it that a user reaches: ``save_npz``,
``save_folder``, ``Engine.save``, a Grappa ``checkpoint_dir`` / ``history_path``, ``zg train
--json``, a result file). The same checks run over all of them:

* a target this user may not write (``chmod 444``; a folder no file can be created in) is
  refused as a plain ``open(path, "w")`` would refuse it: a PermissionError (or ValueError)
  naming the path, the old content and mode kept, no temporary file left. As root (who may
  write anything) the writers run in a child process as ``nobody``;
* a full disk (a child process under ``RLIMIT_FSIZE`` with ``SIGXFSZ`` ignored, so a write
  past the limit fails with ``EFBIG`` as a full file system fails with ``ENOSPC``) is one
  message of one shape for every writer, naming the path and the room left, the old file
  kept, no temporary file left and nothing on stderr (no ``ZipFile.__del__`` traceback, no
  torch ``unexpected pos``).

:func:`test_every_writer_of_the_kit_is_in_the_contract` reads the source of ``zg/``: every
call of the shared writer must be one :data:`WRITERS` exercises (or one named in
:data:`REACHED_ONLY_INSIDE_A_RUN` with its reason), and no file is written another way
(``torch.save`` / ``np.save`` / ``open(..., "w")`` outside a writer passed to
``atomic_write``) unless :data:`NOT_A_USERS_FILE` says why.
"""

from __future__ import annotations

import ast
import errno
import gc
import json
import os
import re
import resource
import shutil
import signal
import stat
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import processes  # noqa: E402

NOBODY = 65534
LIMIT = 1024  # bytes: the "disk" of the full-disk child; every writer below writes more
OLD = b"old content\n" * 8  # what is at the path before (under LIMIT, written before it)


# ----------------------------------------------------------------------------- the writers

# name -> (file name, function(path) writing at least LIMIT bytes there). Each runs in a child
# process (see _child); heavy imports happen inside, once per child.


def _graph():
    from graphs import tiny  # imports zg: in the child, after its signal handling

    return tiny()


def _engine():
    import zg

    g = _graph()
    model = zg.models.build("sage", g.feat_dim, 16, g.num_classes, 2)
    return zg.Engine(g, model, [5, 5], 64, mode="eager", device="cpu", seed=0)


def _big_json():
    return {"rows": [{"epoch": i, "loss": 1.0 / (i + 1)} for i in range(200)]}


def _atomic_write(path):
    from zg._io import atomic_write

    atomic_write(path, lambda f: f.write(b"x" * (4 * LIMIT)), name="path")


def _atomic_write_swallowing(path):
    """A writer that catches its own failed write and goes on: still an error, not a file."""
    from zg._io import atomic_write

    def write(f):
        for _ in range(8):
            try:
                f.write(b"x" * LIMIT)
            except OSError:
                pass

    atomic_write(path, write, name="path")


def _write_text(path):
    from zg._io import write_text

    write_text(path, "x" * (4 * LIMIT), name="--out")


def _save_npz(path):
    import zg

    zg.datasets.save_npz(_graph(), path)


def _save_npz_compressed(path):
    import numpy as np
    import torch

    import zg

    g = _graph()
    g.x = torch.from_numpy(np.random.default_rng(0).random((300, 8), dtype=np.float32))
    zg.datasets.save_npz(g, path, compress=True)


def _engine_save(path):
    _engine().save(path)


def _grappa_checkpoint(path):
    import torch

    from zg.grappa.checkpoint import _save_checkpoint

    _save_checkpoint(path, {"model": [{"w": torch.zeros(4 * LIMIT)}], "step": 1})


def _grappa_history(path):
    from zg.grappa.history import write_json

    write_json(_big_json(), path)


def _zg_train_json(path):
    from zg.cli import write_json_atomic

    write_json_atomic(path, _big_json())


def _result_file(path):
    from zg.experiments import results

    doc = json.loads((ROOT / "bench" / "results" / "aggregation.json").read_text())
    results.write(path, doc)


WRITERS = {
    "atomic_write": ("out.bin", _atomic_write),
    "atomic_write_swallowing": ("out.bin", _atomic_write_swallowing),
    "write_text": ("out.txt", _write_text),
    "save_npz": ("g.npz", _save_npz),
    "save_npz_compressed": ("g.npz", _save_npz_compressed),
    "Engine.save": ("ckpt.pt", _engine_save),
    "grappa_checkpoint_dir": ("checkpoint.pt", _grappa_checkpoint),
    "grappa_history_path": ("history.json", _grappa_history),
    "zg_train_json": ("h.json", _zg_train_json),
    "results.write": ("result.json", _result_file),
}

# Each call of the shared writer in zg/ (module, function) -> the entry of WRITERS that runs it.
EXERCISED = {
    ("zg/_io.py", "write_text"): "write_text",
    ("zg/checkpoint.py", "save"): "Engine.save",
    ("zg/cli.py", "write_json_atomic"): "zg_train_json",
    ("zg/cli.py", "cmd_train"): "zg_train_json",
    ("zg/datasets.py", "save_npz"): "save_npz",
    ("zg/experiments/results.py", "write"): "results.write",
    ("zg/grappa/checkpoint.py", "_save_checkpoint"): "grappa_checkpoint_dir",
    ("zg/grappa/history.py", "write_json"): "grappa_history_path",
}
# ... or the reason it is reached only inside a run (the same call as an exercised one).
REACHED_ONLY_INSIDE_A_RUN = {
    ("zg/grappa/worker.py", "_Run.finish"): "model_path: torch.save through atomic_write, as "
    "grappa_checkpoint_dir",
    ("zg/grappa/launch.py", "_record_error"): "a worker's error record for its parent; a "
    "failure to write it is ignored so that it never hides the error itself",
    ("zg/datasets.py", "products_like"): "the generator's note beside its cache; a failure is "
    "ignored (the graph itself is saved by save_folder)",
}
# Files written another way, and why that is not a user's file.
NOT_A_USERS_FILE = {
    ("zg/datasets.py", "save_folder"): "the arrays of a graph folder, inside its temporary "
    "folder, swapped in as a whole (tests/core/test_graph_files.py; in WRITERS as save_folder)",
    ("zg/datasets.py", "_save_array"): "save_folder's arrays (as save_folder)",
    ("zg/grappa/launch.py", "_end_soon"): "os.devnull for faulthandler",
    ("zg/grappa/launch.py", "_children_die_with_parent"): "the workers' launcher script, in "
    "the spawn's own temporary record folder (tests/grappa/test_grappa_parent_death.py)",
    ("zg/grappa/checkpoint.py", "_open_lock"): "a Grappa run's lock file, opened without "
    "following links and never replaced (tests/core/test_writers_readers.py)",
    ("zg/grappa/progress.py", "epoch_report"): "rank 0's progress lines, appended to a file in "
    "the temporary folder the calling process made and reads (or to os.devnull) "
    "(tests/grappa/test_grappa_progress.py)",
}


def _save_folder(path):
    import zg

    zg.datasets.save_folder(_graph(), path)


FOLDER_WRITERS = {"save_folder": ("graph", _save_folder)}


# ----------------------------------------------------------------------------- the child


def _snapshot(folder: Path) -> dict:
    """name -> (mode, content) of every entry under ``folder`` (content None for a folder)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        info = p.lstat()
        content = p.read_bytes().hex() if stat.S_ISREG(info.st_mode) else None
        out[str(p.relative_to(folder))] = (stat.S_IMODE(info.st_mode), content)
    return out


def _make_old(where: Path, name: str, folder_writer: bool) -> Path:
    path = where / name
    if folder_writer:
        _save_folder(path)
    else:
        path.write_bytes(OLD)
    return path


def _make_read_only(path: Path, case: str) -> None:
    if case == "file":
        if path.is_dir():
            for p in path.iterdir():
                p.chmod(0o444)
            path.chmod(0o555)
        else:
            path.chmod(0o444)
    else:  # "folder": the folder holding the path
        path.parent.chmod(0o555)


def _run_one(mode: str, name: str, scratch: Path, limit: int | None = None) -> dict:
    """One write of writer ``name`` over an old file (or graph folder) made read-only as
    ``mode`` says, or under a file-size ``limit``: what it raised, and what changed."""
    folder_writer = name in FOLDER_WRITERS
    file_name, write = {**WRITERS, **FOLDER_WRITERS}[name]
    where = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{name}-"))
    path = _make_old(where, file_name, folder_writer)
    if mode.startswith("read-only-"):
        _make_read_only(path, mode.removeprefix("read-only-"))
    before = _snapshot(where)
    record = {"limit": limit, "path": str(path), "error": None}
    unlimited = resource.getrlimit(resource.RLIMIT_FSIZE)
    try:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, unlimited[1]))
        try:
            write(path)
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, unlimited)
    except Exception as exc:  # what the caller sees
        record["error"] = {
            "type": type(exc).__name__,
            "classes": [c.__name__ for c in type(exc).__mro__],
            "errno": getattr(exc, "errno", None),
            "message": str(exc),
        }
    record["unchanged"] = _snapshot(where) == before
    record["entries"] = sorted(os.listdir(where))
    for p in [where, *where.rglob("*")]:
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    shutil.rmtree(where)
    return record


def _largest_file(name: str, scratch: Path) -> int:
    """Bytes of the largest file writer ``name`` writes (a file-size limit below it fails)."""
    file_name, write = {**WRITERS, **FOLDER_WRITERS}[name]
    where = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{name}-size-"))
    write(where / file_name)
    size = max(p.stat().st_size for p in where.rglob("*") if p.is_file())
    shutil.rmtree(where)
    return size


def _limits(size: int) -> list[int]:
    """Where the disk fills: before the first byte, in the first block (a header), in the
    middle, and a few bytes before the end (an end-of-file record, the last flush)."""
    return sorted({n for n in (0, 1, 100, size // 2, size - 8) if 0 <= n < size})


def _child(mode: str, names: list[str], scratch: str) -> None:
    """Run each writer in ``names`` under ``mode``; one JSON line each on stdout, and a marker
    line on stderr before each, so what a writer prints (late) is attributed to it."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    import torch  # noqa: F401  (imported before any limit)

    import zg  # noqa: F401

    _graph(), _engine()  # warm every import and cache before the limit
    for name in names:
        print(f"@@ {name}", file=sys.stderr, flush=True)
        if mode == "full-disk":
            limits = _limits(_largest_file(name, Path(scratch)))
            runs = [_run_one(mode, name, Path(scratch), limit) for limit in limits]
        else:
            runs = [_run_one(mode, name, Path(scratch))]
        gc.collect()  # a writer's leftover object (a ZipFile) would speak now
        sys.stderr.flush()
        print(json.dumps({"name": name, "runs": runs}), flush=True)
    print("@@ end", file=sys.stderr, flush=True)


def _run_child(mode: str, names: list[str], *, as_nobody: bool) -> tuple[dict, dict]:
    """(name -> record, name -> what it printed on stderr)."""
    scratch = Path(tempfile.mkdtemp(prefix="zg-writers-"))
    try:
        env = {
            **os.environ,
            "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests' / 'core'}",
            "DGLBACKEND": "pytorch",
            "OMP_NUM_THREADS": "1",
            "HOME": str(scratch),
            "NUMBA_CACHE_DIR": str(scratch / ".numba"),
            "TMPDIR": str(scratch),
        }
        prefix = []
        if as_nobody:
            os.chown(scratch, NOBODY, NOBODY)
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("root may write anything, and setpriv is not here to run as nobody")
            prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        code = (
            "import sys, test_writers_contract as t; "
            "t._child(sys.argv[1], sys.argv[2:-1], sys.argv[-1])"
        )
        done = processes.run(
            [*prefix, sys.executable, "-c", code, mode, *names, str(scratch)],
            cwd=scratch,
            env=env,
            capture_output=True,
            text=True,
            timeout=400,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    records = {r["name"]: r for r in map(json.loads, done.stdout.splitlines())}
    said, current = {}, None
    for line in done.stderr.splitlines():
        if line.startswith("@@ "):
            current = line[3:]
            said[current] = []
        elif current is not None:
            said[current].append(line)
    assert set(records) == set(names), done.stderr[-3000:]
    return records, {k: "\n".join(v) for k, v in said.items()}


_RUNS: dict[str, tuple[dict, dict]] = {}


def _results(mode: str) -> tuple[dict, dict]:
    """The child's results for ``mode``, run once for all writers (one torch import)."""
    if mode not in _RUNS:
        names = [*WRITERS, *FOLDER_WRITERS]
        _RUNS[mode] = _run_child(
            mode, names, as_nobody=mode.startswith("read-only-") and os.geteuid() == 0
        )
    return _RUNS[mode]


# ----------------------------------------------------------------------------- the contract

ALL = [*WRITERS, *FOLDER_WRITERS]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_a_write_protected_target_is_refused_as_a_plain_write_would_be(name):
    """``chmod 444`` (a graph folder: its files 444, itself 555): a plain ``open(path, "w")``
    is refused, and so is every writer of the kit; nothing changes at the path, no
    temporary file is left."""
    records, said = _results("read-only-file")
    (record,) = records[name]["runs"]
    error = record["error"]
    assert error is not None, f"{name} replaced a file this user may not write"
    assert "PermissionError" in error["classes"] and error["errno"] == errno.EACCES, error
    assert record["path"] in error["message"] and "not writable" in error["message"], error
    assert ".tmp" not in error["message"], error
    assert record["unchanged"], f"{name} changed something at a refused path"
    assert not [e for e in record["entries"] if e.endswith(".tmp")], record["entries"]
    assert said[name] == "", said[name]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_a_target_in_a_read_only_folder_is_refused(name):
    records, said = _results("read-only-folder")
    (record,) = records[name]["runs"]
    error = record["error"]
    assert error is not None, f"{name} wrote into a folder this user may not write"
    assert {"PermissionError", "ValueError"} & set(error["classes"]), error
    assert record["path"] in error["message"], error
    assert re.search("not writable|Permission denied", error["message"]), error
    assert record["unchanged"], f"{name} changed something in a read-only folder"
    assert said[name] == "", said[name]


FULL_DISK = re.compile(
    r"(\[Errno \d+\] )?could not write (the graph folder )?\S+ '(?P<path>[^']+)': (?P<why>[^;]+); "
    r"[0-9.]+ MiB free there; the path is unchanged: free some space \(or raise the limit\) "
    r"or write elsewhere$"
)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_a_full_disk_is_one_message_for_every_writer(name):
    """A write past the file-size limit (EFBIG, as ENOSPC on a full file system), the disk
    filling at every stage of the write (before the first byte, in a header, in the middle, in
    the end record): an OSError with that errno, one message of one shape naming the path and
    the room left (never torch's "unexpected pos"), the old file kept, no temporary file, and
    nothing on stderr after it."""
    records, said = _results("full-disk")
    runs = records[name]["runs"]
    assert len(runs) >= 3, runs  # the disk fills at the start, in the middle, near the end
    for record in runs:
        error, at = record["error"], f"{name}, {record['limit']} bytes left"
        assert error is not None, f"{at}: wrote past the limit without an error"
        assert "OSError" in error["classes"] and error["errno"] == errno.EFBIG, (at, error)
        match = FULL_DISK.match(error["message"])
        assert match, (at, error["message"])
        assert match["path"] == record["path"], (at, match["path"], record["path"])
        assert "unexpected pos" not in error["message"], (at, error["message"])
        assert record["unchanged"], f"{at}: the old file was not kept"
        assert not [e for e in record["entries"] if ".tmp" in e], (at, record["entries"])
    assert said[name] == "", f"{name} printed after its error:\n{said[name]}"


# ----------------------------------------------------------------------------- every writer listed


def _dotted(node) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


SHARED = {"atomic_write", "write_text", "write_json_atomic"}
RAW = {"torch.save", "np.save", "np.savez", "np.savez_compressed", "shutil.copy", "shutil.copyfile"}


def _writes_of(source: str) -> tuple[set, set]:
    """(functions calling the shared writer, functions writing a file another way) of a module,
    each as a dotted qualified name. A raw write inside a lambda given to the shared writer is
    the shared writer's."""
    tree = ast.parse(source)
    shared, raw = set(), set()

    def visit(node, where: list[str], in_writer: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            where = [*where, node.name]
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name in SHARED or (name.split(".")[-1] in SHARED and "_io." in name):
                shared.add(".".join(where))
                for arg in [*node.args, *(k.value for k in node.keywords)]:
                    visit(arg, where, True)
                visit(node.func, where, in_writer)
                return
            if not in_writer and _is_raw_write(node, name):
                raw.add(".".join(where))
        for child in ast.iter_child_nodes(node):
            visit(child, where, in_writer)

    visit(tree, [], False)
    return shared, raw


def _is_raw_write(node: ast.Call, name: str) -> bool:
    if name in RAW or name.split(".")[-1] in ("write_text", "write_bytes"):
        return True
    if name in ("open", "io.open", "os.fdopen"):
        mode = node.args[1] if len(node.args) > 1 else None
        mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
        if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
            return bool(set(mode.value) & set("wax+"))
        return mode is not None  # a mode not written out: counted as a write
    return False


def test_every_writer_of_the_kit_is_in_the_contract():
    shared, raw = set(), set()
    for path in sorted((ROOT / "zg").rglob("*.py")):
        module = str(path.relative_to(ROOT))
        calls, others = _writes_of(path.read_text(encoding="utf-8"))
        if module == "zg/_io.py":
            others.discard("atomic_write")  # the shared writer itself
        shared |= {(module, f) for f in calls}
        raw |= {(module, f) for f in others}
    listed = set(EXERCISED) | set(REACHED_ONLY_INSIDE_A_RUN)
    assert shared - listed == set(), (
        "a new caller of the shared writer: add it to WRITERS / EXERCISED (or, if only a run "
        f"reaches it, REACHED_ONLY_INSIDE_A_RUN): {sorted(shared - listed)}"
    )
    assert listed - shared == set(), f"listed but gone: {sorted(listed - shared)}"
    assert raw - set(NOT_A_USERS_FILE) == set(), (
        "a file written without zg._io.atomic_write (read-only targets, a full disk and "
        f"links would each need their own code): {sorted(raw - set(NOT_A_USERS_FILE))}"
    )
    assert set(NOT_A_USERS_FILE) - raw == set(), sorted(set(NOT_A_USERS_FILE) - raw)
    assert set(EXERCISED.values()) <= set(WRITERS)


def test_the_source_scan_sees_a_writer_that_bypasses_the_shared_one():
    """The scan above can fail: a torch.save, an open for writing and a Path.write_text outside
    the shared writer are each found; the same inside a lambda given to it are not."""
    bypass = (
        "def a(p, s):\n    torch.save(s, p)\n"
        "def b(p):\n    with open(p, 'w') as f:\n        f.write('x')\n"
        "def c(p):\n    p.write_text('x')\n"
        "def d(p, s):\n    atomic_write(p, lambda f: torch.save(s, f))\n"
        "def e(p):\n    open(p).read()\n"
    )
    shared, raw = _writes_of(bypass)
    assert raw == {"a", "b", "c"} and shared == {"d"}


# ----------------------------------------------------------------------------- --json -


@pytest.mark.slow
def test_zg_train_json_dash_is_stdout(tmp_path, monkeypatch, capsys):
    """``zg train --json -``: the history alone on stdout (it parses as JSON), everything the
    command says on stderr, and no file named ``-``."""
    from zg import cli

    monkeypatch.chdir(tmp_path)
    argv = ["train", "--dataset", "cora", "--epochs", "1", "--no-progress", "--json", "-"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    history = json.loads(out)
    assert history["final"]["val_acc"] is not None and history["command"][-1] == "-"
    assert "final: val" in err and "history written" not in out + err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_zg_train_refuses_a_write_protected_json_before_it_trains(tmp_path):
    """``zg train --json`` at a ``chmod 444`` file: exit status 2 and one line naming the flag
    and the path, before the dataset is read (as root, run as nobody)."""
    folder = Path(tempfile.mkdtemp(prefix="zg-writers-"))
    try:
        out = folder / "h.json"
        out.write_bytes(OLD)
        out.chmod(0o444)
        prefix = []
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("root may write anything, and setpriv is not here to run as nobody")
            os.chown(folder, NOBODY, NOBODY)
            os.chown(out, NOBODY, NOBODY)
            prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
        env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "HOME": str(folder),
            "NUMBA_CACHE_DIR": str(folder / ".numba"),
        }
        argv = ["train", "--dataset", "cora", "--epochs", "1", "--json", str(out)]
        done = processes.run(
            [*prefix, sys.executable, "-m", "zg", *argv],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 2, done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert lines[-1].startswith("zg train: error: --json "), lines
        assert str(out) in lines[-1] and "not writable" in lines[-1], lines
        assert "Traceback" not in done.stderr and done.stdout == ""
        assert out.read_bytes() == OLD and stat.S_IMODE(out.stat().st_mode) == 0o444
        assert sorted(p.name for p in folder.iterdir() if p.name != ".numba") == ["h.json"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
