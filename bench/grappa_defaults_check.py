"""The acceptance check of Grappa's defaults (issue 14): on graphs no test uses, a user who gives
``zg.grappa.train`` only ``workers=4``, ``epochs`` and ``seed`` gets, over 3 seeds, a mean
test accuracy within 1 point of the single-process trainer under the same defaults
(``trainer="single"``, also given only epochs and seed).

    .venv/bin/python bench/grappa_defaults_check.py            # the committed result
    .venv/bin/python bench/grappa_defaults_check.py --quick    # 2 epochs, one seed: a smoke run

Writes ``bench/results/grappa_defaults_check.json`` (``..._quick.json`` with --quick): the
defaults in force (``TrainConfig()``), every run's final test accuracy (the model after the last
epoch, full neighbourhoods), mean ± std per trainer and the gap in points (single minus grappa;
positive = Grappa loses). The check passes when |gap| <= 1 point or Grappa is better.

The graphs (seeds and shapes no test, notebook or other bench uses):

    csbm_a   csbm(num_nodes=12000, avg_degree=12, num_classes=6, feat_dim=32, homophily=0.6,
                  feature_snr=1.0, seed=101): uniform degrees, moderate homophily
    csbm_pl  csbm(num_nodes=12000, avg_degree=15, num_classes=8, feat_dim=48, homophily=0.7,
                  degree="powerlaw", feature_snr=0.7, seed=202): power-law degrees

Only ``threads`` (one torch thread per worker on a small shared machine: a speed setting that
changes no number) and generous timeouts are added to what a user passes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import zg  # noqa: E402
from zg import grappa  # noqa: E402

from _machine import machine_note, table, write_json  # noqa: E402

GRAPHS = {
    "csbm_a": dict(num_nodes=12000, avg_degree=12, num_classes=6, feat_dim=32, homophily=0.6,
                   feature_snr=1.0, seed=101, name="csbm_a"),
    "csbm_pl": dict(num_nodes=12000, avg_degree=15, num_classes=8, feat_dim=48, homophily=0.7,
                    degree="powerlaw", feature_snr=0.7, seed=202, name="csbm_pl"),
}
EPOCHS = 20                  # TrainConfig's default number of epochs
SEEDS = (0, 1, 2)
SPEED = dict(threads=1, timeout=900, run_timeout=7200)    # no effect on any number


def mean_std(values):
    return {"mean": statistics.mean(values),
            "std": statistics.stdev(values) if len(values) > 1 else 0.0, "values": values}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 epochs, one seed: a smoke run")
    args = parser.parse_args(argv)
    epochs, seeds = (2, (0,)) if args.quick else (EPOCHS, SEEDS)
    start = time.perf_counter()
    note = machine_note()
    defaults = asdict(grappa.TrainConfig())
    results = {}
    rows = []
    for name, spec in GRAPHS.items():
        g = zg.datasets.csbm(**spec)
        print(f"{name}: {g} (edge homophily {g.edge_homophily():.2f})", flush=True)
        t = time.perf_counter()
        single = grappa.train_many(g, [dict(trainer="single", workers=1, epochs=epochs, seed=s, **SPEED)
                                       for s in seeds])
        dist = grappa.train_many(g, [dict(workers=4, epochs=epochs, seed=s, **SPEED) for s in seeds])
        seconds = time.perf_counter() - t
        s_acc = [h["final"]["test_acc"] for h in single]
        g_acc = [h["final"]["test_acc"] for h in dist]
        gap = 100 * (statistics.mean(s_acc) - statistics.mean(g_acc))
        cfg = dist[0]["config"]
        results[name] = {"graph": spec, "summary": str(g), "single": mean_std(s_acc),
                         "grappa": mean_std(g_acc), "gap_points": gap, "met": gap <= 1.0,
                         "grappa_config": {k: cfg[k] for k in ("estimator", "method", "halo",
                                                               "repartition_every", "num_chunks",
                                                               "batch_size", "lr", "epochs")},
                         "seconds": seconds}
        rows.append([name, f"{100 * statistics.mean(s_acc):.1f} ± {100 * results[name]['single']['std']:.1f}",
                     f"{100 * statistics.mean(g_acc):.1f} ± {100 * results[name]['grappa']['std']:.1f}",
                     f"{gap:+.1f}", "met" if gap <= 1.0 else "NOT met"])
        print(f"  single {s_acc}  grappa {g_acc}  gap {gap:+.2f} points ({seconds:.0f}s)", flush=True)
    print("\n" + table(rows, ["graph", "single test %", "grappa (defaults) test %", "gap (pts)", "check"]))
    out = {"machine": note, "quick": args.quick, "epochs": epochs, "seeds": list(seeds),
           "defaults": defaults, "speed_options": SPEED, "graphs": results,
           "all_met": all(r["met"] for r in results.values()),
           "bench_seconds": time.perf_counter() - start}
    path = write_json("grappa_defaults_check_quick" if args.quick else "grappa_defaults_check", out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
