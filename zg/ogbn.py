"""zg.ogbn: the OGB node-property-prediction graphs (ogbn-arxiv, -products, -papers100M).

Where it sits: a source of graphs for :func:`zg.datasets.load`, beside the bundled Cora and
the synthetic generators. The files are read by the ``ogb`` package's own loader,
``ogb.nodeproppred.NodePropPredDataset(name, root=...)``, so its on-disk format, its
pre-processing and its official split are the ones every OGB result uses; this module only
turns what it returns into a validated :class:`zg.Graph` and keeps it from ever waiting on a
prompt or a dead network.

    g = zg.datasets.load("ogbn-arxiv")                  # root: $ZG_OGB_ROOT or ~/.cache/zg/ogb
    g = zg.datasets.load("ogbn-products", root="/data/ogb")

On disk (what ogb downloads and unpacks; ``<root>/<name with "_">``)::

    ogbn_arxiv/RELEASE_v1.txt                 ogb's release marker
    ogbn_arxiv/raw/edge.csv.gz                one "src,dst" line per edge
    ogbn_arxiv/raw/num-node-list.csv.gz, num-edge-list.csv.gz, node-feat.csv.gz,
               node-label.csv.gz, node_year.csv.gz
    ogbn_arxiv/split/time/{train,valid,test}.csv.gz     node ids, one per line
    ogbn_arxiv/processed/                     empty in the zip; ogb caches the parsed files
                                              there as data_processed (torch.save)

ogbn-papers100M ships binary: ``raw/data.npz`` (edge_index, num_nodes_list, num_edges_list,
node_feat, node_year) and ``raw/node-label.npz`` (node_label, NaN for unlabelled papers).
Each dataset's split name, version and whether ogb adds inverse edges come from ogb's
``master.csv``.

Offline: if the files are in ``root`` nothing is downloaded and no network is touched. If they
are missing, a short TCP probe of the download host (``NETWORK_TIMEOUT`` seconds) decides
between downloading and failing at once with a ``FileNotFoundError`` that names the dataset
and the folder the files belong in. ogb's interactive questions ("Will you proceed? (y/N)"
before downloads over 1 GB, "Will you update the dataset now?" for an old release) are never
asked: the first is answered "yes" (the caller asked for the dataset), the second is turned
into an error before ogb starts.

Damaged files: every file ogb reads goes through zg's wrappers of ``pandas.read_csv``,
``numpy.load`` and ``torch.load`` (:class:`_ReadsNamingTheFile`), so a truncated, corrupt or
missing file (an interrupted download, copy or first load) ends in one error that names the
dataset, the file and what to do (a ValueError, or FileNotFoundError for a missing file),
instead of ogb's bare ``EOFError`` or "No necessary file". zg never deletes anything there.
"""

from __future__ import annotations

import os
import pickle
import socket
import sys
import threading
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .errors import ZgError
from .graph import Graph
from .interop import VERSION_CHECK, blocked_imports

__all__ = ["DATASETS", "ROOT_ENV", "NETWORK_TIMEOUT", "default_root", "dataset_dir", "load"]

# The homogeneous ogbn datasets zg loads (ogbn-proteins is multi-label, ogbn-mag heterogeneous).
DATASETS = ("ogbn-arxiv", "ogbn-products", "ogbn-papers100M")
ROOT_ENV = "ZG_OGB_ROOT"
# Seconds the download host may take to accept a TCP connection before we call it unreachable.
NETWORK_TIMEOUT = 5.0


# ----------------------------------------------------------------------------- where the files live


def default_root() -> Path:
    """``$ZG_OGB_ROOT`` if set, else ``$XDG_CACHE_HOME/zg/ogb`` (default ``~/.cache/zg/ogb``)."""
    env = os.environ.get(ROOT_ENV)
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "zg" / "ogb"


