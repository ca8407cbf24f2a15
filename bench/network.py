"""Grappa vs feature fetching across real (emulated) hosts on shaped links, measured, and the
validated link model's projection for a products-scale graph.

    sudo .venv/bin/python bench/network.py          # needs root and iproute2 (NetLab)
    sudo .venv/bin/python bench/network.py --quick  # a small smoke run

**Measured.** For each link bandwidth (tc tbf on every link of a NetLab virtual switch) and
worker count P, one torchrun agent per host (c10d rendezvous) trains csbm with a 3-layer SAGE
twice: Grappa (the kit's default estimator and repartitioning) and the feature-fetching
baseline. The graph is chosen so that feature bytes per iteration dwarf compute: wide features
(1,024 floats per node), degree 50, a global batch of 2,048 seeds, fanouts [15, 10, 5], the
kit's hidden width (64). All P hosts share this machine's cores, so compute is P times slower
than on P real machines and hides part of the network: the measured ratio is a lower bound of
what separate machines would show. Measured: the median epoch time and the bytes each worker
sent. The link model of zg.grappa.comm is then checked against the measurement: its projection
for the shaped link is the same trainer's epoch time measured on unshaped loopback links plus
the modelled link time of the bytes sent; the JSON reports projection / measurement.

**Projected (link model, not a measurement).** The products-scale synthetic graph
(``zg.datasets.products_like``: 2.4M nodes, degree 50, 100 features, 47 classes, 8% train) is
too large to train here; its projection needs only its sizes. Per iteration and worker, with
the same model, batch and fanouts at P=4:

* compute: one worker's iteration measured in one process (the single-process trainer with one
  worker's batch, one thread: no other worker shares the cores, as on separate machines) on a
  smaller csbm with the same degree and feature width (``--proj-nodes`` nodes), scaled by the
  ratio of the input rows a worker batch needs on products to those it needs on the smaller
  graph, and used for both designs (Grappa's local graph is smaller, so this favours feature
  fetching; scaling the fixed per-iteration costs with the rows does too);
* input rows on products: the sampled tree ``b (1 + f_1) ... (1 + f_L)`` (b seeds per worker)
  corrected for collisions among N nodes, ``N (1 - exp(-tree / N))``;
* feature fetching's bytes: :func:`zg.experiments.fetch_traffic_model` of those rows (random
  P-way ownership) plus the gradient all-reduce; Grappa's: the gradient all-reduce and the
  estimator's scalars (:func:`zg.experiments.gradient_traffic`, exact);
* link time on 1 Gbit/s: ``bytes / bandwidth`` (plus ``rounds x latency`` on the 1GbE row).

Latency cannot be shaped on kernels without the netem qdisc; the JSON says whether it was.
Writes bench/results/network.json (network_quick.json with --quick).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from _machine import RESULTS, machine_note, read_json, table, write_json
from netlab import NetLab, supports_latency, unavailable_reason

import zg
from zg import experiments as ex
from zg import grappa
from zg._io import write_text
from zg.experiments.results import headline
from zg.grappa.comm import LINKS, Link, project_seconds
from zg.grappa.config import TrainConfig
from zg.grappa.history import bytes_per_worker

RATES = {"1gbit": 125e6, "10gbit": 1.25e9, "100mbit": 12.5e6}
# The products-scale synthetic graph (zg.datasets.products_like's defaults): only its sizes.
TARGET = 4.0  # issue 14: Grappa >= 4x faster than feature fetch at P=4, 1 Gbit/s
PRODUCTS = {
    "num_nodes": 2_400_000,
    "avg_degree": 50,
    "feat_dim": 100,
    "num_classes": 47,
    "train_frac": 0.08,
}


def products_projection(args, fanouts, hidden, workers=4):
    """The link model's projection of one epoch on products_like at P=workers (see the module
    docstring): rows measured and modelled, per-iteration compute and bytes, projected seconds."""
    small = zg.datasets.csbm(
        num_nodes=args.proj_nodes,
        avg_degree=PRODUCTS["avg_degree"],
        num_classes=PRODUCTS["num_classes"],
        feat_dim=PRODUCTS["feat_dim"],
        seed=0,
    )
    part = grappa.partition(small, workers, "random", seed=0)
    counted = ex.feature_fetch_traffic(small, part, fanouts, args.batch_size, seed=0)
    seeds = args.batch_size / workers
    # One worker's compute per iteration, measured in one process (no other worker sharing the
    # cores, as on separate machines): the single-process trainer with one worker's batch on the
    # whole smaller graph. A feature-fetching worker does exactly this sampling, forward and
    # backward (plus the fetch, which the link model replaces); a Grappa worker does the same on
    # its local graph, which is smaller, so using this time for Grappa too favours feature
    # fetching.
    one = grappa.train(
        small,
        workers=1,
        trainer="single",
        epochs=1,
        seed=0,
        fanouts=fanouts,
        num_layers=len(fanouts),
        batch_size=int(seeds),
        hidden_dim=hidden,
        eval_every=1,
        threads=1,
        timeout=600,
        kernel="auto",
    )
    measured_per_iteration = one["seconds_per_epoch"] / one["epochs"][0]["iterations"]
    tree = seeds * math.prod(1 + f for f in fanouts)
    rows = PRODUCTS["num_nodes"] * -math.expm1(-tree / PRODUCTS["num_nodes"])
    scale = rows / counted["input_rows_per_iteration"]
    model = zg.models.build(
        "sage", PRODUCTS["feat_dim"], hidden, PRODUCTS["num_classes"], len(fanouts)
    )
    estimator = TrainConfig().estimator
    grad = ex.gradient_traffic(model, workers, estimator=estimator)
    mean = ex.gradient_traffic(model, workers, estimator="mean")
    fetch = ex.fetch_traffic_model(rows, seeds, workers, PRODUCTS["feat_dim"])
    per_iteration = {
        name: {"seconds": scale * measured_per_iteration} for name in ("grappa", "feature_fetch")
    }
    per_iteration["grappa"].update(bytes=grad["bytes"], rounds=grad["rounds"])
    per_iteration["feature_fetch"].update(
        bytes=fetch["bytes"] + mean["bytes"], rounds=fetch["rounds"] + mean["rounds"]
    )
    iterations = math.ceil(PRODUCTS["train_frac"] * PRODUCTS["num_nodes"] / args.batch_size)
    links = [Link("1gbit", RATES["1gbit"], 0.0), LINKS["1GbE"]]
    rows_out = ex.project_epochs(per_iteration, iterations, links)
    by = {(r["design"], r["link"]): r for r in rows_out}
    speedups = {
        link.name: by[("feature_fetch", link.name)]["projected_seconds"]
        / by[("grappa", link.name)]["projected_seconds"]
        for link in links
    }
    # Where the 4x would hold: (c + L_fetch) / (c + L_grappa) >= 4 for a per-iteration compute
    # c <= (L_fetch - 4 L_grappa) / 3, with L the link seconds per iteration (derived from the
    # model above, not measured). How much faster than this machine's one-thread compute that is.
    break_even = {}
    for link in links:
        l_fetch = by[("feature_fetch", link.name)]["link_seconds"] / iterations
        l_grappa = by[("grappa", link.name)]["link_seconds"] / iterations
        c_max = (l_fetch - TARGET * l_grappa) / (TARGET - 1)
        break_even[link.name] = {
            "max_compute_seconds_per_iteration": c_max,
            "compute_here_seconds_per_iteration": per_iteration["grappa"]["seconds"],
            "compute_speedup_needed": per_iteration["grappa"]["seconds"] / c_max
            if c_max > 0
            else None,
        }
    return {
        "label": "projected (link model), not measured",
        "graph": {"generator": "zg.datasets.products_like", **PRODUCTS},
        "workers": workers,
        "batch_size": args.batch_size,
        "fanouts": fanouts,
        "hidden_dim": hidden,
        "estimator": estimator,
        "iterations_per_epoch": iterations,
        "seeds_per_worker": seeds,
        "sampled_tree_rows": tree,
        "input_rows_per_iteration": rows,
        "smaller_graph": {
            "generator": "zg.datasets.csbm",
            "num_nodes": args.proj_nodes,
            "avg_degree": PRODUCTS["avg_degree"],
            "feat_dim": PRODUCTS["feat_dim"],
            "num_classes": PRODUCTS["num_classes"],
            "seed": 0,
            "input_rows_per_iteration": counted["input_rows_per_iteration"],
            "measured_seconds_per_iteration": measured_per_iteration,
            "measured_how": "trainer='single', one worker's batch, one process, one thread",
        },
        "link_only_ratio": {
            link.name: by[("feature_fetch", link.name)]["link_seconds"]
            / by[("grappa", link.name)]["link_seconds"]
            for link in links
        },
        "compute_scale": scale,
        "per_iteration": per_iteration,
        "rows": rows_out,
        "speedups": speedups,
        "break_even_for_target": {
            "target": TARGET,
            "label": "derived from the link model, not measured",
            "how": "largest per-iteration compute c with (c + fetch link s) / "
            "(c + grappa link s) >= target",
            **break_even,
        },
    }


def gpu_compute_bound(projection, gpu=None):
    """The same link model with a GPU's compute: ``c`` bounded above by the committed GPU check's
    slowest iteration (any pipeline: dynamic, eager or captured) whose work is at least one products worker's on every size (input
    rows, feature width, hidden width, seeds, fanouts). Projected, not measured; None when no GPU
    result is committed or none of its rows bounds the work."""
    if gpu is None:
        path = RESULTS / "gpu_check_cuda.json"
        if not path.exists():
            return None
        gpu = read_json(path)
    worker_rows = projection["input_rows_per_iteration"]

    def work(r):
        """The row's own sizes (gpu_check.py records them since they became per row); files
        from before fall back to what gpu_check.py measured then, with 128 features, the
        smaller of its two graphs' widths (Cora 1,433, csbm 128), as the lower bound."""
        return {
            "feat_dim": r.get("feat_dim", 128),
            "hidden_dim": r.get("hidden_dim", 256),
            "fanouts": r.get("fanouts", [15, 10, 5]),
            "sizes_from": "the row" if "feat_dim" in r else "gpu_check.py's constants (older file)",
        }

    rows = [
        r
        for r in gpu["rows"]
        if r.get("oracle_mean_counts")
        and r["oracle_mean_counts"][0] >= worker_rows
        and r["batch_size"] >= projection["seeds_per_worker"]
        and work(r)["feat_dim"] >= projection["graph"]["feat_dim"]
        and work(r)["hidden_dim"] >= projection["hidden_dim"]
        and work(r)["fanouts"] == projection["fanouts"]
    ]
    if not rows:
        return None
    row = max(rows, key=lambda r: r["seconds_per_iteration"])
    c = row["seconds_per_iteration"]
    per = projection["per_iteration"]
    speedups = {}
    for link in {r["link"] for r in projection["rows"]}:
        by = {r["design"]: r for r in projection["rows"] if r["link"] == link}
        it = by["grappa"]["iterations"]
        speedups[link] = (c + by["feature_fetch"]["link_seconds"] / it) / (
            c + by["grappa"]["link_seconds"] / it
        )
    return {
        "label": "projected (link model) with a GPU compute bound, not measured",
        "compute_seconds_per_iteration_at_most": c,
        "from": {
            "file": "bench/results/gpu_check_cuda.json",
            "gpu": gpu["machine"].get("cuda"),
            "graph": row["graph"],
            "batch_size": row["batch_size"],
            "variant": row["variant"],
            "input_rows_per_iteration": row["oracle_mean_counts"][0],
            **work(row),
        },
        "products_worker": {
            "input_rows_per_iteration": worker_rows,
            "seeds": projection["seeds_per_worker"],
            "feat_dim": projection["graph"]["feat_dim"],
            "hidden_dim": projection["hidden_dim"],
        },
        "why_a_bound": (
            "the GPU row's iteration (the slowest pipeline among those that qualify) does at least a products worker's work on every size "
            "(more input rows, seeds, feature and hidden width; the same fanouts), so a worker's "
            "compute on that GPU is at most this; Grappa's estimator scalars and the all-reduce are "
            "in the link time"
        ),
        "speedups": speedups,
        "cpu_bytes_per_iteration": {k: v["bytes"] for k, v in per.items()},
    }


