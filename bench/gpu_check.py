"""GPU check: captured vs eager numerics, then epoch time, GPU execution fraction, host syncs and
peak memory for dynamic / envelope eager / envelope captured. Needs only torch (>= 2.2, no DGL,
no internet). Finishes within ``--budget`` seconds (default 420): configurations that would
not fit are listed as skipped, never silently dropped.

    bash bench/gpu_check.sh                  # on a GPU machine
    python bench/gpu_check.py --budget 120   # anywhere; on a CPU it runs the CPU parts and says
                                             # plainly what it skipped

Writes bench/results/gpu_check_<device>.json and prints a short table.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # before torch: idle OpenMP threads sleep

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import zg  # noqa: E402
from zg import models  # noqa: E402
from zg.engine import Engine  # noqa: E402
from zg.envelope import Envelope, worst_case_sizes  # noqa: E402
from zg.profile import gpu_execution_fraction  # noqa: E402
from _machine import machine, table, write_json  # noqa: E402


def numerics_check(g, device, iterations=6):
    """Captured and uncaptured static steps from the same start agree (same batches, same keys)."""
    out = {}
    engines = []
    for capture_graph in (True, False):
        torch.manual_seed(0)
        model = models.SAGE(g.feat_dim, 64, max(g.num_classes, 1), 2, dropout=0.0)
        eng = Engine(g, model, [10, 10], 256, envelope="worst_case", device=device, seed=0,
                     audit_iterations=0)
        if not capture_graph:
            eng.graph = None                      # the same static step, run eagerly
        eng.train_epoch(max_batches=iterations)
        engines.append(eng)
    diffs = [float((p - q).abs().max()) for p, q in zip(engines[0].model.parameters(),
                                                         engines[1].model.parameters())]
    out["max_abs_param_diff"] = max(diffs)
    out["captured"] = engines[0].graph is not None
    out["agree"] = max(diffs) <= 1e-4
    return out


def measure(g, device, batch_size, variant, envelope, max_batches):
    """One epoch (or max_batches) of one variant; returns seconds, syncs, fraction, memory."""
    torch.manual_seed(0)
    model = models.SAGE(g.feat_dim, 256, max(g.num_classes, 1), 3, dropout=0.5)
    kw = dict(device=device, seed=0, audit_iterations=2)
    if variant == "dynamic":
        eng = Engine(g, model, [15, 10, 5], batch_size, pipeline="dynamic", **kw)
    elif variant == "envelope_eager":
        eng = Engine(g, model, [15, 10, 5], batch_size, envelope=envelope, capture=True, **kw)
        eng.graph = None
    else:
        eng = Engine(g, model, [15, 10, 5], batch_size, envelope=envelope, capture=True, **kw)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    eng.train_epoch(max_batches=2)                        # warm-up (not timed)
    if device.type == "cuda":
        torch.cuda.synchronize()
    stats = eng.train_epoch(max_batches=max_batches)
    if device.type == "cuda":
        torch.cuda.synchronize()
    batches = eng.batches(eng.epoch)
    step = (lambda i: eng._run_static(batches[i % len(batches)], 0, i)) if variant != "dynamic" else \
           (lambda i: eng._pipe.train_step(batches[i % len(batches)], 0, i))
    fraction = gpu_execution_fraction(step, 10) if device.type == "cuda" else None
    row = {"variant": variant, "batch_size": batch_size, "iterations": stats.iterations,
           "seconds": stats.seconds, "seconds_per_iteration": stats.seconds / max(stats.iterations, 1),
           "full_epoch": max_batches is None, "host_syncs_per_iteration": stats.host_syncs,
           "overflows": stats.overflows, "gpu_execution_fraction": fraction,
           "peak_bytes": int(torch.cuda.max_memory_allocated()) if device.type == "cuda" else None,
           "envelope": None if eng.envelope is None else eng.envelope.sizes}
    if eng.envelope is not None:
        from zg.engine import _hidden
        mm = eng.envelope.memory_model(g.feat_dim, _hidden(eng.model), max(g.num_classes, 1))["totals"]
        row["model_bytes"] = mm
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds for everything")
    ap.add_argument("--nodes", type=int, default=1_000_000, help="csbm size on a GPU")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--max-batches", type=int, default=None,
                    help="iterations per measured run (default: a full epoch)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    skipped = []
    print(f"device: {torch.cuda.get_device_name(0) if cuda else 'CPU (no CUDA here)'}; torch {torch.__version__}")
    if not cuda:
        skipped.append("CUDA Graph capture (no CUDA): the 'captured' variant runs the same static step eagerly")
        skipped.append("GPU execution fraction (no CUDA)")
        skipped.append(f"csbm with {args.nodes:,} nodes (CPU run uses 20,000 nodes)")

    cora = zg.datasets.load("cora").to(device)
    check = numerics_check(cora, device)
    print(f"captured vs uncaptured: max |param diff| = {check['max_abs_param_diff']:.2e} "
          f"({'agree' if check['agree'] else 'DISAGREE'}; captured={check['captured']})")

    graphs = {"cora": cora}
    nodes = args.nodes if cuda else 20_000
    t0 = time.perf_counter()
    graphs[f"csbm_{nodes}"] = zg.datasets.csbm(num_nodes=nodes, avg_degree=20, num_classes=10,
                                                feat_dim=128, seed=0).to(device)
    print(f"csbm {nodes:,} nodes generated in {time.perf_counter() - t0:.1f} s")
    max_batches = args.max_batches if cuda else (args.max_batches or 20)
    if not cuda and args.max_batches is None:
        skipped.append("full epochs on the CPU (each CPU run is 20 iterations)")

    rows = []
    for gname, g in graphs.items():
        for batch_size in args.batch_sizes:
            envelope = Envelope.profile(g, [15, 10, 5], batch_size, seed=0)
            worst = Envelope.worst_case(g, [15, 10, 5], batch_size)
            for variant, env in (("dynamic", None), ("envelope_eager", envelope),
                                 ("envelope_captured", envelope), ("worst_case_captured", worst)):
                elapsed = time.perf_counter() - t_start
                if elapsed > args.budget * 0.85:
                    skipped.append(f"{gname} batch {batch_size} {variant} (time budget)")
                    continue
                try:
                    row = measure(g, device, batch_size,
                                  "envelope_captured" if variant == "worst_case_captured" else variant,
                                  env, max_batches)
                except (torch.cuda.OutOfMemoryError, MemoryError) as exc:
                    skipped.append(f"{gname} batch {batch_size} {variant}: out of memory ({exc})")
                    continue
                row["variant"], row["graph"] = variant, gname
                row["oracle_mean_counts"] = envelope.observed.double().mean(0).tolist()
                row["worst_case_sizes"] = worst_case_sizes(g.num_nodes, [15, 10, 5], batch_size)
                rows.append(row)
                print(f"  {gname:14s} b={batch_size:5d} {variant:20s} {row['seconds_per_iteration'] * 1e3:8.2f} ms/it"
                      f"  syncs/it={row['host_syncs_per_iteration']}"
                      f"  gpu_frac={row['gpu_execution_fraction']}  peak={row['peak_bytes']}")

    # Ratios side by side.
    ratios = {}
    for gname in graphs:
        for batch_size in args.batch_sizes:
            by = {r["variant"]: r for r in rows if r["graph"] == gname and r["batch_size"] == batch_size}
            if "dynamic" in by and "envelope_captured" in by:
                ratios[f"{gname}/b{batch_size}/captured_vs_dynamic"] = (
                    by["dynamic"]["seconds_per_iteration"] / by["envelope_captured"]["seconds_per_iteration"])
            if "envelope_eager" in by and "envelope_captured" in by:
                ratios[f"{gname}/b{batch_size}/captured_vs_eager"] = (
                    by["envelope_eager"]["seconds_per_iteration"] / by["envelope_captured"]["seconds_per_iteration"])
            if cuda and "envelope_captured" in by and "worst_case_captured" in by and "dynamic" in by:
                ratios[f"{gname}/b{batch_size}/peak_captured_over_dynamic"] = (
                    by["envelope_captured"]["peak_bytes"] / by["dynamic"]["peak_bytes"])
                ratios[f"{gname}/b{batch_size}/peak_captured_over_worst_case"] = (
                    by["envelope_captured"]["peak_bytes"] / by["worst_case_captured"]["peak_bytes"])
    print()
    print(table([[k, f"{v:.2f}x"] for k, v in ratios.items()], ["ratio", "value"]))
    if skipped:
        print("\nskipped:")
        for s in skipped:
            print(f"  - {s}")
    tag = "cuda" if cuda else "cpu"
    path = write_json(f"gpu_check_{tag}", {
        "benchmark": "gpu_check", "machine": machine(), "settings": vars(args), "numerics": check,
        "rows": rows, "ratios": ratios, "skipped": skipped,
        "seconds_total": time.perf_counter() - t_start,
        "note": ("dynamic allocates each batch's exact sizes, so its peak is the oracle's; "
                 "worst_case_captured is the never-overflowing envelope."),
    })
    print(f"\nwrote {path} in {time.perf_counter() - t_start:.0f} s")
    return 0 if check["agree"] else 1


if __name__ == "__main__":
    sys.exit(main())