def canonical_name(name: Any) -> str:
    """``name`` as OGB spells it ("ogbn-papers100M"), matched case-insensitively."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    for known in DATASETS:
        if name.lower() == known.lower():
            return known
    raise ValueError(f"unknown OGB dataset {name!r}; zg loads {', '.join(DATASETS)}")


def dataset_dir(name: str, root: Any = None) -> Path:
    """The folder ogb keeps ``name`` in: ``<root>/<name with "-" replaced by "_">``."""
    return _root_arg(root) / canonical_name(name).replace("-", "_")


def _root_arg(root: Any) -> Path:
    if root is None:
        return default_root()
    if not isinstance(root, (str, os.PathLike)):
        raise TypeError(
            f"root must be a path (str or os.PathLike) or None, got {type(root).__name__}"
        )
    return Path(os.fspath(root)).expanduser()


# ----------------------------------------------------------------------------- the ogb package


def _importing_ogb():
    """A context in which ogb imports without its side effects.

    ``import ogb`` starts a thread that asks PyPI whether ogb is outdated (see
    :data:`zg.interop.VERSION_CHECK`), and ``ogb.nodeproppred`` imports its DGL and PyG
    dataset wrappers (seconds, and unused here); with those modules blocked ogb skips them,
    as it does when they are not installed.
    """
    return blocked_imports(*VERSION_CHECK, "dgl", "torch_geometric")


def require_ogb():
    """Import and return ``ogb.nodeproppred.dataset``, or raise ImportError saying how to get it."""
    try:
        with _importing_ogb():
            from ogb.nodeproppred import dataset as ogb_dataset
    except ImportError as exc:
        raise ImportError(
            "the OGB datasets need the ogb package, which is not installed: "
            f"`pip install -e .[ogb]` (the reference environment pins it). ({exc})"
        ) from None
    return ogb_dataset


def _meta(ogb_dataset, name: str) -> dict[str, str]:
    """ogb's own description of ``name`` (a column of its master.csv), as strings."""
    import pandas as pd  # ogb depends on pandas

    master = pd.read_csv(
        os.path.join(os.path.dirname(ogb_dataset.__file__), "master.csv"),
        index_col=0,
        keep_default_na=False,
    )
    return {key: str(value) for key, value in master[name].items()}


# What ogb's cache may hold: numpy arrays and scalars, their dtypes, plain containers (and
# torch tensors). Anything else in the pickle (a function to call, any other class) is refused.
_CACHE_GLOBALS = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("collections", "OrderedDict"),
    ("_codecs", "encode"),  # bytes under pickle protocol 2 (a pure function, as torch allows)
    ("torch._utils", "_rebuild_tensor_v2"),
    ("torch", "FloatStorage"),
    ("torch", "LongStorage"),
    ("torch", "IntStorage"),
    ("torch", "DoubleStorage"),
    ("torch", "UntypedStorage"),
}
_CACHE_MODULES = {"numpy.dtypes"}  # numpy 2's dtype classes


class _UnsafeCache(ZgError, pickle.UnpicklingError):
    """ogb's cache names something besides arrays and plain containers."""


class _CacheUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _CACHE_GLOBALS or module in _CACHE_MODULES:
            return super().find_class(module, name)
        raise _UnsafeCache(
            f"the pickle asks for {module}.{name}, which is not a numpy array, a dtype or a "
            "plain container; it was not loaded"
        )


class _CachePickle:
    """The ``pickle_module`` torch.load reads ogb's cache with: pickle, with an allow-list."""

    Unpickler = _CacheUnpickler
    load = staticmethod(lambda f, **kw: _CacheUnpickler(f, **kw).load())
    __name__ = "zg_ogb_cache_pickle"


class _TorchForOgbCache:
    """``torch`` as ogb's dataset module sees it while zg loads: ``load`` reads pickles.

    ogb caches the parsed files as a pickled dict of numpy arrays (``processed/data_processed``)
    and reads it back with a bare ``torch.load``. torch 2.6 made ``weights_only=True`` the
    default, and that loader cannot read this pickle at all (protocol 4, numpy objects), so
    under a recent torch ogb fails on its own cache; torch 2.2 read any pickle, so a crafted
    cache file could run code. zg reads it with an allow-list instead (numpy arrays, scalars and
    dtypes, plain containers, tensors: :data:`_CACHE_GLOBALS`): anything else is refused, with
    the advice to delete the processed folder, which ogb rebuilds from the raw files.
    Everything else is torch itself.
    """

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)

    @staticmethod
    def load(f: Any, *args: Any, **kwargs: Any) -> Any:
        kwargs["weights_only"] = False  # the allow-list below is the check
        kwargs["pickle_module"] = _CachePickle
        return _reading(torch.load, f, *args, **kwargs)


