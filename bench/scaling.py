"""Cost growth: training time per batch against graph size and batch size, DGL vs zg, in one run.

    .venv/bin/python bench/scaling.py              # the issue's sweep (estimated 12-15 min on 2
                                                   #  quiet cores, plus generating the graphs once)
    .venv/bin/python bench/scaling.py --quick      # a tiny run (a minute): checks the script

Graphs: :func:`zg.datasets.products_like` (the shape of ogbn-products: power-law degrees
averaging 50, 100 float32 features, 47 classes, 8% of nodes train) at 100k, 400k, 1.2M and
2.4M nodes, the same degree and features at every size; cached under bench/data/ (gitignored),
so only the first run generates them. Model: 3-layer SAGE, hidden 256, fanouts [15, 10, 5].

Two sweeps:
  * size:  every graph size at batch size ``--size-batch`` (1024);
  * batch: batch sizes 256 ... 4096 on the largest graph (``--batch-graph``).

Pipelines, same seed order, same batches, same model configuration, same torch thread count:
  * dgl:          zg.Engine(mode="dgl") (DGL's NeighborSampler + DataLoader + dgl.nn);
  * zg_dynamic:   zg.Engine(mode="dynamic"), the host-mediated reference;
  * zg_envelope:  zg.Engine(mode="static"): the static envelope step (profiled envelope).

A full epoch on 2.4M nodes takes long on two cores, so each point times ``--batches`` batches
after ``--warmup`` batches (the first batches of epoch 0) and reports seconds per batch
(mean and standard deviation over the timed batches) and the *projected* epoch time, seconds
per batch times the batches in an epoch: it is labelled as projected in the JSON. Every timed
batch also runs the stage clock (zg.step.StageClock: perf_counter laps, no synchronisation on
the CPU), so each point records where its time goes: sample, compact, gather, forward, loss,
backward, step. Setup (building the pipeline; the envelope's profiling pass) is timed apart. If the envelope
overflows during the timed batches (later steps would be skipped on the device), it grows as
the Engine's epoch loop grows it and the point is timed again; the JSON counts the regrowths.
The load average is recorded before and after, beside the machine note.

The run time is an estimate: on a loaded machine (load average 28 on 2 cores) one batch of
1024 on the 2.4M-node graph took 7.8 s (DGL), 8.0 s (zg dynamic) and 9.5 s (zg envelope),
building DGL's graph 54 s; on quiet cores expect several times less. ``--batches`` trades run
time against the spread of the per-batch mean; the JSON keeps every timed batch.
Writes bench/results/<name>.json (default scaling.json).
"""

from __future__ import annotations

import os
import sys


def _threads_from_argv(argv) -> int:
    """--threads, read before torch is imported (OpenMP reads its variables at load time)."""
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return int(argv[i + 1])
        if a.startswith("--threads="):
            return int(a.split("=", 1)[1])
    return 2


_THREADS = _threads_from_argv(sys.argv[1:])
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep
os.environ.setdefault("OMP_NUM_THREADS", str(_THREADS))
os.environ.setdefault("NUMBA_NUM_THREADS", str(_THREADS))
os.environ.setdefault("DGLBACKEND", "pytorch")

import argparse
import gc
import math
import statistics
import time
import warnings
from pathlib import Path

import torch

# DGL suggests pinning DataLoader workers to cores; with num_workers=0 there are none to pin.
warnings.filterwarnings("ignore", message="Dataloader CPU affinity opt is not enabled")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, pm, ran_kernel, short, table, write_json

import zg
from zg import models
from zg.engine import Engine
from zg.experiments.results import headline, mean_std
from zg.profile import peak_rss_bytes
from zg.step import STAGES, StageClock

DATA = Path(__file__).resolve().parent / "data"
PIPELINES = ("dgl", "zg_dynamic", "zg_envelope")


def load_average():
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


def graph_for(num_nodes, args):
    """The products_like graph of this size (cached), with how long it took and whether it was
    generated now (then the generation time is the one in the cache folder's note)."""
    kwargs = dict(
        num_nodes=num_nodes,
        avg_degree=args.degree,
        feat_dim=args.feat_dim,
        num_classes=args.classes,
        seed=args.graph_seed,
        cache_dir=args.cache_dir,
    )
    folder = zg.datasets.products_like_path(**kwargs)
    cached = (folder / "meta.json").is_file()
    start = time.perf_counter()
    g = zg.datasets.products_like(**kwargs)
    seconds = time.perf_counter() - start
    info = {
        "num_nodes": g.num_nodes,
        "num_edges": g.num_edges,
        "train_nodes": int(g.train_idx.numel()),
        "max_degree": int(g.in_degrees().max()),
        "edge_homophily": g.edge_homophily(),
        "cached": cached,
        "seconds": seconds,
        "folder": folder.name,
    }
    note = folder / "products_like.json"
    if note.is_file():
        import json

        info["generation_seconds"] = json.loads(note.read_text())["generation_seconds"]
    return g, info


