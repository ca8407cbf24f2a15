"""zg.Graph: the graph every other part of the kit reads.

Where it sits: datasets build a Graph; samplers read its CSC arrays; Grappa cuts it into
induced subgraphs; the DGL and PyG interop turn it into a ``DGLGraph`` or a
``torch_geometric.data.Data`` and back (each imported lazily, only when called).

Layout (CSC, "who sends to v"):

    indptr   int64 [N + 1]   monotone, indptr[0] == 0, indptr[N] == E
    indices  int64 [E]       indices[indptr[v]:indptr[v + 1]] are the in-neighbours of v,
                             i.e. the message sources of edges u -> v (sorted by u when the
                             graph comes from from_edges; the constructor keeps any order)
    x        float32 [N, F]  node features (optional, finite)
    y        int64 [N]       class labels in [0, num_classes), -1 for unlabelled (optional)
    train_idx, val_idx, test_idx
             int64 [*]       disjoint sets of labelled node ids (optional)

Every constructor validates its input and raises ``TypeError`` (wrong kind of thing: float ids,
a 2-d edge list) or ``ValueError`` (right kind, wrong value: ids out of range, NaN features,
overlapping splits), naming the argument and the problem. A Graph that exists is well formed.

Self-loops and duplicate edges (``Graph.from_edges``):

    self_loops="keep"     (default) keep edges v -> v as given
    self_loops="remove"   drop every v -> v
    self_loops="add"      drop existing v -> v, then add exactly one per node
    duplicates="keep"     (default) keep repeated u -> v edges; samplers treat each as an edge,
                          as DGL does
    duplicates="remove"   keep one copy of each distinct u -> v

The defaults keep the edge list exactly as given, so ``from_edges`` followed by ``edges()``
returns the same multiset of edges.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from ._checks import device_arg, memory_arg, out_of_memory_names

__all__ = ["Graph", "graph_arg", "csc_from_pairs", "EDGE_CHUNK"]

# A bound that keeps a typo (num_nodes=10**15) from turning into an out-of-memory crash.
MAX_NODES = 2**31
SPLITS = ("train_idx", "val_idx", "test_idx")
SELF_LOOP_POLICIES = ("keep", "remove", "add")
DUPLICATE_POLICIES = ("keep", "remove")


# ----------------------------------------------------------------------------- validation


def _as_tensor(value: Any, name: str) -> torch.Tensor:
    """Tensor view of a tensor, numpy array or (nested) list, without copying tensors. A
    tensor must live on the CPU or a CUDA device: a meta tensor holds no values to check, and
    the kit's kernels run nowhere else; nor may it be sparse (every consumer indexes rows)."""
    if isinstance(value, torch.Tensor):
        if value.device.type not in ("cpu", "cuda"):
            what = (
                "a meta tensor, which holds no values"
                if value.device.type == "meta"
                else f"a tensor on the {value.device.type!r} device"
            )
            raise ValueError(f"{name} is {what}; zg takes tensors on the CPU or a CUDA device")
        if value.layout != torch.strided:  # every zg consumer indexes rows of a dense tensor
            raise TypeError(
                f"{name} must be a dense tensor, got a sparse one (layout {value.layout}); "
                f"densify it first: {name}.to_dense()"
            )
        return value
    if isinstance(value, (bool, int, float, str, bytes)) or value is None:
        raise TypeError(f"{name} must be a tensor, array or list, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except Exception as exc:  # ragged lists and other oddities
        raise TypeError(f"{name} could not be read as an array: {exc}") from None
    if array.dtype == object:
        raise TypeError(f"{name} must hold numbers, got an array of Python objects")
    if array.dtype.kind in "USV":
        raise TypeError(f"{name} must hold numbers, got {array.dtype} values")
    if array.size == 0 and not isinstance(value, np.ndarray):
        array = array.astype(np.int64)  # [] reads as float64; an empty list of ids is fine
    if array.dtype.kind == "u" and array.dtype.itemsize > 1:
        # uint16 / uint32 / uint64 (torch holds only uint8): widened to int64, every value kept.
        if array.dtype.itemsize == 8 and array.size and int(array.max()) > 2**63 - 1:
            raise ValueError(
                f"{name} holds the value {int(array.max())} (dtype uint64), beyond int64, the "
                "largest integer type torch holds"
            )
        array = array.astype(np.int64)
    return torch.from_numpy(np.ascontiguousarray(array))


def _ids(value: Any, name: str, *, num_nodes: int | None = None) -> torch.Tensor:
    """Validate a 1-d tensor of node ids; int32/uint8/int16 are widened to int64."""
    t = _as_tensor(value, name)
    if t.dtype == torch.bool:
        raise TypeError(f"{name} must hold integer node ids, got a boolean tensor (a mask?)")
    if t.is_floating_point() or t.is_complex():
        raise TypeError(f"{name} must hold integer node ids, got dtype {t.dtype}")
    if t.dim() != 1:
        raise TypeError(f"{name} must be 1-dimensional, got shape {tuple(t.shape)}")
    t = t.to(torch.int64)
    if t.numel() and num_nodes is not None:
        lo, hi = int(t.min()), int(t.max())
        if lo < 0:
            raise ValueError(f"{name} holds a negative id ({lo})")
        if hi >= num_nodes:
            raise ValueError(f"{name} holds id {hi}, out of range for num_nodes={num_nodes}")
    return t.contiguous()


def _count(value: Any, name: str, *, minimum: int, why: str = "") -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, torch.Tensor) and value.dim() == 0 and not value.is_floating_point():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if value > MAX_NODES:
        raise ValueError(f"{name}={value}{why} is larger than zg supports ({MAX_NODES})")
    return value