# ----------------------------------------------------------------------------- damaged files


class _DamagedFile(Exception):
    """A file ogb could not read (``path``), and why (``error``); turned into a user's error by
    :func:`_damage_error`. A missing file is not one: ogb reads optional files (edge features)
    inside ``except FileNotFoundError`` (see :func:`_missing_file`)."""

    def __init__(self, path: Any, error: BaseException):
        super().__init__(f"{path}: {type(error).__name__}: {error}")
        self.path = Path(os.fspath(path))
        self.error = error


def _reading(read, path: Any, *args: Any, **kwargs: Any) -> Any:
    """``read(path, ...)``, any failure but running out of memory raised as :class:`_DamagedFile`."""
    try:
        return read(path, *args, **kwargs)
    except (MemoryError, FileNotFoundError):
        raise
    except Exception as exc:  # EOFError, zlib.error, BadZipFile, UnpicklingError, ParserError...
        if not isinstance(path, (str, os.PathLike)):
            raise
        raise _DamagedFile(path, exc) from exc


class _NpzNamingTheFile:
    """An open ``.npz`` whose members, read lazily, report a failure as :class:`_DamagedFile`."""

    def __init__(self, npz: Any, path: Any):
        self._npz, self._path = npz, path

    def __getattr__(self, name: str) -> Any:
        return getattr(self._npz, name)

    def __getitem__(self, key: str) -> Any:
        return _reading(lambda _path: self._npz[key], self._path)

    def __contains__(self, key: str) -> bool:
        return key in self._npz

    def __iter__(self):
        return iter(self._npz)


class _ReadsNamingTheFile:
    """A module (``pandas`` or ``numpy``) as ogb's loaders see it while zg loads: its readers
    report a damaged or missing file as :class:`_DamagedFile`. Everything else is the module."""

    def __init__(self, module: Any):
        self._module = module

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def read_csv(self, path: Any, *args: Any, **kwargs: Any) -> Any:
        return _reading(self._module.read_csv, path, *args, **kwargs)

    def load(self, path: Any, *args: Any, **kwargs: Any) -> Any:
        loaded = _reading(self._module.load, path, *args, **kwargs)
        return _NpzNamingTheFile(loaded, path) if hasattr(loaded, "files") else loaded


