"""Engine benchmark on the CPU: DGL vs zg dynamic vs zg envelope (static step), side by side.

    .venv/bin/python bench/engine.py                         # csbm 200k: SAGE, GCN, GAT at batch 1024
    .venv/bin/python bench/engine.py --graph products        # the products-scale graph (+ memory rows)
    .venv/bin/python bench/engine.py --quick                 # csbm 20k, one seed: checks it runs
    .venv/bin/python bench/engine.py --graph products --max-batches 40   # same batches, fewer of them
    .venv-modern/bin/python bench/engine.py --compile --no-dgl           # torch.compile beside zg
    .venv/bin/python bench/engine.py --models sage --kernels auto torch --max-batches 20 \
        --name engine_kernels        # both kernel paths side by side (the README's two rows)
    .venv/bin/python bench/engine.py --compiled --kernels auto torch --max-batches 20 \
        --name engine_compiled       # + Engine(mode="compiled"), first epoch left out

For each graph, model and batch size (fanouts [15, 10, 5], 3 layers): one full training epoch of
each pipeline (zg.Engine in mode "dgl", "dynamic" and "static"), timed in the same process, for
each seed (default 3 seeds; mean ± std). The
pipelines of one seed run back to back (DGL, zg dynamic, zg envelope; reversed on odd seeds, so
a load that drifts during a block biases the paired ratios in opposite directions), so a change
in the machine's load hits all three. Same thread count for both sides (``torch.get_num_threads()``,
recorded). Per row: seconds per epoch, the ratios DGL time / zg time, host syncs per iteration
(SyncAudit over steady-state iterations), overflows, and for SAGE at the first batch size the
per-stage breakdown of a few iterations (zg.profile).

Models: SAGE hidden 256 (the target row), GCN hidden 256, GAT 4 heads x 64 (the same 256
concatenated width). Memory rows (the envelope memory model, bytes of the features and
activations one iteration holds): the profiled envelope against the oracle (each batch's exact
sizes; its largest batch, i.e. the peak an oracle allocator would reach) and against the worst
case. Targets (issue 12): epoch ratio >= 1.0; on the products-scale graph envelope / oracle
<= 1.15 and envelope / worst case <= 0.5.

Kernels (``--kernels``, default ``auto``): the zg pipelines run with each kernel named, in the
same seed's block, back to back: ``kernel="auto"`` (the compiled numba kernels on a CPU with
numba: pipelines ``zg_dynamic``, ``zg_envelope``) and ``kernel="torch"`` (the Engine's default,
the torch code the notebooks show: ``zg_dynamic_torch``, ``zg_envelope_torch``). Every row
records the kernel that ran, and every headline metric's ``where`` names it.

Compiled (``--compiled``): one more pipeline in every seed's block, ``zg_compiled``:
``Engine(mode="compiled")``, the static step compiled whole from the torch code
(:mod:`zg.compiled`). Every pipeline then trains a first, untimed epoch (of ``--max-batches``
batches when given) before the timed one, so the compile (and every pipeline's own warm-up) is
left out of the ratios; the compiled row records its compile seconds, the graphs compiled, the
recompiles during the timed epoch (the engine's backend count and torch's own
``torch._dynamo.utils.counters``), and the first epoch's seconds.

Writes bench/results/<name>.json (default ``engine`` for csbm, ``engine_products``, and
``engine_quick`` with --quick).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep
os.environ.setdefault("DGLBACKEND", "pytorch")

import argparse
import shlex
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import kernel_phrase, machine_note, pm, ran_kernel, table, write_json

import zg
from zg import models
from zg.engine import Engine
from zg.experiments.results import headline, headline_from, spread
from zg.observe import AuditSyncs
from zg.profile import profile_engine

PIPELINES = ("dgl", "zg_dynamic", "zg_envelope")
ZG_PIPELINES = ("zg_dynamic", "zg_envelope")


def suffix(kernel: str) -> str:
    """A pipeline name's kernel suffix: none for "auto" (the names of the earlier files), else
    "_<kernel>" ("zg_envelope_torch")."""
    return "" if kernel == "auto" else f"_{kernel}"


def all_zg(args) -> list[str]:
    """Every zg pipeline of a run: each kernel's, then ``zg_compiled`` with ``--compiled``."""
    return zg_pipelines(args.kernels) + (["zg_compiled"] if args.compiled else [])


