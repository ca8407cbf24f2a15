"""GPU check: captured vs uncaptured numerics over several batches and two epochs, the overflow
policy on the device, then epoch time, GPU execution fraction, host syncs and peak memory for
dynamic / envelope eager / envelope captured, and data-parallel scaling when more than one GPU
is here. Needs only torch (>= 2.2) and numpy: no DGL, no internet. Stays within ``--budget``
seconds: rows that would not fit are listed as skipped, never silently dropped. Every row is
caught on its own (an exception becomes an "error" entry) and the JSON is rewritten after each
row, so a failure late in the run loses nothing measured before it.

    bash bench/gpu_check.sh                  # on a GPU machine: this, then the CUDA-marked tests
    python bench/gpu_check.py --budget 120   # anywhere; on a CPU it runs the CPU parts and says
                                             # plainly what it skipped

Writes bench/results/gpu_check_<cuda|cpu>.json and prints a short table.

Peak memory: reset before each Engine is built (so a captured graph's private memory pool is
counted), reported as ``max_memory_allocated`` and ``max_memory_reserved``. Host syncs: the
SyncAudit count (``host_syncs_per_iteration``) and, on CUDA, torch's sync-debug count
(``cuda_sync_warnings_per_iteration``), reported separately, never added.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")   # before torch: idle OpenMP threads sleep

import argparse
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import zg  # noqa: E402
from zg import models  # noqa: E402
from zg.engine import Engine  # noqa: E402
from zg.observe import AuditSyncs, Trace  # noqa: E402
from zg.envelope import Envelope, worst_case_sizes  # noqa: E402
from zg.profile import gpu_execution_fraction  # noqa: E402
from _machine import machine_note, table, write_json  # noqa: E402

FANOUTS = [15, 10, 5]
HIDDEN, LAYERS, DROPOUT = 256, 3, 0.5        # the measured model: 3-layer SAGE, hidden 256
VARIANTS = ("dynamic", "envelope_eager", "envelope_captured")


def build_engine(g, device, batch_size, variant, envelope, seed=0, audit_iterations=2):
    """The check's engine for one variant (also bench/gpu_sync_sources.py's): the measured model
    (SAGE, HIDDEN, LAYERS, FANOUTS) seeded with ``seed``; "dynamic" (mode "dynamic",
    host-mediated sampling), "envelope_eager" (mode "eager": fixed shapes, no capture) or
    "envelope_captured" (mode "graph", one CUDA Graph, on a GPU; mode "static", the same step
    run eagerly, on a CPU). ``audit_iterations`` steady iterations per epoch run under SyncAudit."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    torch.manual_seed(seed)
    model = models.SAGE(g.feat_dim, HIDDEN, max(g.num_classes, 1), LAYERS, dropout=DROPOUT)
    captured = "graph" if torch.device(device).type == "cuda" else "static"
    mode = {"dynamic": "dynamic", "envelope_eager": "eager", "envelope_captured": captured}[variant]
    if mode == "dynamic":
        envelope = "profiled"          # unused: the dynamic mode has no envelope
    eng = Engine(g, model, FANOUTS, batch_size, envelope, mode=mode, device=device, seed=seed)
    eng.observers = [AuditSyncs(audit_iterations)] if audit_iterations else []
    return eng


def _params(eng):
    return [p.detach().clone() for p in eng.model.parameters()]


def numerics_check(g, device):
    """Several batches, two epochs: the captured graph, the same static step uncaptured, and the
    eager pipeline apply the same batches (trace) and agree on the parameters; a tiny envelope
    (overflow, rewind) agrees with the worst case. Bitwise on the CPU, a tolerance on a GPU."""
    out = {}

    def run(mode, envelope="worst_case"):
        torch.manual_seed(0)
        model = models.SAGE(g.feat_dim, 64, max(g.num_classes, 1), 2, dropout=0.5)
        eng = Engine(g, model, [10, 10], 32, envelope, mode=mode, device=device, seed=0)
        eng.observers = [Trace()]
        for _ in range(2):
            eng.train_epoch()
        return eng

    captured = run("graph" if device.type == "cuda" else "static")
    static = run("static")
    eager = run("eager")
    tiny = run("graph" if device.type == "cuda" else "static", Envelope([300, 64]))
    ref_trace = static.applied_trace()
    out["batches_per_epoch"] = len(static.batches(0))
    out["captured"] = captured.graph is not None
    for name, eng in (("captured", captured), ("eager", eager), ("tiny_envelope", tiny)):
        diff = max(float((p - q).abs().max()) for p, q in zip(_params(eng), _params(static)))
        out[f"{name}_vs_static_max_abs_param_diff"] = diff
        out[f"{name}_same_batches"] = [t[:2] for t in eng.applied_trace()] == [t[:2] for t in ref_trace]
        out[f"{name}_same_node_sets"] = eng.applied_trace() == ref_trace
    out["tiny_envelope_overflows"] = sum(h.overflows for h in tiny.history)
    # Equal envelope sizes: bitwise on the CPU; a grown envelope re-associates sums (1e-5).
    tolerance = {"captured": 0.0 if device.type == "cpu" else 1e-4,
                 "eager": 0.0 if device.type == "cpu" else 1e-4, "tiny_envelope": 1e-5 if device.type == "cpu" else 1e-4}
    out["tolerance"] = tolerance
    out["agree"] = all(out[f"{n}_vs_static_max_abs_param_diff"] <= tol and out[f"{n}_same_batches"]
                       for n, tol in tolerance.items()) and out["tiny_envelope_overflows"] >= 1
    return out


