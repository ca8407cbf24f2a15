"""GPU check: captured vs uncaptured numerics, then for each graph and batch size the iteration
time of dynamic / envelope eager / envelope captured (and, beside them, ``torch.compile`` of the
same steps: the peer a user would try first; and the kit's whole step compiled, ``Engine(mode=
"compiled")``, against both: ``WHOLE``), each row's memory above its own baseline, host
syncs and launches per iteration, the cold start (profiling + build + capture), the cost of one
overflow and rewind, a kernel-level profile of the captured replay, and data-parallel scaling
when more than one GPU is here. Needs only torch (>= 2.2) and numpy: no DGL, no internet. Stays
within ``--budget`` seconds (default 300; bench/gpu_session.sh runs it at 120 after the CUDA tests,
so that with Lab 8 and the floor it ends within 9 minutes and can run twice in 15 minutes of GPU time):
rows that would not fit are listed as skipped, never silently dropped. Every row is caught on its
own (an exception becomes an "error" entry) and the JSON is rewritten after each row.

    bash bench/gpu_check.sh                  # on a GPU machine: this, then the CUDA-marked tests
    python bench/gpu_check.py --budget 120   # anywhere; on a CPU it runs the CPU parts at a
                                             # reduced size and says plainly what it skipped

Writes bench/results/gpu_check_<cuda|cpu>.json and prints a short table.

How it measures:
- Timing: the sync audit is off; ``--reps`` (3) rounds of ``--iterations`` (100 on a GPU)
  iterations per variant, the variants interleaved round by round, so a drift of the machine
  hits all of them alike; the row reports the median and the sample standard deviation of the
  rounds' seconds per iteration.
- Syncs and launches: counted on their own, untimed, by ``zg.observe.AuditSyncs`` (host syncs
  and the ops the host launches per steady iteration; a captured replay launches one graph).
  The captured graph's kernels come from the profiler (``kernel_profile``).
- Memory: every variant is measured alone: everything freed, the baseline taken
  (``memory_allocated`` / ``memory_reserved``), the engine built, warmed and run; the row
  reports its peak above that baseline (``ORACLE``: the dynamic pipeline, which allocates each
  batch's exact sizes, is the oracle the envelope is compared with).
- Cora (140 training nodes: one batch whatever the batch size) serves the numerics check only;
  no Cora rows are timed.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep

import argparse
import gc
import statistics
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import machine_note, ran_kernel, short, table, write_json

import zg
from zg import kernels, models
from zg.engine import Engine, StepHooks
from zg.envelope import Envelope, worst_case_sizes
from zg.experiments.results import headline, spread
from zg.observe import AuditSyncs, Trace
from zg.profile import gpu_execution_fraction

FANOUTS = [15, 10, 5]
HIDDEN, LAYERS, DROPOUT = 256, 3, 0.5  # the measured model: 3-layer SAGE, hidden 256
VARIANTS = ("dynamic", "envelope_eager", "envelope_captured")
# torch.compile of the same steps (the model's forward compiled; sampling as the variant has it):
# variant -> (base variant, torch.compile mode).
COMPILED = {
    "dynamic_compiled": ("dynamic", "default"),
    "dynamic_compiled_reduce_overhead": ("dynamic", "reduce-overhead"),
    "envelope_eager_compiled": ("envelope_eager", "default"),
}
# The whole static step compiled by the kit (Engine mode "compiled", zg.compiled: sampling,
# gather, forward, loss, backward and optimizer step as one torch.compile graph, captured as one
# CUDA Graph on CUDA; issue 58): variant -> the variant it is timed against.
WHOLE = {"envelope_compiled_step": "envelope_captured"}
# TF32 matrix products (torch.backends.cuda.matmul.allow_tf32, a process setting, off by
# default; on around this variant's own batches only): variant -> base variant.
TF32 = {"envelope_captured_tf32": "envelope_captured"}
ORACLE = "dynamic"  # memory: the pipeline that allocates each batch's exact sizes


def build_engine(
    g, device, batch_size, variant, envelope, seed=0, audit_iterations=2, model="sage"
):
    """The check's engine for one variant (also bench/gpu_sync_sources.py's): the measured model
    (``model``: "sage" by default, or "gcn" / "gat"; HIDDEN, LAYERS, FANOUTS) seeded with
    ``seed``; "dynamic" (mode "dynamic", host-mediated sampling), "envelope_eager" (mode "eager":
    fixed shapes, no capture) or "envelope_captured" (mode "graph", one CUDA Graph, on a GPU;
    mode "static", the same step run eagerly, on a CPU), or a :data:`COMPILED` variant (its base
    variant with the model's forward under ``torch.compile``) or a :data:`TF32` one (its base
    variant with TF32 on while it is built and around each of its batches, so a captured graph
    keeps TF32 and the variants timed beside it keep full FP32). ``audit_iterations`` steady iterations per epoch
    run under SyncAudit (0: none, as when timing)."""
    compiled, tf32, whole = None, variant in TF32, variant in WHOLE
    variant = WHOLE.get(variant, variant)
    if variant in COMPILED:
        variant, compiled = COMPILED[variant]
    variant = TF32.get(variant, variant)
    if variant not in VARIANTS:
        raise ValueError(
            f"variant must be one of {VARIANTS + tuple(COMPILED) + tuple(WHOLE) + tuple(TF32)},"
            f" got {variant!r}"
        )
    torch.manual_seed(seed)
    net = models.build(model, g.feat_dim, HIDDEN, max(g.num_classes, 1), LAYERS, dropout=DROPOUT)
    captured = "graph" if torch.device(device).type == "cuda" else "static"
    mode = {"dynamic": "dynamic", "envelope_eager": "eager", "envelope_captured": captured}[variant]
    if whole:
        mode = "compiled"
    if mode == "dynamic":
        envelope = "profiled"  # unused: the dynamic mode has no envelope
    hooks = StepHooks(
        forward=None if compiled is None else torch.compile(net, mode=compiled),
        before=_set_tf32(True) if tf32 else None,
        after=_set_tf32(False) if tf32 else None,
    )
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32  # what the engine records (settings.allow_tf32)
    try:
        eng = Engine(
            g,
            net,
            FANOUTS,
            batch_size,
            envelope,
            mode=mode,
            device=device,
            seed=seed,
            hooks=hooks,
            kernel="auto",  # the fastest here: the fused kernels on a CPU, the torch path on a GPU
        )
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    eng.observers = [AuditSyncs(audit_iterations)] if audit_iterations else []
    return eng


def _set_tf32(on: bool):
    """A StepHooks before/after hook that turns TF32 matrix products on or off."""

    def hook(epoch, batch):
        torch.backends.cuda.matmul.allow_tf32 = on

    return hook


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
        eng = Engine(
            g, model, [10, 10], 32, envelope, mode=mode, device=device, seed=0, kernel="auto"
        )
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
    out["captured"] = captured.cuda_graph is not None
    for name, eng in (("captured", captured), ("eager", eager), ("tiny_envelope", tiny)):
        diff = max(float((p - q).abs().max()) for p, q in zip(_params(eng), _params(static)))
        out[f"{name}_vs_static_max_abs_param_diff"] = diff
        out[f"{name}_same_batches"] = [t[:2] for t in eng.applied_trace()] == [
            t[:2] for t in ref_trace
        ]
        out[f"{name}_same_node_sets"] = eng.applied_trace() == ref_trace
    out["tiny_envelope_overflows"] = sum(h.overflows for h in tiny.history)
    # Equal envelope sizes: bitwise on the CPU; a grown envelope re-associates sums (1e-5).
    tolerance = {
        "captured": 0.0 if device.type == "cpu" else 1e-4,
        "eager": 0.0 if device.type == "cpu" else 1e-4,
        "tiny_envelope": 1e-5 if device.type == "cpu" else 1e-4,
    }
    out["tolerance"] = tolerance
    out["agree"] = (
        all(
            out[f"{n}_vs_static_max_abs_param_diff"] <= tol and out[f"{n}_same_batches"]
            for n, tol in tolerance.items()
        )
        and out["tiny_envelope_overflows"] >= 1
    )
    return out


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def free(device) -> None:
    """Everything a finished row left behind goes, so the next row's baseline is its own."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def measure(g, device, batch_size, variant, envelope, max_batches, seed=0):
    """One variant alone (audit on): an epoch (or max_batches) after a warm-up; seconds, syncs,
    launches, memory above the row's baseline. The interleaved timing of :func:`time_rounds` is
    what the check reports as the row's time; this is its audit and memory part."""
    free(device)
    base = _memory(device)
    t0 = time.perf_counter()
    eng = build_engine(g, device, batch_size, variant, envelope, seed=seed)
    eng.train_epoch(max_batches=2)  # warm-up (not timed; captures on a GPU)
    _sync(device)
    build_seconds = time.perf_counter() - t0
    stats = eng.train_epoch(max_batches=max_batches)
    _sync(device)
    peak = _memory(device, peak=True)
    row = {
        "variant": variant,
        "batch_size": batch_size,
        "iterations": stats.iterations,
        "audited_seconds": stats.seconds,
        "full_epoch": max_batches is None,
        "host_syncs_per_iteration": stats.host_syncs,
        "launches_per_iteration": stats.launches,
        "cuda_sync_warnings_per_iteration": stats.cuda_sync_warnings,
        "overflows": stats.overflows,
        "captured": eng.cuda_graph is not None,
        "kernel": ran_kernel(eng),
        "build_and_warm_up_seconds": build_seconds,
        "baseline_allocated_bytes": base["allocated"],
        "baseline_reserved_bytes": base["reserved"],
        "peak_bytes": None if peak["allocated"] is None else peak["allocated"] - base["allocated"],
        "peak_reserved_bytes": None
        if peak["reserved"] is None
        else peak["reserved"] - base["reserved"],
        "envelope": None if eng.envelope is None else eng.envelope.sizes,
        # The work of one iteration (bench/network.py bounds a worker's compute with these).
        "feat_dim": g.feat_dim,
        "hidden_dim": HIDDEN,
        "num_layers": LAYERS,
        "fanouts": FANOUTS,
    }
    # Without an interleaved timing (a caller of measure alone) the audited epoch is the time.
    row["seconds"] = stats.seconds
    row["seconds_per_iteration"] = stats.seconds / max(stats.iterations, 1)
    if eng.envelope is not None:
        row["model_bytes"] = eng.memory_model()["totals"]
    del eng
    free(device)
    return row


