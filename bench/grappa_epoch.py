"""An epoch's account: where every second of a Grappa epoch goes (issue 38).

    .venv/bin/python bench/grappa_epoch.py                        # Cora, 3 seeds
    .venv/bin/python bench/grappa_epoch.py --graphs csbm20k --add  # + the csbm 20k graph
    .venv/bin/python bench/grappa_epoch.py --quick                # 3 epochs, one seed: a smoke run

(the committed file: ``--graphs cora,csbm20k,products_like``, the three graphs one after the
other in one run; every graph's entry keeps its own command and machine note).

Writes ``bench/results/grappa_epoch.json``: for each graph and setting, per seed, the median
epoch seconds (the history's ``seconds_per_epoch``) and the epoch's account
(:func:`zg.grappa.account.account_summary`: mean seconds per epoch by part, sampling ...
other, one step's seconds, rank 0's step, one evaluation's seconds). The settings, all with
``threads=1``:

    reference         grappa.train(g, workers=4, preset="reference", epochs, eval_every=5)
    reference_eval1   the same with eval_every=1 (evaluation after every epoch)
    single            the reference preset's settings with trainer="single" (one process)
    kit               the kit's defaults, workers=4
    single_kit        the kit's defaults with trainer="single"

Runs with the same number of processes share one set of workers (``grappa.train_many``), one
after the other, so the rows of a graph are measured in one run of this script, side by side
(the load average is in the machine note). The first epoch of every run is left out of its
account (it pays for the processes meeting). The authors' public code measured 0.13 s per epoch
for the reference setting on Cora on this machine (issue 38); that number is theirs, not
measured here.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import RESULTS, machine_note, pm, read_json, table, write_json

import zg
from zg import grappa
from zg.experiments.results import headline_from, spread
from zg.grappa.account import PARTS, account_summary

WORKERS = 4
SEEDS = (0, 1, 2)
SETTINGS = ("reference", "reference_eval1", "single", "kit", "single_kit")
EPOCHS = {"cora": 30, "csbm20k": 10, "products_like": 5}
SPEED = dict(threads=1, timeout=900, run_timeout=7200)
NOT_RUN = {}
GRAPHS = {
    "cora": lambda: zg.datasets.load("cora"),
    "csbm20k": lambda: zg.datasets.csbm(
        num_nodes=20_000, avg_degree=20, num_classes=10, feat_dim=64, feature_snr=0.5, seed=0
    ),
    "products_like": lambda: zg.datasets.products_like(num_nodes=100_000),
}


def run_args(setting: str, epochs: int, seed: int) -> dict:
    base = dict(epochs=epochs, seed=seed, eval_every=5, **SPEED)
    return {
        "reference": dict(base, preset="reference", workers=WORKERS),
        "reference_eval1": dict(base, preset="reference", workers=WORKERS, eval_every=1),
        "single": dict(base, preset="reference", trainer="single"),
        "kit": dict(base, workers=WORKERS),
        "single_kit": dict(base, trainer="single"),
    }[setting]


def summarise(histories: list[dict]) -> dict:
    """One setting over its seeds: every account number as a spread over the seeds."""
    accounts = [account_summary(h) for h in histories]
    return {
        "seconds_per_epoch": spread(a["seconds"] for a in accounts),
        "parts": {p: spread(a["parts"][p] for a in accounts) for p in PARTS},
        "step_seconds": spread(a["step_seconds"] for a in accounts),
        # rank 0's own step: it evaluates, so it never waits for an evaluation in its exchange
        "step_seconds_rank0": spread(a["step_seconds_by_worker"][0] for a in accounts),
        "evaluation_seconds": spread(a["evaluation_seconds"] for a in accounts),
        "other_fraction": spread(a["parts"]["other"] / sum(a["parts"].values()) for a in accounts),
        "test_acc_at_best_val": spread(h["final"]["test_acc_at_best_val"] for h in histories),
        "iterations_per_epoch": histories[0]["epochs"][0]["iterations"],
        "workers": histories[0]["workers"],
    }


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 epochs, one seed: a smoke run")
    parser.add_argument(
        "--graphs",
        type=lambda t: t.split(","),
        default=["cora"],
        help=f"comma-separated subset of {list(GRAPHS)} (default cora)",
    )
    parser.add_argument(
        "--add", action="store_true", help="keep the graphs already in the file, add these"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.graphs) - set(GRAPHS))
    if unknown:
        parser.error(f"--graphs: unknown graph(s) {unknown}; known: {list(GRAPHS)}")
    seeds = (0,) if args.quick else SEEDS
    start = time.perf_counter()
    command = "bench/grappa_epoch.py " + " ".join(argv)
    results, lines = {}, []
    for name in args.graphs:
        g = GRAPHS[name]()
        epochs = 3 if args.quick else EPOCHS[name]
        print(f"{name}: {g}, {epochs} epochs", flush=True)
        histories = {}
        # One set of processes per worker count, the settings interleaved seed by seed.
        for group in (("single", "single_kit"), ("reference", "reference_eval1", "kit")):
            todo = [(s, seed) for seed in seeds for s in group]
            out = grappa.train_many(g, [run_args(s, epochs, seed) for s, seed in todo])
            histories.update(dict(zip(todo, out)))
        cells = {s: summarise([histories[(s, seed)] for seed in seeds]) for s in SETTINGS}
        results[name] = {
            "summary": str(g),
            "epochs": epochs,
            "settings": cells,
            "command": command,
            "machine": machine_note(),
        }
        for s, c in cells.items():
            lines.append(
                [
                    name,
                    s,
                    pm(c["seconds_per_epoch"]["mean"], c["seconds_per_epoch"]["std"], "{:.3f}"),
                ]
                + [f"{1000 * c['parts'][p]['mean']:.1f}" for p in PARTS]
            )
    print(
        "\n" + table(lines, ["graph", "setting", "s / epoch (median)"] + [f"{p} ms" for p in PARTS])
    )
    name = "grappa_epoch_quick" if args.quick else "grappa_epoch"
    previous = RESULTS / f"{name}.json"
    if args.add and previous.exists():
        results = {
            **{k: v for k, v in read_json(previous)["graphs"].items() if k not in results},
            **results,
        }
    out = {
        "benchmark": "grappa_epoch",
        "command": command,
        "machine": machine_note(),
        "seeds": list(seeds),
        "settings": {s: run_args(s, "epochs", "seed") for s in SETTINGS},
        "parts": list(PARTS),
        "graphs": results,
        "authors_cora_seconds_per_epoch": 0.13,
        "not_run": {k: v for k, v in NOT_RUN.items() if k not in results},
        "bench_seconds": time.perf_counter() - start,
    }
    print(f"wrote {write_json(name, out)}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """Per graph: the reference preset's median epoch seconds, its ratio to single-process
    training (paired per seed), one evaluation against one step (eval_every=1) and the share
    of "other" in the epoch."""
    out = []
    for graph, entry in (doc["detail"].get("graphs") or {}).items():
        cells, where = entry["settings"], f"{graph}, P = 4, {entry['epochs']} epochs"
        ref, single = cells["reference"], cells["single"]
        out.append(
            headline_from(
                f"epoch_seconds_reference_{graph}",
                ref["seconds_per_epoch"]["values"],
                "s",
                where=f"{where}, median epoch, eval_every=5",
                higher_is_better=False,
            )
        )
        out.append(
            headline_from(
                f"epoch_reference_over_single_{graph}",
                [
                    a / b
                    for a, b in zip(
                        ref["seconds_per_epoch"]["values"], single["seconds_per_epoch"]["values"]
                    )
                ],
                "x",
                compared_to="single (one process, the same settings), same seed",
                where=f"{where}, median epoch seconds",
                higher_is_better=False,
            )
        )
        eval1 = cells["reference_eval1"]
        if eval1["evaluation_seconds"] is not None and "step_seconds_rank0" in eval1:
            out.append(
                headline_from(
                    f"evaluation_over_step_{graph}",
                    [
                        a / b
                        for a, b in zip(
                            eval1["evaluation_seconds"]["values"],
                            eval1["step_seconds_rank0"]["values"],
                        )
                    ],
                    "x",
                    compared_to="one training step of rank 0 (the evaluating worker) in the same "
                    "run: the other workers' steps include waiting for the evaluation",
                    where=f"{where}, eval_every=1",
                    higher_is_better=False,
                )
            )
        single_eval = single["evaluation_seconds"]
        if single_eval is not None and "step_seconds_rank0" in single:
            out.append(
                headline_from(
                    f"evaluation_over_step_single_{graph}",
                    [
                        a / b
                        for a, b in zip(
                            single_eval["values"], single["step_seconds_rank0"]["values"]
                        )
                    ],
                    "x",
                    compared_to="one training step of the same run (one process: nothing else "
                    "runs beside the evaluation)",
                    where=f"{graph}, trainer='single', {entry['epochs']} epochs, eval_every=5",
                    higher_is_better=False,
                )
            )
        out.append(
            headline_from(
                f"other_fraction_reference_{graph}",
                ref["other_fraction"]["values"],
                "fraction",
                where=f"{where}, 'other' over the mean epoch",
                higher_is_better=False,
            )
        )
    return out


if __name__ == "__main__":
    main()