def print_projection(projection):
    print(
        table(
            [
                [
                    r["design"],
                    r["link"],
                    r["iterations"],
                    f"{r['compute_seconds']:.1f}",
                    f"{r['link_seconds']:.1f}",
                    f"{r['projected_seconds']:.1f}",
                    f"{r['bytes_per_worker'] / 2**30:.2f}",
                ]
                for r in projection["rows"]
            ],
            [
                "design",
                "link",
                "iterations",
                "compute s (scaled)",
                "link s",
                "projected s/epoch",
                "GiB/worker",
            ],
        )
    )
    for k, v in projection["speedups"].items():
        print(f"projected feature_fetch / grappa epoch time on products_like, P=4, {k}: {v:.2f}x")
    ptarget = projection["speedups"]["1gbit"]
    print(
        f"  [{'met' if ptarget >= TARGET else 'MISSED'}] projected: Grappa >= {TARGET:g}x faster than feature "
        f"fetch at P=4 on 1 Gbit/s, products_like ({ptarget:.2f}x)"
    )
    g = projection.get("gpu_compute_bound")
    if g:
        print(
            f"  projected with GPU compute (at most {g['compute_seconds_per_iteration_at_most'] * 1e3:.1f} ms per "
            f"worker iteration, {g['from']['gpu']}, {g['from']['variant']}, {g['from']['graph']} b{g['from']['batch_size']}): "
            + ", ".join(f"{k} {v:.1f}x" for k, v in sorted(g["speedups"].items()))
        )
    b = projection["break_even_for_target"]["1gbit"]
    print(
        f"  derived: the {TARGET:g}x holds on 1 Gbit/s when one worker's iteration computes in at most "
        f"{b['max_compute_seconds_per_iteration']:.3f} s; here it takes {b['compute_here_seconds_per_iteration']:.1f} s "
        f"(one CPU thread), {b['compute_speedup_needed']:.0f}x longer"
    )
    return ptarget