def _memory(device, peak: bool = False):
    if device.type != "cuda":
        return {"allocated": None, "reserved": None}
    if peak:
        return {
            "allocated": int(torch.cuda.max_memory_allocated(device)),
            "reserved": int(torch.cuda.max_memory_reserved(device)),
        }
    return {
        "allocated": int(torch.cuda.memory_allocated(device)),
        "reserved": int(torch.cuda.memory_reserved(device)),
    }


def time_iterations(eng, iterations: int, device, start: int = 0) -> float:
    """Seconds per iteration of ``iterations`` steady iterations (batches ``start``, ...)."""
    _sync(device)
    t0 = time.perf_counter()
    for i in range(iterations):
        eng.run_batch(start + i)
    _sync(device)
    return (time.perf_counter() - t0) / iterations


def timing_spread(values):
    """Median, mean, sample standard deviation (n - 1) and n of a list of measurements."""
    values = list(values)
    return {"median": statistics.median(values), **spread(values)}


def time_rounds(engines, iterations: int, reps: int, device):
    """Every engine timed ``reps`` times, interleaved round by round: {name: spread}."""
    seconds = {name: [] for name in engines}
    for rep in range(reps):
        for name, eng in engines.items():
            seconds[name].append(time_iterations(eng, iterations, device, start=rep * iterations))
    return {name: timing_spread(v) for name, v in seconds.items()}