def zg_pipelines(kernels) -> list[str]:
    """The zg pipelines of a run, kernel by kernel: ["zg_dynamic", "zg_envelope",
    "zg_dynamic_torch", "zg_envelope_torch"] for ``--kernels auto torch``."""
    return [p + suffix(k) for k in kernels for p in ZG_PIPELINES]


# --compile: the model's forward under torch.compile, in zg's dynamic and eager modes (a user's
# first try at the same thing): pipeline -> (zg mode, torch.compile mode).
COMPILED = {
    "zg_dynamic_compiled": ("dynamic", "default"),
    "zg_dynamic_compiled_reduce_overhead": ("dynamic", "reduce-overhead"),
    "zg_eager_compiled": ("eager", "default"),
}


def have_dgl() -> bool:
    try:
        import dgl  # noqa: F401
    except Exception:
        return False
    return True


def load_graph(name: str, nodes: int, seed: int):
    """csbm (the quick graph) or the products-scale graph (2.4M nodes, degree ~50, 100 features)."""
    if name == "csbm":
        return f"csbm_{nodes}", zg.datasets.csbm(
            num_nodes=nodes, avg_degree=20, num_classes=10, feat_dim=128, seed=seed
        )
    if name == "products":
        return "products_like", zg.datasets.products_like(
            num_nodes=2_400_000, avg_degree=50, feat_dim=100, num_classes=47, seed=seed
        )
    raise ValueError(f"--graph must be csbm or products, got {name!r}")


def model_widths(kind: str, hidden: int, heads: int):
    """(hidden_dim, extra kwargs) so every model's hidden layers are ``hidden`` wide."""
    if kind == "gat":
        if hidden % heads:
            raise ValueError(f"--hidden {hidden} must be a multiple of --gat-heads {heads}")
        return hidden // heads, {"heads": heads}
    return hidden, {}