def reproject(args):
    """--projection-only: the products projection again, written into the existing result."""
    name = "network_quick" if args.quick else "network"
    path = RESULTS / f"{name}.json"
    if not path.exists():
        print(
            f"error: --projection-only needs an existing {path.name}: run the full bench first",
            file=sys.stderr,
        )
        return 2
    result = read_json(path)
    fanouts = result["projected"]["fanouts"] if "projected" in result else [15, 10, 5]
    projection = (
        result["projected"]
        if args.gpu_bound_only
        else products_projection(args, fanouts, args.hidden)
    )
    if not args.gpu_bound_only:
        projection["machine"] = machine_note()
    projection["gpu_compute_bound"] = gpu_compute_bound(projection)
    ptarget = print_projection(projection)
    result["projected"] = projection
    result["targets"]["projected_products_P4_1gbit_at_least_4x"] = ptarget
    print(f"wrote {write_json(name, result)} (the measured part is unchanged)")
    return 0


def run_on_lab(lab: NetLab, config: dict, workdir: Path, port: int, timeout: float) -> dict:
    cfg = workdir / "config.json"
    write_text(cfg, json.dumps(config), name="config")  # the kit's one writer
    out = workdir / "history.json"
    codes, logs = lab.torchrun(
        ["-m", "zg.grappa", "--config", str(cfg), "--out", str(out)],
        workdir,
        port=port,
        timeout=timeout,
        rdzv_id=f"net{port}",
    )
    if codes != [0] * lab.hosts:
        raise RuntimeError(f"torchrun failed with {codes}: {logs[0][-2000:]}")
    return json.loads(out.read_text())