def kernel_summary(events, replays: int, top: int = 10):
    """A compact summary of GPU activity: ``events`` is a list of (name, start_us, duration_us)
    (the profiler's CUDA kernels and memory operations over ``replays`` replays). Returns kernels
    per replay, the ``top`` kernels by total time (count per replay, microseconds, share), and
    the idle gaps between consecutive activities (busy time is the union of the intervals)."""
    events = sorted((float(s), float(d), str(n)) for n, s, d in events if d > 0)
    if not events or replays < 1:
        return {"replays": replays, "kernels_per_replay": 0, "top": [], "busy_fraction": None}
    by_name = {}
    for _start, dur, name in events:
        total, count = by_name.get(name, (0.0, 0))
        by_name[name] = (total + dur, count + 1)
    busy_total = sum(d for _, d, _ in events)
    merged, gaps = [], []
    cur_start, cur_end = events[0][0], events[0][0] + events[0][1]
    for start, dur, _ in events[1:]:
        if start > cur_end:
            merged.append((cur_start, cur_end))
            gaps.append(start - cur_end)
            cur_start, cur_end = start, start + dur
        else:
            cur_end = max(cur_end, start + dur)
    merged.append((cur_start, cur_end))
    busy = sum(e - s for s, e in merged)
    span = merged[-1][1] - merged[0][0]
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
    return {
        "replays": replays,
        "kernels_per_replay": len(events) / replays,
        "distinct_kernels": len(by_name),
        "top": [
            {
                "name": name[:120],
                "per_replay": count / replays,
                "total_us": total,
                "share": total / busy_total,
            }
            for name, (total, count) in ranked
        ],
        "busy_us_per_replay": busy / replays,
        "span_us_per_replay": span / replays,
        "busy_fraction": busy / span if span > 0 else None,
        "gaps_per_replay": len(gaps) / replays,
        "median_gap_us": statistics.median(gaps) if gaps else 0.0,
        "idle_us_per_replay": sum(gaps) / replays,
    }


def kernel_profile(eng, replays: int = 50):
    """The profiler's view of ``replays`` steady iterations of ``eng`` (CUDA only): see
    :func:`kernel_summary`."""
    from torch.profiler import ProfilerActivity, profile

    device = eng.device
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(replays):
            eng.run_batch(i)
        torch.cuda.synchronize(device)
    events = []
    for e in prof.events():
        if "CUDA" in str(getattr(e, "device_type", "")):
            events.append((e.name, e.time_range.start, e.time_range.elapsed_us()))
    return kernel_summary(events, replays)


