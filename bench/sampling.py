"""Sampling benchmark: DGL vs zg dynamic vs zg envelope (torch path and fused kernel), one run.

    .venv/bin/python bench/sampling.py                  # the issue's setting (csbm 200k; ~15 min on 2 cores)
    .venv/bin/python bench/sampling.py --quick          # csbm 20k, sampling only (~1 min)
    .venv/bin/python bench/sampling.py --graph products # the products-scale graph (zg.datasets.products_like)

Setting: csbm with 200k nodes, average degree 20, 128 features, 10 classes (or the
products-scale graph: 2.4M nodes, power-law degrees averaging 50, 100 features, 47 classes);
fanouts [15, 10, 5], batch 1024, 3-layer SAGE with hidden size 256. The pipelines share the
seed order, the model configuration, the loss, the optimizer and the loop (zg.Engine in modes
"dgl", "dynamic" and "eager"); they differ only in the sampler. The envelope pipeline runs twice: with the torch
reference ops (``kernel="torch"``, the capturable CUDA path) and with the fused numba kernel
(``kernel="fused"``, what the CPU picks by default); both sample the same tensors bit for bit.

Threads: torch, DGL's OpenMP pool and numba all run ``--threads`` threads (default: torch's
count), set before anything is timed and recorded in the JSON.

Measured per pipeline: seconds per sampling-only epoch (``--repeats`` epochs, round-robin over the
pipelines; the median is compared, every value is kept) and of a full training epoch, with a per-stage breakdown; the
sampled edges of each sampling epoch, hence sampled edges per second per core (DGL and the
fused kernel); host syncs per iteration (zg.audit.SyncAudit, for the zg pipelines: DGL's
sampler runs in C++ below the dispatcher, and so does the fused kernel, so only the torch
path's 0 is a proof); the fused kernel's first-call compile time (cold, in a fresh process
with an empty numba cache, and as this process saw it); envelope sizes and the bytes they cost
against worst case and the oracle (each batch's exact sizes, from the counts of the measured
epoch); the overflow rate; the load average before and after. Writes bench/results/<name>.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DGLBACKEND", "pytorch")

from _machine import kernel_phrase, machine_note, paired, pm, ran_kernel, table, write_json

import zg
from zg import models
from zg.audit import SyncAudit
from zg.engine import Engine
from zg.experiments.results import headline, headline_from, mean_std
from zg.kernels import sampling as _fused
from zg.step import STAGES, StageClock

ROOT = Path(__file__).resolve().parent.parent


def syncs_per_iteration(eng, iterations=3, sample_only=False):
    """Host syncs and data-dependent-shape ops per iteration, after one warm-up iteration."""
    run = eng.sample if sample_only else eng.run_batch
    run(0, epoch=99)
    with SyncAudit() as audit:
        for b in range(1, iterations + 1):
            run(b, epoch=99)
    return {
        "host_syncs": audit.host_syncs / iterations,
        "dynamic_shape_ops": audit.dynamic_shape_ops / iterations,
    }


def sample_epoch(eng, epoch, keep_counts=False):
    """Seconds to sample every batch of ``epoch`` (sampling only), and with ``keep_counts`` each
    batch's true counts and overflow flag (two small tensors, read after the clock stops; each
    mini-batch itself is dropped at once, as a training loop drops it)."""
    n = len(eng.batches(epoch))
    kept = []
    start = time.perf_counter()
    for b in range(n):
        mb = eng.sample(b, epoch=epoch)
        if keep_counts:
            kept.append((mb.counts, mb.overflowed))
    seconds = time.perf_counter() - start
    return seconds, kept


def train_epoch_with_stages(eng, epoch):
    """One training epoch batch by batch with the stage clock (perf_counter laps): its seconds,
    stage seconds, iterations and mean loss."""
    n = len(eng.batches(epoch))
    stages = {s: 0.0 for s in STAGES}
    start = time.perf_counter()
    losses = []
    for b in range(n):
        losses.append(eng.run_batch(b, epoch=epoch, clock=StageClock(None, into=stages)))
    seconds = time.perf_counter() - start
    return seconds, stages, n, float(torch.stack(losses).double().mean())


def sampled_edges(eng, epoch):
    """The real sampled edges of one sampling epoch (an untimed rerun of the same batches)."""
    total = 0
    for b in range(len(eng.batches(epoch))):
        mb = eng.sample(b, epoch=epoch)
        for block in mb.blocks:
            total += (
                int(block.num_edges()) if hasattr(block, "num_edges") else int(block.mask.sum())
            )
    return total


def cold_compile_seconds():
    """The fused kernel's first call in a fresh process with an empty numba cache (compiles)."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "NUMBA_CACHE_DIR": cache, "PYTHONPATH": str(ROOT)}
        code = (
            "from zg.kernels import sampling as _fused; s = _fused.warm_up(); "
            "i = _fused.compile_info(); print(s, i['from_cache'])"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
        )
    if out.returncode != 0:
        raise RuntimeError(f"the cold-compile run failed: {out.stderr[-2000:]}")
    seconds, from_cache = out.stdout.split()
    return {"seconds": float(seconds), "from_cache": from_cache == "True"}


