"""Accuracy against depth (2 to 4 layers) for single, isolated and Grappa, and a 2 x 2 ablation
that separates Grappa's two mechanisms (repartitioning, coverage-corrected weighting).

    .venv/bin/python bench/depth.py                 # Cora, depths 2 3 4, seeds 0 1 2 (about 15 min on 2 shared cores)
    .venv/bin/python bench/depth.py --quick         # depths 2 3, one seed, 2 epochs: checks the script runs

Every run trains on Cora with the settings of notebook 06 (random partition, global batch 32,
fanouts [10] per layer, hidden 64, dropout 0.5, Adam lr 0.01, weight decay 5e-4) on
``--workers`` worker processes. For each depth and seed: ``single`` (one process, whole graph:
the ceiling), ``isolated`` (no repartitioning, plain averaging) and ``grappa`` (the kit's
default: ``batch`` estimator, regrouped every epoch). At the first depth, the ablation adds
``grappa, fixed partition`` (``batch`` weights, ``repartition_every=None``) and ``grappa,
unweighted`` (``estimator="mean"``, regrouped every epoch): with ``isolated`` (neither) and
``grappa`` (both) that is every combination. Reported: test accuracy at the epoch of best
validation accuracy, mean ± std over seeds. Writes bench/results/depth.json; notebook 06 draws it.
"""

from __future__ import annotations

import os
import re

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _machine import machine_note, pm, table, write_json

import zg
from zg import experiments as ex
from zg.experiments.results import headline_from

TRAIN = dict(
    method="random",
    batch_size=32,
    hidden_dim=64,
    dropout=0.5,
    lr=0.01,
    weight_decay=5e-4,
    threads=1,
    timeout=600,
    kernel="auto",  # the fastest kernels here (the same values as the default "torch")
)
ABLATION = {
    "grappa, fixed partition": dict(trainer="grappa", estimator="batch", repartition_every=None),
    "grappa, unweighted": dict(trainer="grappa", estimator="mean", repartition_every=1),
}
TRAINERS = {
    "single": dict(trainer="single"),
    "isolated": dict(trainer="isolated"),
    "grappa": dict(trainer="grappa", estimator="batch", repartition_every=1),
}


def depth_runs(depths, seeds, fanout):
    """The run list for ex.run_trainers: labels ``<name>|<layers>|<seed>``."""
    runs = []
    for layers in depths:
        for seed in seeds:
            names = dict(TRAINERS, **(ABLATION if layers == depths[0] else {}))
            for name, options in names.items():
                runs.append(
                    {
                        **options,
                        "label": f"{name}|{layers}|{seed}",
                        "num_layers": layers,
                        "fanouts": [fanout] * layers,
                        "seed": seed,
                    }
                )
    return runs


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--depths", type=int, nargs="+", default=[2, 3, 4])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fanout", type=int, default=10)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="depths 2 3, seed 0, 2 epochs (writes depth_quick.json)",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.depths, args.seeds, args.epochs = [2, 3], [0], 2
    if any(d < 1 for d in args.depths) or args.epochs < 1 or args.workers < 2:
        ap.error("--depths must be >= 1, --epochs >= 1 and --workers >= 2")
    g = zg.datasets.load("cora")
    start = time.perf_counter()
    histories = ex.run_trainers(
        g,
        depth_runs(args.depths, args.seeds, args.fanout),
        workers=args.workers,
        epochs=args.epochs,
        **TRAIN,
    )
    seconds = time.perf_counter() - start
    by_key = {}
    for label, h in histories.items():
        name, layers, seed = label.split("|")
        by_key.setdefault((int(layers), int(seed)), {})[name] = h
    rows = ex.depth_rows(by_key, metric="test_acc_at_best_val")
    print(
        table(
            [
                (r["trainer"], r["layers"], pm(r["mean"], r["std"], "{:.3f}"), r["seeds"])
                for r in rows
            ],
            ["trainer", "layers", "test acc. at best val.", "seeds"],
        )
    )
    path = write_json(
        "depth_quick" if args.quick else "depth",
        {
            "benchmark": "depth",
            "machine": machine_note(),
            "settings": {
                "dataset": "cora",
                "depths": args.depths,
                "seeds": args.seeds,
                "epochs": args.epochs,
                "workers": args.workers,
                "fanout_per_layer": args.fanout,
                **TRAIN,
            },
            "metric": "test_acc_at_best_val",
            "rows": rows,
            "note": "single trains on the whole graph in one process; isolated = no repartitioning + plain averaging; "
            "grappa = batch estimator + repartitioning every epoch; the two ablation rows exist at the first depth only",
            "seconds_total": seconds,
        },
    )
    print(f"wrote {path} in {seconds:.0f} s")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a depth result (bench/_headlines.py calls it)."""
    out, by = [], {(r["trainer"], r["layers"]): r for r in doc["rows"]}
    for (trainer, layers), r in by.items():
        name = re.sub(r"[^a-z0-9]+", "_", trainer).strip("_")
        out.append(
            headline_from(
                f"{name}_L{layers}",
                r["values"],
                "acc",
                where=f"cora, {layers} layers, test accuracy",
            )
        )
        single = by.get(("single", layers))
        if trainer != "single" and single and len(single["values"]) == len(r["values"]):
            diffs = [100 * (x - y) for x, y in zip(r["values"], single["values"])]
            out.append(
                headline_from(
                    f"{name}_minus_single_L{layers}",
                    diffs,
                    "points",
                    compared_to="single-process training, same seed",
                    where=f"cora, {layers} layers, P={doc['settings'].get('workers')}, test accuracy",
                )
            )
    iso = by.get(("isolated", min(layers for _, layers in by)))
    for (trainer, layers), r in by.items():
        if trainer.startswith("grappa") and iso and iso["layers"] == layers:
            out.append(
                headline_from(
                    f"{re.sub(r'[^a-z0-9]+', '_', trainer).strip('_')}_minus_isolated_L{layers}",
                    [100 * (x - y) for x, y in zip(r["values"], iso["values"])],
                    "points",
                    compared_to="isolated training (no repartitioning, plain averaging), same seed",
                    where=f"cora, {layers} layers, test accuracy",
                )
            )
    return out


if __name__ == "__main__":
    main()