def overflow_cost(g, device, batch_size, envelope, batches: int, seed=0, shrink: float = 0.6):
    """The cost of overflows: the same ``batches`` cold-started with the profiled envelope and
    with one shrunk by ``shrink`` (it overflows, grows, is captured again, rewinds). Seconds per
    overflow = the extra seconds over the overflows counted."""
    sizes = [max(batch_size, int(s * shrink)) for s in envelope.sizes]
    tiny = Envelope(sizes, fanouts=FANOUTS, batch_size=batch_size, num_nodes=g.num_nodes)
    out = {}
    for name, env in (("profiled", envelope), ("shrunk", tiny)):
        free(device)
        eng = build_engine(
            g, device, batch_size, "envelope_captured", env, seed=seed, audit_iterations=0
        )
        _sync(device)
        t0 = time.perf_counter()
        stats = eng.train_epoch(max_batches=batches)
        _sync(device)
        out[name] = {
            "seconds": time.perf_counter() - t0,
            "overflows": stats.overflows,
            "rewound_batches": stats.rewound_batches,
            "iterations": stats.iterations,
            "envelope_start": env.sizes,
            "envelope_end": eng.envelope.sizes,
        }
        del eng
    extra = out["shrunk"]["seconds"] - out["profiled"]["seconds"]
    out["seconds_per_overflow"] = (
        extra / out["shrunk"]["overflows"] if out["shrunk"]["overflows"] else None
    )
    out["shrink"] = shrink
    return out


def data_parallel_rows(g, budget_left, epochs=2):
    """zg.parallel on 1 and N GPUs (N = all here), the same global batch: epoch seconds and the
    speed-up. Runs only with more than one GPU."""
    from zg import parallel

    rows = []
    count = torch.cuda.device_count()
    for workers in (1, count):
        hist = parallel.train(
            g,
            workers=workers,
            epochs=epochs,
            batch_size=4096,
            fanouts=FANOUTS,
            hidden_dim=256,
            evaluate=False,
            backend="nccl",
            run_timeout=max(30.0, budget_left / 2),
        )
        rows.append(
            {
                "workers": workers,
                "seconds_per_epoch": hist["seconds_per_epoch"],
                "captured": hist["captured"],
                "host_syncs": [e["host_syncs"] for e in hist["epochs"]],
            }
        )
    rows.append(
        {"speedup": rows[0]["seconds_per_epoch"] / rows[1]["seconds_per_epoch"], "workers": count}
    )
    return rows


def parse_args(argv=None):
    """The command line (the device fills in what is left at None: see :class:`CheckRun`)."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--budget", type=float, default=300.0, help="seconds for everything (default 300)"
    )
    ap.add_argument(
        "--nodes", type=int, default=1_000_000, help="csbm size on a GPU (a CPU uses 20,000)"
    )
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed for the models, the engines' sampling and the envelope profile (the graphs stay seed 0)",
    )
    ap.add_argument(
        "--name",
        default=None,
        help="write bench/results/<name>.json instead of gpu_check_<cuda|cpu>.json",
    )
    ap.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="timed iterations per round (default 100 on a GPU, 3 on a CPU)",
    )
    ap.add_argument("--reps", type=int, default=3, help="interleaved timing rounds (default 3)")
    ap.add_argument(
        "--max-batches",
        type=int,
        default=None,
        help="iterations of each row's audited epoch (default 20 on a GPU, 3 on a CPU)",
    )
    ap.add_argument(
        "--compile",
        dest="compile",
        action="store_true",
        default=None,
        help="time the torch.compile variants (default: on a GPU)",
    )
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument(
        "--products",
        dest="products",
        action="store_true",
        default=None,
        help="rows for products_like (2.4M nodes; default: on a GPU)",
    )
    ap.add_argument("--no-products", dest="products", action="store_false")
    return ap.parse_args(argv)


class CheckRun:
    """One run of the check: the settings the device decides, the result document (rewritten
    after every row, so a run stopped midway leaves what it measured), the time budget, and the
    guard every row runs under. ``args`` stays as parsed: the JSON's settings are its vars."""

    def __init__(self, args):
        self.args = args
        self.t_start = time.perf_counter()
        self.cuda = torch.cuda.is_available()
        self.device = torch.device("cuda", 0) if self.cuda else torch.device("cpu")
        self.tag = "cuda" if self.cuda else "cpu"
        self.iterations = args.iterations or (100 if self.cuda else 3)
        self.audit_batches = args.max_batches or (20 if self.cuda else 3)
        self.want_compile = self.cuda if args.compile is None else args.compile
        self.want_products = self.cuda if args.products is None else args.products
        self.nodes = args.nodes if self.cuda else 20_000
        self.result = {
            "benchmark": "gpu_check",
            "machine": machine_note(),
            "settings": {**vars(args), "kernel": kernels.resolve("auto", self.device)},
            "method": {
                "timing": f"{args.reps} interleaved rounds of {self.iterations} iterations per "
                "variant, audit off; median and sample std of the rounds",
                "memory": "each variant alone; peak above the row's own baseline "
                "(max_memory_allocated / reserved minus memory_allocated / "
                "reserved before the engine was built)",
                "oracle": f"{ORACLE}: allocates each batch's exact sizes",
                "cora": "numerics only (140 training nodes: one batch); no Cora rows timed",
                "audit": f"{self.audit_batches} iterations per row, untimed: host syncs and "
                "launches per steady iteration (zg.observe.AuditSyncs)",
            },
            "numerics": None,
            "rows": [],
            "timing": [],
            "compiled": [],
            "kernel_profile": None,
            "overflow_cost": None,
            "cold_start": [],
            "data_parallel": None,
            "ratios": {},
            "skipped": [],
            "errors": [],
            "complete": False,
        }
        self.skipped, self.errors = self.result["skipped"], self.result["errors"]
        self.rows = self.result["rows"]

    def save(self):
        self.result["seconds_total"] = time.perf_counter() - self.t_start
        return write_json(self.args.name or f"gpu_check_{self.tag}", self.result)

    def left(self):
        return self.args.budget - (time.perf_counter() - self.t_start)

    def guarded(self, name, fn):
        """fn(), or None with the failure recorded (out of memory: skipped; else: an error);
        the JSON is rewritten either way."""
        try:
            return fn()
        except (torch.cuda.OutOfMemoryError, MemoryError) as exc:
            self.skipped.append(f"{name}: out of memory ({str(exc)[:200]})")
        except Exception as exc:  # keep every other row
            self.errors.append(
                {
                    "row": name,
                    "error": f"{type(exc).__name__}: {str(exc)[:500]}",
                    "traceback": traceback.format_exc()[-2000:],
                }
            )
            print(f"  {name}: ERROR {type(exc).__name__}: {exc}")
        finally:
            self.save()
        return None