def _graph_bytes(num_nodes: int, num_edges: int) -> int:
    """What building a graph of ``num_nodes`` and ``num_edges`` allocates at its peak, about:
    per edge the CSC build's two stable argsorts (index arrays, gathered copies) and the
    indices (48 bytes); per node the in-degree counts, indptr and the validation's masks and
    split counts (48 bytes). Checked with :func:`zg._checks.memory_arg` before the first of
    them is allocated: sizes read from data (an id, ``data.num_nodes``) are refused as
    arguments are."""
    return 48 * int(num_nodes) + 48 * int(num_edges)


def _graph_fits(num_nodes: int, num_edges: int, what: str) -> None:
    memory_arg(_graph_bytes(num_nodes, num_edges), what)


def _features(value: Any, num_nodes: int) -> torch.Tensor:
    t = _as_tensor(value, "x")
    if t.dtype == torch.bool:
        t = t.to(torch.float32)
    if t.is_complex():
        raise TypeError(f"x must be real, got dtype {t.dtype}")
    if t.dim() != 2:
        raise TypeError(
            f"x must be 2-dimensional [num_nodes, feat_dim], got shape {tuple(t.shape)}"
        )
    if t.shape[0] != num_nodes:
        raise ValueError(f"x has {t.shape[0]} rows but the graph has num_nodes={num_nodes}")
    if t.dtype != torch.float32 or not t.is_contiguous():  # a float32 copy [N, F] is made
        memory_arg(4 * t.shape[0] * t.shape[1], f"x of shape {list(t.shape)} as float32")
    t = t.to(torch.float32).contiguous()
    # Checked in row chunks: isfinite on a [1M, 128] matrix at once would allocate ~1 GB.
    chunk = max(1, (1 << 24) // max(1, t.shape[1]))
    for start in range(0, t.shape[0], chunk):
        part = t[start : start + chunk]
        if not bool(torch.isfinite(part).all()):
            row = start + int(torch.nonzero(~torch.isfinite(part).all(dim=1))[0])
            raise ValueError(
                f"x holds NaN or inf values (first in row {row}; float32 overflow counts)"
            )
    return t


def _labels(value: Any, num_nodes: int, num_classes: int | None) -> tuple[torch.Tensor, int]:
    t = _as_tensor(value, "y")
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise TypeError(f"y must hold integer class labels, got dtype {t.dtype}")
    if t.dim() != 1:
        raise TypeError(f"y must be 1-dimensional [num_nodes], got shape {tuple(t.shape)}")
    if t.shape[0] != num_nodes:
        raise ValueError(f"y has {t.shape[0]} entries but the graph has num_nodes={num_nodes}")
    t = t.to(torch.int64).contiguous()
    lo = int(t.min()) if t.numel() else -1
    hi = int(t.max()) if t.numel() else -1
    if lo < -1:
        raise ValueError(f"y holds label {lo}; labels are >= 0, or -1 for unlabelled nodes")
    if num_classes is None:
        # The bound of an explicit num_classes: a file save_npz writes, load_npz reads back.
        num_classes = _count(
            max(hi + 1, 0),
            "num_classes",
            minimum=0,
            why=f" (inferred from y's largest label, {hi})",
        )
    else:
        num_classes = _count(num_classes, "num_classes", minimum=1)
        if hi >= num_classes:
            raise ValueError(f"y holds label {hi}, out of range for num_classes={num_classes}")
    return t, num_classes


def _splits(splits: dict, num_nodes: int, y: torch.Tensor | None) -> dict:
    out: dict = {}
    owner = torch.full((num_nodes,), -1, dtype=torch.int8)
    for k, name in enumerate(SPLITS):
        value = splits.get(name)
        if value is None:
            out[name] = None
            continue
        idx = _ids(value, name, num_nodes=num_nodes)
        if idx.numel():
            counts = torch.bincount(idx, minlength=num_nodes)
            if int(counts.max()) > 1:
                dup = int(torch.argmax(counts))
                raise ValueError(f"{name} lists node {dup} more than once")
            clash = owner[idx] >= 0
            if bool(clash.any()):
                node = int(idx[clash][0])
                other = SPLITS[int(owner[node])]
                raise ValueError(f"{name} and {other} overlap (node {node} is in both)")
            owner[idx] = k
            if y is not None and bool((y[idx] < 0).any()):
                node = int(idx[y[idx] < 0][0])
                raise ValueError(f"{name} holds node {node}, which is unlabelled (y == -1)")
        out[name] = idx
    return out


def _pyg_labels(y: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """PyG labels -> int64 [N]: [N, 1] squeezed; float labels must be whole, NaN -> -1."""
    if y.dim() == 2 and y.shape[1] == 1:
        y = y[:, 0]  # [N, 1] -> [N] (OGB)
    if y.is_floating_point():
        missing = torch.isnan(y)
        known = y[~missing]
        wild = torch.isinf(y) | (y.abs() > 2**62)  # no class id: never cast to an integer
        if bool(wild.any()):
            node = int(torch.nonzero(wild)[0])
            raise ValueError(
                f"data.y holds {float(y[node])} for node {node}; labels are whole numbers in "
                "[0, num_classes), or NaN / -1 for an unlabelled node"
            )
        if not bool((known == torch.floor(known)).all()):
            raise TypeError(
                f"data.y must hold integer class labels, got dtype {y.dtype} with "
                "fractional values (regression targets?)"
            )
        y = torch.where(missing, torch.full_like(y, -1), y).to(torch.int64)
    return y


def _split_mask(mask: torch.Tensor, name: str, num_nodes: int) -> torch.Tensor:
    """A PyG or DGL split mask as bool [num_nodes]: 1-d, one entry per node, bool (or integer
    0 / 1, as DGL's datasets store them); a ValueError naming ``name`` otherwise."""
    if mask.dim() != 1 or mask.shape[0] != num_nodes:
        raise ValueError(
            f"{name} must be a bool mask [num_nodes] = [{num_nodes}], got shape "
            f"{tuple(mask.shape)}"
            + (" (several splits as columns? pick one: mask[:, i])" if mask.dim() == 2 else "")
        )
    if mask.dtype == torch.bool:
        return mask
    if mask.is_floating_point() or mask.is_complex() or bool(((mask != 0) & (mask != 1)).any()):
        raise ValueError(
            f"{name} must be a bool mask [num_nodes] (or 0 / 1 integers), got dtype {mask.dtype}"
        )
    return mask.bool()


def _pyg_dense(value: Any, name: str) -> Any:
    """A PyG attribute as a dense CPU tensor: a sparse one (COO, CSR, ...; PyG allows a sparse
    ``x``) is densified, since every zg consumer indexes rows of a strided tensor."""
    if not isinstance(value, torch.Tensor) or value.layout == torch.strided:
        return value if not isinstance(value, torch.Tensor) else value.cpu()
    if value.dim() > 2:
        raise TypeError(
            f"data.{name} must be at most 2-dimensional, got a sparse tensor of shape "
            f"{tuple(value.shape)}"
        )
    dense_bytes = math.prod(value.shape) * value.element_size()
    try:
        return value.cpu().to_dense()
    except (RuntimeError, MemoryError) as exc:
        if isinstance(exc, RuntimeError) and "alloc" not in str(exc):  # not out of memory
            raise
        raise MemoryError(
            f"data.{name} is a sparse {value.layout} tensor of shape "
            f"{tuple(value.shape)}; its dense copy needs {dense_bytes:,} bytes, "
            f"which could not be allocated ({exc})"
        ) from None


def _csc_from_edges(src: torch.Tensor, dst: torch.Tensor, num_nodes: int):
    """Sort edges by (dst, src) and build CSC arrays. Stable, so the result is canonical."""
    order = torch.argsort(src, stable=True)
    order = order[torch.argsort(dst[order], stable=True)]
    indices = src[order].contiguous()
    counts = torch.bincount(dst, minlength=num_nodes)
    indptr = torch.zeros(num_nodes + 1, dtype=torch.int64)
    torch.cumsum(counts, 0, out=indptr[1:])
    return indptr, indices


# ----------------------------------------------------------------------------- the graph


class Graph:
    """A homogeneous graph in CSC layout with optional features, labels and splits.

    Build one with :meth:`from_edges`, :meth:`from_dgl`, :meth:`from_pyg`,
    :func:`zg.datasets.load` or the constructor ``Graph(indptr, indices, x=..., y=..., ...)``
    (all validate their input).

    What may be changed in place: the values of ``x`` (features) and ``y`` (labels; the loss
    refuses labels outside ``[-1, num_classes)``). The structure (``indptr``, ``indices``) and the
    splits must not be: build a new Graph instead. Every sampler, ``zg.Envelope.profile`` and
    ``zg.Engine`` check the structure again when they take a graph (:meth:`check_structure`),
    so a structure changed in place is refused with an error, never read out of bounds.
    """

    def __init__(
        self,
        indptr: Any,
        indices: Any,
        *,
        x: Any = None,
        y: Any = None,
        train_idx: Any = None,
        val_idx: Any = None,
        test_idx: Any = None,
        num_classes: int | None = None,
        name: str = "graph",
    ):
        indptr = _ids(indptr, "indptr")
        if indptr.numel() < 2:
            raise ValueError(
                f"indptr must have num_nodes + 1 >= 2 entries, got {indptr.numel()} "
                "(a graph needs at least one node)"
            )
        num_nodes = _count(indptr.numel() - 1, "num_nodes (len(indptr) - 1)", minimum=1)
        indices = _ids(indices, "indices", num_nodes=num_nodes)
        if int(indptr[0]) != 0:
            raise ValueError(f"indptr[0] must be 0, got {int(indptr[0])}")
        if bool((indptr[1:] < indptr[:-1]).any()):
            at = int(torch.nonzero(indptr[1:] < indptr[:-1])[0])
            raise ValueError(f"indptr must be non-decreasing; it falls at position {at + 1}")
        if int(indptr[-1]) != indices.numel():
            raise ValueError(
                f"indptr[-1] = {int(indptr[-1])} but indices has {indices.numel()} entries; "
                "they must be equal"
            )
        if y is None and num_classes is not None:
            num_classes = _count(num_classes, "num_classes", minimum=1)
        self._set(
            indptr,
            indices,
            x=None if x is None else _features(x, num_nodes),
            labels=None if y is None else _labels(y, num_nodes, num_classes),
            splits=None,
            name=name,
        )
        if y is None and num_classes is not None:
            self.num_classes = num_classes
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        splits = _splits(
            {"train_idx": train_idx, "val_idx": val_idx, "test_idx": test_idx}, num_nodes, self.y
        )
        self.train_idx, self.val_idx, self.test_idx = (splits[s] for s in SPLITS)

    def _set(self, indptr, indices, *, x, labels, splits, name):
        self.indptr: torch.Tensor = indptr
        self.indices: torch.Tensor = indices
        self.x: torch.Tensor | None = x
        if labels is None:
            self.y: torch.Tensor | None = None
            self.num_classes = 0
        else:
            self.y, self.num_classes = labels
        splits = splits or {}
        self.train_idx = splits.get("train_idx")
        self.val_idx = splits.get("val_idx")
        self.test_idx = splits.get("test_idx")
        self.name = name

    @classmethod
    def _trusted(cls, indptr, indices, *, x, y, num_classes, splits, name) -> Graph:
        """Build without validation, from arrays that come from a validated Graph."""
        g = cls.__new__(cls)
        g._set(
            indptr,
            indices,
            x=x,
            labels=None if y is None else (y, num_classes),
            splits=splits,
            name=name,
        )
        if y is None:
            g.num_classes = num_classes
        return g

    # ------------------------------------------------------------------------- constructors

    @classmethod
    def from_edges(
        cls,
        src: Any,
        dst: Any,
        num_nodes: int | None = None,
        *,
        x: Any = None,
        y: Any = None,
        train_idx: Any = None,
        val_idx: Any = None,
        test_idx: Any = None,
        num_classes: int | None = None,
        self_loops: str = "keep",
        duplicates: str = "keep",
        symmetrize: bool = False,
        name: str = "graph",
    ) -> Graph:
        """Build a graph from directed edges ``src[i] -> dst[i]``.

        Args:
            src, dst: int [E] node ids (int32 accepted, converted to int64).
            num_nodes: number of nodes; if omitted, taken from ``x``/``y`` or ``max id + 1``.
            x, y, train_idx, val_idx, test_idx, num_classes: see the module docstring.
            self_loops: "keep" | "remove" | "add" (see the module docstring).
            duplicates: "keep" | "remove".
            symmetrize: also add the reverse of every edge (before the duplicate policy).
        """
        if self_loops not in SELF_LOOP_POLICIES:
            raise ValueError(f"self_loops must be one of {SELF_LOOP_POLICIES}, got {self_loops!r}")
        if duplicates not in DUPLICATE_POLICIES:
            raise ValueError(f"duplicates must be one of {DUPLICATE_POLICIES}, got {duplicates!r}")
        if not isinstance(symmetrize, bool):
            raise TypeError(f"symmetrize must be a bool, got {type(symmetrize).__name__}")
        src = _ids(src, "src")
        dst = _ids(dst, "dst")
        if src.numel() != dst.numel():
            raise ValueError(
                f"src has {src.numel()} edges but dst has {dst.numel()}; lengths must match"
            )
        why = ""  # where num_nodes comes from, when it is not given
        if num_nodes is None:
            for arg, value in (("x", x), ("y", y)):
                if value is not None and hasattr(value, "shape") and len(value.shape) >= 1:
                    num_nodes, why = int(value.shape[0]), f" (the rows of {arg})"
                    break
                if isinstance(value, (list, tuple)) and len(value) > 0:
                    num_nodes, why = len(value), f" (the length of {arg})"
                    break
        if num_nodes is None:
            if src.numel() == 0:
                raise ValueError(
                    "the edge list is empty and num_nodes is not given: the graph would have no nodes"
                )
            top_src, top_dst = int(src.max()), int(dst.max())
            num_nodes = max(top_src, top_dst) + 1
            which = "src" if top_src >= top_dst else "dst"
            why = f" (inferred from the largest id in {which}, {num_nodes - 1})"
        num_nodes = _count(num_nodes, "num_nodes", minimum=1, why=why)
        for arg, t in (("src", src), ("dst", dst)):
            if t.numel():
                lo, hi = int(t.min()), int(t.max())
                if lo < 0:
                    raise ValueError(f"{arg} holds a negative id ({lo})")
                if hi >= num_nodes:
                    raise ValueError(f"{arg} holds id {hi}, out of range for num_nodes={num_nodes}")
        num_edges = src.numel() * (2 if symmetrize else 1)
        num_edges += num_nodes if self_loops == "add" else 0
        what = f"a graph of num_nodes={num_nodes}{why} and {num_edges} edges"
        _graph_fits(num_nodes, num_edges, what)
        with out_of_memory_names(what):
            if symmetrize:
                src, dst = torch.cat([src, dst]), torch.cat([dst, src])
            if self_loops != "keep":
                keep = src != dst
                src, dst = src[keep], dst[keep]
            if duplicates == "remove" and src.numel():
                key = torch.unique(dst * num_nodes + src)  # sorted by (dst, src)
                src, dst = key % num_nodes, key // num_nodes
            if self_loops == "add":
                loops = torch.arange(num_nodes, dtype=torch.int64)
                src, dst = torch.cat([src, loops]), torch.cat([dst, loops])
            indptr, indices = _csc_from_edges(src, dst, num_nodes)
        return cls(
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

    @classmethod
    def from_dgl(cls, graph: Any, *, name: str = "graph") -> Graph:
        """Build from a homogeneous ``dgl.DGLGraph``.

        Reads ``ndata['feat']`` (or ``'x'``) as features, ``ndata['label']`` (or ``'y'``) as
        labels and ``ndata['train_mask' | 'val_mask' | 'test_mask']`` as splits, if present
        (bool or 0 / 1 [N]; a 2-D mask or other values are a ValueError naming it).
        Edges are kept as they are (self-loops and duplicates included).
        """
        from .interop import require_dgl

        dgl = require_dgl()
        if not isinstance(graph, dgl.DGLGraph):
            raise TypeError(f"graph must be a dgl.DGLGraph, got {type(graph).__name__}")
        if len(graph.ntypes) != 1 or len(graph.canonical_etypes) > 1:
            raise ValueError(
                f"graph must be homogeneous (one node type, one edge type), got node types "
                f"{graph.ntypes} and edge types {graph.canonical_etypes}"
            )
        if graph.is_block:
            raise ValueError("graph is a DGL block (message flow graph); pass a full graph")
        _graph_fits(
            graph.num_nodes(),
            graph.num_edges(),
            f"a graph of num_nodes={graph.num_nodes()} (graph.num_nodes()) and "
            f"{graph.num_edges()} edges",
        )
        src, dst = graph.edges()
        nd = graph.ndata
        x = nd.get("feat", nd.get("x"))
        y = nd.get("label", nd.get("y"))
        splits = {}
        for split in ("train", "val", "test"):
            mask = nd.get(f"{split}_mask")
            if mask is not None:
                mask = _split_mask(
                    torch.as_tensor(mask).cpu(), f"ndata['{split}_mask']", graph.num_nodes()
                )
                splits[f"{split}_idx"] = torch.nonzero(mask).flatten()
        return cls.from_edges(
            src.cpu(),
            dst.cpu(),
            graph.num_nodes(),
            x=None if x is None else x.cpu(),
            y=None if y is None else y.cpu(),
            name=name,
            **{k: v.cpu() for k, v in splits.items()},
        )

    def to_dgl(self):
        """This graph as a ``dgl.DGLGraph`` (edges in CSC order, ndata feat/label/masks)."""
        from .interop import require_dgl

        dgl = require_dgl()
        self._copy_fits("to_dgl")
        src, dst = self.edges()
        graph = dgl.graph((src, dst), num_nodes=self.num_nodes, device=self.device)
        if self.x is not None:
            graph.ndata["feat"] = self.x
        if self.y is not None:
            graph.ndata["label"] = self.y
        for split in ("train", "val", "test"):
            idx = getattr(self, f"{split}_idx")
            if idx is not None:
                mask = torch.zeros(self.num_nodes, dtype=torch.bool, device=self.device)
                mask[idx] = True
                graph.ndata[f"{split}_mask"] = mask
        return graph

    @classmethod
    def from_pyg(cls, data: Any, *, name: str = "graph") -> Graph:
        """Build from a homogeneous ``torch_geometric.data.Data``.

        Reads ``edge_index`` (int [2, E], row 0 the sources, row 1 the destinations, as PyG's
        message passing reads it), ``x`` (features), ``y`` (labels: int [N], or [N, 1] as in
        OGB's PyG datasets; a float ``y`` must hold whole numbers, and NaN becomes -1,
        unlabelled; inf is a ValueError naming ``data.y``) and ``train_mask`` / ``val_mask`` /
        ``test_mask`` (bool [N], or 0 / 1 integers; another length or shape is a ValueError
        naming the mask) as the splits, each only if present. ``data.num_nodes`` gives N. Edges are kept as they are
        (self-loops and duplicates included); edge attributes are not carried.

        A sparse ``x`` (a torch COO or CSR tensor, as PyG allows for bag-of-words features),
        and a sparse ``y`` or mask, is densified: ``g.x`` is float32 [N, F] either way (it needs
        N * F * 4 bytes; a MemoryError names ``data.x`` if that cannot be allocated). Its
        number of rows must be ``data.num_nodes`` (ValueError naming ``data.x``).
        """
        from .interop import require_pyg

        pyg = require_pyg()
        if not isinstance(data, pyg.data.Data):
            raise TypeError(
                f"data must be a torch_geometric.data.Data (homogeneous), got {type(data).__name__}"
            )
        num_nodes = data.num_nodes
        if num_nodes is None:
            raise ValueError("data has no nodes: set data.num_nodes (or data.x)")
        edge_index = data.edge_index
        if edge_index is None:
            edge_index = torch.empty(2, 0, dtype=torch.int64)
        if not isinstance(edge_index, torch.Tensor):
            raise TypeError(
                f"data.edge_index must be a tensor [2, E], got {type(edge_index).__name__} "
                "(a SparseTensor adjacency? convert it to edge_index first)"
            )
        if edge_index.layout != torch.strided:
            raise TypeError(
                f"data.edge_index must be a dense tensor [2, E], got a sparse "
                f"{edge_index.layout} tensor of shape {tuple(edge_index.shape)} (an "
                "adjacency matrix? torch_geometric.utils.to_edge_index converts it)"
            )
        if edge_index.dim() != 2 or edge_index.shape[0] != 2:
            raise ValueError(
                f"data.edge_index must have shape [2, E], got {tuple(edge_index.shape)}"
            )
        num_nodes = _count(num_nodes, "data.num_nodes", minimum=1)
        _graph_fits(
            num_nodes,
            edge_index.shape[1],
            f"a graph of num_nodes={num_nodes} (data.num_nodes) and {edge_index.shape[1]} edges",
        )
        y = _pyg_dense(data.y, "y")
        if y is not None:
            y = _pyg_labels(torch.as_tensor(y).cpu(), int(num_nodes))
        splits = {}
        for split in ("train", "val", "test"):
            mask = _pyg_dense(getattr(data, f"{split}_mask", None), f"{split}_mask")
            if mask is None:
                continue
            mask = _split_mask(torch.as_tensor(mask).cpu(), f"data.{split}_mask", int(num_nodes))
            splits[f"{split}_idx"] = torch.nonzero(mask).flatten()
        x = _pyg_dense(data.x, "x")
        if isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[0] != int(num_nodes):
            raise ValueError(
                f"data.x has {x.shape[0]} rows but the graph has "
                f"num_nodes={int(num_nodes)} (data.num_nodes); one row per node"
            )
        return cls.from_edges(
            edge_index[0].cpu(), edge_index[1].cpu(), int(num_nodes), x=x, y=y, name=name, **splits
        )

    def to_pyg(self):
        """This graph as a ``torch_geometric.data.Data``.

        ``edge_index`` int64 [2, E] (sources, destinations; CSC order), ``x``, ``y`` (-1 for
        unlabelled nodes, as here) and bool ``train_mask`` / ``val_mask`` / ``test_mask`` [N]
        for the splits that exist; ``num_nodes`` set explicitly.
        """
        from .interop import require_pyg

        pyg = require_pyg()
        self._copy_fits("to_pyg")
        src, dst = self.edges()
        data = pyg.data.Data(edge_index=torch.stack([src, dst]), num_nodes=self.num_nodes)
        if self.x is not None:
            data.x = self.x
        if self.y is not None:
            data.y = self.y
        for split in ("train", "val", "test"):
            idx = getattr(self, f"{split}_idx")
            if idx is not None:
                mask = torch.zeros(self.num_nodes, dtype=torch.bool, device=self.device)
                mask[idx] = True
                setattr(data, f"{split}_mask", mask)
        return data

    # ------------------------------------------------------------------------- properties

    def check_structure(self, name: str = "g") -> None:
        """Raise ValueError unless ``indptr`` and ``indices`` still form a valid CSC structure
        (they may have been changed in place since the graph was built): ``indptr[0] == 0``,
        non-decreasing, ``indptr[-1] == len(indices)``, every index in ``[0, num_nodes)``. Two
        reductions and one host read; on a GPU that read is a sync, so it runs where a graph is
        taken, never inside an iteration."""
        n, e = self.indptr.numel() - 1, self.indices.numel()
        steps = self.indptr[1:] - self.indptr[:-1]  # [N]
        ends = [self.indptr[0], self.indptr[-1], steps.min()]
        if e:
            ends += list(torch.aminmax(self.indices))
        values = torch.stack([v.to(torch.int64) for v in ends]).tolist()
        first, last, min_step = values[:3]
        fix = "(changed in place? build a new zg.Graph instead)"
        if first != 0 or min_step < 0 or last != e:
            raise ValueError(
                f"{name}.indptr is no longer a valid CSC pointer array: indptr[0]={first}, "
                f"indptr[-1]={last} for {e} indices, smallest step {min_step} {fix}"
            )
        if e and (values[3] < 0 or values[4] >= n):
            bad = values[3] if values[3] < 0 else values[4]
            raise ValueError(
                f"{name}.indices holds node id {bad}, out of range for {n} nodes {fix}"
            )

    @property
    def num_nodes(self) -> int:
        return self.indptr.numel() - 1

    @property
    def num_edges(self) -> int:
        return self.indices.numel()

    @property
    def feat_dim(self) -> int:
        return 0 if self.x is None else int(self.x.shape[1])

    @property
    def device(self) -> torch.device:
        return self.indptr.device

    def in_degrees(self) -> torch.Tensor:
        """int64 [N]: number of in-edges (messages received) per node."""
        return self.indptr[1:] - self.indptr[:-1]

    def out_degrees(self) -> torch.Tensor:
        """int64 [N]: number of out-edges (messages sent) per node."""
        return torch.bincount(self.indices, minlength=self.num_nodes)

    def edges(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(src, dst), each int64 [E], in CSC order (sorted by dst, then src)."""
        dst = torch.repeat_interleave(
            torch.arange(self.num_nodes, device=self.device),
            self.in_degrees(),
            output_size=self.num_edges,
        )
        return self.indices, dst

    def _copy_fits(self, what: str) -> None:
        """Refuse a conversion whose copy cannot fit: the edge list (src and dst, int64 [E]
        each, and the other library's own copy of it) and a bool mask per split."""
        memory_arg(
            48 * self.num_edges + 8 * self.num_nodes,
            f"{what} of a graph of {self.num_nodes} nodes and {self.num_edges} edges",
            self.device if self.device.type == "cuda" else None,
        )

    def edge_homophily(self) -> float:
        """Fraction of edges whose two ends have the same label (edges with unlabelled ends excluded)."""
        if self.y is None:
            raise ValueError("edge_homophily needs labels, and this graph has y=None")
        src, dst = self.edges()
        ys, yd = self.y[src], self.y[dst]
        both = (ys >= 0) & (yd >= 0)
        if not bool(both.any()):
            return float("nan")
        return float((ys[both] == yd[both]).double().mean())

    # ------------------------------------------------------------------------- transforms

    def to(self, device: Any) -> Graph:
        """A copy of the graph with every tensor on ``device``."""
        # A torch.device is already one (what the Engine passes, having checked its own).
        device = device if isinstance(device, torch.device) else device_arg(device, "device")
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return Graph._trusted(
            move(self.indptr),
            move(self.indices),
            x=move(self.x),
            y=move(self.y),
            num_classes=self.num_classes,
            splits={s: move(getattr(self, s)) for s in SPLITS},
            name=self.name,
        )

    def with_self_loops(self) -> Graph:
        """A copy with exactly one self-loop per node (any existing one dropped first:
        ``self_loops="add"`` of :meth:`from_edges`), every other edge, feature, label and split
        kept. What DGL-based code trains on after ``dgl.add_self_loop`` (the Grappa authors'
        public code does this to every graph): a SAGE neighbour mean then includes the node."""
        degrees = self.indptr[1:] - self.indptr[:-1]  # [N] in-degrees
        dst = torch.repeat_interleave(
            torch.arange(self.num_nodes, device=self.indptr.device), degrees
        )  # [E] the destination of each edge, in CSC order
        return Graph.from_edges(
            self.indices,
            dst,
            self.num_nodes,
            x=self.x,
            y=self.y,
            num_classes=self.num_classes,
            self_loops="add",
            name=self.name,
            **{s: getattr(self, s) for s in SPLITS},
        )

    def subgraph(self, nodes: Any) -> tuple[Graph, torch.Tensor]:
        """The subgraph induced by ``nodes`` and the map from its ids back to global ids.

        Args:
            nodes: int [K] distinct node ids. Local node i is global node ``nodes[i]``.
        Returns:
            (sub, global_ids): ``sub`` keeps every edge u -> v with both ends in ``nodes``
            (features, labels and the split members that fall inside, all relabelled);
            ``global_ids`` is int64 [K], equal to ``nodes``.
        """
        nodes = _ids(nodes, "nodes", num_nodes=self.num_nodes).to(self.device)
        if nodes.numel() == 0:
            raise ValueError("nodes is empty: a subgraph needs at least one node")
        where = self.device if self.device.type == "cuda" else None
        # The id map (int64 [N]) and the K kept nodes' features, before the edges are known.
        memory_arg(
            8 * self.num_nodes + 48 * nodes.numel() + 4 * nodes.numel() * self.feat_dim,
            f"subgraph of {nodes.numel()} nodes (len(nodes)) of a graph of "
            f"{self.num_nodes} nodes with {self.feat_dim} features",
            where,
        )
        local = torch.full((self.num_nodes,), -1, dtype=torch.int64, device=self.device)
        local[nodes] = torch.arange(nodes.numel(), device=self.device)
        if int((local >= 0).sum()) != nodes.numel():
            raise ValueError("nodes holds repeated ids; each node may appear once")
        deg = self.in_degrees()[nodes]  # [K]
        total = int(deg.sum())
        # Per in-edge of a kept node: owner, edge ids, sources, mask, then the CSC build.
        memory_arg(
            96 * total,
            f"subgraph of {nodes.numel()} nodes (len(nodes)) with {total} in-edges",
            where,
        )
        # Edge ids of each kept node's CSC slice, concatenated: start[v] + 0..deg[v]-1.
        owner = torch.repeat_interleave(
            torch.arange(nodes.numel(), device=self.device), deg, output_size=total
        )  # [sum deg]
        first = torch.cumsum(deg, 0) - deg  # [K]
        edge_ids = self.indptr[nodes][owner] + (
            torch.arange(total, device=self.device) - first[owner]
        )
        src_local = local[self.indices[edge_ids]]  # [sum deg]
        keep = src_local >= 0
        src_local, dst_local = src_local[keep], owner[keep]
        indptr, indices = _csc_from_edges(src_local.cpu(), dst_local.cpu(), nodes.numel())
        splits = {}
        for s in SPLITS:
            idx = getattr(self, s)
            if idx is not None:
                mapped = local[idx]
                splits[s] = torch.sort(mapped[mapped >= 0]).values
            else:
                splits[s] = None
        sub = Graph._trusted(
            indptr.to(self.device),
            indices.to(self.device),
            x=None if self.x is None else self.x[nodes],
            y=None if self.y is None else self.y[nodes],
            num_classes=self.num_classes,
            splits=splits,
            name=f"{self.name}[sub]",
        )
        return sub, nodes.clone()

    # ------------------------------------------------------------------------- display

    def summary(self) -> dict:
        deg = self.in_degrees()
        return {
            "name": self.name,
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "feat_dim": self.feat_dim,
            "num_classes": self.num_classes,
            "avg_in_degree": self.num_edges / self.num_nodes,
            "max_in_degree": int(deg.max()),
            "isolated_nodes": int((deg == 0).sum()),
            **{
                s: (0 if getattr(self, s) is None else int(getattr(self, s).numel()))
                for s in SPLITS
            },
            "device": str(self.device),
        }

    def __repr__(self) -> str:
        s = self.summary()
        return (
            f"Graph(name={s['name']!r}, num_nodes={s['num_nodes']:,}, num_edges={s['num_edges']:,}, "
            f"feat_dim={s['feat_dim']:,}, num_classes={s['num_classes']}, "
            f"in-degree avg {s['avg_in_degree']:.2f} max {s['max_in_degree']:,}, "
            f"train/val/test={s['train_idx']:,}/{s['val_idx']:,}/{s['test_idx']:,}, "
            f"device={s['device']})"
        )


# ----------------------------------------------------------------------------- building CSC from pairs

EDGE_CHUNK = 1 << 20  # edges (node pairs) a generator or loader hands over per chunk


def csc_from_pairs(
    pairs: Iterator[tuple[torch.Tensor, torch.Tensor]],
    max_pairs: int,
    num_nodes: int,
    *,
    reverse: bool = True,
    self_loops: bool = False,
    dedupe: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """CSC arrays of the edges u -> v in ``pairs``, built with one sort.

    ``pairs`` yields (u, v) chunks, int64 [k] each, at most ``max_pairs`` pairs in total.
    Each pair becomes the key ``v * N + u`` (and ``u * N + v`` too if ``reverse``); one sort
    of the keys orders the edges by (dst, src), which is CSC order, and equal neighbours in it
    are duplicates. The defaults make the symmetrised, self-loop-free, de-duplicated union the
    generators need; ``reverse=False, self_loops=True, dedupe=False`` keeps the edges exactly.
    """
    per_pair = 2 if reverse else 1
    keys = torch.empty(per_pair * max_pairs, dtype=torch.int64)  # [2M] or [M], filled in place
    filled = 0
    for u, v in pairs:
        if not self_loops:
            keep = u != v  # self-loops go
            u, v = u[keep], v[keep]
        k = u.numel()
        torch.mul(v, num_nodes, out=keys[filled : filled + k]).add_(u)  # edge u -> v
        if reverse:
            torch.mul(u, num_nodes, out=keys[filled + k : filled + 2 * k]).add_(v)  # edge v -> u
        filled += per_pair * k
    keys = keys[:filled]
    # numpy's in-place sort is several times faster than torch.sort on CPU and needs no
    # index array; the tensor and the array share memory.
    keys.numpy().sort()
    if dedupe:
        distinct = torch.ones(filled, dtype=torch.bool)
        distinct[1:] = keys[1:] != keys[:-1]
        keys = keys[distinct]  # [E], sorted by (dst, src)
        del distinct
    indices = keys % num_nodes  # [E] sources
    # indptr[v] = first key >= v * N: a sorted query, so the binary searches stay in cache.
    bounds = torch.arange(num_nodes + 1, dtype=torch.int64) * num_nodes
    indptr = torch.searchsorted(keys, bounds)  # [N + 1]
    return indptr, indices


def graph_arg(g: Any, name: str = "g", *, train: bool = False) -> Graph:
    """A zg.Graph; with ``train=True`` it must also have features, labels in range and a train
    split."""
    if not isinstance(g, Graph):
        raise TypeError(f"{name} must be a zg.Graph, got {type(g).__name__}")
    g.check_structure(name)
    if train:
        if g.x is None or g.y is None:
            raise ValueError(f"{name} needs features (x) and labels (y) to train on")
        if g.train_idx is None or g.train_idx.numel() == 0:
            raise ValueError(f"{name} has no training nodes (train_idx is empty or None)")
        # Labels changed in place since the graph was built (the one check of a run's labels:
        # the local graphs a run cuts from g are not validated again).
        _labels(g.y, g.num_nodes, g.num_classes)
    return g
