"""Where Grappa holds: the test-accuracy gap to single-process training across graph and
system factors, for grappa (the kit's default estimator), isolated, psgd_pa and feature_fetch.

    PYTHONPATH=$PWD .venv/bin/python bench/grappa_map.py            # the committed map
    PYTHONPATH=$PWD .venv/bin/python bench/grappa_map.py --quick    # a few minutes' smoke run

Writes ``bench/results/grappa_map.json`` (``grappa_map_quick.json`` with --quick): the machine
note, the design, one record per run and one per cell, and prints the cell table.

Factors (issue 14): average degree (5, 20, 50), homophily (0.3, 0.8), feature signal-to-noise
(0.5, 2), workers P (2, 4, 8), partition (random, METIS), depth (2, 3 layers). The base cell is
degree 20, homophily 0.8, SNR 0.5, P=4, 2 layers (the issue's csbm setting). The partition
factor compares the kit's isolation stress test with the kit's defaults: **random** chunks
without the halo (not the paper's setting: the authors' public code adds the complete one-hop
halo and a partner chunk, ``preset="reference"``, bench/grappa_reference.py); **METIS** chunks run as the kit's defaults run them, with the one-hop
halo (``TrainConfig().halo``). Each cell and run records ``halo``.

    --design wide (the committed map; 240 distributed + 24 single-process runs)
        the full factorial partition x degree x homophily at the base values of the other
        factors (12 cells), plus one factor at a time away from the base (SNR 2, P=2, P=8,
        3 layers) for both partitions (8 cells); all four trainers in every cell.
    --design lean (90 distributed + 18 single-process runs; an earlier, smaller map)
        base cell, both partitions, all four trainers; P=2 likewise; P=8, both partitions:
        grappa and isolated; one factor at a time away from the base cell on random chunks
        (degree 5, degree 50, homophily 0.3, SNR 2, 3 layers): grappa and isolated.
    --design full (1,728 distributed + 72 single-process runs)
        the full factorial, 144 cells, all four trainers. The committed wide run took 1,339 s
        on 2 cores (about 5 s a run); at that rate the full factorial takes about 2.5 hours, so
        it is an option for a bigger machine, not the committed map.

Every run calls the trainer with the kit's defaults except the swept factors and the budget:
``epochs`` (EPOCHS), ``eval_every=epochs`` (one evaluation, at the end: test accuracy at the
end, as a user would read it), ``threads=1``. Estimator, repartitioning, batch size, fanouts,
learning rate, model, dropout: the defaults of :class:`zg.grappa.TrainConfig` at the commit
named in the JSON (they are copied into each record); the halo goes with the partition (above). Graphs: ``zg.datasets.csbm``
with NODES nodes (default split 60/20/20), 10 classes, 64 features.

All runs with the same P (across graphs) share one set of worker processes: start-up costs
tens of seconds per set on this machine. Each run's history is kept in a scratch folder
(``--scratch``); a rerun with the same folder reuses finished runs, so an interrupted map
resumes. Accuracy does not depend on timing, so the map may run beside other jobs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, pm, table, write_json

import zg
from zg.experiments.results import headline, mean_std
from zg.grappa.config import TrainConfig
from zg.grappa.launch import spawn
from zg.grappa.worker import run_worker

FACTORS = {
    "avg_degree": (5, 20, 50),
    "homophily": (0.3, 0.8),
    "feature_snr": (0.5, 2.0),
    "workers": (2, 4, 8),
    "method": ("random", "metis"),
    "num_layers": (2, 3),
}
BASE = {
    "avg_degree": 20,
    "homophily": 0.8,
    "feature_snr": 0.5,
    "workers": 4,
    "method": "random",
    "num_layers": 2,
}
CORE = ("method", "avg_degree", "homophily")
SLICES = ({"feature_snr": 2.0}, {"workers": 2}, {"workers": 8}, {"num_layers": 3})
TRAINERS = ("grappa", "isolated", "psgd_pa", "feature_fetch")
GRAPH = {"num_classes": 10, "feat_dim": 64, "seed": 0}
DESIGNS = {
    "lean": (
        "fractional design, one factor at a time: the base cell (degree 20, homophily 0.8, SNR 0.5, "
        "P=4, 2 layers) on random and METIS chunks with all four trainers; P=2 on both partitions "
        "with all four; P=8 on both partitions with grappa and isolated; degree 5, degree 50, "
        "homophily 0.3, SNR 2 and 3 layers on random chunks with grappa and isolated. Interactions "
        "between factors are not measured. The full 144-cell factorial x 5 trainers x 3 seeds does "
        "not fit in 30 minutes on 2 cores; this design was sized for a shared, heavily loaded machine"
    ),
    "wide": (
        "fractional design: the full factorial partition x degree x homophily at the base values of "
        "the other factors (12 cells), plus one factor at a time away from the base (SNR 2, P=2, P=8, "
        "3 layers) for both partitions (8 cells); all four trainers in every cell"
    ),
    "full": (
        "the full factorial: every combination of the six factors (144 cells), all four trainers in "
        "every cell (1,728 distributed runs and 72 single-process runs per 3 seeds; hours on 2 cores)"
    ),
}
# 2,000 nodes and 32 epochs: 96 optimizer steps at the default batch (512), 6 super-epochs at the
# default repartitioning (every 5). 16 epochs left the 3-layer model untrained (single: 37 %
# test accuracy on the base graph; 95 % at 32 epochs).
FULL = {"nodes": 2000, "epochs": 32, "seeds": (0, 1, 2)}
QUICK = {"nodes": 800, "epochs": 2, "seeds": (0, 1, 2)}


def design(name="lean"):
    """The cells, each with the trainers it runs, most informative first."""
    cells = []

    def add(kind, trainers, **change):
        cells.append({**BASE, **change, "design": kind, "trainers": list(trainers)})

    if name == "lean":
        for method in FACTORS["method"]:
            add("base", TRAINERS, method=method)
        for workers in (2, 8):
            for method in FACTORS["method"]:
                add(
                    "slice",
                    TRAINERS if workers == 2 else ("grappa", "isolated"),
                    workers=workers,
                    method=method,
                )
        for change in (
            {"avg_degree": 5},
            {"avg_degree": 50},
            {"homophily": 0.3},
            {"feature_snr": 2.0},
            {"num_layers": 3},
        ):
            add("slice", ("grappa", "isolated"), method="random", **change)
    elif name == "wide":
        for values in itertools.product(*(FACTORS[f] for f in CORE)):
            add("core", TRAINERS, **dict(zip(CORE, values)))
        for change in SLICES:
            for method in FACTORS["method"]:
                add("slice", TRAINERS, **{**change, "method": method})
    elif name == "full":
        for values in itertools.product(*FACTORS.values()):
            add("full", TRAINERS, **dict(zip(FACTORS, values)))
    else:
        raise ValueError(f"design must be one of {sorted(DESIGNS)}, got {name!r}")
    return cells


def halo_of(method):
    """The halo goes with the partition: random chunks run without a halo (the stress test),
    METIS chunks as the kit's defaults run them (with the halo, ``TrainConfig().halo``)."""
    return False if method == "random" else TrainConfig().halo