def check_numerics(run):
    """The device line, what a CPU run skips, and the numerics check on Cora; returns the check
    (None if it failed)."""
    device, skipped = run.device, run.skipped
    print(
        f"device: {torch.cuda.get_device_name(device) if run.cuda else 'CPU (no CUDA here)'}; torch {torch.__version__}"
    )
    if not run.cuda:
        skipped.append(
            "CUDA Graph capture (no CUDA): the 'captured' variant runs the same static step eagerly"
        )
        skipped.append("GPU execution fraction, memory and the kernel profile (no CUDA)")
        skipped.append(f"csbm with {run.args.nodes:,} nodes (CPU run uses 20,000 nodes)")
    cora = zg.datasets.load("cora").to(device)
    check = run.guarded("numerics", lambda: numerics_check(cora, device))
    run.result["numerics"] = check
    if check is not None:
        print(
            f"captured vs static vs eager vs tiny envelope (2 epochs, {check['batches_per_epoch']} batches): "
            f"{'agree' if check['agree'] else 'DISAGREE'}; captured={check['captured']}, "
            f"max diffs {check['captured_vs_static_max_abs_param_diff']:.1e} / "
            f"{check['eager_vs_static_max_abs_param_diff']:.1e} / "
            f"{check['tiny_envelope_vs_static_max_abs_param_diff']:.1e}"
        )
    cora = None  # off the GPU before the timed rows
    free(device)
    run.save()
    return check


def graph_plan(run):
    """[(graph name, loader, batch sizes)]: csbm, and products_like where wanted; what is not
    run is listed as skipped."""
    nodes = run.nodes
    plan = [
        (
            f"csbm_{nodes}",
            lambda: zg.datasets.csbm(
                num_nodes=nodes, avg_degree=20, num_classes=10, feat_dim=128, seed=0
            ),
            run.args.batch_sizes,
        )
    ]
    if run.want_products:
        plan.append(("products_like", lambda: zg.datasets.products_like(), [1024, 4096]))
    else:
        run.skipped.append("products_like rows (--no-products; default on a GPU only)")
    if not run.want_compile:
        run.skipped.append("torch.compile variants (--no-compile; default on a GPU only)")
    return plan


def audit_rows(run, g, gname, batch_size, envelope, worst, profile_seconds):
    """1. Each variant alone: audit (syncs, launches) and memory above its baseline. Appends the
    rows (and the captured variant's cold start); returns {variant: row}."""
    by = {}
    for variant, env in (
        ("dynamic", None),
        ("envelope_eager", envelope),
        ("envelope_captured", envelope),
        ("worst_case_captured", worst),
    ):
        if variant != "dynamic" and env is None:
            continue
        if run.left() < 20:
            run.skipped.append(f"{gname} batch {batch_size} {variant} (time budget)")
            continue
        base = "envelope_captured" if variant == "worst_case_captured" else variant
        row = run.guarded(
            f"{gname} b{batch_size} {variant}",
            lambda: measure(g, run.device, batch_size, base, env, run.audit_batches, run.args.seed),
        )
        if row is None:
            continue
        row["variant"], row["graph"], row["model"] = variant, gname, "sage"
        if envelope is not None:
            row["oracle_mean_counts"] = envelope.observed.double().mean(0).tolist()
        row["worst_case_sizes"] = worst_case_sizes(g.num_nodes, FANOUTS, batch_size)
        if variant == "envelope_captured":
            run.result["cold_start"].append(
                {
                    "graph": gname,
                    "batch_size": batch_size,
                    "profile_seconds": profile_seconds,
                    "build_capture_and_two_batches_seconds": row["build_and_warm_up_seconds"],
                }
            )
        run.rows.append(row)
        by[variant] = row
        run.save()
    return by


