"""Engine benchmark on the CPU: DGL vs zg dynamic vs zg envelope (static step), side by side.

    .venv/bin/python bench/engine.py                     # Cora and csbm 200k, batches 256/1024/4096
    .venv/bin/python bench/engine.py --nodes 20000 --name engine_small

For each graph and batch size (fanouts [15, 10, 5], 3-layer SAGE, hidden 256): one full
training epoch of each pipeline, timed in the same process, plus host syncs per iteration
(SyncAudit over two steady-state iterations), overflows and peak bytes (the envelope memory
model on the CPU), and the per-stage breakdown of a few iterations (zg.profile).
``torch.compile`` of the static step is not attempted yet (the JSON says so).
Writes bench/results/<name>.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # before torch: idle OpenMP threads sleep

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DGLBACKEND", "pytorch")

import zg  # noqa: E402
from zg import models  # noqa: E402
from zg.engine import Engine  # noqa: E402
from zg.profile import profile_engine  # noqa: E402
from _machine import machine_note, table, write_json  # noqa: E402


def zg_model(g, hidden, layers, seed):
    torch.manual_seed(seed)
    return models.SAGE(g.feat_dim, hidden, g.num_classes, layers)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="engine")
    args = ap.parse_args(argv)
    from zg.baselines.dgl import DGLModel, DGLPipeline

    graphs = {"cora": zg.datasets.load("cora"),
              f"csbm_{args.nodes}": zg.datasets.csbm(num_nodes=args.nodes, avg_degree=20, num_classes=10,
                                                       feat_dim=128, seed=args.seed)}
    layers = len(args.fanouts)
    rows, profiles = [], []
    for gname, g in graphs.items():
        for batch_size in args.batch_sizes:
            common = dict(fanouts=args.fanouts, batch_size=batch_size, seed=args.seed)
            torch.manual_seed(args.seed)
            dgl_pipe = DGLPipeline(g, DGLModel("sage", g.feat_dim, args.hidden, g.num_classes, layers), **common)
            t0 = time.perf_counter()
            # Sized for the rows a batch really has (the Engine sizes its buffers the same way).
            envelope = zg.Envelope.profile(g, args.fanouts, min(batch_size, g.train_idx.numel()),
                                           seed=args.seed)
            profile_seconds = time.perf_counter() - t0
            engines = {
                "zg_dynamic": Engine(g, zg_model(g, args.hidden, layers, args.seed), pipeline="dynamic",
                                     audit_iterations=2, **common),
                "zg_envelope": Engine(g, zg_model(g, args.hidden, layers, args.seed), envelope=envelope,
                                      audit_iterations=2, **common),
            }
            result = {"graph": gname, "batch_size": batch_size, "envelope": envelope.sizes,
                      "profile_seconds": profile_seconds}
            dgl_stats = dgl_pipe.train_epoch(epoch=0)
            result["dgl"] = {"seconds": dgl_stats.seconds, "iterations": dgl_stats.iterations,
                             "loss": dgl_stats.loss}
            for name, eng in engines.items():
                stats = eng.train_epoch()
                result[name] = {"seconds": stats.seconds, "iterations": stats.iterations,
                                "host_syncs_per_iteration": stats.host_syncs, "overflows": stats.overflows,
                                "peak_bytes": stats.peak_bytes, "loss": stats.loss,
                                "val_accuracy_after_one_epoch": eng.evaluate("val")}
            for name, eng in engines.items():
                prof = profile_engine(eng, iterations=3, warmup=1)
                profiles.append({"graph": gname, "batch_size": batch_size, "pipeline": name, **prof.as_dict()})
                # Steady-state syncs (the epoch above may hold a single, first-ever iteration).
                result[name]["host_syncs_per_iteration_steady"] = prof.host_syncs_per_iteration
            result["ratio_envelope_vs_dgl"] = result["dgl"]["seconds"] / result["zg_envelope"]["seconds"]
            result["ratio_envelope_vs_dynamic"] = result["zg_dynamic"]["seconds"] / result["zg_envelope"]["seconds"]
            rows.append(result)
            print(f"{gname:14s} b={batch_size:5d}  DGL {result['dgl']['seconds']:7.2f} s  "
                  f"dynamic {result['zg_dynamic']['seconds']:7.2f} s  envelope {result['zg_envelope']['seconds']:7.2f} s  "
                  f"(envelope vs DGL {result['ratio_envelope_vs_dgl']:.2f}x, syncs/it "
                  f"{result['zg_dynamic']['host_syncs_per_iteration_steady']} -> {result['zg_envelope']['host_syncs_per_iteration_steady']})",
                  flush=True)

    print()
    print(table([[r["graph"], r["batch_size"], f"{r['dgl']['seconds']:.2f}", f"{r['zg_dynamic']['seconds']:.2f}",
                  f"{r['zg_envelope']['seconds']:.2f}", f"{r['ratio_envelope_vs_dgl']:.2f}x",
                  f"{r['zg_envelope']['host_syncs_per_iteration_steady']}", r["zg_envelope"]["overflows"]] for r in rows],
                ["graph", "batch", "DGL s/epoch", "dynamic s/epoch", "envelope s/epoch", "env vs DGL",
                 "env syncs/it", "overflows"]))
    b1024 = [r for r in rows if r["batch_size"] == 1024]
    targets = {
        "CPU: envelope epoch at least as fast as DGL at batch 1024":
            all(r["ratio_envelope_vs_dgl"] >= 1.0 for r in b1024) if b1024 else None,
        "CPU: 0 host syncs per envelope iteration":
            all(r["zg_envelope"]["host_syncs_per_iteration_steady"] == 0 for r in rows),
    }
    for k, ok in targets.items():
        print(f"  [{'met' if ok else 'MISSED'}] {k}")
    path = write_json(args.name, {"benchmark": "engine", "machine": machine_note(), "settings": vars(args),
                                  "rows": rows, "stage_profiles": profiles, "targets": targets,
                                  "compile": "not attempted: torch.compile of the whole static step "
                                             "(sampler + backward + optimizer) is left for later"})
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
