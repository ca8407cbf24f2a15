"""zg.datasets: where graphs come from.

Where it sits: the first stage of every experiment. Each function here returns a validated
:class:`zg.Graph` (CSC adjacency, float32 features, int64 labels, train/val/test splits) that
the samplers, the engine and Grappa's partitioner then read.

    load("cora")            bundled real data (data/cora.npz), offline, no pandas/pyarrow
    load("ogbn-arxiv")      OGB graphs through the ogb package (ogbn-arxiv, -products,
                            -papers100M; see zg.ogbn), from a cache folder, never a prompt
    csbm(...)               contextual stochastic block model: tunable homophily and degrees
    rmat(...)               R-MAT / Graph500 Kronecker graph: skewed degrees at any scale
    products_like(...)      the shape of ogbn-products (2.4M nodes, power-law degree ~50, 100
                            features, 47 classes), generated with numpy and cached on disk
    save_npz(g, path)       a user's own graph to one .npz file ...
    load_npz(path)          ... and back, through the validating constructor
    save_folder(g, path)    a graph as a folder of .npy files, replaced atomically ...
    load_folder(path)       ... read back, the features memory-mapped: features larger than
                            RAM can be sampled (the structure is copied into memory;
                            mmap="all" maps it too, for structure larger than RAM)

The synthetic generators are vectorised over edges and work in fixed-size chunks, so memory
stays bounded; they build the CSC arrays with one sort of an int64 key ``dst * N + src``.
Every generated graph is undirected (stored as both directions), without self-loops or
duplicate edges, and reproducible: the same arguments and seed give identical tensors on the
same machine and torch version.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ._checks import (
    _kind,
    memory_arg,
    output_file_arg,
    output_folder_arg,
    path_arg,
    path_kind,
    refuse_read_only,
    seed_arg,
)
from ._checks import int_arg as _int_arg
from ._checks import real_arg as _real_arg
from ._io import (
    atomic_write,
    current_umask,
    exchange_paths,
    os_error_naming,
    remove_stale_temps,
)
from .graph import EDGE_CHUNK, Graph
from .graph import csc_from_pairs as _csc_from_pairs

__all__ = [
    "load",
    "data_dir",
    "dataset_paths",
    "csbm",
    "rmat",
    "save_npz",
    "load_npz",
    "save_folder",
    "load_folder",
    "products_like",
    "products_like_path",
    "default_cache_dir",
    "KNOWN_DATASETS",
    "CORA_SUBJECTS",
]

KNOWN_DATASETS = ("cora", "ogbn-arxiv", "ogbn-products", "ogbn-papers100M")

# Label i of Cora is CORA_SUBJECTS[i]; the mapping is the one in graphdatascience's
# resources/cora/serialize_cora.py, from which data/cora.npz is built (see data/README.md).
CORA_SUBJECTS = (
    "Neural_Networks",
    "Rule_Learning",
    "Reinforcement_Learning",
    "Probabilistic_Methods",
    "Theory",
    "Genetic_Algorithms",
    "Case_Based",
)

NPZ_FORMAT = "zg.graph"
NPZ_VERSION = 1
CORA_FORMAT = "zg.cora"
CORA_VERSION = 1
FOLDER_FORMAT = "zg.graph.folder"
FOLDER_VERSION = 1
FOLDER_META = "meta.json"
# The arrays of a graph folder, each <key>.npy, and the dtype each must have.
FOLDER_ARRAYS = {
    "indptr": "int64",
    "indices": "int64",
    "x": "float32",
    "y": "int64",
    "train_idx": "int64",
    "val_idx": "int64",
    "test_idx": "int64",
}
# The arrays load_folder leaves memory-mapped, for each value of its mmap argument. True (the
# default): only the features; every other array is something the samplers index with (an
# out-of-range id read from a file rewritten under a run would make the compiled kernels read
# outside their buffers), so it is copied into memory. "all": every array, for a structure
# larger than RAM, trusting that no file is rewritten in place. False: none.
FOLDER_MAPPED = {True: ("x",), "all": tuple(FOLDER_ARRAYS), False: ()}

# Chunk sizes of the generators. They bound memory, and they fix how the random stream is
# consumed: changing one changes which graph a given seed produces.
FEATURE_CHUNK = 1 << 16  # feature rows drawn per chunk


# ----------------------------------------------------------------------------- argument checks


def _mmap_arg(value: Any) -> Any:
    """The ``mmap=`` of load_folder and products_like: True, "all" or False."""
    if isinstance(value, bool) or (isinstance(value, str) and value == "all"):
        return value
    allowed = "True (map the features), 'all' (map every array) or False (map nothing)"
    if isinstance(value, str):
        raise ValueError(f"mmap must be {allowed}, got {value!r}")
    raise TypeError(f"mmap must be {allowed}, got {type(value).__name__}")


def _name_arg(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"name must be a str, got {type(value).__name__}")
    return value


def _split_fracs(train_frac: Any, val_frac: Any) -> tuple[float, float]:
    train_frac = _real_arg(train_frac, "train_frac", low=0.0, high=1.0)
    val_frac = _real_arg(val_frac, "val_frac", low=0.0, high=1.0)
    if train_frac + val_frac > 1.0 + 1e-12:
        raise ValueError(
            f"train_frac + val_frac must be <= 1 (the test split takes the rest), got "
            f"{train_frac} + {val_frac} = {train_frac + val_frac}"
        )
    return train_frac, val_frac


# ----------------------------------------------------------------------------- bundled data


def data_dir() -> Path:
    """The folder holding bundled data files: ``$ZG_DATA_DIR`` if set, else ``<repo>/data`` in
    a clone of the repository, else the copy installed with the package (``zg/_bundled``: a
    wheel carries Cora, so an installed kit runs the labs offline too)."""
    env = os.environ.get("ZG_DATA_DIR")
    if env:
        return Path(env)
    repo = Path(__file__).resolve().parent.parent / "data"
    if (repo / "make_cora.py").is_file():
        return repo
    return Path(__file__).resolve().parent / "_bundled"


def load(name: str, root: Any = None, *, symmetrize: bool = True, download: bool = True) -> Graph:
    """A real dataset by name: bundled Cora, or an OGB node-property-prediction graph.

    ``"cora"``: 2,708 papers, 10,556 directed edges (the 5,429 citations symmetrised and
    de-duplicated, no self-loops), x float32 [2708, 1433] binary bag-of-words, y int64 [2708]
    in 0..6 (names in :data:`CORA_SUBJECTS`), and the seeded split stored in the file: 20
    labelled nodes per class for training (140), 500 for validation, 1,000 for test. Node i is
    row i of graphdatascience's ``cora_nodes.parquet.gzip``; the original paper ids are kept
    in the file under ``paper_id``. Read offline from ``root`` (default :func:`data_dir`).
    Provenance and format: ``data/README.md``.

    ``"ogbn-arxiv"``, ``"ogbn-products"``, ``"ogbn-papers100M"``: through the ``ogb``
    package's own loader, with its official split, from ``root`` (default
    ``$ZG_OGB_ROOT`` or ``~/.cache/zg/ogb``); see :func:`zg.ogbn.load` for the layout on
    disk, the offline behaviour and ``download``.

    A path (a ``str`` naming an existing file or folder, ending in ``.npz`` or holding a path
    separator, or an ``os.PathLike``) is read as ``zg train --dataset`` reads it: a file with
    :func:`load_npz`, a folder with :func:`load_folder`; ``root``, ``symmetrize`` and
    ``download`` are the named datasets' only.

    Args:
        name: one of :data:`KNOWN_DATASETS` (case-insensitive), or a graph file or folder.
        root: the folder holding the dataset's files (None: the default above).
        symmetrize: make a directed citation graph undirected (every edge in both directions,
            each pair once): common practice for Cora, ogbn-arxiv and ogbn-papers100M.
            False keeps the edges as the files give them (Cora: see data/README.md for the
            direction; OGB: citing -> cited). ogbn-products is undirected as ogb stores it.
        download: OGB only: download missing files (False: fail instead).
    """
    if isinstance(name, os.PathLike):
        return _load_path(Path(os.fspath(name)), root)
    if not isinstance(name, str):
        raise TypeError(f"name must be a str or a path, got {type(name).__name__}")
    if name.lower() not in {known.lower() for known in KNOWN_DATASETS} and (
        name.endswith(".npz") or os.sep in name or os.path.lexists(name)
    ):
        return _load_path(Path(name), root)
    if not isinstance(symmetrize, bool):
        raise TypeError(f"symmetrize must be a bool, got {type(symmetrize).__name__}")
    if not isinstance(download, bool):
        raise TypeError(f"download must be a bool, got {type(download).__name__}")
    if root is not None and not isinstance(root, (str, os.PathLike)):
        raise TypeError(
            f"root must be a path (str or os.PathLike) or None, got {type(root).__name__}"
        )
    key = name.lower()
    if key not in {known.lower() for known in KNOWN_DATASETS}:
        raise ValueError(
            f"unknown dataset {name!r}; known datasets: {', '.join(KNOWN_DATASETS)}, or a "
            "graph file (.npz, zg.datasets.save_npz) or folder (zg.datasets.save_folder)"
        )
    if key == "cora":
        folder = data_dir() if root is None else Path(os.fspath(root))
        return _load_cora(folder / "cora.npz", symmetrize=symmetrize)
    from . import ogbn

    return ogbn.load(name, root, symmetrize=symmetrize, download=download)


def _load_path(path: Path, root: Any) -> Graph:
    """:func:`load` of a graph file or folder."""
    if root is not None:
        raise ValueError(
            f"root applies to the named datasets ({', '.join(KNOWN_DATASETS)}), not to a "
            f"graph file or folder like {str(path)!r}"
        )
    if path.is_dir():
        return load_folder(path)
    return load_npz(path)  # a missing file, a FIFO, ...: its own error, naming the path


def dataset_paths(name: str, root: Any = None) -> list[Path]:
    """The files or folders :func:`load` reads for the dataset ``name``: what no output of a
    run may overwrite (``zg train --dataset cora --json <the bundled cora.npz>`` is refused).
    Cora: its ``cora.npz``; an OGB graph: its folder under ``root``. Unknown names: none."""
    if not isinstance(name, str):
        return []
    key = name.lower()
    if key == "cora":
        folder = data_dir() if root is None else Path(os.fspath(root))
        return [folder / "cora.npz"]
    if key in {known.lower() for known in KNOWN_DATASETS}:
        from . import ogbn

        try:
            return [ogbn.dataset_dir(name, root)]
        except (TypeError, ValueError):
            return []
    return []


def _load_cora(path: Path, *, symmetrize: bool = True) -> Graph:
    if not path.is_file():
        raise FileNotFoundError(
            f"Cora data file not found at {path}. Regenerate it with `python data/make_cora.py` "
            "(needs pandas, pyarrow<20 and access to PyPI), or set ZG_DATA_DIR to a folder "
            "that holds cora.npz."
        )
    arrays = _read_npz(path, CORA_FORMAT, CORA_VERSION)
    try:
        num_nodes = int(arrays["paper_id"].shape[0])
        feat_dim = _cora_feat_dim(arrays["feat_dim"], arrays["features_packed"])
        if arrays["y"].dtype.kind not in "iu":  # never truncated to a class id
            raise ValueError(f"y must hold integer class ids, got {arrays['y'].dtype} values")
        # The unpacked features, then their float32 copy: sized by the file, refused before
        # either is allocated when they cannot fit.
        memory_arg(
            (1 + 4) * num_nodes * feat_dim,
            f"the features of {path} ({num_nodes} nodes x feat_dim={feat_dim}, unpacked)",
        )
        # Features are 0/1, stored bit-packed along each row (np.packbits, big-endian bits).
        x = np.unpackbits(arrays["features_packed"], axis=1, count=feat_dim)  # uint8 [N, F]
        return Graph.from_edges(
            arrays["rel_source"],
            arrays["rel_target"],
            num_nodes,
            x=torch.from_numpy(x).to(torch.float32),
            y=arrays["y"].astype(np.int64),
            train_idx=arrays["train_idx"],
            val_idx=arrays["val_idx"],
            test_idx=arrays["test_idx"],
            num_classes=len(CORA_SUBJECTS),
            symmetrize=symmetrize,
            self_loops="remove",
            duplicates="remove",
            name="cora",
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{path} is not a valid Cora file ({exc}); regenerate it with "
            "`python data/make_cora.py`"
        ) from None


def _cora_feat_dim(value: np.ndarray, packed: np.ndarray) -> int:
    """The ``feat_dim`` of a Cora file, checked against ``features_packed`` before anything is
    unpacked: ``packed`` is uint8 [N, B] (each row's bits, np.packbits, padded to whole bytes),
    so feat_dim is an integer in ``(8 * (B - 1), 8 * B]``: larger would pad every row with
    zero columns (allocating N x feat_dim bytes), smaller or negative would drop real bits or
    read the padding as features. A ValueError naming the field (the caller adds the file)."""
    if packed.ndim != 2 or packed.dtype != np.uint8:
        raise ValueError(
            f"features_packed must be uint8 [num_nodes, bytes per row], got {packed.dtype} "
            f"{list(packed.shape)}"
        )
    if value.ndim != 0 or value.dtype.kind not in "iu":
        shown = value.item() if value.ndim == 0 else f"an array of shape {list(value.shape)}"
        raise ValueError(f"feat_dim must be an integer, got {value.dtype} {shown!r}")
    feat_dim, width = int(value), int(packed.shape[1])
    low, high = max(1, 8 * (width - 1) + 1), 8 * width
    if not low <= feat_dim <= high:
        held = (
            f"which hold between {low} and {high} features" if width else "so there are no features"
        )
        raise ValueError(
            f"feat_dim is {feat_dim}, but features_packed has {width} bytes per row, {held}"
        )
    return feat_dim


# ----------------------------------------------------------------------------- user files


def save_npz(g: Graph, path: Any, *, compress: bool = False) -> None:
    """Write ``g`` to one ``.npz`` file at exactly ``path`` (no ".npz" is appended).

    Format (numpy arrays, readable with ``np.load(path, allow_pickle=False)``):

        format       str    "zg.graph"
        version      int    1
        indptr       int64 [N + 1]     CSC, as in zg.Graph
        indices      int64 [E]
        name         str
        x            float32 [N, F]    only if g.x is not None
        y            int64 [N]         only if g.y is not None
        num_classes  int64             only if g.num_classes (an unlabelled graph keeps its
                                       declared class count too)
        train_idx, val_idx, test_idx
                     int64 [*]         each only if not None

    Absent keys load back as None. The write is atomic (:func:`zg._io.atomic_write`): a crash
    never leaves a half-written file at ``path``; a symbolic link at ``path`` is kept and its
    target written. A ``path`` that is not a regular file (a directory, a FIFO, a device), a
    dangling link, or lies in a missing or read-only folder is a ValueError naming it, raised
    before anything is written.
    ``compress=True`` uses zip deflate (worth it for 0/1 features; random floats do not shrink).
    """
    if not isinstance(g, Graph):
        raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
    if not isinstance(compress, bool):
        raise TypeError(f"compress must be a bool, got {type(compress).__name__}")
    path = output_file_arg(path, "path")  # before any array is built
    arrays = {
        "format": np.array(NPZ_FORMAT),
        "version": np.array(NPZ_VERSION, dtype=np.int64),
        "indptr": g.indptr.cpu().numpy(),
        "indices": g.indices.cpu().numpy(),
        "name": np.array(g.name),
    }
    if g.x is not None:
        arrays["x"] = g.x.cpu().numpy()
    if g.y is not None:
        arrays["y"] = g.y.cpu().numpy()
    if g.num_classes:
        arrays["num_classes"] = np.array(g.num_classes, dtype=np.int64)
    for split in ("train_idx", "val_idx", "test_idx"):
        idx = getattr(g, split)
        if idx is not None:
            arrays[split] = idx.cpu().numpy()
    # Through a file object: np.savez given a *name* would append ".npz" to it.
    atomic_write(path, lambda f: (np.savez_compressed if compress else np.savez)(f, **arrays))


def _num_classes(value: Any, where: Path) -> int | None:
    """A file's ``num_classes`` entry as an int (None: absent or 0, none known); a float, a bool,
    a string or an array is refused, naming the file, never truncated."""
    if value is None:
        return None
    array = np.asarray(value)
    if array.ndim != 0 or array.dtype.kind not in "iu":
        shown = array.item() if array.ndim == 0 else f"an array of shape {list(array.shape)}"
        raise ValueError(
            f"{where}: num_classes must be an integer, got {array.dtype} {shown!r}; the file is "
            "damaged or was not written by zg.datasets.save_npz"
        )
    return int(array) or None


def load_npz(path: Any) -> Graph:
    """Read a graph written by :func:`save_npz`, validating it like any other Graph.

    Raises TypeError if ``path`` is not a str or os.PathLike, FileNotFoundError if it does not
    exist, OSError naming it if it cannot be read, and ValueError if it is a directory or the
    file is truncated, corrupt, not a zg graph file, from a newer format version, missing a key, or
    holds arrays that do not make a valid graph. Every array is read into memory (a zip member cannot
    be memory-mapped); for graphs near or above the size of RAM use :func:`save_folder` /
    :func:`load_folder`.
    """
    path = path_arg(path, "path")
    _, mode = path_kind(path, "path")  # a loop of links, a name too long: ValueError naming it
    if mode is None:
        raise FileNotFoundError(f"no graph file at {path}")
    if stat.S_ISDIR(mode):
        raise ValueError(f"path {str(path)!r} is a directory, not a graph file")
    if not stat.S_ISREG(mode):
        raise ValueError(f"path {str(path)!r} is {_kind(mode)}, not a graph file")
    try:
        arrays = _read_npz(path, NPZ_FORMAT, NPZ_VERSION)
    except OSError as exc:  # unreadable: permissions, an I/O error, ...
        raise os_error_naming(exc, "path", path, "read") from exc
    for key in ("indptr", "indices", "name"):
        if key not in arrays:
            raise ValueError(
                f"{path} is missing the key {key!r}; it is not a complete zg graph file"
            )
    num_classes = _num_classes(arrays.get("num_classes"), path)  # 0: none known
    try:
        return Graph(
            arrays["indptr"],
            arrays["indices"],
            x=arrays.get("x"),
            y=arrays.get("y"),
            train_idx=arrays.get("train_idx"),
            val_idx=arrays.get("val_idx"),
            test_idx=arrays.get("test_idx"),
            num_classes=num_classes,
            name=str(arrays["name"]),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path} does not hold a valid graph: {exc}") from None


def save_folder(g: Graph, path: Any) -> None:
    """Write ``g`` as a folder of ``.npy`` files that :func:`load_folder` can memory-map.

    Layout (each array a plain ``.npy`` file, C order, readable with ``np.load``)::

        path/meta.json       {"format": "zg.graph.folder", "version": 1, "name": ...,
                              "num_nodes": N, "num_edges": E, "num_classes": C,
                              "arrays": {"indptr": {"dtype": "int64", "shape": [N + 1]}, ...}}
        path/indptr.npy      int64 [N + 1]     CSC, as in zg.Graph
        path/indices.npy     int64 [E]
        path/x.npy           float32 [N, F]    only if g.x is not None
        path/y.npy           int64 [N]         only if g.y is not None
        path/train_idx.npy, val_idx.npy, test_idx.npy
                             int64 [*]         each only if not None

    The write is atomic: everything goes into a temporary folder beside ``path``, is flushed
    to disk, and the folder is renamed into place, so ``path`` never holds a half-written
    graph. The temporary folder a killed save left (``.<name>.XXXXXXXX.tmp``) is removed by
    the next save of the same ``path`` once it is a minute old. An existing graph folder at ``path`` is replaced in one step (Linux's
    ``renameat2(RENAME_EXCHANGE)`` swaps the two folders): interrupted at any point, ``path``
    holds the old complete folder or the new one, never nothing. Where the system cannot swap
    (another OS, a file system without it) the old folder is moved aside and the new one
    renamed in, and an exception between the two renames moves the old one back; only a
    process killed in that instant leaves ``path`` empty, its old folder then in
    ``.<name>.*.old/graph`` beside it. Anything else at ``path`` is refused
    (FileExistsError), so a typo cannot delete unrelated files. A symbolic link at ``path`` is
    followed (a dangling link or a loop is a ValueError): the folder it names is replaced and
    the link stays. The folder gets ``0o777`` less the umask, a replaced one keeps its mode; a
    folder (or a file in it) this user may not write is refused as a plain rewrite of its files
    would be (:class:`zg._checks.ReadOnlyTarget`, a PermissionError naming it).
    A process that has the old folder loaded (:func:`load_folder`, memory-mapped) keeps its
    graph unchanged: the old files lose their names but live on, bit for bit, until the last
    map of them is closed. This is the way to change a graph under a running job; never
    rewrite its files in place (see :func:`load_folder` and docs/files.md). The arrays are
    written straight from the tensors (no copy of a CPU tensor), so a memory-mapped graph can
    be saved elsewhere without loading it.
    """
    if not isinstance(g, Graph):
        raise TypeError(f"g must be a zg.Graph, got {type(g).__name__}")
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    path = path_arg(path, "path")
    target, mode = _graph_folder_target(path, "path")
    if mode is not None:  # a plain rewrite of its files would be refused: so is the swap
        for entry in (target, *sorted(p for p in target.iterdir() if p.is_file())):
            refuse_read_only(entry, "path", path if entry == target else path / entry.name)
    arrays = {
        "indptr": g.indptr,
        "indices": g.indices,
        "x": g.x,
        "y": g.y,
        "train_idx": g.train_idx,
        "val_idx": g.val_idx,
        "test_idx": g.test_idx,
    }
    meta = {
        "format": FOLDER_FORMAT,
        "version": FOLDER_VERSION,
        "name": g.name,
        "num_nodes": g.num_nodes,
        "num_edges": g.num_edges,
        "num_classes": g.num_classes,
        "arrays": {},
    }
    folder_mode = stat.S_IMODE(mode) if mode is not None else 0o777 & ~current_umask()
    tmp: Path | None = None
    remove_stale_temps(target)  # a temporary folder a killed earlier save left (a minute old)
    try:
        tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
        for key, tensor in arrays.items():
            if tensor is None:
                continue
            array = tensor.detach().cpu().numpy()
            _save_array(tmp / f"{key}.npy", np.ascontiguousarray(array))
            meta["arrays"][key] = {"dtype": str(array.dtype), "shape": list(array.shape)}
        with open(tmp / FOLDER_META, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, folder_mode)  # mkdtemp makes it owner-only; a data folder is not
        if mode is None:
            os.replace(tmp, target)
            tmp = None
        elif not exchange_paths(tmp, target):  # swapped: tmp now holds the old folder
            _replace_folder_in_two_renames(tmp, target)
    except BaseException as exc:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, OSError):  # a full disk: one line naming the folder, nothing left
            raise os_error_naming(exc, "path", path, "write the graph folder") from exc
        raise
    if tmp is not None:
        shutil.rmtree(tmp, ignore_errors=True)  # the old folder


def _save_array(path: Path, array: np.ndarray) -> None:
    """``np.save`` to a new file at ``path``, flushed to disk. numpy writes a file straight
    from the array (``tofile``, through C stdio): a write cut short says only "N requested and
    M written", and one cut short at stdio's last flush says nothing at all, the file simply
    shorter. Both are caught (the file's size against what was written) and the file system
    is asked once more, one byte at the end of a file about to be thrown away, so the error
    carries its errno (ENOSPC, EFBIG) as every other writer's does."""
    with open(path, "wb") as f:
        try:
            np.save(f, array, allow_pickle=False)
            f.flush()
            short = os.fstat(f.fileno()).st_size < f.tell()
        except OSError as exc:
            if exc.errno is not None:
                raise
            short = True
        if short:
            size = os.fstat(f.fileno()).st_size
            try:
                os.pwrite(f.fileno(), b"\0", size)
            except OSError as why:
                raise OSError(why.errno, why.strerror) from None
            raise OSError(errno.EIO, f"only {size} bytes of the array reached the file")
        os.fsync(f.fileno())


def _graph_folder_target(path: Path, name: str) -> tuple[Path, int | None]:
    """(final target, st_mode or None) of a folder :func:`save_folder` may write: absent, or a
    graph folder it wrote; its parent folder exists. Raises FileExistsError for anything else
    there, FileNotFoundError for a missing parent, ValueError naming ``name`` for a dangling
    link, a loop, a name too long."""
    target, mode = path_kind(path, name)
    if mode is not None and not (stat.S_ISDIR(mode) and (target / FOLDER_META).is_file()):
        raise FileExistsError(
            f"{path} exists and is not a zg graph folder; save_folder replaces "
            "only a folder it wrote (one with meta.json)"
        )
    if not target.parent.is_dir():
        raise FileNotFoundError(f"the parent folder of {name}, {target.parent}, does not exist")
    return target, mode


def _replace_folder_in_two_renames(new: Path, target: Path) -> None:
    """Where folders cannot be swapped in one step: the old folder at ``target`` moved aside,
    ``new`` renamed in, the old one deleted. An exception between the two renames moves the old
    folder back (if that fails too, it is left in ``.<name>.*.old/graph``, never deleted)."""
    aside = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".old"))
    try:
        os.replace(target, aside / "graph")
    except BaseException:
        shutil.rmtree(aside, ignore_errors=True)  # empty: nothing was moved
        raise
    try:
        os.replace(new, target)
    except BaseException:
        os.replace(aside / "graph", target)  # the old folder back
        shutil.rmtree(aside, ignore_errors=True)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def load_folder(path: Any, *, mmap: Any = True) -> Graph:
    """Read a graph folder written by :func:`save_folder`, validating it like any other Graph.

    ``mmap`` chooses what is memory-mapped:

    * ``True`` (default): ``x`` only. Features larger than RAM; safe against in-place
      rewrites of the structure files.
    * ``"all"``: every array. A structure (8 bytes per edge) larger than RAM; no file of the
      folder may be rewritten or truncated in place while it is loaded.
    * ``False``: nothing; every array is read into memory, and the files may change.

    ``mmap=True`` (default) memory-maps the feature matrix ``x.npy``
    (``np.load(mmap_mode="c")``: copy-on-write, so the file is never modified) and hands the
    map to the Graph without copying: ``g.x`` is a view of the file, pages are read from disk
    when first touched, and the operating system can drop them again under memory pressure.
    So features larger than RAM can still be sampled and trained on (the samplers gather only
    the rows they sample), while the validation reads the file once, streaming.

    With ``mmap=True`` the structure (``indptr``, ``indices``) and what the samplers index with
    (``y`` and the splits) are copied into memory, read before they are validated: 8 bytes per
    edge plus 8 per node for each of indptr and y, plus 8 per split entry (a products-sized
    graph, 2.4M nodes and 120M edges: 0.95 GiB, a little more than its 100 features, 0.89 GiB;
    the measured cost is in docs/files.md). That RAM is taken beyond the mapped features; in
    exchange the graph's own ids can never change under a run: a file rewritten in place later
    (``np.save`` over ``indices.npy`` by a regenerate-the-data script) changes nothing in this
    process, and no sampler can be sent outside its arrays. ``mmap=False`` reads ``x`` into
    memory too.

    ``mmap="all"`` maps every array, as zg did before the structure was copied: loading adds
    almost none of the process's own memory, for a graph whose structure does not fit in RAM.
    Then no file of the folder may be rewritten or truncated in place while it is loaded,
    not only ``x.npy``: the arrays are validated once, at load time, and the samplers then
    trust every id they read, so an ``indices.npy`` rewritten with out-of-range ids under a
    run can make them read outside their buffers and crash the process (a segmentation
    fault), and a truncated file gets SIGBUS. Replace the folder with :func:`save_folder`.

    What you must not do: rewrite or truncate ``x.npy`` in place while a process has the folder
    loaded with ``mmap=True``. Rewritten, the run silently reads the new values; truncated, the
    next read of a lost page gets the signal SIGBUS from the operating system, which kills the
    process (exit status 135) and which no Python code can catch. To change the data under a
    running job, write a new folder with :func:`save_folder`: it replaces the folder
    atomically (a rename), and a process that has the old one loaded keeps reading the old,
    now unnamed, files, bit for bit. Or load with ``mmap=False``, which reads everything.

    Raises TypeError / ValueError naming ``mmap`` for a value other than True, "all" or
    False, FileNotFoundError if ``path`` is not a folder, and ValueError naming the file if
    ``meta.json`` is missing, unreadable or from a newer version, or an array file is
    missing, truncated, corrupt or disagrees with ``meta.json``, or if the arrays do not make
    a valid graph.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"path must be a str or os.PathLike, got {type(path).__name__}")
    mapped = FOLDER_MAPPED[_mmap_arg(mmap)]
    path = path_arg(path, "path")
    _, mode = path_kind(path, "path")  # a loop of links, a name too long: ValueError naming it
    if mode is None:
        raise FileNotFoundError(f"no graph folder at {path}")
    if stat.S_ISREG(mode):
        raise ValueError(
            f"{path} is a file; load_folder reads a folder written by save_folder "
            "(a .npz file? use load_npz)"
        )
    if not stat.S_ISDIR(mode):
        raise ValueError(f"path {str(path)!r} is {_kind(mode)}, not a graph folder")
    meta = _read_folder_meta(path / FOLDER_META)
    arrays = {
        key: _read_npy(path / f"{key}.npy", spec, mmap=key in mapped)
        for key, spec in meta["arrays"].items()
    }
    try:
        return Graph(
            arrays["indptr"],
            arrays["indices"],
            x=arrays.get("x"),
            y=arrays.get("y"),
            train_idx=arrays.get("train_idx"),
            val_idx=arrays.get("val_idx"),
            test_idx=arrays.get("test_idx"),
            num_classes=meta["num_classes"] or None,  # 0: no labels, or none known
            name=meta["name"],
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path} does not hold a valid graph: {exc}") from None


def _read_folder_meta(meta_path: Path) -> dict:
    """The checked content of a graph folder's meta.json; every problem is a ValueError."""
    from ._io import read_json_config

    if not os.path.lexists(meta_path):
        raise ValueError(
            f"{meta_path.parent} has no {meta_path.name}; it is not a zg graph folder "
            "(written by zg.datasets.save_folder)"
        )
    try:  # bounded (1 MiB), and never a FIFO or a device that would block or never end
        meta = read_json_config(meta_path, "meta.json")
    except ValueError as exc:
        raise ValueError(
            f"{meta_path} could not be read as JSON; it may be truncated or corrupt ({exc})"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FOLDER_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ValueError(f"{meta_path} is not a {FOLDER_FORMAT!r} file (found {found!r})")
    version = meta.get("version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise ValueError(f"{meta_path} has no integer format version")
    if not 1 <= version <= FOLDER_VERSION:
        raise ValueError(
            f"{meta_path} has {FOLDER_FORMAT} version {version}; this zg reads "
            f"versions 1..{FOLDER_VERSION} (a newer zg wrote it?)"
        )
    arrays = meta.get("arrays")
    if not isinstance(arrays, dict) or not {"indptr", "indices"} <= set(arrays):
        raise ValueError(f"{meta_path} does not list the arrays indptr and indices")
    for key, spec in arrays.items():
        expected = FOLDER_ARRAYS.get(key)
        if expected is None:
            raise ValueError(
                f"{meta_path} lists an unknown array {key!r}; known: {sorted(FOLDER_ARRAYS)}"
            )
        if (
            not isinstance(spec, dict)
            or spec.get("dtype") != expected
            or not isinstance(spec.get("shape"), list)
            or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in spec["shape"]
            )
        ):
            raise ValueError(
                f"{meta_path}: array {key!r} must be described as "
                f'{{"dtype": "{expected}", "shape": [...]}}, got {spec!r}'
            )
    if not isinstance(meta.get("name"), str):
        raise ValueError(f"{meta_path} has no graph name")
    num_classes = meta.get("num_classes")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 0:
        raise ValueError(f"{meta_path} has no valid num_classes (an int >= 0), got {num_classes!r}")
    return meta


def _read_npy(file: Path, spec: dict, *, mmap: bool) -> np.ndarray:
    """One array of a graph folder, checked against its meta.json entry before it is read."""
    _, mode = path_kind(file, "path")
    if mode is None:
        raise ValueError(f"{file} is missing; meta.json lists it, so the folder is incomplete")
    if not stat.S_ISREG(mode):
        raise ValueError(f"{file} is {_kind(mode)}, not a regular .npy file")
    try:
        with open(file, "rb") as f:
            major, _ = np.lib.format.read_magic(f)
            if major == 1:
                shape, fortran_order, dtype = np.lib.format.read_array_header_1_0(f)
            elif major == 2:
                shape, fortran_order, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unsupported .npy format version {major}")
            offset = f.tell()
    except Exception as exc:  # bad magic, damaged header: ValueError, EOFError, SyntaxError...
        raise ValueError(
            f"{file} is not a readable .npy file; it may be truncated or corrupt "
            f"({type(exc).__name__}: {exc})"
        ) from None
    if not dtype.isnative and str(dtype.newbyteorder("=")) == spec["dtype"]:
        raise ValueError(
            f"{file} holds {dtype.str} values, in the other byte order than this machine's; "
            "a graph folder holds native arrays (they are memory-mapped as they are): write it "
            "again with zg.datasets.save_folder"
        )
    if str(dtype) != spec["dtype"] or list(shape) != spec["shape"] or fortran_order:
        raise ValueError(
            f"{file} holds {'Fortran-order ' if fortran_order else ''}{dtype} "
            f"{list(shape)}, but meta.json says {spec['dtype']} {spec['shape']}"
        )
    # The file's size against its header, before anything is mapped: a map past the end of a
    # file is a SIGBUS at the first read, which no Python code can catch. Python ints: no
    # int64 product can wrap around to a small, matching size.
    size = file.stat().st_size
    expected = offset + math.prod(int(d) for d in shape) * dtype.itemsize
    if size != expected:
        problem = "truncated" if size < expected else "longer than its header says"
        raise ValueError(f"{file} is {problem}: {size:,} bytes, expected {expected:,}")
    try:
        # "c": copy-on-write; a writable map (torch warns on read-only arrays) whose writes,
        # if any, stay in this process and never reach the file.
        return np.load(file, mmap_mode="c" if mmap else None, allow_pickle=False)
    except Exception as exc:
        raise ValueError(f"{file} could not be read ({type(exc).__name__}: {exc})") from None


def _native(array: np.ndarray) -> np.ndarray:
    """``array`` in this machine's byte order: a big-endian array (written on another machine or
    by another tool) is read as the same values, not reinterpreted, and torch takes it."""
    if array.dtype.isnative:
        return array
    return array.astype(array.dtype.newbyteorder("="))


# What each .npz format's arrays must agree on, read from the members' headers before any data:
# (member whose first dimension is the node count, how many more rows than N it has), and the
# members whose first dimension must be N. Split ids and edge lists are checked by length alone.
_NPZ_NODE_ARRAYS = {
    NPZ_FORMAT: (("indptr", 1), ("x", "y")),
    CORA_FORMAT: (("paper_id", 0), ("features_packed", "y")),
}
NPZ_HEADER_LIMIT = 10_000  # bytes of a .npy header (a short dict): numpy's own bound


def _npz_member_header(zf: Any, info: Any, path: Path, key: str) -> tuple[tuple, np.dtype]:
    """``(shape, dtype)`` from the .npy header of one member of an .npz, checked against the
    member's uncompressed size in the zip directory (which bounds what reading it can ever
    produce: zipfile stops there). Nothing but the header is read."""
    fmt = np.lib.format
    try:
        with zf.open(info) as f:
            major, minor = fmt.read_magic(f)
            if (major, minor) == (1, 0):
                shape, fortran, dtype = fmt.read_array_header_1_0(
                    f, max_header_size=NPZ_HEADER_LIMIT
                )
            elif (major, minor) in ((2, 0), (3, 0)):
                shape, fortran, dtype = fmt.read_array_header_2_0(
                    f, max_header_size=NPZ_HEADER_LIMIT
                )
            else:
                raise ValueError(f"unsupported .npy format version {major}.{minor}")
            offset = f.tell()
    except Exception as exc:  # bad magic, a damaged header or zip entry: many kinds
        raise ValueError(
            f"{path}: member {key!r} has no readable .npy header; the file may be truncated or "
            f"corrupt ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None
    if dtype.hasobject:
        raise ValueError(
            f"{path}: member {key!r} holds Python objects ({dtype}); a graph file holds only "
            "numbers and strings"
        )
    # Python ints: no int64 product can wrap around to a small, matching size.
    expected = offset + math.prod(int(d) for d in shape) * dtype.itemsize
    if info.file_size != expected:
        raise ValueError(
            f"{path}: member {key!r} claims {dtype} {list(shape)} ({expected:,} bytes with its "
            f"header), but the zip directory says it holds {info.file_size:,} bytes; the file "
            "is damaged or crafted, nothing was read"
        )
    return tuple(int(d) for d in shape), dtype


def _npz_headers(zf: Any, path: Path) -> dict[str, tuple[tuple, np.dtype, Any]]:
    """Every member of an .npz by key (its name less ".npy"): shape, dtype, zip entry."""
    members = {}
    for info in zf.infolist():
        if not info.filename.endswith(".npy"):
            raise ValueError(
                f"{path}: member {info.filename!r} is not a .npy array; a graph file holds "
                "only .npy members"
            )
        key = info.filename[: -len(".npy")]
        if key in members:
            raise ValueError(
                f"{path}: member {key!r} appears twice; the file is damaged or crafted"
            )
        shape, dtype = _npz_member_header(zf, info, path, key)
        members[key] = (shape, dtype, info)
    return members


def _npz_check_shapes(path: Path, members: dict, expected_format: str) -> None:
    """The members' shapes against each other, from their headers alone: each node array has
    the node count's rows, the scalars are scalars, the edge arrays are flat."""
    for key in ("format", "version", "name", "num_classes", "feat_dim"):
        if key in members and members[key][0] != ():
            noun = "an integer" if key in ("version", "num_classes", "feat_dim") else "a string"
            raise ValueError(
                f"{path}: {key} must be {noun}, got an array of shape {list(members[key][0])} "
                f"(member {key!r}); the file is damaged or was not written by zg"
            )
    counted, rows = _NPZ_NODE_ARRAYS.get(expected_format, (None, ()))
    for key in ("indptr", "indices", "train_idx", "val_idx", "test_idx", "y"):
        if key in members and len(members[key][0]) != 1:
            raise ValueError(
                f"{path}: member {key!r} has shape {list(members[key][0])}; it must be 1-D"
            )
    if counted is None or counted[0] not in members:
        return
    key, extra = counted
    shape = members[key][0]
    if len(shape) < 1 or shape[0] < extra:
        raise ValueError(f"{path}: member {key!r} has shape {list(shape)}; it must be 1-D")
    num_nodes = shape[0] - extra
    for other in rows:
        if other in members:
            got = members[other][0]
            if len(got) < 1 or got[0] != num_nodes:
                raise ValueError(
                    f"{path}: member {other!r} has shape {list(got)}, but {key!r} "
                    f"({list(shape)}) makes {num_nodes:,} nodes; it must have one row per node"
                )


def _npz_read_member(zf: Any, members: dict, key: str, path: Path) -> np.ndarray:
    """One member's array (its header already checked), in this machine's byte order."""
    shape, dtype, info = members[key]
    with zf.open(info) as f:
        return _native(
            np.lib.format.read_array(f, allow_pickle=False, max_header_size=NPZ_HEADER_LIMIT)
        )


def _read_npz(path: Path, expected_format: str, max_version: int) -> dict:
    """Every array of the .npz at ``path``, read eagerly; any read failure is a ValueError.

    Nothing is decompressed before it is known to fit: every member's .npy header is read
    first (shape, dtype) and checked against its uncompressed size in the zip directory, the
    shapes against each other (indptr has N + 1 entries, x and y N rows, the flat arrays are
    flat), the format marker and version; then indptr is read and ``indices`` must hold
    ``indptr[-1]`` entries; only then is the rest read. A header claiming 10^10 elements or a
    deflated member far larger than the rest of the file agrees with is a ValueError naming
    the member, raised before its data is read; a consistent file larger than the machine's
    free memory is a MemoryError naming it."""
    import zipfile

    with open(path, "rb") as f:
        head = f.read(6)
    if head.startswith(b"\x93NUMPY"):
        raise ValueError(f"{path} holds a single .npy array, not a .npz file of named arrays")
    if not head.startswith(b"PK"):
        raise ValueError(f"{path} is not a .npz (zip) file; it may be truncated or corrupt")
    # Damaged zips raise a zoo of errors (BadZipFile, zlib.error, EOFError, OSError, ...);
    # report them all the same way, as a ValueError that names the file.
    try:
        zf = zipfile.ZipFile(path)
    except Exception as exc:
        raise ValueError(
            f"{path} could not be read as a .npz file; it may be truncated or corrupt "
            f"({type(exc).__name__}: {exc})"
        ) from None
    with zf:
        members = _npz_headers(zf, path)

        def read(key: str) -> np.ndarray:
            try:
                return _npz_read_member(zf, members, key, path)
            except Exception as exc:
                raise ValueError(
                    f"{path}: member {key!r} could not be read; the file may be truncated or "
                    f"corrupt ({type(exc).__name__}: {str(exc)[:200]})"
                ) from None

        arrays = {}
        for key in ("format", "version"):  # which file this is, before its sizes are judged
            if key in members and members[key][0] == () and members[key][2].file_size < 4096:
                arrays[key] = read(key)
        marker = arrays.get("format")
        if marker is None or marker.dtype.kind != "U" or str(marker) != expected_format:
            found = "no format marker" if marker is None else f"format {str(marker)!r}"
            raise ValueError(f"{path} is not a {expected_format!r} file (found {found})")
        version = arrays.get("version")
        if version is None or version.dtype.kind not in "iu" or version.ndim != 0:
            raise ValueError(f"{path} has no integer format version")
        if not 1 <= int(version) <= max_version:
            raise ValueError(
                f"{path} has {expected_format} version {int(version)}; this zg reads versions "
                f"1..{max_version} (a newer zg wrote it?)"
            )
        _npz_check_shapes(path, members, expected_format)
        memory_arg(
            sum(info.file_size for _, _, info in members.values()),
            f"the graph file {path} (its arrays, uncompressed)",
        )
        if "indptr" in members:
            arrays["indptr"] = read("indptr")
            indptr = arrays["indptr"]
            if "indices" in members and indptr.size and indptr.dtype.kind in "iu":
                edges = int(indptr[-1])
                if members["indices"][0] != (edges,):
                    raise ValueError(
                        f"{path}: member 'indices' has shape {list(members['indices'][0])}, but "
                        f"indptr[-1] says {edges:,} edges; nothing more was read"
                    )
        for key in members:
            if key not in arrays:
                arrays[key] = read(key)
    return arrays


# ----------------------------------------------------------------------------- shared generator parts


def _class_features(
    y: torch.Tensor, num_classes: int, feat_dim: int, feature_snr: float, gen: torch.Generator
) -> torch.Tensor:
    """float32 [N, F]: x_i = mean[y_i] + noise_i, noise ~ N(0, I).

    The class means are drawn from N(0, snr^2 / (2F) I), so two class means lie about
    ``feature_snr`` noise standard deviations apart.
    """
    means = torch.randn(num_classes, feat_dim, generator=gen) * (
        feature_snr / math.sqrt(2 * feat_dim)
    )
    x = torch.empty(y.numel(), feat_dim, dtype=torch.float32)  # [N, F]
    for start in range(0, y.numel(), FEATURE_CHUNK):  # chunks: no [N, F] temporary
        rows = x[start : start + FEATURE_CHUNK]
        torch.randn(rows.shape, generator=gen, out=rows)
        rows += means[y[start : start + FEATURE_CHUNK]]
    return x


def _random_split(num_nodes: int, train_frac: float, val_frac: float, gen: torch.Generator):
    """Disjoint sorted int64 id sets: floor(train_frac N), floor(val_frac N), and the rest."""
    perm = torch.randperm(num_nodes, generator=gen)
    n_train = int(train_frac * num_nodes)
    n_val = int(val_frac * num_nodes)
    return (
        torch.sort(perm[:n_train]).values,
        torch.sort(perm[n_train : n_train + n_val]).values,
        torch.sort(perm[n_train + n_val :]).values,
    )


def _chunks(total: int) -> Iterator[int]:
    for start in range(0, total, EDGE_CHUNK):
        yield min(EDGE_CHUNK, total - start)


# ----------------------------------------------------------------------------- cSBM


GENERATOR_NODE_BYTES = 96  # per node: labels, permutations, class groups, splits, indptr


def _graph_fits(num_nodes: int, feat_dim: int, edges: float, what: str) -> None:
    """Refuse a generated graph that cannot fit, before drawing it: x (float32 [N, F]) and the
    transient of its finiteness check, the edges' keys and indices (int64, twice), and the
    node-indexed arrays (labels, the permutations behind the classes and the split, class
    groups, degrees or weights, indptr and its search bounds: GENERATOR_NODE_BYTES a node)."""
    memory_arg(8 * num_nodes * feat_dim + 16 * edges + GENERATOR_NODE_BYTES * num_nodes, what)


def csbm(
    num_nodes: int,
    avg_degree: float,
    num_classes: int,
    feat_dim: int,
    homophily: float = 0.8,
    seed: int = 0,
    degree: str = "uniform",
    power: float = 2.5,
    feature_snr: float = 1.0,
    train_frac: float = 0.6,
    val_frac: float = 0.2,
    name: str = "csbm",
) -> Graph:
    """A contextual stochastic block model: class-structured edges and class-correlated features.

    Classes: balanced (sizes differ by at most one), randomly assigned; y int64 [N].
    Edges: ``round(N * avg_degree / 2)`` undirected pairs are drawn, each stored in both
    directions, so the average in-degree is about ``avg_degree``. For each pair, one end u is
    drawn with probability proportional to a per-node weight; then with probability
    ``homophily`` the other end comes from u's class, else from a uniformly chosen other class,
    and within that class again proportional to weight. Self-loops and duplicate pairs are
    dropped afterwards, which lowers the degree a little (noticeably only for power-law hubs or
    dense graphs). The measured ``g.edge_homophily()`` is close to ``homophily``.
    Weights: ``degree="uniform"``: all 1 (Poisson-like degrees). ``degree="powerlaw"``: Pareto
    weights ``w = (1 - U)^(-1 / (power - 1))``, so expected degrees have a power-law tail with
    density exponent ``power`` (2.5 is typical of citation and web graphs).
    Features: ``x_i = mean[y_i] + N(0, I)``, float32 [N, feat_dim]; the class means lie about
    ``feature_snr`` noise standard deviations apart (1.0: features alone separate two classes
    with Bayes error ~31%, so aggregating neighbours visibly helps).
    Split: a seeded random permutation: floor(train_frac N) train, floor(val_frac N) val, the
    rest test; each sorted.

    Args:
        num_nodes: N >= 2.  avg_degree: target mean in-degree, in [0, N - 1].
        num_classes: in [1, N].  feat_dim: >= 1.  homophily: in [0, 1]; < 1 needs >= 2 classes.
        seed: int >= 0; the same arguments and seed give identical tensors.
        degree: "uniform" | "powerlaw".  power: the power-law exponent, > 2.
        feature_snr: >= 0.  train_frac, val_frac: in [0, 1], summing to <= 1.
        name: the Graph's name.

    Cost, measured on a 2-core Xeon VM (AVX-512, shared with other jobs), torch 2.2.1,
    numpy 1.26, with

        /usr/bin/time -v python -c "import zg; zg.datasets.csbm(num_nodes=1_000_000,
            avg_degree=20, num_classes=10, feat_dim=128)"

    -> 19,998,484 edges in 6.6-7.8 s (plus ~1 s to import torch), peak RSS 2.1-2.2 GB. Of
    that, ~0.35 GB is torch itself, 0.5 GB is x, 0.16 GB each are the edge keys and indices,
    and ~0.85 GB is a transient in Graph's validation (``torch.isfinite`` over x). The
    edges are drawn EDGE_CHUNK pairs at a time and x FEATURE_CHUNK rows at a time, so no
    temporary scales with N * avg_degree beyond the key buffer. ``degree="powerlaw"``: ~14 s.
    """
    num_nodes = _int_arg(num_nodes, "num_nodes", low=2, high=2**31)
    avg_degree = _real_arg(avg_degree, "avg_degree", low=0.0, high=num_nodes - 1)
    num_classes = _int_arg(num_classes, "num_classes", low=1, high=num_nodes)
    feat_dim = _int_arg(feat_dim, "feat_dim", low=1)
    homophily = _real_arg(homophily, "homophily", low=0.0, high=1.0)
    if homophily < 1.0 and num_classes < 2:
        raise ValueError(
            f"homophily={homophily} < 1 sends some edges to another class, which needs "
            f"num_classes >= 2 (got num_classes={num_classes})"
        )
    seed = seed_arg(seed)
    if degree not in ("uniform", "powerlaw"):
        raise ValueError(f"degree must be 'uniform' or 'powerlaw', got {degree!r}")
    power = _real_arg(power, "power", low=2.0, low_open=True)
    feature_snr = _real_arg(feature_snr, "feature_snr", low=0.0)
    train_frac, val_frac = _split_fracs(train_frac, val_frac)
    _graph_fits(
        num_nodes,
        feat_dim,
        num_nodes * avg_degree,
        f"csbm(num_nodes={num_nodes}, avg_degree={avg_degree}, feat_dim={feat_dim})",
    )
    name = _name_arg(name)

    gen = torch.Generator().manual_seed(seed)
    N, C = num_nodes, num_classes
    y = (torch.arange(N) % C)[torch.randperm(N, generator=gen)]  # [N] balanced classes
    # Nodes grouped by class: members[class_start[c]:class_start[c + 1]] are class c.
    members = torch.argsort(y, stable=True)  # [N]
    class_size = torch.bincount(y, minlength=C)  # [C]
    class_start = torch.cumsum(class_size, 0) - class_size  # [C]
    if degree == "powerlaw":
        u01 = torch.rand(N, generator=gen, dtype=torch.float64)
        weight = (1.0 - u01).pow(-1.0 / (power - 1.0))  # [N] Pareto, >= 1
        cum = torch.cumsum(weight[members], 0)  # [N] float64, by class
        cum_before = torch.cat([cum.new_zeros(1), cum])[class_start]  # [C] mass before class c
        class_mass = cum[class_start + class_size - 1] - cum_before  # [C]

    def draw_in_classes(c: torch.Tensor) -> torch.Tensor:
        """One node per entry of c (class ids, int64 [k]), proportional to weight in its class."""
        r = torch.rand(c.numel(), generator=gen, dtype=torch.float64)
        if degree == "uniform":
            # Equal weights: the inverse CDF is a scaled floor, no binary search needed.
            pos = class_start[c] + (r * class_size[c]).long()
        else:
            pos = torch.searchsorted(cum, cum_before[c] + r * class_mass[c], right=True)
        # Clamp into the class: float rounding can land one past its last member.
        pos = torch.minimum(torch.maximum(pos, class_start[c]), class_start[c] + class_size[c] - 1)
        return members[pos]

    num_pairs = round(N * avg_degree / 2)

    def pairs() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for k in _chunks(num_pairs):
            if degree == "uniform":
                u = torch.randint(N, (k,), generator=gen)
            else:
                r = torch.rand(k, generator=gen, dtype=torch.float64) * cum[-1]
                u = members[torch.searchsorted(cum, r, right=True).clamp_(max=N - 1)]
            cu = y[u]
            same = torch.rand(k, generator=gen) < homophily
            if C > 1:
                # A uniformly chosen *other* class: shift by 1..C-1 around the ring.
                other = (cu + torch.randint(1, C, (k,), generator=gen)) % C
                c = torch.where(same, cu, other)
            else:
                c = cu
            yield u, draw_in_classes(c)

    indptr, indices = _csc_from_pairs(pairs(), num_pairs, N)
    x = _class_features(y, C, feat_dim, feature_snr, gen)
    train_idx, val_idx, test_idx = _random_split(N, train_frac, val_frac, gen)
    return Graph(
        indptr,
        indices,
        x=x,
        y=y,
        train_idx=train_idx,
        val_idx=val_idx,
        test_idx=test_idx,
        num_classes=C,
        name=name,
    )


# ----------------------------------------------------------------------------- R-MAT


def rmat(
    scale: int,
    edge_factor: int = 16,
    feat_dim: int = 128,
    num_classes: int = 19,
    seed: int = 0,
    a: float = 0.57,
    b: float = 0.19,
    c: float = 0.19,
    feature_snr: float = 1.0,
    train_frac: float = 0.6,
    val_frac: float = 0.2,
    name: str = "rmat",
) -> Graph:
    """An R-MAT graph (Chakrabarti et al. 2004) with the Graph500 Kronecker parameters.

    ``2**scale`` nodes; ``edge_factor * 2**scale`` directed edges are generated as in the
    Graph500 reference generator: for each of ``scale`` levels, every edge independently picks
    a quadrant of the adjacency matrix, top-left with probability a, top-right b, bottom-left
    c, bottom-right d = 1 - a - b - c, setting one bit of its source and destination ids; then
    the vertex ids are relabelled by a seeded random permutation (so id order carries no degree
    information). The graph is then made undirected (both directions stored) and self-loops and
    duplicate edges are removed, so ``g.num_edges`` is below ``2 * edge_factor * 2**scale``
    (duplicates are common around the hubs). Many nodes end up isolated, as in Graph500.

    Labels are uniform random in [0, num_classes), independent of the structure, and features
    are class mean + noise as in :func:`csbm` (``feature_snr``): a graph for measuring systems
    (sampling skew, hub fan-out, partition balance), not for accuracy of structure-aware models.
    Split: seeded random, floor(train_frac N) / floor(val_frac N) / rest.

    Cost: ``rmat(20)`` (1,048,576 nodes, 31,405,196 edges after clean-up) takes ~19 s and
    2.3 GB peak RSS on the machine described in :func:`csbm`.

    Args:
        scale: log2 of the node count, in [1, 30].  edge_factor: generated edges per node, >= 1.
        a, b, c: quadrant probabilities, each in [0, 1] with a + b + c <= 1.
    """
    scale = _int_arg(scale, "scale", low=1, high=30)
    edge_factor = _int_arg(edge_factor, "edge_factor", low=1)
    feat_dim = _int_arg(feat_dim, "feat_dim", low=1)
    num_nodes = 2**scale
    num_classes = _int_arg(num_classes, "num_classes", low=1)
    if num_classes > num_nodes:
        raise ValueError(
            f"num_classes={num_classes} is more than the {num_nodes} nodes of scale={scale} "
            f"(2**scale nodes); give num_classes <= {num_nodes} or scale >= "
            f"{max(1, (num_classes - 1).bit_length())}"
        )
    seed = seed_arg(seed)
    a = _real_arg(a, "a", low=0.0, high=1.0)
    b = _real_arg(b, "b", low=0.0, high=1.0)
    c = _real_arg(c, "c", low=0.0, high=1.0)
    if a + b + c > 1.0 + 1e-12:
        raise ValueError(f"a + b + c must be <= 1 (d = 1 - a - b - c), got a={a}, b={b}, c={c}")
    feature_snr = _real_arg(feature_snr, "feature_snr", low=0.0)
    train_frac, val_frac = _split_fracs(train_frac, val_frac)
    _graph_fits(
        2**scale,
        feat_dim,
        2 * edge_factor * 2**scale,
        f"rmat(scale={scale}, edge_factor={edge_factor}, feat_dim={feat_dim})",
    )
    name = _name_arg(name)

    gen = torch.Generator().manual_seed(seed)
    N = num_nodes
    num_generated = edge_factor * N
    # One uniform draw per edge and level picks the quadrant: r < a -> top-left (0, 0),
    # < a+b -> top-right (0, 1), < a+b+c -> bottom-left (1, 0), else bottom-right (1, 1),
    # as (source bit, destination bit). The edge is carried as one int64 code src * N + dst,
    # so each level is a table lookup and an add: quadrant q adds step[q] << level.
    thresholds = torch.tensor([a, a + b, a + b + c])
    step = torch.tensor([0, 1, N, N + 1], dtype=torch.int64)  # [4] (src bit) * N + (dst bit)
    # Graph500 permutes vertex labels so that hubs are not all at small ids; drawn first.
    perm = torch.randperm(N, generator=gen)  # [N]

    def edges() -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for k in _chunks(num_generated):
            code = torch.zeros(k, dtype=torch.int64)  # [k] src * N + dst
            for level in range(scale):  # vectorised over edges
                r = torch.rand(k, generator=gen)
                quadrant = torch.bucketize(r, thresholds, right=True)  # [k] in 0..3
                code += step[quadrant] << level
            yield perm[code // N], perm[code % N]

    indptr, indices = _csc_from_pairs(edges(), num_generated, N)
    y = torch.randint(num_classes, (N,), generator=gen)
    x = _class_features(y, num_classes, feat_dim, feature_snr, gen)
    train_idx, val_idx, test_idx = _random_split(N, train_frac, val_frac, gen)
    return Graph(
        indptr,
        indices,
        x=x,
        y=y,
        train_idx=train_idx,
        val_idx=val_idx,
        test_idx=test_idx,
        num_classes=num_classes,
        name=name,
    )


# ----------------------------------------------------------------------------- products-like

PRODUCTS_LIKE_VERSION = 1  # bump when the generator changes: cached folders then miss
PRODUCTS_LIKE_CHUNK = 1 << 21  # node pairs drawn per chunk (fixes how the stream is consumed)
PRODUCTS_LIKE_MAX_DEGREE = 20_000  # default cap on expected degree (ogbn-products: max 17,481)


def default_cache_dir() -> Path:
    """Where generated graphs are cached when no ``cache_dir`` is given.

    ``$ZG_CACHE_DIR`` if set; else ``<repo>/bench/data`` when zg runs from a source checkout
    (that folder is gitignored); else ``$XDG_CACHE_HOME/zg/datasets`` (``~/.cache/zg/datasets``).
    """
    env = os.environ.get("ZG_CACHE_DIR")
    if env:
        return Path(env)
    bench = Path(__file__).resolve().parent.parent / "bench"
    if bench.is_dir():
        return bench / "data"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "zg" / "datasets"


def _products_like_args(
    num_nodes,
    avg_degree,
    feat_dim,
    num_classes,
    seed,
    homophily,
    power,
    max_degree,
    feature_snr,
    train_frac,
    val_frac,
    name,
) -> dict:
    """The checked arguments of :func:`products_like` (every problem names its argument)."""
    num_nodes = _int_arg(num_nodes, "num_nodes", low=2, high=2**31)
    avg_degree = _real_arg(avg_degree, "avg_degree", low=0.0, high=num_nodes - 1, low_open=True)
    feat_dim = _int_arg(feat_dim, "feat_dim", low=1)
    num_classes = _int_arg(num_classes, "num_classes", low=1, high=num_nodes)
    seed = seed_arg(seed)
    homophily = _real_arg(homophily, "homophily", low=0.0, high=1.0)
    if homophily < 1.0 and num_classes < 2:
        raise ValueError(
            f"homophily={homophily} < 1 sends some edges to another class, which "
            f"needs num_classes >= 2 (got num_classes={num_classes})"
        )
    power = _real_arg(power, "power", low=2.0, low_open=True)
    if max_degree is None:
        max_degree = min(PRODUCTS_LIKE_MAX_DEGREE, num_nodes - 1)
    max_degree = _int_arg(max_degree, "max_degree", low=1, high=num_nodes - 1)
    if max_degree < avg_degree:
        raise ValueError(
            f"max_degree must be >= avg_degree, got max_degree={max_degree} < "
            f"avg_degree={avg_degree}"
        )
    feature_snr = _real_arg(feature_snr, "feature_snr", low=0.0)
    train_frac, val_frac = _split_fracs(train_frac, val_frac)
    name = _name_arg(name)
    return dict(
        num_nodes=num_nodes,
        avg_degree=avg_degree,
        feat_dim=feat_dim,
        num_classes=num_classes,
        seed=seed,
        homophily=homophily,
        power=power,
        max_degree=max_degree,
        feature_snr=feature_snr,
        train_frac=train_frac,
        val_frac=val_frac,
        name=name,
    )


def products_like_path(
    num_nodes: int = 2_400_000,
    avg_degree: float = 50.0,
    feat_dim: int = 100,
    num_classes: int = 47,
    seed: int = 0,
    cache_dir: Any = None,
    *,
    homophily: float = 0.8,
    power: float = 2.5,
    max_degree: Any = None,
    feature_snr: float = 1.0,
    train_frac: float = 0.08,
    val_frac: float = 0.016,
    name: str = "products_like",
) -> Path:
    """The cache folder :func:`products_like` reads and writes for these arguments.

    Its name shows the size and seed and ends in a hash of every argument and the generator
    version, so two different graphs never share a folder. Whether it exists says whether the
    next call generates or loads.
    """
    args = _products_like_args(
        num_nodes,
        avg_degree,
        feat_dim,
        num_classes,
        seed,
        homophily,
        power,
        max_degree,
        feature_snr,
        train_frac,
        val_frac,
        name,
    )
    return _products_like_folder(args, cache_dir)


def _products_like_folder(args: dict, cache_dir: Any) -> Path:
    import hashlib

    root = default_cache_dir() if cache_dir is None else path_arg(cache_dir, "cache_dir")
    spec = json.dumps(
        {"generator": "products_like", "version": PRODUCTS_LIKE_VERSION, **args}, sort_keys=True
    )
    digest = hashlib.sha256(spec.encode()).hexdigest()[:12]
    return root / (
        f"products_like-n{args['num_nodes']}-d{args['avg_degree']:g}-f{args['feat_dim']}"
        f"-c{args['num_classes']}-s{args['seed']}-{digest}"
    )


def products_like(
    num_nodes: int = 2_400_000,
    avg_degree: float = 50.0,
    feat_dim: int = 100,
    num_classes: int = 47,
    seed: int = 0,
    cache_dir: Any = None,
    *,
    cache: bool = True,
    homophily: float = 0.8,
    power: float = 2.5,
    max_degree: Any = None,
    feature_snr: float = 1.0,
    train_frac: float = 0.08,
    val_frac: float = 0.016,
    mmap: Any = True,
    name: str = "products_like",
) -> Graph:
    """A synthetic graph with the shape of ogbn-products, generated once and cached on disk.

    ogbn-products (Amazon co-purchases): 2,449,029 nodes, 61,859,140 undirected edges (mean
    degree 50.5, heavy-tailed, largest 17,481), 100 float32 features, 47 classes, edge
    homophily about 0.81, and a split of 8.0% train / 1.6% val / 90.4% test. The defaults here
    copy those numbers; the structure is a degree-corrected stochastic block model:

    * Classes: balanced (sizes differ by at most one), randomly assigned; y int64 [N].
      (ogbn-products' classes are imbalanced; balanced classes keep accuracy easy to read.)
    * Degrees: each node gets a Pareto weight ``w = (1 - U)^(-1 / (power - 1))`` (a power-law
      tail with density exponent ``power``), capped so that no node's expected degree exceeds
      ``max_degree`` (the cap is found by a fixed-point iteration that keeps the mean at
      ``avg_degree``). Expected degree is proportional to weight.
    * Edges: undirected pairs, stored in both directions, without self-loops or duplicates. For
      each pair one end u is drawn with probability proportional to weight; with probability
      ``homophily`` the other end comes from u's class, else from a uniformly chosen other
      class, and within that class again proportional to weight. Duplicates are removed and
      missing pairs drawn again (a few top-up rounds), so ``g.num_edges / N`` is within 0.5% of
      ``avg_degree`` (on sparse graphs; a graph near complete cannot take every pair it draws)
      and ``g.edge_homophily()`` is close to ``homophily`` (a little below: the dropped
      duplicates are mostly same-class pairs among hubs; 0.795 for 0.8 at the defaults).
    * Features: ``x_i = mean[y_i] + N(0, I)``, float32 [N, feat_dim], the class means about
      ``feature_snr`` noise standard deviations apart (as :func:`csbm`).
    * Split: a seeded random permutation: floor(train_frac N) train, floor(val_frac N) val, the
      rest test (ogbn-products splits by sales rank; a random split keeps the graph one model).

    Generation is numpy: a seeded ``np.random.Generator`` (PCG64), inverse-CDF draws with
    ``np.searchsorted``, and the CSC arrays from one in-place sort of the packed int64 keys
    ``dst * N + src`` (the adjacent-difference dedup of ``np.unique`` without its copy). Pairs
    are drawn ``PRODUCTS_LIKE_CHUNK`` at a time, features ``FEATURE_CHUNK`` rows at a time, so
    beyond the outputs only the key array (8 bytes per directed edge) scales with the graph.

    Caching: unless ``cache=False``, the graph is written with :func:`save_folder` to
    ``products_like_path(...)`` under ``cache_dir`` (default :func:`default_cache_dir`) and
    every later call with the same arguments reads it back with :func:`load_folder` (features
    memory-mapped unless ``mmap=False``, the structure copied into memory unless
    ``mmap="all"``); a cache hit returns
    the same tensors as the generating call.
    The folder also holds ``products_like.json``: the arguments and the generation time.

    Cost at the defaults (2.4M nodes, 119,995,018 directed edges, largest degree 15,439,
    median 28, edge homophily 0.795), on the 2-core machine described in :func:`csbm` while
    other jobs kept its load average near 23: generation 404 s wall, of which ~90 s CPU
    time; a cache hit (memory-mapped, the Graph validation reading every array once) 17.5 s.
    At 1.2M nodes, same load: 417 s wall, peak RSS 2.5 GB (generation, save and reload).
    ``bench/scaling.py`` records the generation and load seconds of every size it uses
    (its "graphs" entry); on a quiet machine expect a small fraction of those wall times.

    Args:
        num_nodes: N >= 2.  avg_degree: target mean degree, in (0, N - 1].
        feat_dim: >= 1.  num_classes: in [1, N].  seed: int >= 0.
        cache_dir: folder of cached graphs (None: :func:`default_cache_dir`).
        cache: False: generate in memory, read and write nothing.
        homophily: in [0, 1].  power: power-law exponent, > 2.
        max_degree: cap on any node's expected degree, in [avg_degree, N - 1] (None:
            min(20,000, N - 1); a hub also cannot have more distinct neighbours than its
            class and the rest offer, so on small graphs the realised cap is lower).
        feature_snr: >= 0.  train_frac, val_frac: in [0, 1], summing to <= 1.
        mmap: how the cached folder is read, as :func:`load_folder`: True maps the
            features, "all" every array, False reads everything into memory.
        name: the Graph's name.
    """
    import time

    args = _products_like_args(
        num_nodes,
        avg_degree,
        feat_dim,
        num_classes,
        seed,
        homophily,
        power,
        max_degree,
        feature_snr,
        train_frac,
        val_frac,
        name,
    )
    if not isinstance(cache, bool):
        raise TypeError(f"cache must be a bool, got {type(cache).__name__}")
    _mmap_arg(mmap)
    if cache_dir is not None:
        path_arg(cache_dir, "cache_dir")
    folder = _products_like_folder(args, cache_dir) if cache else None
    if folder is not None:
        target, kind = path_kind(folder, "cache_dir")
        if kind is not None and stat.S_ISDIR(kind) and (target / FOLDER_META).is_file():
            return load_folder(folder, mmap=mmap)
        # The cache is checked before the work it caches (minutes at the defaults): a folder
        # that cannot be created or written, or something else where the graph would go, is
        # refused now, not after the graph is drawn.
        output_folder_arg(folder.parent, "cache_dir")
        if kind is not None:
            _graph_folder_target(folder, "cache_dir")  # FileExistsError: not a graph folder
    _graph_fits(
        args["num_nodes"],
        args["feat_dim"],
        args["num_nodes"] * args["avg_degree"],
        f"products_like(num_nodes={args['num_nodes']}, avg_degree={args['avg_degree']}, "
        f"feat_dim={args['feat_dim']})",
    )
    start = time.perf_counter()
    g = _generate_products_like(**args)
    seconds = time.perf_counter() - start
    if folder is None:
        return g
    folder.parent.mkdir(parents=True, exist_ok=True)
    save_folder(g, folder)
    info = {
        "generator": "products_like",
        "version": PRODUCTS_LIKE_VERSION,
        "arguments": args,
        "generation_seconds": seconds,
        "num_edges": g.num_edges,
        "numpy": np.__version__,
    }
    try:
        atomic_write(
            folder / "products_like.json",
            lambda f: f.write(json.dumps(info, indent=1) + "\n"),
            text=True,
        )
    except OSError:
        pass  # the note is informative; the graph itself is saved
    return load_folder(folder, mmap=mmap) if mmap else g


def _capped_degrees(weight: np.ndarray, avg_degree: float, max_degree: int) -> np.ndarray:
    """Expected degrees proportional to ``weight``, mean ``avg_degree``, none above ``max_degree``.

    Scaling and clipping are repeated until the mean settles: clipping the hubs lowers the
    mean, so the rest scale up a little (a fixed point, reached in a few rounds).
    """
    degree = weight * (avg_degree / weight.mean())
    for _ in range(50):
        np.minimum(degree, max_degree, out=degree)
        mean = degree.mean()
        if abs(mean - avg_degree) <= 1e-9 * avg_degree:
            break
        free = degree < max_degree
        # Scale the unclipped nodes so the total comes back to N * avg_degree.
        missing = avg_degree * degree.size - degree.sum()
        degree[free] *= 1.0 + missing / degree[free].sum()
    return degree


def _generate_products_like(
    num_nodes,
    avg_degree,
    feat_dim,
    num_classes,
    seed,
    homophily,
    power,
    max_degree,
    feature_snr,
    train_frac,
    val_frac,
    name,
) -> Graph:
    rng = np.random.default_rng(seed)
    N, C = num_nodes, num_classes
    y = rng.permutation(np.arange(N, dtype=np.int64) % C)  # [N] balanced classes
    members = np.argsort(y, kind="stable")  # [N] nodes by class
    class_size = np.bincount(y, minlength=C)  # [C]
    class_start = np.cumsum(class_size) - class_size  # [C]
    pareto = (1.0 - rng.random(N)) ** (-1.0 / (power - 1.0))  # [N] float64, >= 1
    weight = _capped_degrees(pareto, avg_degree, max_degree)  # [N] expected degree
    del pareto
    cum = np.cumsum(weight[members])  # [N] by class
    cum_before = np.concatenate([[0.0], cum])[class_start]  # [C] mass before c
    class_mass = cum[class_start + class_size - 1] - cum_before  # [C]
    del weight

    guide = _guide_table(cum)

    def draw_in_classes(c: np.ndarray) -> np.ndarray:
        """One node per entry of ``c`` (class ids, int64 [k]), proportional to weight in its class."""
        query = cum_before[c] + rng.random(c.size) * class_mass[c]
        pos = _guided_search(cum, guide, query)
        # Clamp into the class: float rounding can land one past its last member.
        pos = np.clip(pos, class_start[c], class_start[c] + class_size[c] - 1)
        return members[pos]

    def draw_pairs(count: int) -> np.ndarray:
        """int64 [2 * kept] keys ``dst * N + src`` of ``count`` drawn pairs, both directions.

        Pairs are drawn class by class (how many have their first end u in class c is one
        multinomial draw over the class masses), so the searches for u and for a same-class v
        stay in that class's slice of ``cum``, which stays in cache.
        """
        keys = np.empty(2 * count, dtype=np.int64)  # filled in place, chunk by chunk
        filled = 0
        per_class = rng.multinomial(count, class_mass / class_mass.sum())  # [C]
        for c, n_c in enumerate(per_class.tolist()):
            for start in range(0, n_c, PRODUCTS_LIKE_CHUNK):
                k = min(PRODUCTS_LIKE_CHUNK, n_c - start)
                u = draw_in_classes(np.full(k, c, dtype=np.int64))  # [k] in class c
                same = rng.random(k) < homophily
                # A uniformly chosen *other* class: shift by 1..C-1 around the ring.
                other = c if C == 1 else (c + rng.integers(1, C, k)) % C
                v = draw_in_classes(np.where(same, c, other))  # [k]
                keep = u != v  # no self-loops
                u, v = u[keep], v[keep]
                forward = keys[filled : filled + u.size]
                backward = keys[filled + u.size : filled + 2 * u.size]
                np.multiply(v, N, out=forward)  # edge u -> v
                forward += u
                np.multiply(u, N, out=backward)  # edge v -> u
                backward += v
                filled += 2 * u.size
        return keys[:filled]

    target = int(round(N * avg_degree / 2))  # undirected pairs
    keys = draw_pairs(target)
    keys.sort()  # in place; numpy's sort is the fast one here
    keys = _distinct_sorted(keys)  # [E] by (dst, src)
    # Top-up: duplicates and self-loops were dropped, so draw the missing pairs again (a few
    # rounds: each loses a smaller share). New keys merge into the sorted array by searchsorted.
    for _ in range(8):
        missing = target - keys.size // 2
        if missing <= 0.001 * target:
            break
        extra = draw_pairs(missing)
        extra.sort()
        extra = _distinct_sorted(extra)
        at = np.searchsorted(keys, extra)
        fresh = (at == keys.size) | (keys[np.minimum(at, keys.size - 1)] != extra)
        keys = np.insert(keys, at[fresh], extra[fresh])
    indices = keys % N  # [E] sources
    indptr = np.searchsorted(keys, np.arange(N + 1, dtype=np.int64) * N)  # [N + 1]
    del keys
    # Features: class means + noise, drawn in row chunks straight into x.
    means = rng.standard_normal((C, feat_dim)) * (feature_snr / math.sqrt(2 * feat_dim))
    means = means.astype(np.float32)
    x = np.empty((N, feat_dim), dtype=np.float32)  # [N, F]
    for start in range(0, N, FEATURE_CHUNK):
        rows = x[start : start + FEATURE_CHUNK]
        rng.standard_normal(rows.shape, dtype=np.float32, out=rows)
        rows += means[y[start : start + FEATURE_CHUNK]]
    perm = rng.permutation(N)
    n_train, n_val = int(train_frac * N), int(val_frac * N)
    train_idx = np.sort(perm[:n_train])
    val_idx = np.sort(perm[n_train : n_train + n_val])
    test_idx = np.sort(perm[n_train + n_val :])
    return Graph(
        indptr,
        indices,
        x=x,
        y=y,
        train_idx=train_idx,
        val_idx=val_idx,
        test_idx=test_idx,
        num_classes=C,
        name=name,
    )


def _guide_table(cum: np.ndarray) -> np.ndarray:
    """int64 [m + 1]: ``guide[j]`` = first index with ``cum > j * cum[-1] / m`` (m = len(cum)).

    A guide table (Chen and Asau's indexed search) for :func:`_guided_search`: with as many
    bins as entries, a query lands a few entries before its answer, so the search is a jump
    and a short, vectorised forward scan instead of a branchy binary search per query.
    """
    m = cum.size
    return np.searchsorted(cum, np.arange(m + 1) * (cum[-1] / m), side="right")


def _guided_search(cum: np.ndarray, guide: np.ndarray, query: np.ndarray) -> np.ndarray:
    """``np.searchsorted(cum, query, side="right")``, exactly, through a guide table."""
    m = cum.size
    # One bin early: float rounding of query / width may land one bin past the true one.
    j = np.clip((query * (m / cum[-1])).astype(np.int64) - 1, 0, m)
    pos = guide[j]  # a lower bound of the answer
    active = np.flatnonzero(pos < m)
    while active.size:
        step = cum[pos[active]] <= query[active]  # still at or below the query
        active = active[step]
        pos[active] += 1
        active = active[pos[active] < m]
    return pos


def _distinct_sorted(keys: np.ndarray) -> np.ndarray:
    """The distinct values of a sorted int64 array (what np.unique does after its sort)."""
    if keys.size == 0:
        return keys
    distinct = np.empty(keys.size, dtype=bool)
    distinct[0] = True
    np.not_equal(keys[1:], keys[:-1], out=distinct[1:])
    return keys[distinct]
