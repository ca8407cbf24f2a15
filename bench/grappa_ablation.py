"""Why ``preset="reference"`` learned less than the authors' code in 30 epochs on Cora (issue
57, items 1 and 2): each difference from the public code toggled alone on zg's side.

    .venv/bin/python bench/grappa_ablation.py --peer-data /tmp/grappa-peer/data   # the file
    .venv/bin/python bench/grappa_ablation.py --epochs 150 --rows reference,self_loops \
        --peer-data /tmp/grappa-peer-150/data --name grappa_ablation_e150   # 150 epochs
    .venv/bin/python bench/grappa_ablation.py --quick         # 2 epochs, one seed, two rows

The setting is the one ``bench/grappa_peer.py`` compares (Cora, P = 4, the public code's
default: SAGE 3 x 128, fanouts 15,10,5, batch 1000 per worker, lr 0.003, 30 epochs, evaluated
every 5th epoch, the metric their code prints: test accuracy at the best validation epoch,
full-neighbour evaluation). The base row is ``preset="reference"`` as it was up to zg 0.4
(``self_loops="keep"``: Cora as the kit loads it, no self-loop); every other row changes one
thing to what the public code does (read at github.com/chongyang-xu/grappa 5b00124):

    self_loops         the graph their code trains on: ``t10n/dataset/dgl_to_t10n.py``
                       (``augmentation_dgl_g``) removes and re-adds one self-loop per node, so
                       SAGE's neighbour mean includes the node itself (in sampling, in training
                       and in evaluation); ``self_loops="add"``, what the preset now sets
    estimator_mean     the gradients averaged (estimator "mean") instead of scaled by the public
                       code's c_r / P and summed: the gradient scaling (with Adam, a scale that
                       is the same on every worker changes nothing; c_r differs a little)
    unbalanced_chunks  every node's chunk drawn independently and uniformly
                       (``t10n/dataset/chunk_dist.py``: ``random_assign_pid``), not the kit's
                       balanced random cut: chunk sizes and training seeds per worker vary
    eval_every_1       the best validation epoch picked from every epoch, not every 5th: how
                       much the evaluation schedule alone moves the metric

and four rows measure item 2 (the kit's defaults, given only ``workers`` or the trainer,
``epochs`` and ``seed``; the kit's default is ``self_loops="keep"``):

    kit, kit_single    ``grappa.train(g, workers=4, epochs=30, seed=s)``, and with
                       ``trainer="single"`` (one process, the same defaults)
    kit_self_loops, kit_single_self_loops   the same two with ``self_loops="add"``

What stays equal on both sides and is therefore not a row (read in the public code): the
initialisation (DGL's SAGEConv: Glorot-uniform weights with the ReLU gain, nn.Linear's bias;
zg.models.SAGEConv does the same), dropout 0.5 after the ReLU of each hidden layer (none on the
input), Adam (lr 0.003, no weight decay, one optimizer for the whole run: at 30 epochs there is
no repartitioning), one batch per worker and epoch (Cora has 140 training nodes, about 35 per
worker; batch order is moot), cross-entropy averaged over the worker's seeds, fanouts
sampled seeds first (their C++ sampler walks the fanouts in reverse, as DGL does). The
evaluation protocol differs on their side (as published, ``asis``, their layer-wise inference
computes hidden embeddings only for the split's nodes, zero for the rest); the peer's
``everynode`` variant evaluates every node as zg does. With ``--peer-data`` (the ``data``
folder of a ``../shared/grappa_peer/run.sh`` run with ``VARIANTS="asis everynode"`` and the same
epochs), their rows and per-epoch curves (rank 0's loss, rank 0's validation accuracy at their
evaluations) are read from its logs into the same file.

Writes ``bench/results/grappa_ablation.json`` (``grappa_ablation_quick.json`` with --quick):
per row the test accuracy at the best validation epoch (mean ± sample std over the seeds, the
values), the last epoch's test accuracy, the best epoch, and per seed the curves (the mean
training loss over the workers per epoch, the validation accuracy at each evaluated epoch).
Headlines: each row minus the base row, paired per seed, in points; the kit's 4 workers minus
its single process (with and without self-loops), and what the self-loops change in each of
the kit's rows; with ``--peer-data``, the base row and the self-loop row minus their
``everynode`` mean. Only ``threads`` (one torch thread per worker on a small machine) and
generous timeouts are added; they change no number.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from _machine import machine_note, pm, table, write_json

import zg
from zg import grappa
from zg.experiments.results import headline_from, spread

WORKERS = 4
SEEDS = (0, 1, 2)
EPOCHS = 30
EVAL_EVERY = 5  # the public code's default (t10n_train.py), as bench/grappa_peer.py runs both
SPEED = dict(threads=1, timeout=900, run_timeout=7200)  # no effect on any number
BASE = "reference"
# row -> (what it changes, train() options). Every ablation row is the base row with one
# option changed; the base row is the preset as it was up to zg 0.4 (the graph as given).
AS_BEFORE = {"self_loops": "keep"}
ROWS = {
    "reference": ("preset='reference' up to zg 0.4: the graph as given (the base)", AS_BEFORE),
    "self_loops": (
        "one self-loop per node, as their data has (self_loops='add': the preset now)",
        {"self_loops": "add"},
    ),
    "estimator_mean": ("estimator='mean' (no c_r scaling)", {**AS_BEFORE, "estimator": "mean"}),
    "unbalanced_chunks": ("each node's chunk drawn independently", AS_BEFORE),
    "eval_every_1": ("best validation epoch over every epoch", {**AS_BEFORE, "eval_every": 1}),
    "kit": ("the kit's defaults, P = 4", {}),
    "kit_single": ("the kit's defaults, one process", {"trainer": "single"}),
    "kit_self_loops": ("the kit's defaults with self_loops='add', P = 4", {"self_loops": "add"}),
    "kit_single_self_loops": (
        "the kit's defaults with self_loops='add', one process",
        {"trainer": "single", "self_loops": "add"},
    ),
}
ABLATION_ROWS = ("self_loops", "estimator_mean", "unbalanced_chunks", "eval_every_1")
KIT_PAIRS = {"kit": "kit_single", "kit_self_loops": "kit_single_self_loops"}
QUICK_ROWS = ("reference", "self_loops")
THEIR_VARIANTS = ("asis", "everynode")


def unbalanced_partition(g: zg.Graph, seed: int, workers: int = WORKERS):
    """The reference preset's partition (one chunk per worker, halo, partner sweep) with every
    node's chunk drawn independently and uniformly, as the public code's chunker does: chunk
    sizes follow a multinomial draw instead of differing by at most one node."""
    part = grappa.partition(
        g, workers, method="random", seed=seed, halo=True, schedule="partner_sweep"
    )
    draw = torch.Generator().manual_seed(seed)
    part.chunk_of = torch.randint(0, workers, (g.num_nodes,), generator=draw)  # [N]
    part.chunk_sizes = torch.bincount(part.chunk_of, minlength=part.num_chunks)
    return part


def run_options(row: str, seed: int, epochs: int, g: zg.Graph) -> dict:
    """The train() options of ``row`` for ``seed`` (see ROWS): the kit's rows give only
    ``workers`` (or the trainer), ``epochs`` and ``seed`` beyond their own options."""
    options = dict(epochs=epochs, seed=seed, **SPEED)
    if row.startswith("kit"):
        return {**options, **({} if "single" in row else {"workers": WORKERS}), **ROWS[row][1]}
    options.update(workers=WORKERS, preset="reference", eval_every=EVAL_EVERY)
    options.update(ROWS[row][1])
    if row == "unbalanced_chunks":
        options["partition"] = unbalanced_partition(g, seed)
    return options


def curves(history: dict) -> dict:
    """Per epoch: the training loss (mean over the workers' seeds) and the validation accuracy
    where the run evaluated (None elsewhere)."""
    return {
        "loss": [e["loss"] for e in history["epochs"]],
        "val_acc": [e.get("val_acc") for e in history["epochs"]],
    }


def row_result(row: str, histories: list[dict], seeds) -> dict:
    """One row of the file from its runs' histories (one per seed, in ``seeds`` order)."""
    finals = [h["final"] for h in histories]
    return {
        "changes": ROWS[row][0],
        "config": {
            k: histories[0]["config"].get(k)
            for k in (
                "trainer",
                "preset",
                "self_loops",
                "method",
                "halo",
                "schedule",
                "estimator",
                "hidden_dim",
                "num_layers",
                "fanouts",
                "batch_size",
                "lr",
                "eval_every",
                "epochs",
            )
        },
        "seeds": list(seeds),
        "test_acc_at_best_val": spread(f["test_acc_at_best_val"] for f in finals),
        "test_acc_last": spread(f["test_acc"] for f in finals),
        "best_epoch": [f["best_epoch"] for f in finals],
        "chunk_nodes": [_chunk_nodes(h) for h in histories],
        "curves": [curves(h) for h in histories],
    }


def _chunk_nodes(history: dict) -> list[int] | None:
    """The nodes each worker held in the first super-epoch (its chunks, halo not counted); None
    for a run without a partition record (one process)."""
    stats = (history.get("partition") or {}).get("stats") or []
    return [p["nodes"] for p in stats[0]["parts"]] if stats else None


# Rank 0's lines of the public code's t10n_train.py (see its run()): the loss of its step, its
# validation accuracy at an evaluation, and the best-validation model's final evaluation.
_STEP = re.compile(r"^rank0 step_\|epoch\|(\d+)\|step\|(\d+)\|part\|\d+\|loss\|([0-9.]+)\|")
_VAL = re.compile(r"^rank0 epoch=(\d+), val_acc=([0-9.]+)")
_INFER = re.compile(
    r"^rank0 infer_\|epoch\|(\d+)\|part\|\d+\|val_acc\|([0-9.]+)\|test_acc\|([0-9.]+)"
)


def their_run(log_text: str, epochs: int) -> dict | None:
    """One run of theirs from its train.log: the final test accuracy of the best-validation
    model, rank 0's loss of each epoch's first step, rank 0's validation accuracy where it
    evaluated; None when the run did not finish (no final line) or ran other than ``epochs``."""
    loss: list[float | None] = [None] * epochs
    val: list[float | None] = [None] * epochs
    final, last_epoch = None, None
    for line in log_text.splitlines():
        if m := _STEP.match(line):
            epoch, step = int(m[1]), int(m[2])
            if step == 0 and epoch < epochs:
                loss[epoch] = float(m[3])
        elif m := _VAL.match(line):
            if int(m[1]) < epochs:
                val[int(m[1])] = float(m[2])
        elif m := _INFER.match(line):
            last_epoch = int(m[1])
            final = {"val_acc": float(m[2]), "test_acc_at_best_val": float(m[3])}
    if final is None or last_epoch != epochs - 1:  # unfinished, or a run of other epochs
        return None
    scored = [(v, e) for e, v in enumerate(val) if v is not None]
    best_epoch = max(scored, key=lambda ve: (ve[0], -ve[1]))[1] if scored else None
    return {**final, "best_epoch": best_epoch, "curves": {"loss": loss, "val_acc": val}}


def their_rows(data: Path, seeds, epochs: int) -> dict:
    """Their rows (per variant of THEIR_VARIANTS found) from a peer data folder:
    ``public_<variant>_s<seed>/train.log``."""
    out = {}
    for variant in THEIR_VARIANTS:
        runs = []
        for seed in seeds:
            log = data / f"public_{variant}_s{seed}" / "train.log"
            run = their_run(log.read_text(errors="replace"), epochs) if log.exists() else None
            if run is not None:
                runs.append({"seed": seed, **run})
        if runs:
            out[variant] = {
                "seeds": [r["seed"] for r in runs],
                "test_acc_at_best_val": spread(r["test_acc_at_best_val"] for r in runs),
                "best_epoch": [r["best_epoch"] for r in runs],
                "curves": [r["curves"] for r in runs],
            }
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 epochs, one seed, two rows")
    parser.add_argument(
        "--rows",
        type=lambda t: t.split(","),
        default=None,
        help=f"comma-separated subset of {list(ROWS)}",
    )
    parser.add_argument(
        "--peer-data",
        type=Path,
        default=None,
        help="a grappa_peer run.sh data folder (VARIANTS='asis everynode'): their rows",
    )
    parser.add_argument("--epochs", type=int, default=EPOCHS, help=f"default {EPOCHS}")
    parser.add_argument("--name", default=None, help="result file name (default: from --quick)")
    args = parser.parse_args(argv)
    epochs, seeds = (2, (0,)) if args.quick else (args.epochs, SEEDS)
    rows = args.rows or (list(QUICK_ROWS) if args.quick else list(ROWS))
    unknown = sorted(set(rows) - set(ROWS))
    if unknown:
        parser.error(f"--rows: unknown row(s) {unknown}; known: {list(ROWS)}")
    start = time.perf_counter()
    cora = zg.datasets.load("cora")
    results = {}
    for row in rows:
        t = time.perf_counter()
        histories = grappa.train_many(cora, [run_options(row, s, epochs, cora) for s in seeds])
        results[row] = row_result(row, histories, seeds)
        results[row]["seconds"] = time.perf_counter() - t
        acc = results[row]["test_acc_at_best_val"]
        print(f"{row}: {acc['values']} (best epochs {results[row]['best_epoch']})", flush=True)
    theirs = their_rows(args.peer_data, seeds, epochs) if args.peer_data else {}
    lines = [
        [
            row,
            r["changes"],
            pm(r["test_acc_at_best_val"]["mean"], r["test_acc_at_best_val"]["std"], "{:.1f}", 100),
        ]
        for row, r in results.items()
    ]
    lines += [
        [
            f"theirs_{v}",
            "the public code (peer)",
            pm(r["test_acc_at_best_val"]["mean"], r["test_acc_at_best_val"]["std"], "{:.1f}", 100),
        ]
        for v, r in theirs.items()
    ]
    print("\n" + table(lines, ["row", "changes", "test % at best val"]))
    out = {
        "machine": machine_note(),
        "settings": {
            "graph": "cora",
            "workers": WORKERS,
            "epochs": epochs,
            "eval_every": EVAL_EVERY,
            "seeds": list(seeds),
            "base": BASE,
            "speed_options": SPEED,
        },
        "quick": args.quick,
        "rows": [{"row": row, **r} for row, r in results.items()],
        "theirs": theirs,
        "peer_data": str(args.peer_data) if args.peer_data else None,
        "bench_seconds": time.perf_counter() - start,
    }
    path = write_json(
        args.name or ("grappa_ablation_quick" if args.quick else "grappa_ablation"), out
    )
    print(f"wrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a grappa_ablation result (bench/_headlines.py calls it): the
    base and self-loop rows' accuracy (and theirs, per variant), each row minus the base row
    paired per seed, the kit's P = 4 minus
    its single process, and (with their rows) the base and self-loop rows minus theirs."""
    rows = {r["row"]: r for r in doc["rows"]}
    epochs = doc["settings"].get("epochs")
    where = f"cora, P = 4, {epochs} epochs, test acc at best val"
    out = []
    base = rows.get(BASE)
    for row in (BASE, "self_loops"):
        if row in rows:
            out.append(
                headline_from(
                    f"test_acc_{row}",
                    rows[row]["test_acc_at_best_val"]["values"],
                    "acc",
                    where=f"{where}: {rows[row]['changes']}",
                )
            )
    for variant, their in (doc["detail"].get("theirs") or {}).items():
        out.append(
            headline_from(
                f"test_acc_theirs_{variant}",
                their["test_acc_at_best_val"]["values"],
                "acc",
                where=f"{where}: the public code ({variant}), run by ../shared/grappa_peer",
            )
        )
    for row in ABLATION_ROWS:
        if row in rows and base is not None and rows[row]["seeds"] == base["seeds"]:
            diffs = [
                100 * (x - y)
                for x, y in zip(
                    rows[row]["test_acc_at_best_val"]["values"],
                    base["test_acc_at_best_val"]["values"],
                )
            ]
            out.append(
                headline_from(
                    f"{row}_minus_reference",
                    diffs,
                    "points",
                    compared_to="preset='reference' as is, same seed",
                    where=f"{where}: {rows[row]['changes']}",
                )
            )
    for kit, single in KIT_PAIRS.items():
        if kit in rows and single in rows and rows[kit]["seeds"] == rows[single]["seeds"]:
            diffs = [
                100 * (x - y)
                for x, y in zip(
                    rows[kit]["test_acc_at_best_val"]["values"],
                    rows[single]["test_acc_at_best_val"]["values"],
                )
            ]
            out.append(
                headline_from(
                    f"{kit}_minus_single",
                    diffs,
                    "points",
                    compared_to=f"single-process training ({single}), same seed",
                    where=f"cora, {epochs} epochs, test acc at best val: {rows[kit]['changes']}",
                )
            )
    for looped, plain in (("kit_self_loops", "kit"), ("kit_single_self_loops", "kit_single")):
        if looped in rows and plain in rows and rows[looped]["seeds"] == rows[plain]["seeds"]:
            out.append(
                headline_from(
                    f"{looped}_minus_{plain}",
                    [
                        100 * (x - y)
                        for x, y in zip(
                            rows[looped]["test_acc_at_best_val"]["values"],
                            rows[plain]["test_acc_at_best_val"]["values"],
                        )
                    ],
                    "points",
                    compared_to=f"{plain} ({rows[plain]['changes']}), same seed",
                    where=f"cora, {epochs} epochs, test acc at best val: self_loops='add'",
                )
            )
    theirs = (doc["detail"].get("theirs") or {}).get("everynode")
    if theirs is not None:
        their_mean = theirs["test_acc_at_best_val"]["mean"]
        for row in (BASE, "self_loops"):
            if row in rows:
                out.append(
                    headline_from(
                        f"{row}_minus_theirs",
                        [
                            100 * (x - their_mean)
                            for x in rows[row]["test_acc_at_best_val"]["values"]
                        ],
                        "points",
                        compared_to="the public code's mean (everynode: every node evaluated)",
                        where=f"{where}: zg row {row}",
                    )
                )
    return out


if __name__ == "__main__":
    main()