def build_timed(run, g, gname, batch_size, envelope, first_graph):
    """The variants to time, built and warmed (captured, compiled): {name: (engine, warm-up
    seconds)}."""
    names = ["dynamic", "envelope_eager", "envelope_captured"]
    if run.want_compile and batch_size == 1024 and first_graph:
        names += list(COMPILED) + list(WHOLE)
    if batch_size == 1024 and first_graph:
        names += list(TF32)  # its own row: TF32 is off by default
    timed = {}
    for name in names:
        if run.left() < 30:
            run.skipped.append(f"{gname} batch {batch_size} {name} timing (time budget)")
            continue
        env = None if COMPILED.get(name, (name,))[0] == "dynamic" else envelope

        def warm(name=name, env=env):
            t = time.perf_counter()
            eng = build_engine(
                g, run.device, batch_size, name, env, seed=run.args.seed, audit_iterations=0
            )
            eng.train_epoch(max_batches=3)  # warm-up: captures, compiles
            _sync(run.device)
            return eng, time.perf_counter() - t

        made = run.guarded(f"{gname} b{batch_size} {name} build", warm)
        if made is not None:
            timed[name] = made
    return timed


def time_variants(run, g, gname, batch_size, envelope, by, first_graph):
    """2. The time: the variants alive together, interleaved rounds, audit off; each audited
    row's time becomes the interleaved median. 3. The captured replay's kernels."""
    timed = build_timed(run, g, gname, batch_size, envelope, first_graph)
    if timed:
        spreads = (
            run.guarded(
                f"{gname} b{batch_size} timing",
                lambda: time_rounds(
                    {k: v[0] for k, v in timed.items()}, run.iterations, run.args.reps, run.device
                ),
            )
            or {}
        )
        for name, sp in spreads.items():
            entry = {
                "graph": gname,
                "model": "sage",
                "batch_size": batch_size,
                "variant": name,
                "seconds_per_iteration": sp,
                "warm_up_seconds": timed[name][1],
            }
            if run.cuda:
                entry["gpu_execution_fraction"] = run.guarded(
                    f"{gname} b{batch_size} {name} fraction",
                    lambda: gpu_execution_fraction(lambda i: timed[name][0].run_batch(i), 10),
                )
            compiled_row = name in COMPILED or name in WHOLE
            (run.result["compiled"] if compiled_row else run.result["timing"]).append(entry)
            if name in by:  # the row's time is the interleaved median
                by[name]["seconds_per_iteration"] = sp["median"]
                by[name]["seconds_per_iteration_spread"] = sp
                by[name]["gpu_execution_fraction"] = entry.get("gpu_execution_fraction")
        # 3. The captured replay's kernels (CUDA, batch 1024 of the first graph).
        if run.cuda and batch_size == 1024 and first_graph and "envelope_captured" in timed:
            run.result["kernel_profile"] = run.guarded(
                "kernel profile",
                lambda: {
                    "graph": gname,
                    "batch_size": batch_size,
                    **kernel_profile(timed["envelope_captured"][0], 50),
                },
            )
    for name in list(timed):
        del timed[name]
    free(run.device)


def measure_batch(run, g, gname, batch_size, first_graph):
    """One graph and batch size: the envelope profile, the audited rows, the interleaved timing
    and (batch 1024 of the first graph) the cost of one overflow and rewind."""
    bs = min(batch_size, g.train_idx.numel())
    t0 = time.perf_counter()
    envelope = run.guarded(
        f"{gname} b{batch_size} profile",
        lambda: Envelope.profile(g, FANOUTS, bs, seed=run.args.seed),
    )
    profile_seconds = time.perf_counter() - t0
    worst = Envelope.worst_case(g, FANOUTS, bs)
    by = audit_rows(run, g, gname, batch_size, envelope, worst, profile_seconds)
    time_variants(run, g, gname, batch_size, envelope, by, first_graph)
    # 4. One overflow and rewind (batch 1024 of the first graph).
    if batch_size == 1024 and first_graph and envelope is not None:
        if run.left() > 60:
            run.result["overflow_cost"] = run.guarded(
                "overflow cost",
                lambda: {
                    "graph": gname,
                    "batch_size": batch_size,
                    **overflow_cost(
                        g,
                        run.device,
                        batch_size,
                        envelope,
                        max(run.audit_batches, 10),
                        run.args.seed,
                    ),
                },
            )
        else:
            run.skipped.append("overflow cost (time budget)")
    run.save()


