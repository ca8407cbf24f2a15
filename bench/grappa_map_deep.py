"""The map's 3-layer cells, diagnosed: why Grappa ends below isolated training on random chunks.

    PYTHONPATH=$PWD .venv/bin/python bench/grappa_map_deep.py            # about 8 minutes on 2 cores
    PYTHONPATH=$PWD .venv/bin/python bench/grappa_map_deep.py --quick    # a smoke run

In ``grappa_map.json`` one cell has Grappa below isolated training: 3 layers, random chunks
without the halo, P=4, csbm 2,000 nodes (degree 20, homophily 0.8, SNR 0.5), 32 epochs, mean
coverage 0.02. This script reruns that cell with a validation and loss curve every epoch, for:

    single              the single-process trainer (the gap's reference)
    isolated            gradient-only training on fixed chunks, plain mean (no coverage weights)
    grappa/batch        the kit's default estimator, repartitioning every 5 epochs (the map's run)
    grappa/mean         the same without coverage correction: does the weighting cause the loss?
    grappa/batch fixed  the same without repartitioning: does regrouping the chunks cause it?
    defaults (metis+halo)  the kit's defaults (METIS chunks, one-hop halo): the map's other
                        3-layer cell, about 17 points below single at 32 epochs

at the map's budget (32 epochs) and at 100 epochs, 3 seeds each, every other setting the map's
(the kit's defaults but the swept factors). Every final model is also evaluated on the test
nodes three ways (``grappa_diagnosis.eval_modes``): full neighbourhoods (what the history
records); neighbourhoods sampled with the training fanouts on the whole graph; and, for the
partitioned runs, each test node's neighbourhood in its worker's local graph of the last
super-epoch (what that worker trained on). A model that fits its local graphs but not the
whole graph scores high on "local" and low on "full".

Writes ``bench/results/grappa_map_deep.json`` with the machine note, every run's curves, final
test accuracy and three evaluations, and the cell means; prints them.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, pm, table, write_json
from grappa_diagnosis import eval_modes

import zg
from zg.experiments.results import headline, mean_std
from zg.grappa.train import train_many

CELL = {
    "num_nodes": 2000,
    "avg_degree": 20,
    "homophily": 0.8,
    "feature_snr": 0.5,
    "num_classes": 10,
    "feat_dim": 64,
    "seed": 0,
}
RUN = {
    "method": "random",
    "halo": False,
    "num_layers": 3,
    "threads": 1,
    "timeout": 600,
    "kernel": "auto",  # the fastest kernels here (the same values as the default "torch")
}
VARIANTS = {
    "isolated": {"trainer": "isolated"},
    "grappa/batch": {"trainer": "grappa", "estimator": "batch"},
    "grappa/mean": {"trainer": "grappa", "estimator": "mean"},
    "grappa/batch fixed": {"trainer": "grappa", "estimator": "batch", "repartition_every": None},
    "defaults (metis+halo)": {"trainer": "grappa", "method": "metis", "halo": True},
}


def summarise(values):
    """(mean, sample std; None for one seed)."""
    return mean_std(values)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="800 nodes, 2 and 4 epochs, 1 seed")
    ap.add_argument("--epochs", type=int, nargs="+", default=[32, 100])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--name", default=None)
    return ap.parse_args(argv)


def design(args):
    """(graph cell, epoch budgets, seeds) of this run."""
    cell = dict(CELL, num_nodes=800) if args.quick else CELL
    budgets = [2, 4] if args.quick else args.epochs
    seeds = [0] if args.quick else args.seeds
    return cell, budgets, seeds


def measure(cell, budgets, seeds):
    """Every variant and the single-process run, each budget and seed: one record per run."""
    torch.set_num_threads(1)
    g = zg.datasets.csbm(**cell)
    scratch = tempfile.mkdtemp(prefix="zg_map_deep_")

    def model_path(epochs, name, seed):
        return os.path.join(
            scratch, f"{epochs}_{name.replace('/', '_').replace(' ', '_')}_{seed}.pt"
        )

    runs, names = [], []
    for epochs in budgets:
        for seed in seeds:
            for name, variant in VARIANTS.items():
                runs.append(
                    dict(
                        RUN,
                        workers=4,
                        epochs=epochs,
                        eval_every=1,
                        seed=seed,
                        model_path=model_path(epochs, name, seed),
                        **variant,
                    )
                )
                names.append((epochs, name, seed))
    histories = train_many(g, runs)
    singles = []
    for epochs in budgets:
        for seed in seeds:
            singles.append(
                dict(
                    RUN,
                    workers=1,
                    trainer="single",
                    epochs=epochs,
                    eval_every=1,
                    seed=seed,
                    model_path=model_path(epochs, "single", seed),
                )
            )
            names.append((epochs, "single", seed))
    histories += train_many(g, singles)
    records = []
    try:
        for (epochs, name, seed), h in zip(names, histories):
            records.append(
                {
                    "epochs": epochs,
                    "run": name,
                    "seed": seed,
                    "test_acc": h["final"]["test_acc"],
                    "val_curve": [e["val_acc"] for e in h["epochs"]],
                    "loss_curve": [e["loss"] for e in h["epochs"]],
                    "mean_coverage": statistics.mean(h["epochs"][-1]["mean_coverage"]),
                    "eval": eval_modes(g, h, model_path(epochs, name, seed)),
                }
            )
    finally:
        for entry in os.listdir(scratch):
            os.remove(os.path.join(scratch, entry))
        os.rmdir(scratch)
    return records


def cells_of(cell, budgets, records):
    """Per budget and run: accuracy, gap to single (paired per seed), losses, evaluations;
    and the terminal table's rows."""
    cells, printed = [], []
    for epochs in budgets:
        single = {
            r["seed"]: r["test_acc"]
            for r in records
            if r["epochs"] == epochs and r["run"] == "single"
        }
        for name in ("single", *VARIANTS):
            rs = [r for r in records if r["epochs"] == epochs and r["run"] == name]
            acc = summarise([r["test_acc"] for r in rs])
            gap = summarise([r["test_acc"] - single[r["seed"]] for r in rs])
            # The loss at chance level is ln(classes); the first epoch whose loss is well below it.
            below = [
                next(
                    (
                        i + 1
                        for i, x in enumerate(r["loss_curve"])
                        if x < 0.9 * math.log(cell["num_classes"])
                    ),
                    None,
                )
                for r in rs
            ]
            evals = {
                mode: summarise([r["eval"][mode] for r in rs])
                if all(mode in r["eval"] for r in rs)
                else None
                for mode in ("full", "sampled", "local")
            }
            cells.append(
                {
                    "epochs": epochs,
                    "run": name,
                    "test_acc_mean": acc[0],
                    "test_acc_std": acc[1],
                    "gap_mean": gap[0],
                    "gap_std": gap[1],
                    "final_loss_mean": summarise([r["loss_curve"][-1] for r in rs])[0],
                    "first_epoch_loss_below_0.9_chance": below,
                    **{
                        f"eval_{mode}_mean": None if v is None else v[0]
                        for mode, v in evals.items()
                    },
                    **{
                        f"eval_{mode}_std": None if v is None else v[1] for mode, v in evals.items()
                    },
                }
            )
            printed.append(
                [
                    epochs,
                    name,
                    pm(acc[0], acc[1], "{:.3f}"),
                    pm(gap[0], gap[1], "{:+.1f}", 100),
                    f"{cells[-1]['final_loss_mean']:.3f}",
                    ", ".join(map(str, below)),
                    *("-" if v is None else pm(v[0], v[1], "{:.3f}") for v in evals.values()),
                ]
            )
    return cells, printed