def graph_key(cell):
    return (cell["avg_degree"], cell["homophily"], cell["feature_snr"])


def _run_jobs(rank, world, graphs, jobs):
    """Worker body: each job is (graph key, TrainConfig, history path); finished ones are skipped
    on every rank alike (the file exists before the job starts on any rank)."""
    for key, cfg, path in jobs:
        run_worker(rank, world, cfg, graphs[key], None, path)


def run_group(graphs, runs, scratch, workers):
    """Every run with this P, in one set of processes; returns {run name: history}."""
    todo = [(key, cfg, path) for name, key, cfg, path in runs if not os.path.exists(path)]
    if todo:
        start = time.perf_counter()
        print(f"P={workers}: {len(todo)} runs ({len(runs) - len(todo)} reused)", flush=True)
        # One run at a time would be a spawn per run; the timeout covers the whole set.
        spawn(
            _run_jobs,
            workers,
            args=({k: graphs[k] for k in {k for k, *_ in todo}}, todo),
            timeout=600,
            run_timeout=6 * 3600,
        )
        print(f"P={workers}: done in {time.perf_counter() - start:.0f}s", flush=True)
    histories = {}
    for name, _, _, path in runs:
        with open(path) as f:
            histories[name] = json.load(f)
    return histories


def summarise(values):
    """(mean, sample std; None for one seed)."""
    return mean_std(values)


