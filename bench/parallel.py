"""Data-parallel ZeroGNN (zg.parallel) on CPU processes: 1 worker against 2, the same global batch.

    .venv/bin/python bench/parallel.py                  # csbm 50k, batch 1024, 3 seeds
    .venv/bin/python bench/parallel.py --nodes 20000 --seeds 0 1 2

Every run trains ``--epochs`` epochs of a 3-layer SAGE (hidden 256, fanouts [15, 10, 5]) with
the static envelope step in every process and the gradient all-reduce (gloo) inside the step.
1 worker gets all the machine's cores as torch threads; P workers get cores / P each, so the
comparison spends the same cores either way. Reported: seconds per epoch (median epoch of a
run), mean ± std over seeds, the speed-up, host syncs per iteration, and bytes each worker sent
per epoch. On a 2-core machine two processes can at best match one process with two threads:
the kit's claim here is that the step needs no host read on any worker, not a CPU speed-up.
Writes bench/results/parallel.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import machine_note, pm, table, write_json

import zg
from zg import parallel
from zg.experiments.results import headline, mean_std


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=50_000)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = ap.parse_args(argv)
    cores = os.cpu_count() or 1
    g = zg.datasets.csbm(num_nodes=args.nodes, avg_degree=20, num_classes=10, feat_dim=128, seed=0)
    rows = []
    start = time.perf_counter()
    for workers in args.workers:
        times, syncs, sent, overflows = [], [], [], 0
        for seed in args.seeds:
            hist = parallel.train(
                g,
                workers=workers,
                epochs=args.epochs,
                batch_size=args.batch_size,
                fanouts=[15, 10, 5],
                hidden_dim=256,
                seed=seed,
                evaluate=False,
                threads=max(1, cores // workers),
                kernel="auto",  # the compiled CPU kernels, as every bench times
                timeout=600,
            )
            times.append(hist["seconds_per_epoch"])
            syncs += [e["host_syncs"] for e in hist["epochs"]]
            sent.append(hist["bytes_sent_per_worker"] / args.epochs)
            overflows += sum(e["overflows"] for e in hist["epochs"])
        rows.append(
            {
                "workers": workers,
                "threads_per_worker": max(1, cores // workers),
                "seconds_per_epoch_mean": statistics.mean(times),
                "seconds_per_epoch_std": mean_std(times)[1],
                "seconds_per_epoch": times,
                "host_syncs_per_iteration": max(syncs),
                "bytes_sent_per_worker_per_epoch": statistics.mean(sent),
                "overflows": overflows,
                "kernel": hist["kernel"],  # what ran
            }
        )
        print(
            f"workers={workers}: "
            f"{pm(rows[-1]['seconds_per_epoch_mean'], rows[-1]['seconds_per_epoch_std'])} "
            f"s/epoch, syncs/it={max(syncs)}"
        )
    base = rows[0]["seconds_per_epoch_mean"]
    for r in rows:
        r["speedup_vs_first"] = base / r["seconds_per_epoch_mean"]
    print(
        table(
            [
                [
                    r["workers"],
                    r["threads_per_worker"],
                    pm(r["seconds_per_epoch_mean"], r["seconds_per_epoch_std"]),
                    f"{r['speedup_vs_first']:.2f}x",
                    r["host_syncs_per_iteration"],
                ]
                for r in rows
            ],
            ["workers", "threads each", "s / epoch", "speed-up", "syncs / it"],
        )
    )
    path = write_json(
        "parallel",
        {
            "benchmark": "parallel",
            "machine": machine_note(),
            "settings": vars(args),
            "graph": {"name": "csbm", "nodes": args.nodes, "avg_degree": 20, "feat_dim": 128},
            "model": "SAGE 3 layers, hidden 256, fanouts [15, 10, 5], DeviceAdam lr 3e-3, dropout 0",
            "rows": rows,
            "seconds_total": time.perf_counter() - start,
            "note": (
                "every process holds the whole graph and trains its share of each global batch; "
                "threads per worker = cores / workers, so both sides use the same cores"
            ),
        },
    )
    print(f"wrote {path}")
    return 0


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a parallel result (bench/_headlines.py calls it)."""
    out = []
    rows = doc["rows"]
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        out.append(
            headline(
                "parallel_speedup",
                a["seconds_per_epoch_mean"] / b["seconds_per_epoch_mean"],
                "x",
                compared_to=f"{a['workers']} process x {a['threads_per_worker']} threads",
                where=f"{b['workers']} processes x {b['threads_per_worker']} thread, seconds per epoch",
            )
        )
    if rows:
        out.append(
            headline(
                "host_syncs_max",
                max(r["host_syncs_per_iteration"] for r in rows),
                "per iteration",
                where="every data-parallel run",
                higher_is_better=False,
            )
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