def load_graph(args):
    if args.graph == "products":
        if not hasattr(zg.datasets, "products_like"):
            raise SystemExit(
                "--graph products needs zg.datasets.products_like (the products-scale "
                "generator), which this checkout does not have"
            )
        return zg.datasets.products_like(
            num_nodes=args.nodes or 2_400_000,
            avg_degree=50,
            feat_dim=100,
            num_classes=47,
            seed=args.seed,
        )
    return zg.datasets.csbm(
        num_nodes=args.nodes or 200_000,
        avg_degree=args.degree,
        num_classes=10,
        feat_dim=args.feat_dim,
        seed=args.seed,
    )


ALL_PIPELINES = ("dgl", "zg_dynamic", "zg_envelope_torch", "zg_envelope")


def parse_args(argv=None):
    """The command line, with --quick's settings and the result name filled in."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--graph", choices=["csbm", "products"], default="csbm")
    ap.add_argument("--nodes", type=int, default=None, help="default: 200k (csbm), 2.4M (products)")
    ap.add_argument("--degree", type=int, default=20, help="csbm's average degree")
    ap.add_argument("--feat-dim", type=int, default=128, help="csbm's features")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    ap.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="sampling epochs per pipeline (the median is compared)",
    )
    ap.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads for torch, DGL and numba (default: torch's)",
    )
    ap.add_argument(
        "--no-train", action="store_true", help="sampling only: skip the training epochs"
    )
    ap.add_argument(
        "--quick", action="store_true", help="csbm 20k, sampling only, name sampling_quick"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--pipelines",
        nargs="+",
        default=list(ALL_PIPELINES),
        choices=ALL_PIPELINES,
        help="pipelines to time (dgl and zg_envelope always; the others are slow on the "
        "products-scale graph); host syncs are audited on all of them either way",
    )
    ap.add_argument(
        "--name", default=None, help="results file name (default: sampling[_products|_quick])"
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes = args.nodes or 20_000
        args.no_train = True
    if args.name is None:
        args.name = (
            "sampling"
            + ("_quick" if args.quick else "")
            + ("_products" if args.graph == "products" else "")
        )
    return args


def measure(args):
    """Build the four pipelines, time their sampling (and training) epochs round-robin, audit
    their host syncs, and size the envelope against the oracle and the worst case."""
    timed = [p for p in ALL_PIPELINES if p in set(args.pipelines) | {"dgl", "zg_envelope"}]
    load_before = list(os.getloadavg())
    torch.manual_seed(args.seed)

    import dgl

    from zg.baselines.dgl import DGLModel

    threads = args.threads or torch.get_num_threads()
    torch.set_num_threads(threads)
    dgl.utils.set_num_threads(threads)
    threads_used = {
        "torch": torch.get_num_threads(),
        "dgl": dgl.utils.get_num_threads(),
        "numba": None,
    }

    t0 = time.perf_counter()
    g = load_graph(args)
    feat_dim, num_classes = g.feat_dim, int(g.num_classes)
    print(f"graph: {g}  ({time.perf_counter() - t0:.1f} s)")
    layers = len(args.fanouts)

    def zg_model():
        torch.manual_seed(args.seed)
        return models.SAGE(feat_dim, args.hidden, num_classes, layers)

    def make(model, mode, envelope="profiled", kernel="auto"):
        eng = Engine(
            g,
            model,
            args.fanouts,
            args.batch_size,
            envelope,
            mode=mode,
            seed=args.seed,
            kernel=kernel,
        )
        eng.observers = []
        return eng

    # The fused kernel: first its compile time in a fresh process (empty cache), then here.
    fused_info = {"cold_compile": cold_compile_seconds() if _fused.available() else None}
    t0 = time.perf_counter()
    envelope_eng = make(zg_model(), "eager", kernel="fused")
    profile_seconds = time.perf_counter() - t0
    fused_info["this_process"] = _fused.compile_info()
    threads_used["numba"] = _fused.set_threads()
    print(f"envelope: {envelope_eng.envelope}  (profiled in {profile_seconds:.1f} s)")
    print(
        f"fused kernel: cold compile {fused_info['cold_compile']['seconds']:.1f} s, this process "
        f"{fused_info['this_process']['seconds']:.1f} s (from cache: {fused_info['this_process']['from_cache']})"
    )
    print(f"threads: {threads_used}")
    torch.manual_seed(args.seed)
    engines = {
        "dgl": make(DGLModel("sage", feat_dim, args.hidden, num_classes, layers), "dgl"),
        "zg_dynamic": make(zg_model(), "dynamic"),
        "zg_envelope_torch": make(zg_model(), "eager", envelope_eng.envelope, kernel="torch"),
        "zg_envelope": envelope_eng,
    }

    # Sampling epochs round-robin over the pipelines (epoch r of each, then r + 1, ...), so a
    # change in the machine's load during the run falls on every pipeline alike.
    times = {name: [] for name in timed}
    sampled = {name: [] for name in timed}  # (counts, overflowed) of every sampled batch
    for r in range(args.repeats):
        for name in timed:
            seconds, batches = sample_epoch(engines[name], r, keep_counts=name == "zg_envelope")
            times[name].append(seconds)
            sampled[name] += batches
    results = {}
    for name, eng in engines.items():
        if name not in timed:
            results[name] = {"timed": False}
            continue
        sample_times = times[name]
        median = statistics.median(sample_times)
        results[name] = {
            "sample_epoch_seconds": median,
            "sample_epoch_seconds_all": sample_times,
            "sample_epoch_seconds_std": mean_std(sample_times)[1],
        }
        if name in ("dgl", "zg_envelope"):
            edges = [sampled_edges(eng, r) for r in range(args.repeats)]
            per_core = [e / t / threads for e, t in zip(edges, sample_times)]
            results[name]["sampled_edges_per_epoch"] = edges
            results[name]["sampled_edges_per_second_per_core"] = statistics.median(per_core)
            results[name]["sampled_edges_per_second_per_core_all"] = per_core
        line = f"{name:18s} sample/epoch {median:7.2f} s (all {', '.join(f'{t:.2f}' for t in sample_times)})"
        if not args.no_train:
            seconds, stages, iterations, loss = train_epoch_with_stages(eng, args.repeats)
            results[name].update(
                {
                    "train_epoch_seconds": seconds,
                    "train_stage_seconds": stages,
                    "iterations": iterations,
                    "train_loss": loss,
                }
            )
            line += f"   train/epoch {seconds:7.2f} s"
        print(line)

    # Metadata: host syncs (zg pipelines), envelope memory, overflows.
    for name in ("zg_dynamic", "zg_envelope_torch", "zg_envelope"):
        results[name]["syncs_per_iteration_sampling"] = syncs_per_iteration(
            engines[name], sample_only=True
        )
        if not args.no_train:
            results[name]["syncs_per_iteration_training"] = syncs_per_iteration(engines[name])
    # The exact sizes of the batches of every sampling epoch (what the oracle would allocate).
    oracle_counts = torch.stack([counts for counts, _ in sampled["zg_envelope"]]).cpu()
    flags = torch.stack([flag for _, flag in sampled["zg_envelope"]])
    sampled_batches, overflows = int(flags.numel()), int(flags.sum())
    env = envelope_eng.envelope
    mm = env.memory_model(feat_dim, args.hidden, num_classes, oracle_counts=oracle_counts)
    totals = mm["totals"]
    memory = {
        "envelope_sizes": env.sizes,
        "worst_case_sizes": zg.envelope.worst_case_sizes(
            g.num_nodes, args.fanouts, args.batch_size
        ),
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
    overflow = {
        "overflowed_batches": overflows,
        "sampled_batches": sampled_batches,
        "rate": overflows / max(sampled_batches, 1),
    }

    # Context for the memory target: on the uniform-degree csbm graph the input hop reaches
    # almost every node, so the worst case (capped at N) is nearly tight. Graphs whose degrees
    # fall below the fanouts or are skewed show the envelope's real margin; profile two of them.
    context = {}
    if args.graph == "csbm" and not args.quick:
        for label, other in (
            ("cora", zg.datasets.load("cora")),
            (
                "csbm_powerlaw",
                zg.datasets.csbm(
                    num_nodes=g.num_nodes,
                    avg_degree=args.degree,
                    num_classes=10,
                    feat_dim=8,
                    degree="powerlaw",
                    seed=args.seed,
                ),
            ),
        ):
            e = zg.Envelope.profile(other, args.fanouts, args.batch_size, seed=args.seed)
            t = e.memory_model(feat_dim, args.hidden, num_classes)["totals"]
            context[label] = {
                "envelope_sizes": e.sizes,
                "worst_case_sizes": zg.envelope.worst_case_sizes(
                    other.num_nodes, args.fanouts, args.batch_size
                ),
                "envelope_over_worst_case": t["envelope"] / t["worst_case"],
                "envelope_over_oracle_mean": t["envelope"] / t["oracle_mean"],
            }
    memory["other_graphs"] = context
    # The kernel each zg pipeline ran; the envelope figure is the fused kernel's (the fastest).
    for name in ("zg_dynamic", "zg_envelope_torch", "zg_envelope"):
        results[name]["kernel"] = ran_kernel(engines[name])
    return {
        "load_average_before": load_before,
        "threads": threads_used,
        "graph": g.summary(),
        "fused_kernel": fused_info,
        "results": results,
        "memory": memory,
        "overflow": overflow,
    }


def compare(args, m):
    """The ratios between the pipelines and the targets, from the measurements ``m``."""
    results, memory, overflow = m["results"], m["memory"], m["overflow"]
    dgl_s, env_s, torch_s = results["dgl"], results["zg_envelope"], results["zg_envelope_torch"]

    def over(a, b, key="sample_epoch_seconds"):  # None when a pipeline was not timed
        return a[key] / b[key] if key in a and key in b else None

    ratios = {
        "sampling_speedup_envelope_vs_dgl": dgl_s["sample_epoch_seconds"]
        / env_s["sample_epoch_seconds"],
        "sampling_speedup_envelope_torch_vs_dgl": over(dgl_s, torch_s),
        "sampling_speedup_fused_vs_torch": over(torch_s, env_s),
        "sampling_speedup_envelope_vs_dynamic": over(results["zg_dynamic"], env_s),
        # Each repeat's DGL epoch over the fused epoch run right after it (same load), median.
        "sampling_speedup_envelope_vs_dgl_paired_median": statistics.median(
            d / f
            for d, f in zip(dgl_s["sample_epoch_seconds_all"], env_s["sample_epoch_seconds_all"])
        ),
        "edges_per_second_per_core_fused_over_dgl": (
            env_s["sampled_edges_per_second_per_core"] / dgl_s["sampled_edges_per_second_per_core"]
        ),
    }
    if not args.no_train:
        ratios["training_speedup_envelope_vs_dgl"] = (
            dgl_s["train_epoch_seconds"] / env_s["train_epoch_seconds"]
        )
        ratios["training_speedup_envelope_vs_dynamic"] = over(
            results["zg_dynamic"], env_s, "train_epoch_seconds"
        )
    targets = {
        "envelope (fused) sampling >= 1.5x faster than DGL": ratios[
            "sampling_speedup_envelope_vs_dgl"
        ]
        >= 1.5,
        "0 host syncs per envelope sampling call (torch path)": torch_s[
            "syncs_per_iteration_sampling"
        ]["host_syncs"]
        == 0,
        "profiled memory <= 1.15x oracle (mean)": memory["envelope_over_oracle_mean"] <= 1.15,
        "profiled memory <= 0.5x worst case": memory["envelope_over_worst_case"] <= 0.5,
        "overflow rate <= 1%": overflow["rate"] <= 0.01,
    }
    if not args.no_train:
        targets["envelope training epoch no slower than DGL"] = (
            ratios["training_speedup_envelope_vs_dgl"] >= 1.0
        )
        targets["0 host syncs per envelope training iteration (torch path)"] = (
            torch_s["syncs_per_iteration_training"]["host_syncs"] == 0
        )

    return ratios, targets


def report(m, ratios, targets):
    """Print the pipelines' table, the ratios and the targets."""
    results, memory, overflow, fused_info = (
        m["results"],
        m["memory"],
        m["overflow"],
        m["fused_kernel"],
    )
    context = memory["other_graphs"]
    rows = [
        [
            name,
            pm(r["sample_epoch_seconds"], r["sample_epoch_seconds_std"])
            if r.get("timed", True)
            else "not timed",
            f"{r['sampled_edges_per_second_per_core'] / 1e6:.2f}"
            if "sampled_edges_per_second_per_core" in r
            else "",
            f"{r['train_epoch_seconds']:.2f}" if "train_epoch_seconds" in r else "",
            f"{r['syncs_per_iteration_sampling']['host_syncs']:.1f}"
            if "syncs_per_iteration_sampling" in r
            else "",
        ]
        for name, r in results.items()
    ]
    print()
    print(
        table(
            rows,
            ["pipeline", "sample s/epoch", "M edges/s/core", "train s/epoch", "host syncs/sample"],
        )
    )
    print()
    for k, v in ratios.items():
        print(f"{k:44s} {v:6.2f}x" if v is not None else f"{k:44s}    n/a (not timed)")
    print(
        f"{'fused kernel compile (cold, fresh process)':44s} {fused_info['cold_compile']['seconds']:6.1f} s"
    )
    print(f"{'envelope / oracle (mean) bytes':44s} {memory['envelope_over_oracle_mean']:6.2f}x")
    print(f"{'envelope / worst case bytes':44s} {memory['envelope_over_worst_case']:6.2f}x")
    print(f"{'overflow rate':44s} {overflow['rate']:6.2%}")
    for label, c in context.items():
        print(
            f"  memory on {label:14s} envelope/worst {c['envelope_over_worst_case']:.2f}x  "
            f"envelope/oracle {c['envelope_over_oracle_mean']:.2f}x  sizes {c['envelope_sizes']}"
        )
    print()
    for k, ok in targets.items():
        print(f"  [{'met' if ok else 'MISSED'}] {k}")