def _missing_file(exc: BaseException) -> Any:
    """The FileNotFoundError (with a file name) behind ``exc``, or None: ogb answers a missing
    required raw file with a bare RuntimeError("No necessary file") raised while handling it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, FileNotFoundError) and exc.filename:
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _damage_error(name: str, folder: Path, damaged: _DamagedFile) -> Exception:
    """The error a user sees for a file ogb could not read: dataset, file, and what to do."""
    path, error = damaged.path, damaged.error
    fresh = (
        f"Delete the folder {folder} and load {name} again with downloads allowed "
        "(download=True, the default; `zg train` without --no-download) to fetch a fresh "
        "copy; zg deletes nothing itself."
    )
    if isinstance(error, FileNotFoundError) or not path.exists():
        return FileNotFoundError(
            f"{name}: the file {path} is missing, so the dataset folder "
            f"{folder} is incomplete (an interrupted download or copy?). {fresh}"
        )
    why = f"({type(error).__name__}: {error})"
    if isinstance(error, _UnsafeCache):
        return ValueError(
            f"{name}: ogb's cache {path} holds more than arrays and plain containers {why}: "
            "a crafted or foreign file, so it was not loaded and nothing in it ran. Delete the "
            f"folder {path.parent} and load {name} again: ogb rebuilds it from the raw files "
            f"in {folder / 'raw'}; zg deletes nothing itself."
        )
    if path.parent.name == "processed":
        return ValueError(
            f"{name}: ogb's cache of the parsed files, {path}, could not be read {why}; it is "
            f"damaged (an interrupted first load, a full disk?). Delete that file and load "
            f"{name} again: ogb rebuilds it from the raw files in {folder / 'raw'}; zg deletes "
            "nothing itself."
        )
    return ValueError(
        f"{name}: the file {path} could not be read {why}; it is damaged or "
        f"incomplete (an interrupted download or copy?). {fresh}"
    )


# ----------------------------------------------------------------------------- files and network


def _files_present(folder: Path, meta: dict[str, str]) -> bool:
    """Whether ogb would find the dataset in ``folder`` without downloading (its own test)."""
    if (folder / "processed" / "data_processed").exists():
        return True
    raw = folder / "raw"
    return (raw / ("data.npz" if meta["binary"] == "True" else "edge.csv.gz")).exists()


def _probe_target(url: str):
    """(host, port) a download of ``url`` would connect to first (the proxy, if one is set)."""
    parts = urllib.parse.urlsplit(url)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxy:
        parts = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    default_port = 443 if parts.scheme == "https" else 80
    return parts.hostname, parts.port or default_port


def reachable(url: str, timeout: float = NETWORK_TIMEOUT) -> bool:
    """Whether a TCP connection to ``url``'s host opens within ``timeout`` seconds.

    The name lookup has no timeout of its own (a machine without DNS can wait on it for
    tens of seconds), so the probe runs in a daemon thread and is abandoned at ``timeout``.
    """
    host, port = _probe_target(url)
    if not host:
        return False
    result = []

    def probe() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, name="zg-ogb-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _check_folder(name: str, folder: Path, meta: dict[str, str], *, download: bool) -> None:
    """Everything ogb would ask about on stdin, turned into errors or answered here."""
    release = folder / f"RELEASE_v{meta['version']}.txt"
    present = _files_present(folder, meta)
    if present and not (folder / "split" / meta["split"]).is_dir():
        raise FileNotFoundError(
            f"{name}: {folder} holds the graph but not its split folder "
            f"{folder / 'split' / meta['split']}; the files are incomplete: delete {folder} "
            "and load again to download them"
        )
    if folder.is_dir() and not release.exists():
        if present or any(folder.iterdir()):
            # ogb would ask "Will you update the dataset now? (y/N)" on stdin here.
            raise ValueError(
                f"{name}: {folder} has no {release.name}, ogb's marker of the current release "
                f"(version {meta['version']}); the files there are from another release or "
                f"incomplete. Delete {folder} to download the current release."
            )
        folder.rmdir()  # an empty folder: ogb would ask about it; nothing is lost
    if present:
        # ogb writes its cache into processed/ without creating it (the zip ships it empty);
        # a copy of the files that dropped the empty folder would crash ogb after parsing.
        (folder / "processed").mkdir(exist_ok=True)
        return
    where = (
        f"{name}: the dataset files are not in {folder} (ogb unpacks "
        f"{meta['url'].rsplit('/', 1)[-1]} there as folder {folder.name})"
    )
    if not download:
        raise FileNotFoundError(f"{where}, and download=False")
    if not reachable(meta["url"]):
        host, port = _probe_target(meta["url"])
        raise FileNotFoundError(
            f"{where}, and they cannot be downloaded: {host}:{port} did not answer within "
            f"{NETWORK_TIMEOUT:g} s (no network?). Download {meta['url']} on a machine with "
            f"network access and unpack it into {folder.parent}, or pass root= (or set "
            f"{ROOT_ENV}) to the folder that holds {folder.name}."
        )


def _decide_download_without_prompt(url: str) -> bool:
    """ogb's ``decide_download`` without its (y/N) prompt: the caller asked for the data."""
    print(f"zg: downloading {url} (ogb)", file=sys.stderr, flush=True)
    return True


def _no_prompt(prompt: str = "") -> str:
    raise RuntimeError(
        f"ogb asked a question on stdin, which zg never waits on: {prompt.strip()!r}"
    )


# ----------------------------------------------------------------------------- loading