def other_models(run, g, gname):
    """5. GCN and GAT at batch 1024 (the first graph): dynamic and captured, interleaved."""
    for kind in ("gcn", "gat"):
        if run.left() < 45:
            run.skipped.append(f"{gname} {kind} b1024 (time budget)")
            continue
        bs = min(1024, g.train_idx.numel())
        envelope = Envelope.profile(g, FANOUTS, bs, seed=run.args.seed)

        def models_row(kind=kind, envelope=envelope):
            engines = {}
            for variant in ("dynamic", "envelope_captured"):
                eng = build_engine(
                    g,
                    run.device,
                    1024,
                    variant,
                    envelope,
                    seed=run.args.seed,
                    audit_iterations=0,
                    model=kind,
                )
                eng.train_epoch(max_batches=3)
                engines[variant] = eng
            sp = time_rounds(engines, run.iterations, run.args.reps, run.device)
            return [
                {
                    "graph": gname,
                    "model": kind,
                    "batch_size": 1024,
                    "variant": v,
                    "seconds_per_iteration": s,
                }
                for v, s in sp.items()
            ]

        got = run.guarded(f"{gname} {kind} b1024", models_row)
        if got:
            run.result["timing"].extend(got)
        free(run.device)


def measure_graph(run, gname, make_graph, batch_sizes, first_graph):
    """Every batch size of one graph (and, on the first graph, the other models); False when
    the graph was not measured (time budget, or it failed to load)."""
    if run.left() < 60:
        run.skipped.append(f"{gname} (time budget)")
        return False
    t0 = time.perf_counter()
    g = run.guarded(gname, lambda: make_graph().to(run.device))
    if g is None:
        return False
    print(f"{gname}: {g.num_nodes:,} nodes loaded in {time.perf_counter() - t0:.1f} s")
    for batch_size in batch_sizes:
        if run.left() < 30:
            run.skipped.append(f"{gname} batch {batch_size} (time budget)")
            continue
        measure_batch(run, g, gname, batch_size, first_graph)
    if first_graph:
        other_models(run, g, gname)
    g = None
    free(run.device)
    return True


def data_parallel(run):
    """zg.parallel across every GPU here (more than one), or why not."""
    if run.cuda and torch.cuda.device_count() > 1:
        if run.left() > 60:
            big = zg.datasets.csbm(
                num_nodes=run.nodes, avg_degree=20, num_classes=10, feat_dim=128, seed=0
            )
            run.result["data_parallel"] = run.guarded(
                "data_parallel", lambda: data_parallel_rows(big, run.left())
            )
        else:
            run.skipped.append("data-parallel scaling (time budget)")
    else:
        run.skipped.append(
            "data-parallel scaling across GPUs (needs more than one GPU; the CPU "
            "scaling is in bench/results/parallel.json)"
        )


def compute_ratios(run):
    """The captured step against every other timed variant of its graph, model and batch, and
    (CUDA) its peak memory against the oracle's and the worst case's."""
    result, rows = run.result, run.rows
    ratios = result["ratios"]
    timing = {
        (t["graph"], t["model"], t["batch_size"], t["variant"]): t["seconds_per_iteration"][
            "median"
        ]
        for t in result["timing"] + result["compiled"]
    }
    for (gname, model, batch_size, variant), sec in timing.items():
        if variant != "envelope_captured":
            continue
        for other in ("dynamic", "envelope_eager", *COMPILED, *WHOLE, *TF32):
            if (gname, model, batch_size, other) in timing:
                ratios[f"{gname}/{model}/b{batch_size}/captured_vs_{other}"] = (
                    timing[(gname, model, batch_size, other)] / sec
                )
        compiled = [
            timing[(gname, model, batch_size, c)]
            for c in COMPILED
            if (gname, model, batch_size, c) in timing
        ]
        if compiled:
            ratios[f"{gname}/{model}/b{batch_size}/captured_vs_best_compiled"] = min(compiled) / sec
        for w in WHOLE:  # the whole step compiled against the model alone compiled
            if compiled and (gname, model, batch_size, w) in timing:
                ratios[f"{gname}/{model}/b{batch_size}/{w}_vs_best_compiled"] = (
                    min(compiled) / timing[(gname, model, batch_size, w)]
                )
    if run.cuda:
        for gname in {r["graph"] for r in rows}:
            for batch_size in run.args.batch_sizes + [1024, 4096]:
                by = {
                    r["variant"]: r
                    for r in rows
                    if r["graph"] == gname and r["batch_size"] == batch_size
                }
                if {"envelope_captured", "worst_case_captured", ORACLE} <= set(by) and all(
                    by[v]["peak_bytes"]
                    for v in ("envelope_captured", "worst_case_captured", ORACLE)
                ):
                    ratios[f"{gname}/b{batch_size}/peak_captured_over_oracle"] = (
                        by["envelope_captured"]["peak_bytes"] / by[ORACLE]["peak_bytes"]
                    )
                    ratios[f"{gname}/b{batch_size}/peak_captured_over_worst_case"] = (
                        by["envelope_captured"]["peak_bytes"]
                        / by["worst_case_captured"]["peak_bytes"]
                    )


