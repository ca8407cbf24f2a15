"""Run constructor calls whose sizes come from data under an address-space limit, and report
how each ended (the child of ``tests/core/test_sizes_from_data.py``).

Usage: ``python tests/size_cases.py LIMIT_BYTES < cases.json``. The cases are a JSON list of
``{"call": NAME, "args": {...}}``. zg and torch are imported first; then RLIMIT_AS is set to
the process's virtual size plus ``LIMIT_BYTES``, so every case has about that much address
space to allocate in, whatever the machine has (a size that escaped its estimate fails in the
allocator here, instead of taking the machine's memory). Each case prints one JSON line before
it starts (``{"start": i}``) and one when it ends (``{"case": i, "ended": "ok" | the exception
class, "message": ...}``): a case that kills the process (a signal) is the last one started.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import traceback

os.environ.setdefault("DGLBACKEND", "pytorch")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

import zg
from zg.kernels import sampling as fused_sampling

torch.set_num_threads(1)

DTYPES = {"list": None, "int64": np.int64, "int32": np.int32, "uint32": np.uint32}


def _ids(values: list[int], dtype: str):
    if dtype == "list":
        return list(values)
    if dtype == "tensor":
        return torch.tensor(values, dtype=torch.int64)
    return np.array(values, dtype=DTYPES[dtype])


def _from_edges(a: dict):
    return zg.Graph.from_edges(
        _ids(a["src"], a["dtype"]),
        _ids(a["dst"], a["dtype"]),
        a["num_nodes"],
        symmetrize=a["symmetrize"],
        self_loops=a["self_loops"],
    )


def _from_pyg(a: dict):
    from torch_geometric.data import Data

    edge_index = torch.tensor([a["src"], a["dst"]], dtype=torch.int64).reshape(2, -1)
    return zg.Graph.from_pyg(Data(edge_index=edge_index, num_nodes=a["num_nodes"]))


def _subgraph(a: dict):
    g = zg.Graph.from_edges(list(range(a["n"] - 1)), list(range(1, a["n"])), a["n"])
    return g.subgraph(a["nodes"])


CALLS = {
    "from_edges": _from_edges,
    "from_pyg": _from_pyg,
    "subgraph": _subgraph,
    "csbm": lambda a: zg.datasets.csbm(**a),
    "rmat": lambda a: zg.datasets.rmat(**a),
    "products_like": lambda a: zg.datasets.products_like(**a, cache=False),
    "new_marker": lambda a: fused_sampling.new_marker(**a),
    "new_seen_bitmap": lambda a: fused_sampling.new_seen_bitmap(**a),
}


def _virtual_size() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def main() -> None:
    extra = int(sys.argv[1])
    cases = json.load(sys.stdin)
    if any(case["call"] == "from_pyg" for case in cases):
        import torch_geometric.data  # noqa: F401  (imported before the limit, like zg)
    limit = _virtual_size() + extra
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    for i, case in enumerate(cases):
        print(json.dumps({"start": i}), flush=True)
        try:
            CALLS[case["call"]](case["args"])
            ended, message, where = "ok", "", ""
        except Exception as exc:  # every ending is reported; the test judges it
            ended, message = type(exc).__name__, str(exc)
            where = traceback.extract_tb(exc.__traceback__)[-1].filename
        print(
            json.dumps({"case": i, "ended": ended, "message": message, "raised_in": where}),
            flush=True,
        )


if __name__ == "__main__":
    main()
