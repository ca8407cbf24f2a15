"""Accuracy against homophily: how much the graph lets a GNN add above the features alone.

    .venv/bin/python bench/accuracy.py

csbm graphs (20k nodes, average degree 10, 10 classes, 32 features, feature SNR 1) at
homophily 0.1 ... 0.9; for each: the validation-accuracy curve of a 2-layer SAGE trained by
the envelope engine (fanouts [10, 10], batch 512), its final test accuracy (full-neighbour
inference), and the feature-only logistic-regression floor. Writes bench/results/accuracy.json.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, ran_kernel, table, write_json

import zg
from zg import models
from zg.baselines.features import feature_only_accuracy
from zg.experiments.results import headline


def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--epochs", type=int, default=15)
    ap.add_argument("--homophily", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7, 0.9])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rows = []
    for h in args.homophily:
        g = zg.datasets.csbm(
            num_nodes=args.nodes,
            avg_degree=10,
            num_classes=10,
            feat_dim=32,
            homophily=h,
            seed=args.seed,
        )
        torch.manual_seed(args.seed)
        eng = zg.Engine(
            g,
            models.SAGE(32, 64, 10, 2, dropout=0.5),
            [10, 10],
            512,
            seed=args.seed,
            optimizer=zg.optim.adam(lr=3e-3),
            kernel="auto",
        )
        kernel = ran_kernel(eng)
        eng.observers = []
        curve = []
        for _ in range(args.epochs):
            eng.train_epoch()
            curve.append(eng.evaluate("val"))
        row = {
            "homophily_requested": h,
            "homophily_measured": g.edge_homophily(),
            "val_curve": curve,
            "test_accuracy": eng.evaluate("test"),
            "feature_only_test_accuracy": feature_only_accuracy(g, seed=args.seed),
        }
        rows.append(row)
        print(
            f"h={h:.1f}  measured {row['homophily_measured']:.3f}  SAGE test {row['test_accuracy']:.3f}  "
            f"features only {row['feature_only_test_accuracy']:.3f}",
            flush=True,
        )
    print()
    print(
        table(
            [
                [
                    f"{r['homophily_requested']:.1f}",
                    f"{r['test_accuracy']:.3f}",
                    f"{r['feature_only_test_accuracy']:.3f}",
                    " ".join(f"{v:.2f}" for v in r["val_curve"][::3]),
                ]
                for r in rows
            ],
            ["homophily", "SAGE test", "features only", "val curve (every 3rd epoch)"],
        )
    )
    path = write_json(
        "accuracy",
        {
            "benchmark": "accuracy",
            "machine": machine_note(),
            "settings": {**vars(args), "kernel": kernel},
            "rows": rows,
        },
    )
    print(f"\nwrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """Test accuracy at the lowest and highest homophily the file swept (one seed each)."""
    rows = sorted(doc["rows"], key=lambda r: r["homophily_requested"])
    out = []
    for r in {id(x): x for x in rows[:1] + rows[-1:]}.values():
        h = r["homophily_requested"]
        out.append(
            headline(
                f"test_acc_h{h}",
                r["test_accuracy"],
                "acc",
                compared_to=f"features alone: {r['feature_only_test_accuracy']:.3f}",
                where=f"csbm, homophily {h}, SAGE, one seed",
            )
        )
    return out


if __name__ == "__main__":
    main()