def main(argv=None):
    args = parse_args(argv)
    cell, budgets, seeds = design(args)
    start = time.perf_counter()
    records = measure(cell, budgets, seeds)
    cells, printed = cells_of(cell, budgets, records)
    print(
        table(
            printed,
            [
                "epochs",
                "run",
                "test accuracy",
                "gap to single (points)",
                "final loss",
                "first epoch with loss < 0.9 ln(C)",
                "eval full",
                "eval sampled",
                "eval local",
            ],
        )
    )
    payload = {
        "benchmark": "grappa_map_deep",
        "machine": machine_note(),
        "quick": args.quick,
        "argv": sys.argv[1:] if argv is None else list(argv),
        "graph": dict(cell, generator="zg.datasets.csbm"),
        "run_settings": dict(RUN, workers=4, eval_every=1),
        "variants": VARIANTS,
        "seeds": seeds,
        "budgets": budgets,
        "cells": cells,
        "runs": records,
        "seconds": time.perf_counter() - start,
    }
    print(
        f"wrote {write_json(args.name or ('grappa_map_deep_quick' if args.quick else 'grappa_map_deep'), payload)}"
    )


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a grappa_map_deep result (bench/_headlines.py calls it)."""
    out = []
    for c in doc["detail"].get("cells") or []:
        if c["run"] == "single" or c.get("gap_mean") is None:
            continue
        name = re.sub(r"[^a-z0-9]+", "_", c["run"]).strip("_")
        out.append(
            headline(
                f"gap_{name}_e{c['epochs']}",
                100 * c["gap_mean"],
                "points",
                std=100 * c["gap_std"]
                if c.get("gap_std") is not None and len(doc["seeds"]) > 1
                else None,
                n=len(doc["seeds"]) or 1,
                compared_to="single-process training",
                where=f"csbm, 3 layers, {c['epochs']} epochs",
            )
        )
    return out


if __name__ == "__main__":
    main()
