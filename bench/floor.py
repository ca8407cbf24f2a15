"""The floor: how close each pipeline's iteration is to what any pipeline must pay.

    .venv/bin/python bench/floor.py             # csbm 200k, SAGE h=256, [15, 10, 5], batch 1024, 3 seeds
    .venv/bin/python bench/floor.py --quick     # csbm 5k, small model, one seed: checks it runs
    python bench/floor.py                       # on a GPU: the same rows plus zg captured (floor_cuda.json)

Whatever a pipeline does to sample, every iteration then gathers its input features, runs the
model forward, takes the loss, runs backward and steps the optimizer. The floor is that part
alone (:mod:`zg.experiments.floor`): batches sampled once by zg's dynamic sampler (each batch's
exact sizes, no padding) and kept resident, then ``zg.experiments.fixed_batch_step`` (the
engine's own step, less sampling) on them: the same zg model, optimizer, loss and kernels as the
zg pipelines, at the shapes of a real sampled batch.

Per seed (default 3), the same ``--batches`` batches of epoch 0 (the same seeds for every side)
are run as whole iterations by each pipeline: DGL (``zg.Engine`` mode "dgl": DGL's sampler,
loader and ``dgl.nn`` layers; when DGL imports), zg dynamic (mode "dynamic"), zg envelope (mode
"static") and, on a GPU only, zg captured (mode "graph", one CUDA Graph replayed; on a CPU the
row is skipped, never stood in for). Each side is one pass over those batches; the passes are
interleaved, ``--repeats`` rounds in a rotating order, after one warm-up round, so a change in
the machine's load reaches every side. Per seed: the median pass of each side, seconds per
iteration; each pipeline's ratio to the floor is the median of its per-round ratios (the two
passes of one round, side by side); a further clocked pass per round splits the floor into
gather, forward, loss, backward and step (its own pass: the clock's laps are not in the floor's
time). Across seeds: mean and sample std. The zg sides run ``kernel="auto"`` (the compiled numba
kernels on a CPU with numba, the torch path on a GPU); the kernel that ran is recorded.

Targets (issue 37): zg envelope within 1.10x of the floor on the CPU; zg captured within 1.05x
of it on a GPU. Writes bench/results/<name>.json (default ``floor``, ``floor_cuda`` on a GPU,
``floor_quick`` with --quick).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep
os.environ.setdefault("DGLBACKEND", "pytorch")

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, pm, ran_kernel, table, write_json

import zg
from zg import models
from zg.engine import Engine
from zg.experiments.floor import FLOOR_STAGES, fixed_batch_step, resident_batches
from zg.experiments.results import headline_from, spread
from zg.interop import require_dgl
from zg.step import StageClock

# Each pipeline: (display name, zg.Engine mode). zg captured is CUDA only.
PIPELINES = {
    "dgl": ("DGL", "dgl"),
    "zg_dynamic": ("zg dynamic", "dynamic"),
    "zg_envelope": ("zg envelope", "static"),
    "zg_captured": ("zg captured", "graph"),
}
# The targets: pipeline -> (device type it is judged on, largest multiple of the floor).
TARGETS = {"zg_envelope": ("cpu", 1.10), "zg_captured": ("cuda", 1.05)}


def parse_args(argv=None):
    """The command line, with --quick's settings, the device and the file name filled in."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=200_000, help="csbm size")
    ap.add_argument("--model", choices=["sage", "gcn"], default="sage")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--fanouts", type=int, nargs="+", default=[15, 10, 5])
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument(
        "--batches", type=int, default=2, help="batches per pass (the same on every side)"
    )
    ap.add_argument("--repeats", type=int, default=9, help="interleaved timed rounds per seed")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu")
    ap.add_argument("--quick", action="store_true", help="csbm 5k, hidden 64, batch 256, one seed")
    ap.add_argument("--name", default=None)
    ap.add_argument(
        "--no-dgl",
        dest="dgl",
        action="store_false",
        default=True,
        help="skip the DGL side (it is skipped anyway when DGL does not import)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.hidden, args.batch_size, args.seeds = 5_000, 64, 256, [0]
        args.batches, args.repeats = 2, 3
    if args.device is None:
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    cuda = torch.device(args.device).type == "cuda"
    args.name = args.name or ("floor_quick" if args.quick else "floor_cuda" if cuda else "floor")
    return args


def skipped_pipelines(args) -> dict[str, str]:
    """The pipelines this run does not measure, each with the reason (printed and recorded)."""
    skipped = {}
    if torch.device(args.device).type != "cuda":
        skipped["zg_captured"] = "CUDA only: a CUDA Graph needs a GPU (measured only on a GPU)"
    if not args.dgl:
        skipped["dgl"] = "--no-dgl"
    else:
        try:
            require_dgl()
        except ImportError:
            skipped["dgl"] = "DGL does not import here"
    return skipped


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build_sides(g, args, seed, skipped):
    """{side: (run(b), prepare() or None)} for the floor and every measured pipeline, each with
    its own model (same initial weights), plus the zg kernel that ran; DGL failing to build or
    run (e.g. without its CUDA build) is recorded in ``skipped``."""
    device = torch.device(args.device)

    def engine(mode):
        torch.manual_seed(seed)
        if mode == "dgl":
            from zg.baselines.dgl import DGLModel

            net = DGLModel(args.model, g.feat_dim, args.hidden, g.num_classes, len(args.fanouts))
        else:
            net = models.build(
                args.model, g.feat_dim, args.hidden, g.num_classes, len(args.fanouts)
            )
        eng = Engine(
            g,
            net,
            args.fanouts,
            args.batch_size,
            mode=mode,
            device=device,
            seed=seed,
            kernel="auto",
        )
        eng.observers = []  # no audit while timing
        return eng

    floor = engine("dynamic")
    resident = resident_batches(floor, args.batches)  # sampled once, kept on the device
    _sync(device)
    sides = {"floor": (lambda b: fixed_batch_step(floor, resident[b], batch=b), None)}
    engines = {"floor": floor}
    for key, (_, mode) in PIPELINES.items():
        if key in skipped:
            continue
        try:
            eng = engine(mode)
            eng.run_batch(0, epoch=0)  # builds DGL's loader / the envelope's buffers
        except Exception as exc:  # a side that cannot run here is a result, not a crash
            if mode != "dgl":
                raise
            skipped[key] = f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            continue
        prepare = (lambda e=eng: e.sampler.prepare(0, 0, e.batches(0))) if mode == "dgl" else None
        sides[key] = (lambda b, e=eng: e.run_batch(b, epoch=0), prepare)
        engines[key] = eng
    return sides, engines, resident


def time_pass(run, count: int, device, prepare=None) -> float:
    """Seconds per iteration of one pass over batches 0 .. count - 1 (``prepare`` untimed)."""
    if prepare is not None:
        prepare()  # DGL's loader starts before the clock, as zg's epoch table loads
    _sync(device)
    start = time.perf_counter()
    for b in range(count):
        run(b)
    _sync(device)
    return (time.perf_counter() - start) / count


def floor_parts(floor_engine, resident, device) -> tuple[dict[str, float], float]:
    """One clocked pass of the floor: seconds per iteration of each floor stage, and of the
    clocked pass as a whole (the laps lie inside it)."""
    clock = StageClock(device)
    _sync(device)
    start = time.perf_counter()
    for b, mb in enumerate(resident):
        clock.start()  # only the step's own stages: the loop between steps is not lapped
        fixed_batch_step(floor_engine, mb, batch=b, clock=clock)
    seconds = clock.finish()  # on a GPU: synchronises, then reads the events
    whole = (time.perf_counter() - start) / len(resident)
    return {s: seconds.get(s, 0.0) / len(resident) for s in FLOOR_STAGES}, whole


def run_seed(g, args, seed, skipped):
    """One seed: a warm-up round, then ``args.repeats`` interleaved rounds of every side."""
    device = torch.device(args.device)
    sides, engines, resident = build_sides(g, args, seed, skipped)
    names = [*sides, "floor_parts"]
    seconds = {n: [] for n in sides}
    parts = {s: [] for s in FLOOR_STAGES}
    clocked = []
    for r in range(args.repeats + 1):  # round 0 warms up (compiles, captures, allocates)
        shift = r % len(names)
        for n in names[shift:] + names[:shift]:
            if n == "floor_parts":
                laps, whole = floor_parts(engines["floor"], resident, device)
                if r:
                    clocked.append(whole)
                    for s in FLOOR_STAGES:
                        parts[s].append(laps[s])
                continue
            value = time_pass(sides[n][0], args.batches, device, prepare=sides[n][1])
            if r:
                seconds[n].append(value)
    out = {
        "seed": seed,
        "floor": {
            "seconds": statistics.median(seconds["floor"]),
            "seconds_all": seconds["floor"],
            "parts": {s: statistics.median(v) for s, v in parts.items()},
            "parts_all": parts,
            "clocked_seconds": statistics.median(clocked),
            "clocked_seconds_all": clocked,
            "kernel": ran_kernel(engines["floor"]),
            "input_rows": [int(mb.input_nodes.numel()) for mb in resident],
        },
    }
    for key in (k for k in PIPELINES if k in sides):
        eng = engines[key]
        ratios = [p / f for p, f in zip(seconds[key], seconds["floor"])]
        out[key] = {
            "seconds": statistics.median(seconds[key]),
            "seconds_all": seconds[key],
            "ratio_to_floor": statistics.median(ratios),
            "ratios_all": ratios,
            "kernel": eng.kernel if key == "dgl" else ran_kernel(eng),
            "envelope": None if eng.envelope is None else list(eng.envelope.sizes),
            "overflowed": bool(eng.overflowed) if eng.envelope is not None else False,
        }
    return out


def summarise(per_seed, skipped) -> list[dict]:
    """One row per side: the floor (with its parts), then each pipeline (mean ± std over seeds
    of the per-seed medians), then each skipped pipeline with its reason."""
    floor = [r["floor"] for r in per_seed]
    rows = [
        {
            "pipeline": "floor",
            "key": "floor",
            "seconds": spread(f["seconds"] for f in floor),
            "parts": {s: spread(f["parts"][s] for f in floor) for s in FLOOR_STAGES},
            "clocked_seconds": spread(f["clocked_seconds"] for f in floor),
            "kernel": floor[0]["kernel"],
        }
    ]
    for key, (name, mode) in PIPELINES.items():
        if key in skipped:
            rows.append({"pipeline": name, "key": key, "mode": mode, "skipped": skipped[key]})
            continue
        mine = [r[key] for r in per_seed]
        rows.append(
            {
                "pipeline": name,
                "key": key,
                "mode": mode,
                "seconds": spread(m["seconds"] for m in mine),
                "ratio_to_floor": spread(m["ratio_to_floor"] for m in mine),
                "overhead_seconds": spread(
                    m["seconds"] - f["seconds"] for m, f in zip(mine, floor)
                ),
                "kernel": mine[0]["kernel"],
                "overflowed": any(m["overflowed"] for m in mine),
            }
        )
    return rows


def judge(rows, device) -> dict[str, bool | None]:
    """Each target: met, missed, or None (not measured on this device)."""
    by_key = {r["key"]: r for r in rows}
    out = {}
    for key, (where, limit) in TARGETS.items():
        r = by_key.get(key, {})
        label = f"{PIPELINES[key][0]} within {limit:.2f}x of the floor ({where.upper()})"
        measured = "ratio_to_floor" in r and torch.device(device).type == where
        out[label] = r["ratio_to_floor"]["mean"] <= limit if measured else None
    return out


def report(rows, targets):
    """Print the table and the targets."""

    def ms(d):
        return pm(d["mean"], d["std"], "{:.1f}", scale=1e3)

    print()
    print(
        table(
            [
                [r["pipeline"], "-", "-", "skipped: " + r["skipped"]]
                if "skipped" in r
                else [
                    r["pipeline"],
                    ms(r["seconds"]),
                    pm(r["ratio_to_floor"]["mean"], r["ratio_to_floor"]["std"]) + "x"
                    if "ratio_to_floor" in r
                    else "1x",
                    r["kernel"],
                ]
                for r in rows
            ],
            ["side", "ms per iteration", "multiple of the floor", "kernel"],
        )
    )
    parts = rows[0]["parts"]
    print("floor, clocked pass: " + ", ".join(f"{s} {ms(parts[s])} ms" for s in FLOOR_STAGES))
    for k, ok in targets.items():
        print(f"  [{'met' if ok else ('n/a' if ok is None else 'MISSED')}] {k}")


def main(argv=None):
    args = parse_args(argv)
    skipped = skipped_pipelines(args)
    for key, why in skipped.items():
        print(f"{PIPELINES[key][0]}: skipped ({why})", flush=True)
    load_before = list(os.getloadavg())
    g = zg.datasets.csbm(num_nodes=args.nodes, avg_degree=20, num_classes=10, feat_dim=128, seed=0)
    gname, threads = f"csbm_{args.nodes}", torch.get_num_threads()
    print(f"{gname}: {g.num_nodes} nodes, {g.num_edges} edges; {threads} threads", flush=True)
    per_seed = []
    for seed in args.seeds:
        out = run_seed(g, args, seed, skipped)
        per_seed.append(out)
        print(
            f"  seed {seed}: floor {1e3 * out['floor']['seconds']:.1f} ms; "
            + "  ".join(f"{k} {out[k]['ratio_to_floor']:.2f}x" for k in PIPELINES if k in out),
            flush=True,
        )
    rows = summarise(per_seed, skipped)
    targets = judge(rows, args.device)
    report(rows, targets)
    kernels = sorted({r["kernel"] for r in rows if r.get("kernel") not in (None, "dgl")})
    command = "bench/floor.py " + " ".join(argv if argv is not None else sys.argv[1:])
    path = write_json(
        args.name,
        {
            "benchmark": "floor",
            "command": command.strip(),
            "machine": machine_note(),
            "threads": threads,
            "settings": {
                **vars(args),
                "graph": gname,
                "kernel": kernels[0] if len(kernels) == 1 else kernels,
            },
            "seeds": args.seeds,
            "rows": rows,
            "per_seed": per_seed,
            "targets": targets,
            "load_average_before": load_before,
            "load_average_after": list(os.getloadavg()),
            "notes": {
                "floor": "gather, forward, loss, backward and optimizer step of the zg model "
                "on batches sampled once by zg's dynamic sampler (exact sizes), kept resident",
                "timing": "per seed: median of interleaved rounds (one pass per side per round, "
                "rotating order, one warm-up round); ratio = median of per-round ratios; "
                "across seeds: mean and sample std",
                "parts": "floor parts from a separate clocked pass per round",
            },
        },
    )
    print(f"\nwrote {path}")
    return path


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a floor result (bench/_headlines.py calls it): each measured
    pipeline's multiple of the floor."""
    s = doc["settings"]
    where = (
        f"{s['graph']}, {s['model']} h={s['hidden']}, {s['fanouts']}, batch {s['batch_size']}, "
        f"{s['device']}, {s['batches']} batches x {s['repeats']} interleaved rounds per seed"
    )
    out = []
    for r in doc["rows"]:
        ratio = r.get("ratio_to_floor") or {}
        if ratio.get("values"):
            out.append(
                headline_from(
                    f"floor_ratio_{r['key'].removeprefix('zg_')}",
                    ratio["values"],
                    "x",
                    compared_to="the floor (time of a whole iteration / time of gather, forward, "
                    "loss, backward and step on the same batches, already sampled)",
                    where=where,
                    higher_is_better=False,
                )
            )
    return out


if __name__ == "__main__":
    main()
