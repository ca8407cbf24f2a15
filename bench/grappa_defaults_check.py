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

    csbm_a   csbm(num_nodes=8000, avg_degree=12, num_classes=6, feat_dim=32, homophily=0.6,
                  feature_snr=1.0, seed=101): uniform degrees, moderate homophily
    csbm_pl  csbm(num_nodes=8000, avg_degree=10, num_classes=8, feat_dim=32, homophily=0.7,
                  degree="powerlaw", power=4.0, feature_snr=0.7, seed=202): power-law degrees
                  (power 4: hubs of a few hundred in-edges; a heavier tail makes the full-graph
                  evaluation's padded block too large for a small machine)

E = 10 epochs for both trainers (the check allows any E; 10 keeps it short on 2 cores). Run
the graphs in separate processes with ``--graphs NAME --name grappa_defaults_check_NAME`` and
join them with ``--combine`` (what the committed file is).

Only ``threads`` (one torch thread per worker on a small shared machine: a speed setting that
changes no number) and generous timeouts are added to what a user passes.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, pm, table, write_json

import zg
from zg import grappa
from zg.experiments.results import headline_from, spread

GRAPHS = {
    "csbm_a": dict(
        num_nodes=8000,
        avg_degree=12,
        num_classes=6,
        feat_dim=32,
        homophily=0.6,
        feature_snr=1.0,
        seed=101,
        name="csbm_a",
    ),
    "csbm_pl": dict(
        num_nodes=8000,
        avg_degree=10,
        num_classes=8,
        feat_dim=32,
        homophily=0.7,
        degree="powerlaw",
        power=4.0,
        feature_snr=0.7,
        seed=202,
        name="csbm_pl",
    ),
}
EPOCHS = 10
SEEDS = (0, 1, 2)
SPEED = dict(threads=1, timeout=900, run_timeout=7200, kernel="auto")  # no effect on any number


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 epochs, one seed: a smoke run")
    parser.add_argument(
        "--graphs",
        type=lambda t: t.split(","),
        default=list(GRAPHS),
        help=f"comma-separated subset of {list(GRAPHS)}",
    )
    parser.add_argument("--name", default=None, help="result file name (default: from --quick)")
    parser.add_argument(
        "--combine",
        action="store_true",
        help="join bench/results/grappa_defaults_check_<graph>.json into one file",
    )
    args = parser.parse_args(argv)
    if args.combine:
        return combine()
    unknown = sorted(set(args.graphs) - set(GRAPHS))
    if unknown:
        parser.error(f"--graphs: unknown graph(s) {unknown}; known: {list(GRAPHS)}")
    epochs, seeds = (2, (0,)) if args.quick else (EPOCHS, SEEDS)
    start = time.perf_counter()
    note = machine_note()
    defaults = asdict(grappa.TrainConfig())
    results = {}
    rows = []
    for name, spec in GRAPHS.items():
        if name not in args.graphs:
            continue
        g = zg.datasets.csbm(**spec)
        print(f"{name}: {g} (edge homophily {g.edge_homophily():.2f})", flush=True)
        t = time.perf_counter()
        single = grappa.train_many(
            g, [dict(trainer="single", workers=1, epochs=epochs, seed=s, **SPEED) for s in seeds]
        )
        dist = grappa.train_many(
            g, [dict(workers=4, epochs=epochs, seed=s, **SPEED) for s in seeds]
        )
        seconds = time.perf_counter() - t
        s_acc = [h["final"]["test_acc"] for h in single]
        g_acc = [h["final"]["test_acc"] for h in dist]
        gap = 100 * (statistics.mean(s_acc) - statistics.mean(g_acc))
        cfg = dist[0]["config"]
        results[name] = {
            "graph": spec,
            "summary": str(g),
            "single": spread(s_acc),
            "grappa": spread(g_acc),
            "gap_points": gap,
            "met": gap <= 1.0,
            "grappa_config": {
                k: cfg[k]
                for k in (
                    "estimator",
                    "method",
                    "halo",
                    "repartition_every",
                    "num_chunks",
                    "batch_size",
                    "lr",
                    "epochs",
                )
            },
            "seconds": seconds,
        }
        rows.append(
            [
                name,
                pm(statistics.mean(s_acc), results[name]["single"]["std"], "{:.1f}", 100),
                pm(statistics.mean(g_acc), results[name]["grappa"]["std"], "{:.1f}", 100),
                f"{gap:+.1f}",
                "met" if gap <= 1.0 else "NOT met",
            ]
        )
        print(
            f"  single {s_acc}  grappa {g_acc}  gap {gap:+.2f} points ({seconds:.0f}s)", flush=True
        )
    print(
        "\n"
        + table(rows, ["graph", "single test %", "grappa (defaults) test %", "gap (pts)", "check"])
    )
    out = {
        "machine": note,
        "quick": args.quick,
        "epochs": epochs,
        "seeds": list(seeds),
        "defaults": defaults,
        "speed_options": SPEED,
        "graphs": results,
        "all_met": all(r["met"] for r in results.values()),
        "bench_seconds": time.perf_counter() - start,
    }
    path = write_json(
        args.name or ("grappa_defaults_check_quick" if args.quick else "grappa_defaults_check"), out
    )
    print(f"wrote {path}")


def combine():
    """bench/results/grappa_defaults_check.json from the per-graph files."""
    from _machine import read_json

    parts = [read_json(f"grappa_defaults_check_{name}") for name in GRAPHS]
    out = {
        k: v
        for k, v in parts[0].items()
        if k not in ("graphs", "all_met", "bench_seconds", "source")
    }
    out["graphs"] = {k: v for p in parts for k, v in p["graphs"].items()}
    out["machines"] = [p["machine"] for p in parts]
    out["all_met"] = all(r["met"] for r in out["graphs"].values())
    out["bench_seconds"] = sum(p["bench_seconds"] for p in parts)
    out["note"] = "joined from one run per graph (--graphs NAME), which ran side by side"
    print(f"wrote {write_json('grappa_defaults_check', out)}; all met: {out['all_met']}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a grappa_defaults_check result (bench/_headlines.py calls it)."""
    out = []
    for name, g in (doc["detail"].get("graphs") or {}).items():
        diffs = [100 * (x - y) for x, y in zip(g["grappa"]["values"], g["single"]["values"])]
        if diffs:
            out.append(
                headline_from(
                    f"grappa_minus_single_{name}",
                    diffs,
                    "points",
                    compared_to="single-process training, same seed",
                    where=f"{name} ({g['graph']['num_nodes']:,} nodes), kit defaults, P=4",
                )
            )
    return out


if __name__ == "__main__":
    main()
