"""The fused kernel's compact stage: the sequential dedup against the multithreaded one, A/B.

    .venv/bin/python bench/compact.py                  # products_like (2.4M nodes), 2 threads
    .venv/bin/python bench/compact.py --nodes 200000   # a smaller products_like graph

Times :func:`zg._fused.sample_fused` alone (no pipeline, no features) on the same batches of
the products-scale graph, with the sequential ``compact`` on every hop ("serial") and with
``compact_parallel`` on every hop of at least ``--min-slots`` slots ("parallel"), the two
alternating in one process, every repeat timing every batch once per variant. Two
measures per variant and repeat: the whole kernel call (one compiled call per batch, as the
pipelines run it) and the compact stage alone (the hop-by-hop path with a stage clock, summing
the "compact" intervals). Reported: the medians over repeats and the median of the paired
per-repeat ratios; also the process's CPU seconds (all threads), the work each variant does,
which a loaded machine distorts less than the wall clock. Both variants' outputs are checked
equal on every batch before timing.
Writes bench/results/compact.json with the machine note.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import zg  # noqa: E402
from zg.rng import batch_key  # noqa: E402
from zg import _fused  # noqa: E402
from _machine import machine_note, table, write_json  # noqa: E402

SERIAL = 2**62          # parallel_min_slots that no hop reaches: the sequential compact everywhere


def run_batches(sampler, batches, fanouts, sizes, min_slots, clock=None):
    """Every batch through the kernel; returns the outputs of the last one."""
    out = None
    for seeds, key in batches:
        out = _fused.sample_fused(sampler.g.indptr, sampler.g.indices, seeds,
                                  torch.tensor(seeds.numel()), key, fanouts, sizes,
                                  sampler.replace, sampler.max_degree, sampler._marker,
                                  clock=clock, workspace=sampler._workspace,
                                  parallel_min_slots=min_slots)
    return out


class StageClock:
    """clock(stage): adds the seconds since the previous call to that stage's total, wall clock
    and this process's CPU time (all threads: the work, whatever else the machine runs)."""

    def __init__(self):
        self.totals = {"sample": 0.0, "compact": 0.0}
        self.cpu = {"sample": 0.0, "compact": 0.0}
        self.last = self.last_cpu = None

    def start(self):
        self.last, self.last_cpu = time.perf_counter(), time.process_time()

    def __call__(self, stage):
        now, now_cpu = time.perf_counter(), time.process_time()
        self.totals[stage] += now - self.last
        self.cpu[stage] += now_cpu - self.last_cpu
        self.last, self.last_cpu = now, now_cpu


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=2_400_000)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5], help="input layer first")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=20, help="batches timed per repeat and variant")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--min-slots", type=int, default=32_768,
                    help="the parallel variant's parallel_min_slots (smaller hops stay sequential)")
    ap.add_argument("--name", default="compact")
    args = ap.parse_args(argv)
    if args.repeats < 5:
        raise SystemExit(f"--repeats must be >= 5 (medians), got {args.repeats}")
    torch.set_num_threads(args.threads)          # the fused kernel follows torch's thread count

    load_before = os.getloadavg()
    t0 = time.perf_counter()
    g = zg.datasets.products_like(num_nodes=args.nodes, avg_degree=50, feat_dim=100,
                                  num_classes=47, seed=args.seed)
    load_seconds = time.perf_counter() - t0
    env = zg.Envelope.profile(g, args.fanouts, args.batch_size, seed=args.seed)
    sampler = zg.EnvelopeSampler(g, args.fanouts, args.batch_size, envelope=env, seed=args.seed,
                                 kernel="fused")
    torch.set_num_threads(args.threads)   # (numba's first parallel launch may have reset it)
    threads = _fused.set_threads()
    fanouts = list(reversed(sampler.effective_fanouts))               # seeds outward
    sizes = list(reversed(sampler.sizes))
    rows = [args.batch_size] + sizes[:-1]
    slots = [r * k for r, k in zip(rows, fanouts)]
    print(f"graph: {g.num_nodes:,} nodes, {g.num_edges:,} edges (loaded in {load_seconds:.1f} s); "
          f"envelope {env.sizes}; slots per hop (seeds outward) {slots}; "
          f"{threads} threads; parallel compact on hops of >= {args.min_slots} slots")

    gen = torch.Generator().manual_seed(args.seed)
    order = g.train_idx[torch.randperm(g.train_idx.numel(), generator=gen)]
    batches = [(order[b * args.batch_size:(b + 1) * args.batch_size].contiguous(),
                torch.tensor(batch_key(args.seed, 0, b))) for b in range(args.batches)]
    variants = {"serial": SERIAL, "parallel": args.min_slots}

    # Same outputs (and warm caches) before timing.
    for seeds, key in batches:
        results = [run_batches(sampler, [(seeds, key)], fanouts, sizes, m) for m in variants.values()]
        (ha, *ca), (hb, *cb) = results
        assert all(torch.equal(x, y) for x, y in zip(ca, cb)), "counts differ"
        assert all(torch.equal(x, y) for a, b in zip(ha, hb) for x, y in zip(a, b)), "blocks differ"
    assert not sampler._workspace.bitmap.any()             # the seen bitmap is left all zero

    kernel = {name: [] for name in variants}
    kernel_cpu = {name: [] for name in variants}
    compact_cpu = {name: [] for name in variants}
    compact = {name: [] for name in variants}
    sample = {name: [] for name in variants}
    for r in range(args.repeats):
        names = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in names:
            start, start_cpu = time.perf_counter(), time.process_time()
            run_batches(sampler, batches, fanouts, sizes, variants[name])
            kernel[name].append(time.perf_counter() - start)
            kernel_cpu[name].append(time.process_time() - start_cpu)
            clock = StageClock()

            def timed(stage, clock=clock):
                clock(stage)

            for batch in batches:
                clock.start()
                run_batches(sampler, [batch], fanouts, sizes, variants[name], clock=timed)
            compact[name].append(clock.totals["compact"])
            compact_cpu[name].append(clock.cpu["compact"])
            sample[name].append(clock.totals["sample"])
        print(f"repeat {r}: kernel serial {kernel['serial'][-1]:.3f} s, parallel {kernel['parallel'][-1]:.3f} s; "
              f"compact serial {compact['serial'][-1]:.3f} s, parallel {compact['parallel'][-1]:.3f} s")

    med = statistics.median
    summary = {
        name: {"kernel_seconds": med(kernel[name]), "kernel_seconds_all": kernel[name],
               "compact_seconds": med(compact[name]), "compact_seconds_all": compact[name],
               "sample_seconds": med(sample[name]), "sample_seconds_all": sample[name],
               "kernel_cpu_seconds": med(kernel_cpu[name]), "kernel_cpu_seconds_all": kernel_cpu[name],
               "compact_cpu_seconds": med(compact_cpu[name]),
               "compact_cpu_seconds_all": compact_cpu[name]}
        for name in variants}
    ratios = {
        "kernel_speedup_parallel_vs_serial": med(kernel["serial"]) / med(kernel["parallel"]),
        "kernel_speedup_paired_median": med([a / b for a, b in zip(kernel["serial"], kernel["parallel"])]),
        "compact_speedup_parallel_vs_serial": med(compact["serial"]) / med(compact["parallel"]),
        "compact_speedup_paired_median": med([a / b for a, b in zip(compact["serial"], compact["parallel"])]),
        "kernel_cpu_parallel_over_serial": med(kernel_cpu["parallel"]) / med(kernel_cpu["serial"]),
        "compact_cpu_parallel_over_serial": med(compact_cpu["parallel"]) / med(compact_cpu["serial"]),
    }
    print(table([[name, f"{s['kernel_seconds']:.3f}", f"{s['sample_seconds']:.3f}",
                  f"{s['compact_seconds']:.3f}"] for name, s in summary.items()],
                ["compact", f"kernel s / {args.batches} batches", "sample s (hop by hop)",
                 "compact s (hop by hop)"]))
    for k, v in ratios.items():
        print(f"{k:36s} {v:6.2f}x")
    path = write_json(args.name, {
        "benchmark": "compact", "command": "python bench/compact.py " + " ".join(argv or sys.argv[1:]),
        "machine": machine_note(), "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "settings": {**vars(args), "threads_used": threads,
                     "default_parallel_min_slots": _fused.PARALLEL_MIN_SLOTS},
        "graph": {"num_nodes": g.num_nodes, "num_edges": g.num_edges},
        "envelope_sizes": env.sizes, "slots_per_hop_seeds_outward": slots,
        "results": summary, "ratios": ratios})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
