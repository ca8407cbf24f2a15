"""Graph files that stay true (issue 46, items 3 and 6): a graph folder interrupted at any point
while it is replaced, the formats' edge cases (an unlabelled graph's class count, big-endian
arrays, a float ``num_classes``), a truncated memory-mapped file, a cache folder checked before
the work it caches, and config files read with a size bound."""

import errno
import json
import os
import stat
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import processes
import pytest
import torch

import zg
from zg import datasets
from zg._io import CONFIG_LIMIT, read_json_config

ROOT = Path(__file__).resolve().parents[2]


def graph(name, num_nodes):
    return datasets.csbm(num_nodes, avg_degree=4, num_classes=3, feat_dim=5, seed=1, name=name)


# ----------------------------------------------------------------------------- save_folder


class Interrupt:
    """Wraps the calls save_folder makes on its way (each a point where a process can be
    stopped: a full disk, Ctrl-C) and raises at the ``fail_at``-th of them."""

    def __init__(self, monkeypatch, fail_at, exception, exchange=True):
        self.calls, self.fail_at, self.exception = 0, fail_at, exception
        self.names = []
        import json as json_module
        import tempfile

        targets = [
            (os, "replace"),
            (os, "fsync"),
            (os, "chmod"),
            (np, "save"),
            (json_module, "dump"),
            (tempfile, "mkdtemp"),
            (datasets, "open"),
        ]
        for owner, name in targets:
            original = getattr(owner, name, open)
            monkeypatch.setattr(owner, name, self.wrap(name, original), raising=False)
        swap = datasets.exchange_paths if exchange else (lambda a, b: False)
        monkeypatch.setattr(datasets, "exchange_paths", self.wrap("exchange_paths", swap))

    def wrap(self, name, function):
        def step(*args, **kwargs):
            self.calls += 1
            self.names.append(name)
            if self.calls == self.fail_at:
                raise self.exception
            return function(*args, **kwargs)

        return step


def state(path: Path):
    """The graph at ``path`` as load_folder reads it (every array validated): its name, or None
    when nothing is there."""
    if not os.path.lexists(path):
        return None
    g = datasets.load_folder(path, mmap=False)
    return g.name, g.num_nodes


def leftovers(folder: Path, path: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(f".{path.name}."))


@pytest.mark.parametrize("exchange", [True, False], ids=["swap", "two-renames"])
@pytest.mark.parametrize("existing", [True, False], ids=["over-a-folder", "new"])
def test_save_folder_interrupted_at_every_step_leaves_old_or_new(
    tmp_path, monkeypatch, exchange, existing
):
    old, new = graph("old", 60), graph("new", 80)
    path = tmp_path / "g"
    # How many steps a whole save takes (with the same patches, none failing).
    with monkeypatch.context() as m:
        if existing:
            datasets.save_folder(old, path)
        probe = Interrupt(m, None, None, exchange)
        datasets.save_folder(new, path)
    total = probe.calls
    assert total >= 10 and ("exchange_paths" in probe.names) == existing, probe.names
    for exception in (OSError(errno.ENOSPC, "No space left on device"), KeyboardInterrupt()):
        for k in range(1, total + 1):
            if os.path.lexists(path):
                datasets.shutil.rmtree(path)
            if existing:
                datasets.save_folder(old, path)
            with monkeypatch.context() as m:
                interrupt = Interrupt(m, k, exception, exchange)
                try:
                    datasets.save_folder(new, path)
                    raised = False
                except (OSError, KeyboardInterrupt):
                    raised = True
            step = f"step {k} of {total} ({interrupt.names[-1]}), {type(exception).__name__}"
            expected_old = ("old", 60) if existing else None
            assert state(path) == (expected_old if raised else ("new", 80)), step
            assert leftovers(tmp_path, path) == [], step


def test_save_folder_follows_a_link_and_keeps_it(tmp_path):
    real = tmp_path / "data" / "g"
    real.parent.mkdir()
    datasets.save_folder(graph("old", 60), real)
    os.chmod(real, 0o750)
    link = tmp_path / "current"
    link.symlink_to(real)
    datasets.save_folder(graph("new", 80), link)
    assert os.path.islink(link) and os.readlink(link) == str(real)
    assert state(real) == ("new", 80)
    assert stat.S_IMODE(os.stat(real).st_mode) == 0o750
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="dangling link"):
        datasets.save_folder(graph("x", 10), tmp_path / "dangling")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(ValueError, match="loop"):
        datasets.save_folder(graph("x", 10), tmp_path / "loop")


