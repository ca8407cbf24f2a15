"""An independent check of the engine benchmark: DGL written plainly, as a DGL user would.

    .venv/bin/python bench/dgl_check.py                  # csbm 200k, 40 batches, median of 3
    .venv/bin/python bench/dgl_check.py --quick          # csbm 20k, 10 batches (checks it runs)

No zg code on the DGL side (not zg.baselines, not zg's loop): ``dgl.dataloading.NeighborSampler``
+ ``dgl.dataloading.DataLoader`` (shuffled) + a 3-layer ``dgl.nn.SAGEConv`` model + torch.optim.Adam,
against ``zg.Engine(mode="static")`` (on the CPU the static step: the same fixed buffers a CUDA
Graph would replay, run eagerly). Same graph, fanouts [15, 10, 5], batch 1024, hidden 256,
dropout 0.5, Adam lr 3e-3, the same torch thread count. Each side trains ``--batches`` batches
(after 2 warm-up batches); the two sides alternate run by run so a change in the machine's load
hits both; the median of ``--runs`` runs is reported. Writes bench/results/dgl_check.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep
os.environ.setdefault("DGLBACKEND", "pytorch")

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, paired, ran_kernel, write_json

import zg
from zg.experiments.results import headline_from


class DGLSAGE(nn.Module):
    """The DGL minibatch GraphSAGE example: SAGEConv(mean) -> ReLU -> dropout, per layer."""

    def __init__(self, in_dim, hidden, num_classes, num_layers=3, dropout=0.5):
        import dgl.nn as dglnn

        super().__init__()
        dims = [in_dim] + [hidden] * (num_layers - 1) + [num_classes]
        self.layers = nn.ModuleList(
            dglnn.SAGEConv(a, b, "mean") for a, b in zip(dims[:-1], dims[1:])
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, blocks, x):
        h = x
        for i, (layer, block) in enumerate(zip(self.layers, blocks)):
            h = layer(block, h)
            if i < len(self.layers) - 1:
                h = self.dropout(F.relu(h))
        return h


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--batches", type=int, default=40)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="csbm 20k, 10 batches")
    ap.add_argument("--name", default=None)
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.batches = 20_000, 10
    name = args.name or ("dgl_check_quick" if args.quick else "dgl_check")
    import dgl

    g = zg.datasets.csbm(
        num_nodes=args.nodes, avg_degree=20, num_classes=10, feat_dim=128, seed=args.seed
    )
    threads = torch.get_num_threads()
    needed = (args.batches + 2) * args.batch_size
    if needed > g.train_idx.numel():
        print(
            f"note: {args.batches} + 2 batches of {args.batch_size} exceed the {g.train_idx.numel()} "
            "training nodes; each side wraps into its next epoch"
        )

    # --- DGL, as a DGL user writes it.
    torch.manual_seed(args.seed)
    dgl.seed(args.seed)
    dgl_graph = dgl.graph(
        (g.indices, torch.repeat_interleave(torch.arange(g.num_nodes), g.indptr.diff())),
        num_nodes=g.num_nodes,
    )  # CSC in-edges: indices[j] -> v
    dgl_graph.ndata["feat"], dgl_graph.ndata["label"] = g.x, g.y
    sampler = dgl.dataloading.NeighborSampler(args.fanouts)
    loader = dgl.dataloading.DataLoader(
        dgl_graph,
        g.train_idx,
        sampler,
        batch_size=args.batch_size,
        shuffle=True,
        drop_last=False,
        num_workers=0,
    )
    model = DGLSAGE(g.feat_dim, args.hidden, g.num_classes, len(args.fanouts))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    batches = iter(loader)

    def dgl_batches(n):
        nonlocal batches
        model.train()
        for _ in range(n):
            try:
                input_nodes, output_nodes, blocks = next(batches)
            except StopIteration:
                batches = iter(loader)
                input_nodes, output_nodes, blocks = next(batches)
            x = blocks[0].srcdata["feat"]
            y = blocks[-1].dstdata["label"]
            loss = F.cross_entropy(model(blocks, x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    # --- zg: the engine in mode "static" (the capturable step, run on the CPU).
    torch.manual_seed(args.seed)
    zg_model = zg.models.SAGE(g.feat_dim, args.hidden, g.num_classes, len(args.fanouts))
    eng = zg.Engine(
        g,
        zg_model,
        args.fanouts,
        args.batch_size,
        mode="static",
        seed=args.seed,
        optimizer=zg.optim.adam(lr=3e-3),
        kernel="auto",
    )

    def zg_batches(n):
        done = 0
        while done < n:
            done += eng.train_epoch(max_batches=n - done).iterations

    dgl_batches(2)
    zg_batches(2)
    times = {"dgl": [], "zg": []}
    for run in range(args.runs):
        for side, fn in (("dgl", dgl_batches), ("zg", zg_batches)):
            t0 = time.perf_counter()
            fn(args.batches)
            times[side].append(time.perf_counter() - t0)
        print(
            f"run {run}: DGL {times['dgl'][-1]:.2f} s, zg.Engine(mode='static') {times['zg'][-1]:.2f} s "
            f"for {args.batches} batches",
            flush=True,
        )
    med = {k: statistics.median(v) for k, v in times.items()}
    ratio = med["dgl"] / med["zg"]
    print(
        f"median of {args.runs}: DGL {med['dgl']:.2f} s, zg {med['zg']:.2f} s; DGL / zg = {ratio:.2f}x "
        f"({threads} threads, load {os.getloadavg()[0]:.1f})"
    )
    command = "bench/dgl_check.py " + " ".join(argv if argv is not None else sys.argv[1:])
    path = write_json(
        name,
        {
            "benchmark": "dgl_check",
            "command": command.strip(),
            "machine": machine_note(),
            "threads": threads,
            "settings": {**vars(args), "kernel": ran_kernel(eng)},
            "engine": {"mode": eng.mode, "envelope": eng.envelope.sizes},
            "seconds": times,
            "median_seconds": med,
            "ratio_dgl_vs_zg": ratio,
        },
    )
    print(f"wrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a dgl_check result (bench/_headlines.py calls it)."""
    s = doc["detail"].get("seconds") or {}
    if not s.get("dgl"):
        return []
    return [
        headline_from(
            "envelope_vs_dgl_independent",
            paired(s["dgl"], s["zg"]),
            "x",
            compared_to="DGL's own NeighborSampler + DataLoader + SAGEConv",
            where=f"{doc['settings'].get('nodes')} nodes, batch {doc['settings'].get('batch_size')}, runs paired",
        )
    ]


if __name__ == "__main__":
    main()
