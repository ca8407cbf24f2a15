"""Launches per steady static step: what the host must issue one by one on a GPU.

    .venv/bin/python bench/launches.py                  # SAGE, GCN, GAT at batch 256 and 1024
    .venv/bin/python bench/launches.py --models sage    # one model

Counts, not time: one steady iteration of the static step (``zg.Engine``, mode "eager",
``kernel="torch"``: sampling and aggregation in torch ops, as CUDA runs them) under
``zg.audit.LaunchCount`` (every non-view aten op that is not a pure allocation; see
``zg.audit.launches_op``), after one warm-up step, for 3-layer models with hidden width 256
and fanouts [15, 10, 5] on a csbm graph (3,000 nodes; the count does not depend on the graph
or the batch size, which the rows show). Each row also splits the count by stage: sampling
(pick and compact, every hop), the rest (gather, forward, loss, backward, optimizer step),
and lists the ten most frequent ops. The same count on a GPU is the number of kernels (plus
memsets and copies) one uncaptured iteration launches; a captured one replays them in one
launch (the GPU check profiles the replay's kernels).

Writes ``bench/results/launches.json`` with the machine note. Deterministic: the same code and
torch give the same counts on any machine (the bound test in tests/core/test_sampling.py runs under
both torch versions CI uses).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _machine import machine_note, table, write_json

import zg
from zg import models
from zg.audit import LaunchCount
from zg.experiments.results import headline

FANOUTS = [15, 10, 5]
HIDDEN, LAYERS = 256, 3
BATCH_SIZES = (256, 1024)
TARGET = 300  # launches per steady iteration, 3-layer SAGE h=256, [15, 10, 5]


class _Split(LaunchCount):
    """A LaunchCount that also counts the ops issued while the sampler runs."""

    def __init__(self):
        super().__init__()
        self.sampling = 0
        self.in_sampler = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        before = self.launches
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if self.in_sampler:
            self.sampling += self.launches - before
        return out


def count(g, model: str, batch_size: int) -> dict:
    torch.manual_seed(0)
    eng = zg.Engine(
        g,
        models.build(model, g.feat_dim, HIDDEN, g.num_classes, LAYERS, dropout=0.0),
        FANOUTS,
        batch_size,
        kernel="torch",
    )
    eng.run_batch(0, 0)  # warm-up: the first step allocates the optimizer state
    split = _Split()
    sample_static = eng.sampler.sample_static

    def timed_sample(*args, **kwargs):
        split.in_sampler = True
        try:
            return sample_static(*args, **kwargs)
        finally:
            split.in_sampler = False

    eng.sampler.sample_static = timed_sample
    with split:
        eng.run_batch(1, 0)
    return {
        "model": model,
        "batch_size": batch_size,
        "kernel": "torch",
        "launches_per_iteration": split.launches,
        "sampling": split.sampling,
        "rest": split.launches - split.sampling,
        "top_ops": dict(split.per_op.most_common(10)),
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", nargs="+", choices=["sage", "gcn", "gat"], default=None)
    args = parser.parse_args(argv)
    chosen = args.models or ["sage", "gcn", "gat"]
    g = zg.datasets.csbm(num_nodes=3000, avg_degree=15, num_classes=5, feat_dim=16, seed=0)
    rows = [count(g, m, b) for m in chosen for b in BATCH_SIZES]
    print(
        table(
            [
                [r["model"], r["batch_size"], r["launches_per_iteration"], r["sampling"], r["rest"]]
                for r in rows
            ],
            ["model", "batch", "launches / iteration", "sampling", "rest"],
        )
    )
    path = write_json(
        "launches",
        {
            "benchmark": "launches",
            "command": "bench/launches.py " + " ".join(argv),
            "machine": machine_note(),
            "settings": {
                "graph": str(g),
                "fanouts": FANOUTS,
                "hidden": HIDDEN,
                "layers": LAYERS,
                "mode": "eager (the static step, uncaptured)",
                "kernel": "torch",
                "counter": "zg.audit.LaunchCount (zg.audit.launches_op)",
                "target": f"at most {TARGET} for 3-layer SAGE h=256, [15, 10, 5]",
            },
            "rows": rows,
            "torch": torch.__version__,
        },
    )
    print(f"wrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """Launches per steady static step, per model and batch size (a count: n = 1, exact)."""
    target = (doc.get("settings") or {}).get("target")
    return [
        headline(
            f"launches_{r['model']}_b{r['batch_size']}",
            r["launches_per_iteration"],
            "launches per iteration",
            compared_to=target if r["model"] == "sage" else None,
            where=f"{r['model']}, batch {r['batch_size']}, 3 layers h=256, [15, 10, 5], "
            "static step, torch path (zg.audit.LaunchCount)",
            higher_is_better=False,
        )
        for r in doc["rows"]
    ]


if __name__ == "__main__":
    main()