def measure(g, device, batch_size, variant, envelope, max_batches, seed=0):
    """One epoch (or max_batches) of one variant; returns seconds, syncs, fraction, memory."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)       # before building: the graph's pool counts
    eng = build_engine(g, device, batch_size, variant, envelope, seed=seed)
    eng.train_epoch(max_batches=2)                        # warm-up (not timed; captures on a GPU)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    stats = eng.train_epoch(max_batches=max_batches)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    fraction = gpu_execution_fraction(lambda i: eng.run_batch(i), 10) if device.type == "cuda" else None
    row = {"variant": variant, "batch_size": batch_size, "iterations": stats.iterations,
           "seconds": stats.seconds, "seconds_per_iteration": stats.seconds / max(stats.iterations, 1),
           "full_epoch": max_batches is None, "host_syncs_per_iteration": stats.host_syncs,
           "cuda_sync_warnings_per_iteration": stats.cuda_sync_warnings,
           "overflows": stats.overflows, "gpu_execution_fraction": fraction,
           "captured": eng.graph is not None,
           "peak_bytes": int(torch.cuda.max_memory_allocated(device)) if device.type == "cuda" else None,
           "peak_reserved_bytes": int(torch.cuda.max_memory_reserved(device)) if device.type == "cuda" else None,
           "envelope": None if eng.envelope is None else eng.envelope.sizes,
           # The work of one iteration (bench/network.py bounds a worker's compute with these).
           "feat_dim": g.feat_dim, "hidden_dim": HIDDEN, "num_layers": LAYERS, "fanouts": FANOUTS}
    if eng.envelope is not None:
        row["model_bytes"] = eng.memory_model()["totals"]
    return row


def data_parallel_rows(g, budget_left, epochs=2):
    """zg.parallel on 1 and N GPUs (N = all here), the same global batch: epoch seconds and the
    speed-up. Runs only with more than one GPU."""
    from zg import parallel

    rows = []
    count = torch.cuda.device_count()
    for workers in (1, count):
        hist = parallel.train(g, workers=workers, epochs=epochs, batch_size=4096, fanouts=FANOUTS,
                              hidden_dim=256, evaluate=False, backend="nccl",
                              run_timeout=max(30.0, budget_left / 2))
        rows.append({"workers": workers, "seconds_per_epoch": hist["seconds_per_epoch"],
                     "captured": hist["captured"],
                     "host_syncs": [e["host_syncs"] for e in hist["epochs"]]})
    rows.append({"speedup": rows[0]["seconds_per_epoch"] / rows[1]["seconds_per_epoch"],
                 "workers": count})
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--budget", type=float, default=300.0, help="seconds for everything (default 300)")
    ap.add_argument("--nodes", type=int, default=1_000_000, help="csbm size on a GPU")
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--seed", type=int, default=0,
                    help="seed for the models, the engines' sampling and the envelope profile (the graphs stay seed 0)")
    ap.add_argument("--name", default=None,
                    help="write bench/results/<name>.json instead of gpu_check_<cuda|cpu>.json")
    ap.add_argument("--max-batches", type=int, default=None,
                    help="iterations per measured run (default: a full epoch on a GPU, 20 on a CPU)")
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    tag = "cuda" if cuda else "cpu"
    result = {"benchmark": "gpu_check", "machine": machine_note(), "settings": vars(args),
              "numerics": None, "rows": [], "data_parallel": None, "ratios": {}, "skipped": [],
              "errors": [], "complete": False,
              "note": ("dynamic allocates each batch's exact sizes, so its peak is the oracle's; "
                       "worst_case_captured is the never-overflowing envelope.")}
    skipped, errors, rows = result["skipped"], result["errors"], result["rows"]

    def save():
        result["seconds_total"] = time.perf_counter() - t_start
        return write_json(args.name or f"gpu_check_{tag}", result)

    def guarded(name, fn):
        try:
            return fn()
        except (torch.cuda.OutOfMemoryError, MemoryError) as exc:
            skipped.append(f"{name}: out of memory ({str(exc)[:200]})")
        except Exception as exc:                         # keep every other row
            errors.append({"row": name, "error": f"{type(exc).__name__}: {str(exc)[:500]}",
                           "traceback": traceback.format_exc()[-2000:]})
            print(f"  {name}: ERROR {type(exc).__name__}: {exc}")
        finally:
            save()
        return None

    print(f"device: {torch.cuda.get_device_name(device) if cuda else 'CPU (no CUDA here)'}; torch {torch.__version__}")
    if not cuda:
        skipped.append("CUDA Graph capture (no CUDA): the 'captured' variant runs the same static step eagerly")
        skipped.append("GPU execution fraction (no CUDA)")
        skipped.append(f"csbm with {args.nodes:,} nodes (CPU run uses 20,000 nodes)")
    cora = zg.datasets.load("cora").to(device)
    check = guarded("numerics", lambda: numerics_check(cora, device))
    result["numerics"] = check
    if check is not None:
        print(f"captured vs static vs eager vs tiny envelope (2 epochs, {check['batches_per_epoch']} batches): "
              f"{'agree' if check['agree'] else 'DISAGREE'}; captured={check['captured']}, "
              f"max diffs {check['captured_vs_static_max_abs_param_diff']:.1e} / "
              f"{check['eager_vs_static_max_abs_param_diff']:.1e} / "
              f"{check['tiny_envelope_vs_static_max_abs_param_diff']:.1e}")
    save()

    graphs = {"cora": cora}
    nodes = args.nodes if cuda else 20_000
    t0 = time.perf_counter()
    big = guarded("csbm", lambda: zg.datasets.csbm(num_nodes=nodes, avg_degree=20, num_classes=10,
                                                   feat_dim=128, seed=0).to(device))
    if big is not None:
        graphs[f"csbm_{nodes}"] = big
        print(f"csbm {nodes:,} nodes generated in {time.perf_counter() - t0:.1f} s")
    max_batches = args.max_batches if cuda else (args.max_batches or 20)
    if not cuda and args.max_batches is None:
        skipped.append("full epochs on the CPU (each CPU run is 20 iterations)")

    for gname, g in graphs.items():
        for batch_size in args.batch_sizes:
            envelope = guarded(f"{gname} b{batch_size} profile",
                               lambda: Envelope.profile(g, FANOUTS, min(batch_size, g.train_idx.numel()),
                                                                seed=args.seed))
            worst = Envelope.worst_case(g, FANOUTS, min(batch_size, g.train_idx.numel()))
            for variant, env in (("dynamic", None), ("envelope_eager", envelope),
                                 ("envelope_captured", envelope), ("worst_case_captured", worst)):
                if variant != "dynamic" and env is None:
                    continue
                if time.perf_counter() - t_start > args.budget * 0.8:
                    skipped.append(f"{gname} batch {batch_size} {variant} (time budget)")
                    continue
                row = guarded(f"{gname} b{batch_size} {variant}",
                              lambda: measure(g, device, batch_size,
                                              "envelope_captured" if variant == "worst_case_captured" else variant,
                                              env, max_batches, args.seed))
                if row is None:
                    continue
                row["variant"], row["graph"] = variant, gname
                if envelope is not None:
                    row["oracle_mean_counts"] = envelope.observed.double().mean(0).tolist()
                row["worst_case_sizes"] = worst_case_sizes(g.num_nodes, FANOUTS, batch_size)
                rows.append(row)
                save()
                print(f"  {gname:14s} b={batch_size:5d} {variant:20s} {row['seconds_per_iteration'] * 1e3:8.2f} ms/it"
                      f"  syncs/it={row['host_syncs_per_iteration']} (cuda debug: {row['cuda_sync_warnings_per_iteration']})"
                      f"  gpu_frac={row['gpu_execution_fraction']}  peak={row['peak_bytes']}")

    if cuda and torch.cuda.device_count() > 1 and "csbm" in "".join(graphs):
        left = args.budget - (time.perf_counter() - t_start)
        if left > 60:
            result["data_parallel"] = guarded("data_parallel", lambda: data_parallel_rows(big.to("cpu"), left))
        else:
            skipped.append("data-parallel scaling (time budget)")
    elif not cuda or torch.cuda.device_count() < 2:
        skipped.append("data-parallel scaling across GPUs (needs more than one GPU; the CPU "
                       "scaling is in bench/results/parallel.json)")

    ratios = result["ratios"]
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
    if errors:
        print("\nerrors:")
        for e in errors:
            print(f"  - {e['row']}: {e['error']}")
    result["complete"] = True
    path = save()
    print(f"\nwrote {path} in {time.perf_counter() - t_start:.0f} s")
    return 0 if check is not None and check["agree"] and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