def test_a_new_graph_folder_takes_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        datasets.save_folder(graph("g", 30), tmp_path / "g")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "g").st_mode) == 0o750
    assert stat.S_IMODE(os.stat(tmp_path / "g" / "x.npy").st_mode) == 0o640


# ----------------------------------------------------------------------------- .npz formats


def rewrite_npz(path: Path, change) -> None:
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays = change(arrays)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def same_graph(a: zg.Graph, b: zg.Graph) -> None:
    for key in ("indptr", "indices", "x", "y", "train_idx", "val_idx", "test_idx"):
        left, right = getattr(a, key), getattr(b, key)
        assert (left is None) == (right is None), key
        if left is not None:
            assert left.dtype == right.dtype and torch.equal(left, right), key
    assert (a.num_classes, a.name) == (b.num_classes, b.name)


@pytest.mark.parametrize("labelled", [False, True])
def test_save_npz_keeps_num_classes(tmp_path, labelled):
    g = zg.Graph.from_edges(
        [0, 1, 2],
        [1, 2, 0],
        num_nodes=3,
        y=[0, 1, 0] if labelled else None,
        num_classes=5,
        name="three",
    )
    datasets.save_npz(g, tmp_path / "g.npz")
    back = datasets.load_npz(tmp_path / "g.npz")
    assert back.num_classes == 5
    same_graph(g, back)


def test_big_endian_npz_arrays_read_as_the_same_values(tmp_path):
    g = graph("be", 50)
    path = tmp_path / "g.npz"
    datasets.save_npz(g, path)

    def swap(arrays):
        return {k: v.astype(v.dtype.newbyteorder(">")) for k, v in arrays.items()}

    rewrite_npz(path, swap)
    with np.load(path) as npz:
        assert npz["x"].dtype.str == ">f4" and npz["indptr"].dtype.str == ">i8"
    same_graph(g, datasets.load_npz(path))


@pytest.mark.parametrize(
    "value", [np.array(3.0), np.array(3.5), np.array(True), np.array("3"), np.array([3, 3])]
)
def test_a_num_classes_that_is_not_an_integer_is_refused(tmp_path, value):
    path = tmp_path / "g.npz"
    datasets.save_npz(graph("f", 30), path)
    rewrite_npz(path, lambda arrays: {**arrays, "num_classes": value})
    with pytest.raises(ValueError, match=r"num_classes must be an integer") as info:
        datasets.load_npz(path)
    assert str(path) in str(info.value)


def test_a_big_endian_folder_array_is_refused_naming_the_byte_order(tmp_path):
    folder = tmp_path / "g"
    datasets.save_folder(graph("be", 30), folder)
    x = np.load(folder / "x.npy")
    np.save(folder / "x.npy", x.astype(">f4"))
    with pytest.raises(ValueError, match=r"x\.npy holds >f4 values, in the other byte order"):
        datasets.load_folder(folder)


# ----------------------------------------------------------------------------- memory maps

MAPPED = """
import sys, zg
try:
    g = zg.datasets.load_folder(sys.argv[1], mmap=sys.argv[2] == "True" or "all")
    print("loaded", float(g.x.sum()))
except ValueError as exc:
    print("refused:", exc)
"""


@pytest.mark.parametrize("mmap", ["True", "all"])
@pytest.mark.parametrize("damage", ["truncated", "huge_header"])
def test_a_damaged_mapped_file_is_refused_before_it_is_mapped(tmp_path, mmap, damage):
    """A map past a file's end is a SIGBUS at the first read (exit -7, no Python error): the
    size is checked against the header before mapping, in Python ints (no wrap-around). In a
    child process, so a regression fails the test instead of killing pytest."""
    folder = tmp_path / "g"
    datasets.save_folder(graph("m", 200), folder)
    file = folder / "x.npy"
    if damage == "truncated":
        os.truncate(file, file.stat().st_size - 64)
    else:  # shape [2**62, 4] float32: 2**66 bytes, 0 in int64 arithmetic
        shape = [2**62, 4]
        header = {"descr": "<f4", "fortran_order": False, "shape": tuple(shape)}
        with open(file, "wb") as f:
            np.lib.format.write_array_header_1_0(f, header)
        meta = json.loads((folder / "meta.json").read_text())
        meta["arrays"]["x"]["shape"] = shape
        (folder / "meta.json").write_text(json.dumps(meta))
    run = processes.run(
        [sys.executable, "-c", textwrap.dedent(MAPPED), str(folder), mmap],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT), "DGLBACKEND": "pytorch"},
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, f"exit {run.returncode}: {run.stderr[-2000:]}"
    assert "refused:" in run.stdout and "x.npy" in run.stdout, run.stdout
    assert "truncated" in run.stdout, run.stdout