def summary(history: dict) -> dict:
    epochs = history["epochs"]
    return {
        "seconds_per_epoch": history["seconds_per_epoch"],
        "bytes_per_epoch_per_worker": history["bytes_per_epoch_per_worker"],
        "bytes_per_worker": [b / len(epochs) for b in bytes_per_worker(history)],
        "rounds_per_worker": [
            sum(e["rounds"][p] for e in epochs) / len(epochs) for p in range(history["workers"])
        ],
        "test_acc": history["final"]["test_acc"],
    }


def parse_args(argv=None):
    """The command line, with --quick's sizes filled in."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workers", type=int, nargs="+", default=[4])
    ap.add_argument("--rates", nargs="+", default=["1gbit"])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--degree", type=float, default=50)
    ap.add_argument("--feat-dim", type=int, default=1024)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=2048)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument(
        "--proj-nodes",
        type=int,
        default=50_000,
        help="nodes of the smaller csbm (products' degree and features) the projection measures on",
    )
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--quick", action="store_true", help="small sizes, one epoch: a smoke run")
    ap.add_argument(
        "--projection-only",
        action="store_true",
        help="recompute only the products projection (no root needed) and replace that part of "
        "the existing result file, keeping its measured rows and their machine note",
    )
    ap.add_argument(
        "--gpu-bound-only",
        action="store_true",
        help="keep the existing projection and add (or refresh) only its GPU compute bound, read "
        "from bench/results/gpu_check_cuda.json",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.nodes, args.feat_dim, args.batch_size, args.epochs, args.proj_nodes = (
            4000,
            256,
            512,
            1,
            5000,
        )
    return args


def trainer_config(args, fanouts):
    """The config both trainers share (the JSON's "config"): the csbm graph and the sizes."""
    dataset = {
        "name": "csbm",
        "num_nodes": args.nodes,
        "avg_degree": args.degree,
        "num_classes": 10,
        "feat_dim": args.feat_dim,
        "seed": 0,
    }
    return {
        "dataset": dataset,
        "epochs": args.epochs,
        "num_layers": 3,
        "hidden_dim": args.hidden,
        "fanouts": fanouts,
        "batch_size": args.batch_size,
        "timeout": 300.0,
        "seed": 0,
        "eval_every": args.epochs,
        "threads": 1,
    }


def measure(args, base):
    """Both trainers for every worker count on unshaped loopback links, then on each shaped
    rate; one row per run."""
    # Grappa with the kit's defaults (estimator, repartitioning): only the sizes are set.
    trainers = {"grappa": {"trainer": "grappa"}, "feature_fetch": {"trainer": "feature_fetch"}}
    rows, port = [], 29600
    with tempfile.TemporaryDirectory() as tmp:
        for P in args.workers:
            for rate in ["loopback"] + list(args.rates):
                with NetLab(
                    hosts=P, bandwidth=None if rate == "loopback" else rate, prefix="zgb"
                ) as lab:
                    for name, extra in trainers.items():
                        port += 1
                        work = Path(tmp) / f"{name}-{P}-{rate}"
                        work.mkdir()
                        t0 = time.perf_counter()
                        history = run_on_lab(lab, {**base, **extra}, work, port, args.timeout)
                        row = {
                            "trainer": name,
                            "workers": P,
                            "link": rate,
                            **summary(history),
                            "wall_seconds": time.perf_counter() - t0,
                        }
                        rows.append(row)
                        print(
                            f"P={P} {rate:8s} {name:14s} {row['seconds_per_epoch']:8.2f} s/epoch  "
                            f"{row['bytes_per_epoch_per_worker'] / 2**20:9.2f} MiB/epoch/worker",
                            flush=True,
                        )
    return rows


def compare(args, rows):
    """Adds the link model's projection to every shaped row; returns the speedups
    feature_fetch / grappa per worker count and rate."""
    # Link-model check: projection from the loopback run vs the shaped measurement.
    for row in rows:
        if row["link"] == "loopback":
            continue
        loop = next(
            r
            for r in rows
            if r["link"] == "loopback"
            and r["trainer"] == row["trainer"]
            and r["workers"] == row["workers"]
        )
        link = Link(row["link"], RATES[row["link"]], 0.0)
        proj = project_seconds(
            loop["seconds_per_epoch"], row["bytes_per_worker"], row["rounds_per_worker"], link
        )
        row["projected_seconds_per_epoch"] = proj["projected_seconds"]
        row["projection_over_measurement"] = proj["projected_seconds"] / row["seconds_per_epoch"]
    speedups = {}
    for P in args.workers:
        for rate in args.rates:
            g = next(
                r
                for r in rows
                if r["trainer"] == "grappa" and r["workers"] == P and r["link"] == rate
            )
            f = next(
                r
                for r in rows
                if r["trainer"] == "feature_fetch" and r["workers"] == P and r["link"] == rate
            )
            speedups[f"P{P}/{rate}"] = f["seconds_per_epoch"] / g["seconds_per_epoch"]
    return speedups


def report(rows, speedups):
    """Print the measured table and speedups; return the P=4, 1 Gbit/s speedup (None if not run)."""
    print()
    print(
        table(
            [
                [
                    r["trainer"],
                    r["workers"],
                    r["link"],
                    f"{r['seconds_per_epoch']:.2f}",
                    f"{r.get('projected_seconds_per_epoch', float('nan')):.2f}",
                    f"{r['bytes_per_epoch_per_worker'] / 2**20:.2f}",
                ]
                for r in rows
            ],
            ["trainer", "P", "link", "measured s/epoch", "projected s/epoch", "MiB/epoch/worker"],
        )
    )
    for k, v in speedups.items():
        print(f"feature_fetch / grappa epoch time, {k}: {v:.2f}x")
    target = speedups.get("P4/1gbit")
    print(
        f"  [{'met' if target and target >= 4 else 'MISSED'}] measured: Grappa >= 4x faster than feature "
        f"fetch at P=4 on 1 Gbit/s ({target if target is None else round(target, 2)}x)"
    )
    return target


def write_result(args, base, rows, speedups, projection, target, ptarget):
    """bench/results/network.json (network_quick.json with --quick): the measured rows and
    speedups, the products projection and both targets."""
    return write_json(
        "network_quick" if args.quick else "network",
        {
            "benchmark": "network",
            "machine": machine_note(),
            "settings": vars(args),
            "config": base,
            "latency_shaped": False,
            "netem_available": supports_latency(),
            "measured": {
                "label": "measured on NetLab hosts (network namespaces on this machine, tc tbf links)",
                "rows": rows,
                "speedups": speedups,
                "note": "all hosts share this machine's cores, so compute is slower than on separate "
                "machines and hides part of the network time",
            },
            "projected": projection,
            "targets": {
                "measured_P4_1gbit_at_least_4x": target,
                "projected_products_P4_1gbit_at_least_4x": ptarget,
            },
            "note": "links shaped with tc tbf on both ends; no added latency (netem unavailable)"
            if not supports_latency()
            else "",
        },
    )


def main(argv=None):
    args = parse_args(argv)
    if args.projection_only or args.gpu_bound_only:
        return reproject(args)
    reason = unavailable_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    fanouts = [15, 10, 5]
    base = trainer_config(args, fanouts)
    rows = measure(args, base)
    speedups = compare(args, rows)
    target = report(rows, speedups)
    print("\nprojection for products_like (link model, not a measurement) ...", flush=True)
    projection = products_projection(args, fanouts, args.hidden)
    projection["gpu_compute_bound"] = gpu_compute_bound(projection)
    ptarget = print_projection(projection)
    path = write_result(args, base, rows, speedups, projection, target, ptarget)
    print(f"\nwrote {path}")
    return 0


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a network result (bench/_headlines.py calls it)."""
    d, out = doc["detail"], []
    rows = {(r["trainer"], r["link"]): r for r in (d.get("measured") or {}).get("rows", [])}
    for trainer, link in rows:
        if trainer == "grappa" and ("feature_fetch", link) in rows:
            out.append(
                headline(
                    f"grappa_vs_feature_fetch_{link}",
                    rows["feature_fetch", link]["seconds_per_epoch"]
                    / rows["grappa", link]["seconds_per_epoch"],
                    "x",
                    compared_to="the kit's feature-fetching trainer",
                    where=f"measured, P={rows['grappa', link]['workers']}, {link}, namespace hosts sharing the cores",
                )
            )
    t = d.get("targets") or {}
    if "projected_products_P4_1gbit_at_least_4x" in t:
        out.append(
            headline(
                "projected_grappa_vs_feature_fetch_products_1gbit_cpu",
                t["projected_products_P4_1gbit_at_least_4x"],
                "x",
                compared_to="the kit's feature-fetching trainer",
                where="projected (link model), products-scale graph, P=4, 1 Gbit/s, CPU compute",
            )
        )
    g = (d.get("projected") or {}).get("gpu_compute_bound")
    if g and "1gbit" in g.get("speedups", {}):
        out.append(
            headline(
                "projected_grappa_vs_feature_fetch_products_1gbit_gpu",
                g["speedups"]["1gbit"],
                "x",
                compared_to="the kit's feature-fetching trainer",
                where="projected (link model), products-scale graph, P=4, 1 Gbit/s, GPU compute bound",
            )
        )
    return out


if __name__ == "__main__":
    sys.exit(main())
