"""Sampling benchmark: DGL vs zg dynamic vs zg envelope, side by side in one run.

    .venv/bin/python bench/sampling.py            # the issue's setting (csbm 200k, ~10 min on 2 cores)
    .venv/bin/python bench/sampling.py --nodes 20000 --name sampling_small   # a quick look

Setting: csbm with 200k nodes, average degree 20, 128 features, 10 classes; fanouts
[15, 10, 5], batch 1024, 3-layer SAGE with hidden size 256. The three pipelines share the
seed order, the model configuration, the loss, the optimizer and the loop (zg.pipeline); they
differ only in the sampler and pipeline.

Measured per pipeline: seconds per epoch of sampling only (best of ``--repeats``) and of a full
training epoch, with a per-stage breakdown; host syncs per iteration (zg.audit.SyncAudit, for
the zg pipelines: DGL's sampler runs in C++, below the dispatcher); envelope sizes and the
bytes they cost against worst case and the oracle (each batch's exact sizes, from the counts
of the measured epoch); the overflow rate. Writes bench/results/<name>.json.
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
from zg.audit import SyncAudit  # noqa: E402
from zg.pipeline import DynamicPipeline, EnvelopePipeline  # noqa: E402
from _machine import machine_note, table, write_json  # noqa: E402


def syncs_per_iteration(pipe, iterations=3, sample_only=False):
    """Host syncs and data-dependent-shape ops per iteration, after one warm-up iteration."""
    batches = list(pipe.batches(99))[: iterations + 1]
    b, seeds = batches[0]
    pipe.sample(seeds, 99, b) if sample_only else pipe.train_step(seeds, 99, b)
    with SyncAudit() as audit:
        for b, seeds in batches[1:]:
            pipe.sample(seeds, 99, b) if sample_only else pipe.train_step(seeds, 99, b)
    n = len(batches) - 1
    return {"host_syncs": audit.host_syncs / n, "dynamic_shape_ops": audit.dynamic_shape_ops / n}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=200_000)
    ap.add_argument("--degree", type=int, default=20)
    ap.add_argument("--feat-dim", type=int, default=128)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    ap.add_argument("--repeats", type=int, default=2, help="sampling epochs per pipeline (best is kept)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="sampling")
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)

    from zg.baselines.dgl import DGLModel, DGLPipeline

    t0 = time.perf_counter()
    g = zg.datasets.csbm(num_nodes=args.nodes, avg_degree=args.degree, num_classes=10,
                         feat_dim=args.feat_dim, seed=args.seed)
    print(f"graph: {g}  ({time.perf_counter() - t0:.1f} s)")
    common = dict(fanouts=args.fanouts, batch_size=args.batch_size, seed=args.seed)
    layers = len(args.fanouts)

    def zg_model():
        torch.manual_seed(args.seed)
        return models.SAGE(args.feat_dim, args.hidden, 10, layers)

    t0 = time.perf_counter()
    envelope_pipe = EnvelopePipeline(g, zg_model(), envelope="profiled", **common)
    profile_seconds = time.perf_counter() - t0
    print(f"envelope: {envelope_pipe.envelope}  (profiled in {profile_seconds:.1f} s)")
    torch.manual_seed(args.seed)
    pipes = {
        "dgl": DGLPipeline(g, DGLModel("sage", args.feat_dim, args.hidden, 10, layers), **common),
        "zg_dynamic": DynamicPipeline(g, zg_model(), **common),
        "zg_envelope": envelope_pipe,
    }

    results = {}
    for name, pipe in pipes.items():
        sample_times = [pipe.sample_epoch(epoch=r).seconds for r in range(args.repeats)]
        if name == "zg_envelope":
            pipe.take_counts()
        train = pipe.train_epoch(epoch=args.repeats, stages=True)
        results[name] = {
            "sample_epoch_seconds": min(sample_times),
            "sample_epoch_seconds_all": sample_times,
            "train_epoch_seconds": train.seconds,
            "train_stage_seconds": train.stage_seconds,
            "iterations": train.iterations,
            "train_loss": train.loss,
        }
        print(f"{name:12s} sample/epoch {min(sample_times):7.2f} s   train/epoch {train.seconds:7.2f} s")

    # Metadata: host syncs (zg pipelines), envelope memory, overflows.
    for name in ("zg_dynamic", "zg_envelope"):
        results[name]["syncs_per_iteration_sampling"] = syncs_per_iteration(pipes[name], sample_only=True)
        results[name]["syncs_per_iteration_training"] = syncs_per_iteration(pipes[name])
    oracle_counts = envelope_pipe.take_counts()          # the measured training epoch's counts
    overflows = envelope_pipe.overflow_count()
    sampled_batches = (args.repeats + 1) * envelope_pipe.num_batches() + 8   # epochs + audit batches
    env = envelope_pipe.envelope
    mm = env.memory_model(args.feat_dim, args.hidden, 10, oracle_counts=oracle_counts)
    totals = mm["totals"]
    memory = {
        "envelope_sizes": env.sizes,
        "worst_case_sizes": zg.envelope.worst_case_sizes(g.num_nodes, args.fanouts, args.batch_size),
        "oracle_mean_counts": oracle_counts.double().mean(0).tolist(),
        "oracle_max_counts": oracle_counts.max(0).values.tolist(),
        "bytes": totals,
        "envelope_over_oracle_mean": totals["envelope"] / totals["oracle_mean"],
        "envelope_over_oracle_max": totals["envelope"] / totals["oracle_max"],
        "envelope_over_worst_case": totals["envelope"] / totals["worst_case"],
        "per_block": mm,
        "profile_seconds": profile_seconds,
        "profile_settings": env.settings,
    }
    overflow = {"overflowed_batches": overflows, "sampled_batches": sampled_batches,
                "rate": overflows / sampled_batches}

    # Context for the memory target: on this uniform-degree graph the input hop reaches almost
    # every node, so the worst case (capped at N) is nearly tight. Graphs whose degrees fall
    # below the fanouts or are skewed show the envelope's real margin; profile two of them.
    context = {}
    for label, other in (("cora", zg.datasets.load("cora")),
                         ("csbm_powerlaw", zg.datasets.csbm(num_nodes=args.nodes, avg_degree=args.degree,
                                                            num_classes=10, feat_dim=8, degree="powerlaw",
                                                            seed=args.seed))):
        e = zg.Envelope.profile(other, args.fanouts, args.batch_size, seed=args.seed)
        t = e.memory_model(args.feat_dim, args.hidden, 10)["totals"]
        context[label] = {"envelope_sizes": e.sizes,
                          "worst_case_sizes": zg.envelope.worst_case_sizes(other.num_nodes, args.fanouts, args.batch_size),
                          "envelope_over_worst_case": t["envelope"] / t["worst_case"],
                          "envelope_over_oracle_mean": t["envelope"] / t["oracle_mean"]}
    memory["other_graphs"] = context

    dgl_s, env_s = results["dgl"], results["zg_envelope"]
    ratios = {
        "sampling_speedup_envelope_vs_dgl": dgl_s["sample_epoch_seconds"] / env_s["sample_epoch_seconds"],
        "sampling_speedup_envelope_vs_dynamic": results["zg_dynamic"]["sample_epoch_seconds"] / env_s["sample_epoch_seconds"],
        "training_speedup_envelope_vs_dgl": dgl_s["train_epoch_seconds"] / env_s["train_epoch_seconds"],
        "training_speedup_envelope_vs_dynamic": results["zg_dynamic"]["train_epoch_seconds"] / env_s["train_epoch_seconds"],
    }
    targets = {
        "envelope sampling >= 1.5x faster than DGL": ratios["sampling_speedup_envelope_vs_dgl"] >= 1.5,
        "envelope training epoch no slower than DGL": ratios["training_speedup_envelope_vs_dgl"] >= 1.0,
        "0 host syncs per envelope iteration": env_s["syncs_per_iteration_training"]["host_syncs"] == 0,
        "profiled memory <= 1.15x oracle (mean)": memory["envelope_over_oracle_mean"] <= 1.15,
        "profiled memory <= 0.5x worst case": memory["envelope_over_worst_case"] <= 0.5,
        "overflow rate <= 1%": overflow["rate"] <= 0.01,
    }

    rows = [[name, f"{r['sample_epoch_seconds']:.2f}", f"{r['train_epoch_seconds']:.2f}",
             f"{r.get('syncs_per_iteration_training', {}).get('host_syncs', float('nan')):.1f}"]
            for name, r in results.items()]
    print()
    print(table(rows, ["pipeline", "sample s/epoch", "train s/epoch", "host syncs/iter"]))
    print()
    for k, v in ratios.items():
        print(f"{k:40s} {v:6.2f}x")
    print(f"{'envelope / oracle (mean) bytes':40s} {memory['envelope_over_oracle_mean']:6.2f}x")
    print(f"{'envelope / worst case bytes':40s} {memory['envelope_over_worst_case']:6.2f}x")
    print(f"{'overflow rate':40s} {overflow['rate']:6.2%}")
    for label, c in context.items():
        print(f"  memory on {label:14s} envelope/worst {c['envelope_over_worst_case']:.2f}x  "
              f"envelope/oracle {c['envelope_over_oracle_mean']:.2f}x  sizes {c['envelope_sizes']}")
    print()
    for k, ok in targets.items():
        print(f"  [{'met' if ok else 'MISSED'}] {k}")

    path = write_json(args.name, {
        "benchmark": "sampling", "machine": machine_note(), "settings": vars(args),
        "graph": g.summary(), "results": results, "ratios": ratios, "memory": memory,
        "overflow": overflow, "targets": targets,
    })
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