def parse_args(argv=None):
    """The command line; refuses an empty --max-cells."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny graphs, 2 epochs: a smoke run")
    parser.add_argument(
        "--design",
        choices=sorted(DESIGNS),
        default="wide",
        help="which cells (see the module docstring); the committed map is wide",
    )
    parser.add_argument(
        "--scratch",
        default=None,
        help="folder for the per-run histories (reused by a rerun; default: a new one)",
    )
    parser.add_argument(
        "--max-cells",
        type=int,
        default=None,
        help="only the first N cells of the design (a smoke run of the code paths)",
    )
    args = parser.parse_args(argv)
    if args.max_cells is not None and args.max_cells < 1:
        parser.error(f"--max-cells must be >= 1, got {args.max_cells}")
    return args


def make_graphs(cells, size):
    """One csbm graph per (degree, homophily, SNR) the cells name."""
    graphs = {}
    for cell in cells:
        key = graph_key(cell)
        if key not in graphs:
            graphs[key] = zg.datasets.csbm(
                num_nodes=size["nodes"],
                avg_degree=key[0],
                homophily=key[1],
                feature_snr=key[2],
                **GRAPH,
            )
    return graphs


def plan_runs(cells, size, common, scratch):
    """{P: [(run name, graph key, TrainConfig, history path)]}, every run once."""
    # Every run once: (trainer, graph, depth, P, method, seed); single ignores P and method.
    runs_by_p = {}
    seen = set()
    for cell in cells:
        key = graph_key(cell)
        for seed in size["seeds"]:
            wanted = [("single", 1, "random")] + [
                (t, cell["workers"], cell["method"]) for t in cell["trainers"]
            ]
            for trainer, workers, method in wanted:
                name = (trainer, key, cell["num_layers"], workers, method, seed)
                if name in seen:
                    continue
                seen.add(name)
                cfg = TrainConfig(
                    trainer=trainer,
                    workers=workers,
                    seed=seed,
                    num_layers=cell["num_layers"],
                    method=method,
                    halo=halo_of(method),
                    kernel="auto",  # the fastest kernels here (the same values as "torch")
                    **common,
                ).validated()
                path = os.path.join(
                    scratch,
                    "_".join(
                        map(
                            str,
                            (
                                trainer,
                                *key,
                                cell["num_layers"],
                                workers,
                                method,
                                int(cfg.halo),
                                seed,
                            ),
                        )
                    )
                    + ".json",
                )
                runs_by_p.setdefault(workers, []).append((name, key, cfg, path))
    return runs_by_p


def measure(args):
    """The design's cells and every run's history (run name -> history), with the machine note
    and the clock taken before the first run."""
    size = QUICK if args.quick else FULL
    torch.set_num_threads(1)
    start = time.perf_counter()
    note = machine_note()
    scratch = args.scratch or tempfile.mkdtemp(prefix="zg-grappa-map-")
    os.makedirs(scratch, exist_ok=True)
    cells = design(args.design)
    if args.max_cells is not None:
        cells = cells[: args.max_cells]
    graphs = make_graphs(cells, size)
    common = dict(epochs=size["epochs"], eval_every=size["epochs"], threads=1, timeout=600)
    runs_by_p = plan_runs(cells, size, common, scratch)
    histories = {}
    for workers in sorted(runs_by_p):
        histories.update(run_group(graphs, runs_by_p[workers], scratch, workers))
    return {
        "size": size,
        "start": start,
        "note": note,
        "cells": cells,
        "common": common,
        "histories": histories,
    }


def run_records(histories):
    """One record per run: its factors, accuracies, isolated coverage and seconds."""
    records = []
    for name, hist in histories.items():
        trainer, key, layers, workers, method, seed = name
        records.append(
            {
                "trainer": trainer,
                "avg_degree": key[0],
                "homophily": key[1],
                "feature_snr": key[2],
                "num_layers": layers,
                "workers": workers,
                "method": method,
                "halo": hist["config"]["halo"],
                "seed": seed,
                "test_acc": hist["final"]["test_acc"],
                "val_acc": hist["final"]["val_acc"],
                "mean_coverage": statistics.mean(hist["epochs"][-1]["mean_coverage"]),
                "estimator": hist["config"]["estimator"] if trainer == "grappa" else None,
                "total_seconds": hist["total_seconds"],
            }
        )
    return records


def cell_table(m, records):
    """One row per cell: single-process accuracy and each trainer's gap to it over the seeds."""
    size, cells = m["size"], m["cells"]
    acc = {name: hist["final"]["test_acc"] for name, hist in m["histories"].items()}
    cell_rows = []
    for cell in cells:
        key = graph_key(cell)
        single = [acc[("single", key, cell["num_layers"], 1, "random", s)] for s in size["seeds"]]
        row = {k: cell[k] for k in (*FACTORS, "design", "trainers")}
        row["halo"] = halo_of(cell["method"])
        row["single_acc_mean"], row["single_acc_std"] = summarise(single)
        for trainer in TRAINERS:
            if trainer not in cell["trainers"]:
                row[trainer] = None  # not run in this design
                continue
            got = [
                acc[(trainer, key, cell["num_layers"], cell["workers"], cell["method"], s)]
                for s in size["seeds"]
            ]
            gaps = [a - b for a, b in zip(got, single)]
            row[trainer] = {
                "acc_mean": summarise(got)[0],
                "acc_std": summarise(got)[1],
                "gap_mean": summarise(gaps)[0],
                "gap_std": summarise(gaps)[1],
            }
        cov = [
            r["mean_coverage"]
            for r in records
            if r["trainer"] == "isolated"
            and (r["avg_degree"], r["homophily"], r["feature_snr"]) == key
            and r["num_layers"] == cell["num_layers"]
            and r["workers"] == cell["workers"]
            and r["method"] == cell["method"]
        ]
        row["isolated_mean_coverage"] = statistics.mean(cov)
        cell_rows.append(row)
    return cell_rows