def main(argv=None):
    args = parse_args(argv)
    m = measure(args)
    ratios, targets = compare(args, m)
    report(m, ratios, targets)
    load_after = list(os.getloadavg())
    command = "bench/sampling.py " + " ".join(argv if argv is not None else sys.argv[1:])
    path = write_json(
        args.name,
        {
            "benchmark": "sampling",
            "command": command.strip(),
            "machine": machine_note(),
            "load_average_before": m["load_average_before"],
            "load_average_after": load_after,
            "threads": m["threads"],
            # The zg envelope figure's kernel (each pipeline's is in its results entry).
            "settings": {**vars(args), "kernel": m["results"]["zg_envelope"]["kernel"]},
            "graph": m["graph"],
            "fused_kernel": m["fused_kernel"],
            "results": m["results"],
            "ratios": ratios,
            "memory": m["memory"],
            "overflow": m["overflow"],
            "targets": targets,
        },
    )
    print(f"\nwrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a sampling result (bench/_headlines.py calls it)."""
    d, out = doc["detail"], []
    res = d.get("results") or {}
    # The envelope sampler on each kernel, against DGL's epochs of the same rounds: the fused
    # numba kernel (kernel="fused") and the torch ops (kernel="torch", the Engine's default).
    for name, pipe, kernel in (
        ("fused_vs_dgl_sampling", "zg_envelope", "fused"),
        ("torch_vs_dgl_sampling", "zg_envelope_torch", "torch"),
    ):
        if "dgl" in res and "sample_epoch_seconds_all" in res.get(pipe, {}):
            values = paired(
                res["dgl"]["sample_epoch_seconds_all"], res[pipe]["sample_epoch_seconds_all"]
            )
            out.append(
                headline_from(
                    name,
                    values,
                    "x",
                    compared_to="DGL's sampler, same threads",
                    where=f"epoch sampling time, {len(values)} epochs paired (DGL / zg), "
                    + kernel_phrase(res[pipe].get("kernel", kernel)),
                )
            )
    mem = d.get("memory") or {}
    for key, hib in (("envelope_over_oracle_mean", False), ("envelope_over_worst_case", False)):
        if key in mem:
            out.append(
                headline(
                    key,
                    mem[key],
                    "x",
                    compared_to=key.split("_over_")[1].replace("_", " "),
                    where="memory model bytes of the profiled envelope",
                    higher_is_better=hib,
                )
            )
    if "rate" in (d.get("overflow") or {}):
        out.append(
            headline(
                "overflow_rate",
                d["overflow"]["rate"],
                "fraction",
                where=f"held-out batches ({d['overflow'].get('sampled_batches')})",
                higher_is_better=False,
            )
        )
    return out


if __name__ == "__main__":
    main()