def report(run):
    """Print the timing table, the ratios, and what was skipped or failed."""
    result = run.result
    print()
    print(
        table(
            [
                [
                    t["graph"],
                    t["model"],
                    t["batch_size"],
                    t["variant"],
                    f"{t['seconds_per_iteration']['median'] * 1e3:.2f}",
                    ""
                    if t["seconds_per_iteration"]["std"] is None
                    else f"{t['seconds_per_iteration']['std'] * 1e3:.2f}",
                    t.get("gpu_execution_fraction"),
                ]
                for t in result["timing"] + result["compiled"]
            ],
            ["graph", "model", "batch", "variant", "ms/it (median)", "std", "gpu fraction"],
        )
    )
    print(table([[k, f"{v:.2f}x"] for k, v in result["ratios"].items()], ["ratio", "value"]))
    if run.skipped:
        print("\nskipped:")
        for s in run.skipped:
            print(f"  - {s}")
    if run.errors:
        print("\nerrors:")
        for e in run.errors:
            print(f"  - {e['row']}: {e['error']}")


def main(argv=None):
    run = CheckRun(parse_args(argv))
    check = check_numerics(run)
    first_graph = True
    for gname, make_graph, batch_sizes in graph_plan(run):
        # The first graph that is measured gets the extra rows (compile, TF32, kernels,
        # overflow, GCN and GAT); a graph skipped or failed leaves that to the next one.
        if measure_graph(run, gname, make_graph, batch_sizes, first_graph):
            first_graph = False
    data_parallel(run)
    compute_ratios(run)
    report(run)
    run.result["complete"] = True
    path = run.save()
    print(f"\nwrote {path} in {time.perf_counter() - run.t_start:.0f} s")
    return 0 if check is not None and check["agree"] and not run.errors else 1


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a gpu_check result (bench/_headlines.py calls it)."""
    d, out = doc["detail"], []
    for key, value in (d.get("ratios") or {}).items():
        # graph/model/bN/kind (timing ratios, per model) or graph/bN/kind (memory, older files)
        parts = key.split("/")
        graph, model, batch, kind = parts if len(parts) == 4 else (parts[0], "sage", *parts[1:])
        unit = "x"
        lower = kind.startswith("peak_")
        suffix = "" if model == "sage" else f"_{model}"  # SAGE keeps the names CLAIMS.md reads
        out.append(
            headline(
                f"{kind}_{short(graph)}_{batch}{suffix}",
                value,
                unit,
                compared_to={
                    "captured_vs_dynamic": "dynamic pipeline",
                    "captured_vs_eager": "eager envelope",
                }.get(kind, "dynamic pipeline" if kind.endswith("dynamic") else "worst-case sizes"),
                where=f"{graph}, batch {batch[1:]}, 3-layer {model.upper()}, one seed",
                higher_is_better=not lower,
            )
        )
    for r in doc["rows"]:
        if r.get("variant") == "envelope_captured" and r.get("gpu_execution_fraction") is not None:
            out.append(
                headline(
                    f"gpu_fraction_captured_{short(r['graph'])}_b{r['batch_size']}",
                    r["gpu_execution_fraction"],
                    "fraction",
                    where=f"{r['graph']}, batch {r['batch_size']}, busy fraction of wall time",
                )
            )
    syncs = {}
    for r in doc["rows"]:
        if r.get("cuda_sync_warnings_per_iteration") is not None:
            syncs.setdefault(r["variant"], []).append(r["cuda_sync_warnings_per_iteration"])
    for variant, values in syncs.items():
        out.append(
            headline(
                f"sync_warnings_{variant}_max",
                max(values),
                "per iteration",
                where=f"torch CUDA sync-debug warnings, max over {len(values)} graph x batch rows",
                higher_is_better=False,
            )
        )
    num = d.get("numerics") or {}
    for kind in ("captured", "eager", "tiny_envelope"):
        key = f"{kind}_vs_static_max_abs_param_diff"
        if key in num:
            measured = kind != "captured" or bool(num.get("captured"))
            out.append(
                headline(
                    key,
                    num[key] if measured else None,
                    "abs",
                    compared_to="static step",
                    where=f"max |param diff| after {num.get('batches_per_epoch')} batches; "
                    f"tolerance {(num.get('tolerance') or {}).get(kind)}; same batches: "
                    f"{num.get(kind + '_same_batches')}"
                    + ("" if measured else "; no CUDA Graph captured (no GPU)"),
                    higher_is_better=False,
                )
            )
    return out


if __name__ == "__main__":
    sys.exit(main())