def run_seed(g, kind, batch_size, args, seed, envelope, want_profile, reverse=False):
    """One epoch of each pipeline for one seed; returns {pipeline: measurements} (+ profiles).
    The pipelines run in the listed order (DGL, then each kernel's zg dynamic and zg envelope),
    or in the reverse order with ``reverse``."""
    hidden, extra = model_widths(kind, args.hidden, args.gat_heads)
    layers = len(args.fanouts)

    def zg_model():
        torch.manual_seed(seed)
        return models.build(kind, g.feat_dim, hidden, g.num_classes, layers, **extra)

    def build(mode, model, envelope="profiled", audit=2, kernel="auto"):
        eng = Engine(
            g, model, args.fanouts, batch_size, envelope, mode=mode, seed=seed, kernel=kernel
        )
        eng.observers = [AuditSyncs(audit)] if audit else []
        return eng

    out = {}

    def run_dgl():
        from zg.baselines.dgl import DGLModel

        torch.manual_seed(seed)
        dgl_eng = build(
            "dgl", DGLModel(kind, g.feat_dim, hidden, g.num_classes, layers, **extra), audit=0
        )
        first = dgl_eng.train_epoch(max_batches=args.max_batches) if args.compiled else None
        stats = dgl_eng.train_epoch(max_batches=args.max_batches)
        out["dgl"] = {"seconds": stats.seconds, "iterations": stats.iterations, "loss": stats.loss}
        if first is not None:
            out["dgl"]["first_epoch_seconds"] = first.seconds

    engines = {"dgl": None} if args.dgl else {}
    for k in args.kernels:
        engines["zg_dynamic" + suffix(k)] = lambda k=k: build("dynamic", zg_model(), kernel=k)
        engines["zg_envelope" + suffix(k)] = lambda k=k: build(
            "static", zg_model(), envelope, kernel=k
        )
    if args.compiled:  # the static step compiled whole; the torch kernels are what compiles
        engines["zg_compiled"] = lambda: build("compiled", zg_model(), envelope, kernel="torch")
    profiles = []
    for name in reversed(list(engines)) if reverse else list(engines):
        if name == "dgl":
            run_dgl()
            continue
        eng = engines[name]()
        # With --compiled every pipeline's first epoch is left out (the compile is in it).
        first = eng.train_epoch(max_batches=args.max_batches) if args.compiled else None
        compiled = compiled_counts(eng)
        stats = eng.train_epoch(max_batches=args.max_batches)
        # launches: dispatch-level ops per audited iteration (zg.audit.launches_op); the fused
        # CPU sampler's work is one compiled call there, counted as nothing.
        out[name] = {
            "seconds": stats.seconds,
            "iterations": stats.iterations,
            "host_syncs_per_iteration": stats.host_syncs,
            "overflows": stats.overflows,
            "launches_per_iteration": stats.launches,
            "loss": stats.loss,
            "kernel": ran_kernel(eng),
        }
        if first is not None:
            out[name]["first_epoch_seconds"] = first.seconds
        if compiled is not None:
            after = compiled_counts(eng)
            out[name].update(
                compile_seconds=after["compile_seconds"],
                graphs_compiled=after["graphs"],
                recompiles_timed_epoch=after["graphs"] - compiled["graphs"],
                torch_unique_graphs_timed_epoch=after["torch_unique_graphs"]
                - compiled["torch_unique_graphs"],
            )
        if want_profile:
            prof = profile_engine(eng, iterations=3, warmup=1)
            profiles.append({"pipeline": name, **prof.as_dict()})
            out[name]["host_syncs_per_iteration_steady"] = prof.host_syncs_per_iteration
        if name.startswith("zg_envelope") or name == "zg_compiled":
            out[name]["memory_model_bytes"] = eng.memory_model()["totals"]
        del eng
    if args.compile:
        from zg.engine import StepHooks

        for name, (mode, how) in COMPILED.items():
            model = zg_model()
            try:
                eng = Engine(
                    g,
                    model,
                    args.fanouts,
                    batch_size,
                    "profiled" if mode == "dynamic" else envelope,
                    mode=mode,
                    seed=seed,
                    kernel="auto",
                    hooks=StepHooks(forward=torch.compile(model, mode=how)),
                )
                eng.observers = []
                t0 = time.perf_counter()
                eng.train_epoch(max_batches=3)  # compiles (not timed below)
                warm = time.perf_counter() - t0
                stats = eng.train_epoch(max_batches=args.max_batches)
                out[name] = {
                    "seconds": stats.seconds,
                    "iterations": stats.iterations,
                    "warm_up_seconds": warm,
                    "loss": stats.loss,
                }
            except Exception as exc:  # a compiler that fails is a result
                out[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"}
            eng = None
    return out, profiles


def compiled_counts(eng) -> dict | None:
    """A compiled engine's compile record so far (None for the other modes): its graphs and
    compile seconds (zg.compiled.CompiledStep) and torch's own count of compiled graphs."""
    if eng.compiled is None:
        return None
    from torch._dynamo.utils import counters

    return {
        "graphs": eng.compiled.total_compiles,
        "compile_seconds": eng.compiled.total_compile_seconds,
        "torch_unique_graphs": counters["stats"]["unique_graphs"],
    }


def parse_args(argv=None):
    """The command line, with --quick's settings and DGL's presence filled in."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--graph", choices=["csbm", "products"], default="csbm")
    ap.add_argument(
        "--nodes", type=int, default=200_000, help="csbm size (the products graph is fixed)"
    )
    ap.add_argument(
        "--models", nargs="+", choices=["sage", "gcn", "gat"], default=["sage", "gcn", "gat"]
    )
    ap.add_argument("--batch-sizes", type=int, nargs="+", default=[1024])
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--gat-heads", type=int, default=4)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--kernels",
        nargs="+",
        choices=["auto", "torch", "fused"],
        default=["auto"],
        help="the zg pipelines' kernels, each run in every seed's block (default: auto; "
        "'auto torch': the compiled path beside the Engine's default)",
    )
    ap.add_argument(
        "--max-batches",
        type=int,
        default=None,
        help="time the first N batches of the epoch on every side (default: the whole epoch)",
    )
    ap.add_argument("--quick", action="store_true", help="csbm 20k, one seed, no products graph")
    ap.add_argument("--name", default=None)
    ap.add_argument(
        "--compile",
        action="store_true",
        help="also time the model under torch.compile (default and reduce-overhead) in "
        "zg's dynamic and eager modes; compile time reported apart",
    )
    ap.add_argument(
        "--compiled",
        action="store_true",
        help="add Engine(mode='compiled') (zg_compiled) to every seed's block; every "
        "pipeline's first epoch is then left out (compile seconds recorded apart)",
    )
    ap.add_argument("--note", default=None, help="a note stored in the result file (a small run)")
    ap.add_argument(
        "--no-dgl",
        dest="dgl",
        action="store_false",
        default=None,
        help="skip the DGL side (default: run it when DGL imports)",
    )
    args = ap.parse_args(argv)
    if len(set(args.kernels)) != len(args.kernels) or "auto" not in args.kernels:
        ap.error(
            "--kernels: each kernel once, auto among them (the pipelines the targets judge); "
            f"got {' '.join(args.kernels)}"
        )
    if args.dgl is None:
        args.dgl = have_dgl()
    if args.quick:
        args.graph, args.nodes, args.seeds = "csbm", 20_000, [0]
    return args


def result_name(args) -> str:
    return args.name or (
        "engine_quick"
        if args.quick
        else {"csbm": "engine", "products": "engine_products"}[args.graph]
    )


def measure(args):
    """Every batch size, model and seed: the rows (seed by seed, then mean ± std), the stage
    profiles, the memory rows and the thread count."""
    gname, g = load_graph(args.graph, args.nodes, seed=0)
    args.nodes = g.num_nodes  # the settings say the graph's own size (--nodes sizes csbm only)
    threads = torch.get_num_threads()
    print(
        f"{gname}: {g.num_nodes} nodes, {g.num_edges} edges, {g.train_idx.numel()} training nodes; "
        f"{threads} threads for DGL and zg",
        flush=True,
    )
    rows, profiles, memory = [], [], []
    for batch_size in args.batch_sizes:
        # Sized for the rows a batch really has (the Engine sizes its buffers the same way).
        envelopes, profile_seconds = {}, {}
        for seed in args.seeds:
            t0 = time.perf_counter()
            envelopes[seed] = zg.Envelope.profile(
                g, args.fanouts, min(batch_size, g.train_idx.numel()), seed=seed
            )
            profile_seconds[seed] = time.perf_counter() - t0
        for kind in args.models:
            per_seed = []
            for i, seed in enumerate(args.seeds):
                want_profile = (
                    i == 0 and kind == args.models[0] and batch_size == args.batch_sizes[0]
                )
                # Odd seeds run the pipelines in reverse: a load that drifts during one seed's
                # block then biases the paired ratios one way on even seeds, the other on odd.
                out, prof = run_seed(
                    g,
                    kind,
                    batch_size,
                    args,
                    seed,
                    envelopes[seed],
                    want_profile,
                    reverse=i % 2 == 1,
                )
                per_seed.append(out)
                profiles += [
                    {"graph": gname, "model": kind, "batch_size": batch_size, "seed": seed, **p}
                    for p in prof
                ]
                print(
                    f"  {kind:4s} b={batch_size:5d} seed {seed}: "
                    + "  ".join(
                        f"{p} {out[p]['seconds']:7.2f} s" if "seconds" in out[p] else f"{p} failed"
                        for p in out
                    ),
                    flush=True,
                )
            row = {
                "graph": gname,
                "model": kind,
                "batch_size": batch_size,
                "seeds": args.seeds,
                "envelope": envelopes[args.seeds[0]].sizes,
            }
            for p in [p for p in ("dgl", *all_zg(args)) if p in per_seed[0]]:
                row[p] = {
                    "seconds": spread(r[p]["seconds"] for r in per_seed),
                    "iterations": per_seed[0][p]["iterations"],
                }
                if "kernel" in per_seed[0][p]:
                    row[p]["kernel"] = per_seed[0][p]["kernel"]
                if "first_epoch_seconds" in per_seed[0][p]:
                    row[p]["first_epoch_seconds"] = spread(
                        r[p]["first_epoch_seconds"] for r in per_seed
                    )
            if args.compiled:
                c = row["zg_compiled"]
                c["compile_seconds"] = spread(r["zg_compiled"]["compile_seconds"] for r in per_seed)
                for key in (
                    "graphs_compiled",
                    "recompiles_timed_epoch",
                    "torch_unique_graphs_timed_epoch",
                ):
                    c[key] = [r["zg_compiled"][key] for r in per_seed]
                # time of each other zg pipeline / time of the compiled one, seed by seed
                for p in zg_pipelines(args.kernels):
                    row[f"ratio_{p[3:]}_vs_compiled"] = spread(
                        r[p]["seconds"] / r["zg_compiled"]["seconds"] for r in per_seed
                    )
            for p in [p for p in COMPILED if p in per_seed[0]]:
                if all("seconds" in r[p] for r in per_seed):
                    row[p] = {
                        "seconds": spread(r[p]["seconds"] for r in per_seed),
                        "warm_up_seconds": spread(r[p]["warm_up_seconds"] for r in per_seed),
                        "iterations": per_seed[0][p]["iterations"],
                    }
                    row[f"ratio_{p[3:]}_vs_envelope"] = spread(
                        r[p]["seconds"] / r["zg_envelope"]["seconds"] for r in per_seed
                    )
                else:
                    row[p] = {"error": next(r[p]["error"] for r in per_seed if "error" in r[p])}
            for p in all_zg(args):
                row[p]["overflows"] = sum(r[p]["overflows"] for r in per_seed)
                # Steady state where profiled (the epoch's own audit may include the first-ever
                # iteration), else the epoch's audit of its first iterations.
                steady = [r[p].get("host_syncs_per_iteration_steady") for r in per_seed]
                audited = [r[p]["host_syncs_per_iteration"] for r in per_seed]
                row[p]["host_syncs_per_iteration_steady"] = next(
                    (s for s in steady if s is not None), None
                )
                row[p]["host_syncs_per_iteration"] = audited
                row[p]["launches_per_iteration"] = [
                    r[p].get("launches_per_iteration") for r in per_seed
                ]
            # Ratios are taken seed by seed (same load), then averaged.
            for p in all_zg(args):
                if args.dgl:
                    row[f"ratio_dgl_vs_{p[3:]}"] = spread(
                        r["dgl"]["seconds"] / r[p]["seconds"] for r in per_seed
                    )
            row["per_seed"] = per_seed
            rows.append(row)
        # Memory: the model-independent feature and activation bytes of SAGE at this width.
        mm = [
            envelopes[s].memory_model(g.feat_dim, args.hidden, max(int(g.num_classes), 1))["totals"]
            for s in args.seeds
        ]
        memory.append(
            {
                "graph": gname,
                "batch_size": batch_size,
                "hidden": args.hidden,
                "bytes": [m for m in mm],
                "envelope_vs_oracle_max": spread(m["envelope"] / m["oracle_max"] for m in mm),
                "envelope_vs_oracle_mean": spread(m["envelope"] / m["oracle_mean"] for m in mm),
                "envelope_vs_worst_case": spread(m["envelope"] / m["worst_case"] for m in mm),
                "profile_seconds": spread(profile_seconds[s] for s in args.seeds),
            }
        )
    return rows, profiles, memory, threads


def report(args, rows, memory):
    """Print the tables; return the targets, each met or not (None: not measured here)."""

    def pms(d, fmt="{:.2f}"):
        return pm(d["mean"], d["std"], fmt)

    print()
    if args.dgl:
        print(
            table(
                [
                    [
                        r["graph"],
                        r["model"],
                        r["batch_size"],
                        r[f"zg_envelope{suffix(k)}"]["kernel"],
                        pms(r["dgl"]["seconds"]),
                        pms(r[f"zg_dynamic{suffix(k)}"]["seconds"]),
                        pms(r[f"zg_envelope{suffix(k)}"]["seconds"]),
                        pms(r[f"ratio_dgl_vs_dynamic{suffix(k)}"]) + "x",
                        pms(r[f"ratio_dgl_vs_envelope{suffix(k)}"]) + "x",
                        max(
                            r[f"zg_envelope{suffix(k)}"]["host_syncs_per_iteration"],
                            key=lambda v: -1 if v is None else v,
                        ),
                        r[f"zg_envelope{suffix(k)}"]["overflows"],
                    ]
                    for r in rows
                    for k in args.kernels
                ],
                [
                    "graph",
                    "model",
                    "batch",
                    "zg kernel",
                    "DGL s/epoch",
                    "dynamic s/epoch",
                    "envelope s/epoch",
                    "DGL/dynamic",
                    "DGL/envelope",
                    "env syncs/it",
                    "overflows",
                ],
            )
        )
    if args.compiled:
        print(
            table(
                [
                    [
                        r["graph"],
                        r["model"],
                        r["batch_size"],
                        pms(r["zg_compiled"]["seconds"]),
                        pms(r["zg_compiled"]["compile_seconds"], "{:.1f}"),
                        r["zg_compiled"]["recompiles_timed_epoch"],
                        pms(r["ratio_dgl_vs_compiled"]) + "x" if args.dgl else "",
                        *(
                            pms(r[f"ratio_{p[3:]}_vs_compiled"]) + "x"
                            for p in zg_pipelines(args.kernels)
                        ),
                    ]
                    for r in rows
                ],
                [
                    "graph",
                    "model",
                    "batch",
                    "compiled s/epoch",
                    "compile s",
                    "recompiles",
                    "DGL/compiled",
                    *(f"{p[3:]}/compiled" for p in zg_pipelines(args.kernels)),
                ],
            )
        )
    if args.compile:
        print(
            table(
                [
                    [
                        r["graph"],
                        r["model"],
                        r["batch_size"],
                        p,
                        r[p].get("error") or pms(r[p]["seconds"]),
                        "" if "error" in r[p] else pms(r[p]["warm_up_seconds"]),
                        "" if "error" in r[p] else pms(r[f"ratio_{p[3:]}_vs_envelope"]) + "x",
                    ]
                    for r in rows
                    for p in COMPILED
                    if p in r
                ],
                [
                    "graph",
                    "model",
                    "batch",
                    "compiled pipeline",
                    "s/epoch",
                    "compile (warm-up) s",
                    "compiled / zg envelope",
                ],
            )
        )
    print()
    print(
        table(
            [
                [
                    m["graph"],
                    m["batch_size"],
                    f"{m['bytes'][0]['envelope'] / 2**20:.1f}",
                    f"{m['bytes'][0]['oracle_max'] / 2**20:.1f}",
                    f"{m['bytes'][0]['worst_case'] / 2**20:.1f}",
                    pms(m["envelope_vs_oracle_max"], "{:.3f}") + "x",
                    pms(m["envelope_vs_worst_case"], "{:.3f}") + "x",
                ]
                for m in memory
            ],
            [
                "graph",
                "batch",
                "envelope MiB",
                "oracle MiB (largest batch)",
                "worst case MiB",
                "envelope/oracle",
                "envelope/worst",
            ],
        )
    )
    b1024 = [r for r in rows if r["batch_size"] == 1024 and r["model"] == "sage"]
    targets = {
        "training epoch, SAGE h=256, batch 1024: DGL / zg envelope >= 1.0": all(
            r["ratio_dgl_vs_envelope"]["mean"] >= 1.0 for r in b1024
        )
        if b1024 and args.dgl
        else None,
        "0 host syncs per envelope iteration": all(
            r["zg_envelope"]["host_syncs_per_iteration_steady"] in (0, 0.0, None)
            and all(a in (0, 0.0, None) for a in r["zg_envelope"]["host_syncs_per_iteration"])
            for r in rows
        ),
    }
    if args.graph == "products":
        targets["memory: profiled envelope / oracle <= 1.15"] = all(
            m["envelope_vs_oracle_max"]["mean"] <= 1.15 for m in memory
        )
        targets["memory: profiled envelope / worst case <= 0.5"] = all(
            m["envelope_vs_worst_case"]["mean"] <= 0.5 for m in memory
        )
    for k, ok in targets.items():
        print(f"  [{'met' if ok else ('n/a' if ok is None else 'MISSED')}] {k}")
    return targets


def main(argv=None):
    args = parse_args(argv)
    rows, profiles, memory, threads = measure(args)
    targets = report(args, rows, memory)
    # The kernel the zg pipelines ran (the fastest on this machine: fused on a CPU with numba).
    kernels = sorted({r[p]["kernel"] for r in rows for p in zg_pipelines(args.kernels)})
    first = "left out: every pipeline trains one untimed epoch first" if args.compiled else "timed"
    command = shlex.join(["bench/engine.py", *(argv if argv is not None else sys.argv[1:])])
    path = write_json(
        result_name(args),
        {
            "benchmark": "engine",
            "command": command.strip(),
            "machine": machine_note(),
            "threads": threads,
            "settings": {
                **vars(args),
                "kernel": kernels[0] if len(kernels) == 1 else kernels,
                "pipeline_order": "listed on even seeds, reversed on odd seeds",
            },
            "rows": rows,
            "memory": memory,
            "stage_profiles": profiles,
            **({"note": args.note} if args.note else {}),
            "targets": targets,
            "notes": {
                "memory": "envelope memory model (zg.Envelope.memory_model), SAGE "
                "widths; oracle = the largest profiled batch's exact sizes",
                "gat": f"{args.gat_heads} heads x {args.hidden // args.gat_heads} "
                "features per head (hidden layers concatenate heads)",
                "compile": (
                    "--compile: the model's forward under torch.compile "
                    "(default, reduce-overhead) in zg's dynamic and eager "
                    "modes; 3 warm-up batches (compile) timed apart"
                    if args.compile
                    else "torch.compile not run (--compile)"
                ),
                "dgl": "run" if args.dgl else "not run (DGL absent or --no-dgl)",
                "first_epoch": first,
                "compiled": (
                    "--compiled: zg_compiled is Engine(mode='compiled', kernel='torch'), the "
                    "static step compiled whole (zg.compiled); compile_seconds: the calls that "
                    "compiled (first epoch); recompiles_timed_epoch: graphs compiled during "
                    "the timed epoch (0: none); ratio_<p>_vs_compiled: time <p> / time compiled"
                    if args.compiled
                    else "not run (--compiled)"
                ),
            },
        },
    )
    print(f"\nwrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a engine result (bench/_headlines.py calls it). Each metric's
    ``where`` names the kernel its zg pipeline ran (a row that records none: a file from before
    rows recorded it)."""
    out = []
    kernels = doc["settings"].get("kernels") or ["auto"]
    for r in doc["rows"]:
        tag = f"{r['model']}_b{r['batch_size']}"
        where = f"{r['graph']}, {r['model']}, batch {r['batch_size']}"

        def ran(pipe, r=r):
            kernel = (r.get(pipe) or {}).get("kernel")
            return f", {kernel_phrase(kernel)}" if kernel else ""

        for k in kernels:
            ratio = r.get(f"ratio_dgl_vs_envelope{suffix(k)}") or {}
            if ratio.get("values"):
                out.append(
                    headline_from(
                        f"envelope{suffix(k)}_vs_dgl_{tag}",
                        ratio["values"],
                        "x",
                        compared_to="DGL (time DGL / time zg envelope)",
                        where=where + ran(f"zg_envelope{suffix(k)}"),
                    )
                )
        for k in kernels:
            for pipe in (f"zg_envelope{suffix(k)}", f"zg_dynamic{suffix(k)}"):
                s = (r.get(pipe) or {}).get("host_syncs_per_iteration_steady")
                if s is not None:
                    out.append(
                        headline(
                            f"host_syncs_{pipe[3:]}_{tag}",
                            s,
                            "per iteration",
                            where=where + ", steady state" + ran(pipe),
                            higher_is_better=False,
                        )
                    )
        compiled = r.get("zg_compiled") or {}
        if compiled:  # --compiled: the static step compiled whole, first epoch left out
            tagged = where + ", " + kernel_phrase(compiled.get("kernel", "torch"))
            ratio = (r.get("ratio_dgl_vs_compiled") or {}).get("values")
            if ratio:
                out.append(
                    headline_from(
                        f"compiled_vs_dgl_{tag}",
                        ratio,
                        "x",
                        compared_to="DGL (time DGL / time zg compiled)",
                        where=tagged + ", first epoch left out",
                    )
                )
            for k in kernels:
                ratio = (r.get(f"ratio_envelope{suffix(k)}_vs_compiled") or {}).get("values")
                if ratio:
                    out.append(
                        headline_from(
                            f"compiled_vs_envelope{suffix(k)}_{tag}",
                            ratio,
                            "x",
                            compared_to="zg envelope, eager (time envelope / time compiled)"
                            + ran(f"zg_envelope{suffix(k)}"),
                            where=tagged + ", first epoch left out",
                        )
                    )
            seconds = (compiled.get("compile_seconds") or {}).get("values")
            if seconds:
                out.append(
                    headline_from(
                        f"compile_seconds_{tag}",
                        seconds,
                        "s",
                        where=tagged + ", the first epoch's compile",
                        higher_is_better=False,
                    )
                )
            recompiles = compiled.get("recompiles_timed_epoch")
            if recompiles:
                out.append(
                    headline(
                        f"recompiles_steady_epoch_{tag}",
                        max(recompiles),
                        "graphs",
                        where=tagged + ", the timed epoch (most over the seeds)",
                        higher_is_better=False,
                    )
                )
    for m in doc["detail"].get("memory") or []:
        v = (m.get("envelope_vs_oracle_mean") or {}).get("values")
        if v:
            out.append(
                headline_from(
                    f"envelope_vs_oracle_mean_b{m['batch_size']}",
                    v,
                    "x",
                    compared_to="oracle's mean batch",
                    where=f"{m['graph']}, batch {m['batch_size']}",
                    higher_is_better=False,
                )
            )
    return out


if __name__ == "__main__":
    main()