def load(name: str, root: Any = None, *, symmetrize: bool = True, download: bool = True) -> Graph:
    """An OGB node-property-prediction graph as a validated :class:`zg.Graph`.

    Args:
        name: "ogbn-arxiv" | "ogbn-products" | "ogbn-papers100M" (case-insensitive).
        root: the folder holding ``<name with "_">/``; default :func:`default_root`
            (``$ZG_OGB_ROOT``, else ``~/.cache/zg/ogb``).
        symmetrize: make the directed citation graphs (arxiv, papers100M) undirected: every
            edge u -> v also gets v -> u, and a pair cited both ways is kept once. This is
            common practice for these datasets (OGB's leaderboard baselines, DGL's and PyG's
            examples), because a paper's class shows in what cites it as much as in what it
            cites. ogbn-products is stored undirected already: ogb itself adds the inverse of
            every edge (``add_inverse_edge`` in its master.csv), whatever ``symmetrize`` says.
            ``symmetrize=False`` keeps ogb's edges exactly (citing -> cited).
        download: if the files are missing, let ogb download them (never with a prompt);
            False: fail instead.

    Returns a Graph with x float32 [N, F] (ogb's node features), y int64 [N] (-1 for the
    papers100M nodes whose label is NaN: unlabelled), ``num_classes`` from ogb, and the
    official split (ogb's "train" / "valid" / "test" as train_idx / val_idx / test_idx).

    Raises FileNotFoundError (naming the dataset and the folder) when the files are missing
    and cannot be downloaded, ValueError when the folder holds another release, ImportError
    when ogb is not installed. A damaged file (truncated or corrupt: ogb's cache
    ``processed/data_processed`` or a raw or split file) is a ValueError, and a single missing
    raw file a FileNotFoundError, each naming the dataset and the file and saying what to do
    (delete the cache, which ogb rebuilds, or the dataset folder, to download it again);
    nothing is deleted here. Loading ogbn-papers100M (111M nodes, 1.6B edges) needs a
    machine with a few hundred GB of memory, as with ogb itself.
    """
    name = canonical_name(name)
    root = _root_arg(root)
    if not isinstance(symmetrize, bool):
        raise TypeError(f"symmetrize must be a bool, got {type(symmetrize).__name__}")
    if not isinstance(download, bool):
        raise TypeError(f"download must be a bool, got {type(download).__name__}")
    ogb_dataset = require_ogb()
    meta = _meta(ogb_dataset, name)
    folder = root / name.replace("-", "_")
    _check_folder(name, folder, meta, download=download)
    if download:
        root.mkdir(parents=True, exist_ok=True)
    import ogb.io.read_graph_raw as ogb_raw  # imported by ogb_dataset; it reads the raw files
    import pandas as pd  # ogb depends on pandas

    readers = {"pd": _ReadsNamingTheFile(pd), "np": _ReadsNamingTheFile(np)}
    patches = [
        (
            ogb_dataset,
            {
                "decide_download": _decide_download_without_prompt,
                "input": _no_prompt,
                "torch": _TorchForOgbCache(),
                **readers,
            },
        ),
        (ogb_raw, readers),
    ]
    saved = [
        (module, {key: module.__dict__.get(key) for key in patched}) for module, patched in patches
    ]
    for module, patched in patches:
        module.__dict__.update(patched)
    try:
        ds = ogb_dataset.NodePropPredDataset(name, root=str(root))
        split = ds.get_idx_split()
    except _DamagedFile as damaged:
        raise _damage_error(name, folder, damaged) from damaged.error
    except (RuntimeError, FileNotFoundError) as exc:
        missing = _missing_file(exc)
        if missing is None:
            raise
        raise _damage_error(name, folder, _DamagedFile(missing.filename, missing)) from missing
    finally:
        for module, values in saved:
            for key, value in values.items():
                if value is None:
                    module.__dict__.pop(key, None)
                else:
                    module.__dict__[key] = value
    return _to_graph(
        name,
        ds.graph,
        ds.labels,
        split,
        int(meta["num classes"]),
        symmetrize=symmetrize and meta["add_inverse_edge"] != "True",
    )


def _num_nodes_source(name: str) -> str:
    """Where ogb read a dataset's node count: the file and the field, as a user would look."""
    if name == "ogbn-papers100M":
        return "raw/data.npz's num_nodes_list (num_nodes)"
    return "raw/num-node-list.csv.gz (num-node-list, num_nodes)"