# ----------------------------------------------------------------------------- caches


def test_products_like_checks_its_cache_folder_before_generating(tmp_path, monkeypatch):
    def never(**kwargs):
        raise AssertionError("the graph was generated before its cache folder was checked")

    monkeypatch.setattr(datasets, "_generate_products_like", never)
    small = dict(num_nodes=200, avg_degree=4, feat_dim=4, num_classes=3)
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(ValueError, match=r"cache_dir .* is a file, not a folder"):
        datasets.products_like(**small, cache_dir=blocker)
    with pytest.raises(ValueError, match=r"cache_dir .* is a file, not a folder"):
        datasets.products_like(**small, cache_dir=blocker / "below")
    (tmp_path / "loop").symlink_to("loop")
    with pytest.raises(ValueError, match=r"cache_dir .*loop"):
        datasets.products_like(**small, cache_dir=tmp_path / "loop")
    occupied = datasets.products_like_path(**small, cache_dir=tmp_path / "cache")
    occupied.mkdir(parents=True)
    (occupied / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not a zg graph folder"):
        datasets.products_like(**small, cache_dir=tmp_path / "cache")
    assert (occupied / "notes.txt").read_text() == "mine"


# ----------------------------------------------------------------------------- config files


def test_a_config_is_read_with_a_size_bound(tmp_path):
    small = tmp_path / "c.json"
    small.write_text(json.dumps({"epochs": 1}))
    assert read_json_config(small) == {"epochs": 1}
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"pad": " " * CONFIG_LIMIT}))
    with pytest.raises(ValueError, match=r"--config .*big\.json: is over 1,048,576 bytes"):
        read_json_config(big)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would wait for a writer forever
    with pytest.raises(ValueError, match=r"is a named pipe \(FIFO\), not a regular file"):
        read_json_config(fifo)
    with pytest.raises(ValueError, match=r"/dev/zero: is a character device"):
        read_json_config("/dev/zero")
    with pytest.raises(ValueError, match="is a directory"):
        read_json_config(tmp_path)
    with pytest.raises(ValueError, match="cannot read a JSON config"):
        read_json_config(tmp_path / "missing.json")
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        read_json_config(tmp_path / "deep.json")


@pytest.mark.parametrize("entry", ["zg grappa", "python -m zg.grappa"])
def test_the_grappa_commands_refuse_an_oversized_config(tmp_path, capsys, entry):
    from zg.cli import main as zg_main
    from zg.grappa.__main__ import main as grappa_main

    big = tmp_path / "big.json"
    big.write_text(json.dumps({"dataset": "cora", "pad": "x" * (CONFIG_LIMIT + 1)}))
    run = (
        (lambda: zg_main(["grappa", "--config", str(big)]))
        if entry == "zg grappa"
        else (lambda: grappa_main(["--config", str(big)]))
    )
    with pytest.raises(SystemExit) as info:
        run()
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--config" in err and "is over 1,048,576 bytes" in err, err


def test_a_graph_folders_meta_json_is_bounded_too(tmp_path):
    folder = tmp_path / "g"
    datasets.save_folder(graph("g", 30), folder)
    os.unlink(folder / "meta.json")
    os.mkfifo(folder / "meta.json")
    with pytest.raises(ValueError, match=r"meta\.json could not be read .*named pipe"):
        datasets.load_folder(folder)


def test_save_npz_writes_a_plain_zip_of_npy_members(tmp_path):
    """The .npz written by save_npz is a plain zip of .npy members (what other tools read)."""
    path = tmp_path / "g.npz"
    datasets.save_npz(graph("z", 20), path)
    with zipfile.ZipFile(path) as z:
        assert "x.npy" in z.namelist() and "num_classes.npy" in z.namelist()