def build(pipeline, g, batch_size, args):
    """The Engine of ``pipeline`` (mode "dgl", "dynamic" or "static") and ``run(b, stages)``,
    training on batch b of epoch 0 (adding each stage's seconds into ``stages`` unless None)."""
    layers = len(args.fanouts)
    torch.manual_seed(args.seed)
    if pipeline == "dgl":
        from zg.baselines.dgl import DGLModel

        model, mode, envelope = (
            DGLModel("sage", g.feat_dim, args.hidden, g.num_classes, layers),
            "dgl",
            "profiled",
        )
    else:
        model = models.SAGE(g.feat_dim, args.hidden, g.num_classes, layers)
        mode, envelope = ("dynamic", "profiled") if pipeline == "zg_dynamic" else ("static", None)
    if envelope is None:
        envelope = zg.Envelope.profile(
            g,
            args.fanouts,
            min(batch_size, g.train_idx.numel()),
            num_batches=args.profile_batches,
            seed=args.seed,
        )
    eng = Engine(
        g, model, args.fanouts, batch_size, envelope, mode=mode, seed=args.seed, kernel="auto"
    )
    eng.observers = []

    def run(b, stages):
        clock = None if stages is None else StageClock(None, into=stages)  # starts now
        return eng.run_batch(b, epoch=0, clock=clock)

    return eng, run, eng


def measure(pipeline, g, batch_size, args):
    start = time.perf_counter()
    obj, run, eng = build(pipeline, g, batch_size, args)
    setup = time.perf_counter() - start
    regrown = 0
    while True:
        for b in range(args.warmup):
            run(b, None)
        per_batch, stages = [], {s: 0.0 for s in STAGES}
        loss = None
        for b in range(args.warmup, args.warmup + args.batches):
            t0 = time.perf_counter()
            loss = run(b, stages)
            per_batch.append(time.perf_counter() - t0)
        if eng is None or eng.envelope is None or not bool(eng.overflowed) or regrown == 3:
            break
        # An overflowed envelope skips every later step on the device: a time that is not the
        # pipeline's. Grow it as the Engine's epoch loop does (zg.step policy) and time again.
        eng._grow()
        regrown += 1
    mean = statistics.fmean(per_batch)
    batches_per_epoch = math.ceil(g.train_idx.numel() / batch_size)
    row = {
        "pipeline": pipeline,
        "num_nodes": g.num_nodes,
        "num_edges": g.num_edges,
        "batch_size": batch_size,
        "warmup_batches": args.warmup,
        "timed_batches": args.batches,
        "seconds_per_batch": mean,
        "seconds_per_batch_std": mean_std(per_batch)[1],
        "batch_seconds": per_batch,
        "batches_per_epoch": batches_per_epoch,
        "projected_epoch_seconds": mean * batches_per_epoch,
        "stage_seconds_per_batch": {s: v / args.batches for s, v in stages.items()},
        "setup_seconds": setup,
        "loss_last_batch": float(loss),
        "peak_rss_bytes": peak_rss_bytes(),
    }
    if eng is not None and pipeline != "dgl":
        row["kernel"] = ran_kernel(eng)
    if eng is not None and eng.envelope is not None:
        row["envelope"] = list(eng.envelope.sizes)
        row["overflowed"] = bool(eng.overflowed)  # still, after regrowing: the time is unfair
        row["envelope_regrown"] = regrown  # times the envelope grew and timing restarted
    del obj, run, eng
    gc.collect()
    return row


