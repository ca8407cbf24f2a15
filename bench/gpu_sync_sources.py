"""Where the CUDA syncs of each pipeline come from, on a GPU: torch's sync-debug mode warns at
every operation that makes the host wait on the device; this records the zg source line (the
innermost frame inside ``zg/``) of each warning over a few steady iterations of the dynamic
pipeline, the eager envelope pipeline and the captured one. Needs only torch and numpy.

    python bench/gpu_sync_sources.py            # writes bench/results/gpu_sync_sources.json

On a machine without CUDA it says so and writes nothing: the sync-debug mode is CUDA's.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import cProfile
import pstats
import sys
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import machine_note, write_json
from gpu_check import FANOUTS, VARIANTS, build_engine

import zg
from zg import kernels
from zg.engine import Engine
from zg.envelope import Envelope
from zg.experiments.results import headline

ZG_DIR = str(Path(zg.__file__).resolve().parent)


def _site() -> str:
    """The innermost frame inside the zg package, as 'file.py:line in function'."""
    for frame in reversed(traceback.extract_stack()):
        if frame.filename.startswith(ZG_DIR):
            return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"
    return "outside zg"


def sync_sites(eng: Engine, iterations: int) -> Counter:
    sites: Counter = Counter()
    previous = warnings.showwarning

    def record(message, category, filename, lineno, file=None, line=None):
        if "synchroniz" in str(message).lower():
            sites[_site()] += 1

    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for b in range(iterations):
                eng.run_batch(2 + b)
        finally:
            torch.cuda.set_sync_debug_mode("default")
            warnings.showwarning = previous
    torch.cuda.synchronize()
    return sites


def host_profile(g, batch_size: int, iterations: int) -> dict:
    """Where the host spends a captured iteration: cProfile over ``iterations`` calls of
    ``run_batch`` (each only queues work; one synchronize at the end), the top functions by
    cumulative time, and the host seconds per call against the GPU seconds per call."""
    envelope = Envelope.profile(g, FANOUTS, batch_size, seed=0)
    eng = build_engine(g, g.device, batch_size, "envelope_captured", envelope, audit_iterations=0)
    cuda = g.device.type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    eng.train_epoch(max_batches=2)
    sync()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for b in range(iterations):
        eng.run_batch(2 + b)
    prof.disable()
    host = time.perf_counter() - t0
    sync()
    total = time.perf_counter() - t0
    replay = float("nan")
    if eng.cuda_graph is not None:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            eng.cuda_graph.replay()
        end.record()
        sync()
        replay = start.elapsed_time(end) / 1e3
    stats = pstats.Stats(prof)
    rows = []
    for (filename, line, name), (_cc, nc, tt, ct, _) in stats.stats.items():
        rows.append(
            {
                "function": f"{Path(filename).name}:{line} {name}",
                "calls_per_iteration": nc / iterations,
                "cumulative_ms_per_iteration": ct * 1e3 / iterations,
                "own_ms_per_iteration": tt * 1e3 / iterations,
            }
        )
    rows.sort(key=lambda r: -r["own_ms_per_iteration"])
    return {
        "batch_size": batch_size,
        "iterations": iterations,
        "host_ms_per_iteration_profiled": host * 1e3 / iterations,
        "total_ms_per_iteration_profiled": total * 1e3 / iterations,
        "graph_replay_only_ms_per_iteration": replay * 1e3 / iterations,
        "top_own_time": rows[:20],
    }


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument(
        "--profile-nodes",
        type=int,
        default=1_000_000,
        help="csbm size for the host profile of a captured iteration (0: skip)",
    )
    ap.add_argument("--profile-batch-sizes", type=int, nargs="+", default=[256, 4096])
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA here: torch's sync-debug mode reports only CUDA syncs; nothing written")
        return 0
    device = torch.device("cuda", 0)
    g = zg.datasets.load("cora").to(device)
    envelope = Envelope.profile(g, FANOUTS, args.batch_size, seed=0)
    result = {
        "benchmark": "gpu_sync_sources",
        "machine": machine_note(),
        "settings": {**vars(args), "kernel": kernels.resolve("auto", device)},
        "graph": "cora",
        "variants": {},
    }
    for variant in VARIANTS:
        eng = build_engine(g, device, args.batch_size, variant, envelope, audit_iterations=0)
        eng.train_epoch(max_batches=2)  # warm-up; captures the graph
        sites = sync_sites(eng, args.iterations)
        total = sum(sites.values())
        result["variants"][variant] = {
            "syncs_per_iteration": total / args.iterations,
            "sites_per_iteration": {k: v / args.iterations for k, v in sites.most_common()},
        }
        print(f"{variant:18s} {total / args.iterations:5.1f} syncs/it")
        for k, v in sites.most_common():
            print(f"    {v / args.iterations:5.1f}  {k}")
    if args.profile_nodes:
        big = zg.datasets.csbm(
            num_nodes=args.profile_nodes, avg_degree=20, num_classes=10, feat_dim=128, seed=0
        ).to(device)
        result["host_profile"] = {"graph": f"csbm_{args.profile_nodes}", "rows": []}
        for bs in args.profile_batch_sizes:
            row = host_profile(big, bs, 30)
            result["host_profile"]["rows"].append(row)
            print(
                f"captured b={bs}: host {row['host_ms_per_iteration_profiled']:.2f} ms/it (profiled), "
                f"total {row['total_ms_per_iteration_profiled']:.2f}, replay only "
                f"{row['graph_replay_only_ms_per_iteration']:.2f}"
            )
            for r in row["top_own_time"][:12]:
                print(
                    f"    {r['own_ms_per_iteration']:7.3f} ms own  {r['calls_per_iteration']:6.1f} calls  {r['function']}"
                )
    path = write_json("gpu_sync_sources", result)
    print(f"wrote {path}")
    return 0


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a gpu_sync_sources result (bench/_headlines.py calls it)."""
    return [
        headline(
            f"syncs_{variant}",
            v["syncs_per_iteration"],
            "per iteration",
            where=f"{doc['detail'].get('graph')}, host syncs per iteration",
            higher_is_better=False,
        )
        for variant, v in (doc["detail"].get("variants") or {}).items()
    ]


if __name__ == "__main__":
    sys.exit(main())