def report(cell_rows):
    """Print the cell table: each trainer's gap to single-process training."""
    printed = [
        [
            row["design"],
            row["method"],
            row["avg_degree"],
            row["homophily"],
            row["feature_snr"],
            row["workers"],
            row["num_layers"],
            f"{row['single_acc_mean']:.3f}",
        ]
        + [
            pm(row[t]["gap_mean"], row[t]["gap_std"], "{:+.3f}") if row[t] else "-"
            for t in TRAINERS
        ]
        for row in cell_rows
    ]
    print(
        table(
            printed,
            ["design", "partition", "degree", "homophily", "snr", "P", "layers", "single"]
            + [f"gap {t}" for t in TRAINERS],
        )
    )


def write_result(args, m, cell_rows, records):
    """bench/results/grappa_map.json (grappa_map_quick.json with --quick; a partial map under
    its own name): the design, the graphs, the budget, the defaults, the cells and the runs.
    Returns the path and the seconds the map took."""
    defaults = asdict(TrainConfig().validated())
    payload = {
        "machine": m["note"],
        "quick": args.quick,
        "argv": sys.argv[1:],
        "design": {
            "name": args.design,
            "factors": {k: list(v) for k, v in FACTORS.items()},
            "base_cell": BASE,
            "core": list(CORE),
            "slices": list(SLICES),
            "description": DESIGNS[args.design],
            "cells": len(m["cells"]),
            "seeds": list(m["size"]["seeds"]),
            "trainers": ["single", *TRAINERS],
            "gap": "trainer test accuracy minus single-process test accuracy with the same seed, "
            "at the end of training; mean and sample std over the seeds",
        },
        "graph": {
            "generator": "zg.datasets.csbm",
            "num_nodes": m["size"]["nodes"],
            **GRAPH,
            "split": "default (0.6 / 0.2 / 0.2)",
        },
        "budget": m["common"],
        "defaults": {
            k: defaults[k]
            for k in (
                "estimator",
                "weighting",
                "coverage_floor",
                "shrink",
                "repartition_every",
                "halo",
                "num_chunks",
                "schedule",
                "batching",
                "model",
                "hidden_dim",
                "dropout",
                "fanouts",
                "batch_size",
                "lr",
                "weight_decay",
                "average_every",
                "step_shapes",
            )
        },
        "defaults_note": "fanouts default to 10 per layer (3 layers: [10, 10, 10])",
        "cells_table": cell_rows,
        "runs": records,
        "seconds": time.perf_counter() - m["start"],
    }
    name = "grappa_map_quick" if args.quick else "grappa_map"
    if args.max_cells is not None:  # a partial map never replaces the committed one
        name += f"_first{args.max_cells}"
    return write_json(name, payload), payload["seconds"]


def main(argv=None):
    args = parse_args(argv)
    m = measure(args)
    records = run_records(m["histories"])
    cell_rows = cell_table(m, records)
    report(cell_rows)
    path, seconds = write_result(args, m, cell_rows, records)
    print(f"wrote {path} in {seconds:.0f}s")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a grappa_map result (bench/_headlines.py calls it)."""
    out = []
    for c in doc["detail"].get("cells_table") or []:
        if (c["avg_degree"], c["homophily"], c["num_layers"]) != (20, 0.8, 2) or c["workers"] != 4:
            continue
        for trainer in ("grappa", "isolated"):
            cell = c.get(trainer)
            if not cell or cell.get("gap_mean") is None:
                continue
            part = c["method"] + ("_halo" if c.get("halo") else "")
            out.append(
                headline(
                    f"{trainer}_gap_{part}_P4_deg20_snr{c['feature_snr']}",
                    100 * cell["gap_mean"],
                    "points",
                    std=None if cell.get("gap_std") is None else 100 * cell["gap_std"],
                    n=len(doc["detail"].get("design", {}).get("seeds") or doc["seeds"]) or 3,
                    compared_to="single-process training",
                    where=f"csbm, degree 20, homophily 0.8, 2 layers, P=4, {part}",
                )
            )
    return out


if __name__ == "__main__":
    main()