def _num_nodes(name: str, value: Any, labels: np.ndarray, feat: Any, edge_index: np.ndarray) -> int:
    """The node count ogb read from the dataset's files, checked against the data present
    before anything is sized by it: a whole number >= 1, equal to the number of labels and of
    feature rows, above every edge id. A damaged or crafted count (a folder of 4 nodes that
    claims 10^11) is a ValueError naming the field, never an allocation of that size."""
    where = f"{name}: {_num_nodes_source(name)}"
    try:
        num_nodes = int(np.asarray(value).reshape(()))
    except (TypeError, ValueError, OverflowError):
        shape = getattr(np.asarray(value, dtype=object), "shape", ())
        raise ValueError(
            f"{where} is {value!r:.60} (shape {shape}), not one whole number of nodes"
        ) from None
    if num_nodes < 1:
        raise ValueError(f"{where} says {num_nodes} nodes; a graph has at least one")
    rows = labels.shape[0]
    if num_nodes != rows:
        raise ValueError(
            f"{where} says {num_nodes:,} nodes but the labels (node-label) hold {rows:,} rows; "
            "the files disagree (a damaged or mixed download): delete the dataset folder and "
            "download it again"
        )
    if feat is not None:
        feat_rows = np.shape(feat)[0] if np.ndim(feat) else 0
        if feat_rows != num_nodes:
            raise ValueError(
                f"{where} says {num_nodes:,} nodes but the features (node_feat) hold "
                f"{feat_rows:,} rows; the files disagree: delete the dataset folder and "
                "download it again"
            )
    if edge_index.shape[1]:
        for arg, ids in (("source", edge_index[0]), ("destination", edge_index[1])):
            low, high = int(ids.min()), int(ids.max())
            if low < 0 or high >= num_nodes:
                raise ValueError(
                    f"{name}: an edge {arg} id ({low if low < 0 else high}) is outside "
                    f"0..{num_nodes - 1} ({_num_nodes_source(name)} says {num_nodes:,} nodes)"
                )
    return num_nodes


def _to_graph(
    name: str,
    graph: dict[str, Any],
    labels: Any,
    split: dict[str, Any],
    num_classes: int,
    *,
    symmetrize: bool,
) -> Graph:
    """ogb's (graph dict, labels, split) -> Graph. ``symmetrize``: add reverses, drop repeats."""
    from .graph import EDGE_CHUNK
    from .graph import csc_from_pairs as _csc_from_pairs

    edge_index = np.asarray(graph["edge_index"])  # [2, E] src, dst
    if edge_index.ndim != 2 or edge_index.shape[0] != 2:
        raise ValueError(f"{name}: ogb's edge_index has shape {edge_index.shape}, expected [2, E]")
    labels = np.asarray(labels).reshape(-1)  # [N, 1] -> [N]
    feat = graph.get("node_feat")
    # Every array below is sized by num_nodes, a number read from a file: it is checked against
    # the data actually present (labels, feature rows, edge ids) before anything is allocated.
    num_nodes = _num_nodes(name, graph.get("num_nodes"), labels, feat, edge_index)
    src = torch.from_numpy(np.ascontiguousarray(edge_index[0], dtype=np.int64))
    dst = torch.from_numpy(np.ascontiguousarray(edge_index[1], dtype=np.int64))

    # One sort of the int64 keys dst * N + src builds the CSC arrays (as the generators do):
    # lighter than Graph.from_edges' two argsorts at products' and papers100M's sizes.
    chunks = (
        (src[i : i + EDGE_CHUNK], dst[i : i + EDGE_CHUNK])
        for i in range(0, src.numel(), EDGE_CHUNK)
    )
    indptr, indices = _csc_from_pairs(
        chunks, src.numel(), num_nodes, reverse=symmetrize, self_loops=True, dedupe=symmetrize
    )
    del src, dst, edge_index, chunks

    if labels.dtype.kind == "f":
        missing = np.isnan(labels)  # papers100M: unlabelled
        known = labels[~missing]
        if not np.array_equal(known, np.floor(known)):
            raise ValueError(f"{name}: ogb's labels are not whole numbers")
        y = np.where(missing, -1, labels).astype(np.int64)
    else:
        y = labels.astype(np.int64)
    return Graph(
        indptr,
        indices,
        x=None if feat is None else np.asarray(feat),
        y=y,
        train_idx=np.asarray(split["train"]).reshape(-1).astype(np.int64),
        val_idx=np.asarray(split["valid"]).reshape(-1).astype(np.int64),
        test_idx=np.asarray(split["test"]).reshape(-1).astype(np.int64),
        num_classes=num_classes,
        name=name,
    )