def parse_args(argv=None):
    """The command line, with --quick's settings and the defaults that depend on others."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=[100_000, 400_000, 1_200_000, 2_400_000]
    )
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    ap.add_argument("--size-batch", type=int, default=1024, help="batch size of the size sweep")
    ap.add_argument(
        "--batch-graph",
        type=int,
        default=None,
        help="graph size of the batch sweep (default: the largest of --sizes)",
    )
    ap.add_argument("--batches", type=int, default=10, help="timed batches per point")
    ap.add_argument("--warmup", type=int, default=2, help="untimed batches per point first")
    ap.add_argument(
        "--profile-batches",
        type=int,
        default=32,
        help="batches the envelope is profiled on (zg.Envelope.profile's default)",
    )
    ap.add_argument("--degree", type=float, default=50.0)
    ap.add_argument("--feat-dim", type=int, default=100)
    ap.add_argument("--classes", type=int, default=47)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    ap.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    ap.add_argument(
        "--threads", type=int, default=2, help="torch / OpenMP / numba threads, all sides"
    )
    ap.add_argument("--seed", type=int, default=0, help="sampling, dropout, model initialisation")
    ap.add_argument("--graph-seed", type=int, default=0)
    ap.add_argument("--cache-dir", default=str(DATA))
    ap.add_argument(
        "--quick",
        action="store_true",
        help="a tiny run: graphs of 20k and 40k nodes, batches 128 and 512, 3 timed batches",
    )
    ap.add_argument(
        "--name", default=None, help="results file name (default scaling, or scaling_quick)"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.batch_sizes, args.size_batch = [20_000, 40_000], [128, 512], 512
        args.batches, args.warmup, args.profile_batches = 3, 1, 4
    if args.name is None:
        args.name = "scaling_quick" if args.quick else "scaling"
    if args.batch_graph is None:
        args.batch_graph = max(args.sizes)
    return args


def points_of(args):
    """The (num_nodes, batch_size) points: the size sweep, then the batch sweep."""
    points = [(n, args.size_batch) for n in args.sizes]
    return points + [
        (args.batch_graph, b) for b in args.batch_sizes if (args.batch_graph, b) not in points
    ]


def sweep(args):
    """Every point and pipeline, one graph at a time: (threads, load average, graphs, rows)."""
    torch.set_num_threads(args.threads)
    threads = {
        "torch": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "NUMBA_NUM_THREADS": os.environ.get("NUMBA_NUM_THREADS"),
    }
    try:
        import numba

        threads["numba"] = numba.get_num_threads()
    except ImportError:
        threads["numba"] = None
    load_start = load_average()
    print(f"threads {threads}, load average {load_start}", flush=True)

    points = points_of(args)
    graphs, rows = [], []
    for num_nodes in sorted({n for n, _ in points}):
        g, info = graph_for(num_nodes, args)
        graphs.append(info)
        print(
            f"graph {num_nodes:,} nodes, {g.num_edges:,} edges: "
            f"{'loaded' if info['cached'] else 'generated'} in {info['seconds']:.1f} s",
            flush=True,
        )
        for n, batch_size in points:
            if n != num_nodes:
                continue
            for pipeline in args.pipelines:
                row = measure(pipeline, g, batch_size, args)
                rows.append(row)
                top = sorted(row["stage_seconds_per_batch"].items(), key=lambda kv: -kv[1])[:2]
                print(
                    f"  n={num_nodes:>9,} B={batch_size:>5} {pipeline:12s} "
                    f"{pm(row['seconds_per_batch'], row['seconds_per_batch_std'], '{:.3f}')} s/batch, "
                    f"projected epoch {row['projected_epoch_seconds']:.1f} s "
                    f"(top stages: {', '.join(f'{s} {v:.3f}' for s, v in top)})",
                    flush=True,
                )
        del g
        gc.collect()
    return threads, load_start, graphs, rows


def report(args, rows):
    """DGL over each zg pipeline per point (the summary), printed as a table."""

    def ratio(n, b, other):
        by = {
            r["pipeline"]: r["seconds_per_batch"]
            for r in rows
            if r["num_nodes"] == n and r["batch_size"] == b
        }
        return by["dgl"] / by[other] if "dgl" in by and other in by else None

    summary = []
    for n, b in points_of(args):
        summary.append(
            {
                "num_nodes": n,
                "batch_size": b,
                "dgl_over_zg_envelope": ratio(n, b, "zg_envelope"),
                "dgl_over_zg_dynamic": ratio(n, b, "zg_dynamic"),
            }
        )
    print()
    print(
        table(
            [
                [s["num_nodes"], s["batch_size"]]
                + [
                    f"{r['seconds_per_batch']:.3f}"
                    for p in args.pipelines
                    for r in rows
                    if r["pipeline"] == p
                    and r["num_nodes"] == s["num_nodes"]
                    and r["batch_size"] == s["batch_size"]
                ]
                + [f"{s['dgl_over_zg_envelope']:.2f}x" if s["dgl_over_zg_envelope"] else "-"]
                for s in summary
            ],
            ["nodes", "batch"] + [f"{p} s/batch" for p in args.pipelines] + ["DGL / envelope"],
        )
    )
    return summary


def main(argv=None):
    args = parse_args(argv)
    threads, load_start, graphs, rows = sweep(args)
    summary = report(args, rows)
    settings = {k: v for k, v in vars(args).items() if k != "cache_dir"}
    settings["kernel"] = sorted({r["kernel"] for r in rows if "kernel" in r})  # the zg rows ran
    path = write_json(
        args.name,
        {
            "benchmark": "scaling",
            "machine": machine_note(),
            "threads": threads,
            "load_average_start": load_start,
            "load_average_end": load_average(),
            "settings": settings,
            "sweeps": {
                "size": {"batch_size": args.size_batch, "num_nodes": args.sizes},
                "batch": {"num_nodes": args.batch_graph, "batch_size": args.batch_sizes},
            },
            "projection": (
                f"projected_epoch_seconds = seconds_per_batch x batches_per_epoch, from "
                f"{args.batches} timed batches after {args.warmup} warm-up batches per point; "
                "not a measured full epoch"
            ),
            "graphs": graphs,
            "rows": rows,
            "summary": summary,
        },
    )
    print(f"\nwrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a scaling result (bench/_headlines.py calls it)."""
    return [
        headline(
            f"envelope_vs_dgl_n{short(r['num_nodes'])}_b{r['batch_size']}",
            r["dgl_over_zg_envelope"],
            "x",
            compared_to="DGL (time DGL / time zg envelope)",
            where=f"{r['num_nodes']:,} nodes, batch {r['batch_size']}, SAGE",
        )
        for r in doc["detail"].get("summary") or []
        if r.get("dgl_over_zg_envelope") is not None
    ]


if __name__ == "__main__":
    main()
