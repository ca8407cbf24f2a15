"""Why does Grappa lose accuracy on random chunks? Learning curves, the factors one at a time,
three ways of evaluating the same trained model, and the estimators' gradient error along
training (issue 14, section 1).

    DGLBACKEND=pytorch .venv/bin/python bench/grappa_diagnosis.py           # the committed result
    DGLBACKEND=pytorch .venv/bin/python bench/grappa_diagnosis.py --quick   # a smoke run (minutes)

Writes ``bench/results/grappa_diagnosis.json`` (``grappa_diagnosis_quick.json`` with --quick).

Settings: the kit's training defaults (SAGE, hidden 64, dropout 0.5, Adam lr 0.01) with the
issue's two graphs, 4 workers, random chunks (2P = 8 of them, round-robin schedule),
3 seeds per run (the seed fixes the chunks, the initial parameters and every sample):

    cora      zg.datasets.load("cora"), batch 32, fanouts [10, 10]
    csbm20k   zg.datasets.csbm(num_nodes=20000, avg_degree=20, num_classes=10, feat_dim=64,
              feature_snr=0.5), batch 256, fanouts [10, 10]

Runs per seed (all 4-worker runs of a dataset share one process group, ``train_many``):

    single, feature_fetch, isolated
    grappa with every estimator (mean, node, batch, shrink, reference), repartition every 5
    grappa/batch with repartition every 1, never (fixed partitions), with the halo, on METIS

Each run's validation and test accuracy after every epoch (full neighbourhoods, as the history
records them) gives the learning curves. Each final model is evaluated again three ways on the
test nodes: full neighbourhoods; neighbourhoods *sampled* with the training fanouts on the whole
graph (the training-time distribution of a non-isolated trainer); and, for isolated / grappa,
each test node's neighbourhood in its worker's local graph of the last super-epoch (what the
worker saw while training). Finally, the grappa/batch trajectory of seed 0 is stopped at a few
epochs and every estimator's combined gradient is compared with the exact full-graph gradient
there (:func:`zg.grappa.gradient_error`, 3 random partitions x 2 super-epochs).
"""

from __future__ import annotations

import argparse
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

from _machine import RESULTS, machine_note, pm, read_json, table, write_json

import zg
from zg import grappa
from zg.experiments.results import headline_from, spread
from zg.grappa.config import TrainConfig, super_epoch_of
from zg.grappa.fullgraph import accuracy, full_forward
from zg.inference import sampled_logits

ESTIMATORS = ("mean", "node", "batch", "shrink", "reference")
SEEDS = (0, 1, 2)
SPECS = {
    "cora": {
        "graph": {"name": "cora"},
        "batch_size": 32,
        "epochs": 60,
        "quick_epochs": 6,
        "checkpoints": (0, 5, 20),
        "quick_checkpoints": (0, 2),
    },
    "csbm20k": {
        "graph": {
            "name": "csbm",
            "num_nodes": 20_000,
            "avg_degree": 20,
            "num_classes": 10,
            "feat_dim": 64,
            "feature_snr": 0.5,
            "seed": 0,
        },
        "batch_size": 256,
        "epochs": 12,
        "quick_epochs": 2,
        "checkpoints": (0, 3),
        "quick_checkpoints": (0,),
    },
}
# One torch thread per worker (2 shared cores); random chunks unless a run says otherwise.
COMMON = dict(
    kernel="auto",  # the fastest kernels here (the same values as "torch")
    fanouts=[10, 10],
    threads=1,
    timeout=900,
    run_timeout=7200,
    eval_every=1,
    method="random",
    halo=False,
)


# The kit's Grappa defaults (METIS chunks, the halo, the batch estimator, a new super-epoch
# every 5 epochs), read from TrainConfig so the "grappa/defaults" run follows them.
DEFAULTS = {
    f: getattr(TrainConfig(), f) for f in ("method", "halo", "estimator", "repartition_every")
}


def load(spec):
    spec = dict(spec)
    name = spec.pop("name")
    return zg.datasets.load(name) if name == "cora" else zg.datasets.csbm(**spec)


def distributed_runs(base, only=None):
    """(label, options) of every 4-worker run of one seed (``only``: a subset of the labels)."""
    runs = [
        ("feature_fetch", dict(trainer="feature_fetch")),
        ("isolated", dict(trainer="isolated")),
    ]
    runs += [
        (f"grappa/{est}", dict(trainer="grappa", estimator=est, repartition_every=5))
        for est in ESTIMATORS
    ]
    runs += [
        ("grappa/batch every 1", dict(trainer="grappa", estimator="batch", repartition_every=1)),
        ("grappa/batch fixed", dict(trainer="grappa", estimator="batch", repartition_every=None)),
        (
            "grappa/batch halo",
            dict(trainer="grappa", estimator="batch", repartition_every=5, halo=True),
        ),
        (
            "grappa/batch metis",
            dict(trainer="grappa", estimator="batch", repartition_every=5, method="metis"),
        ),
        # What a user gets: every Grappa setting at the kit's default (TrainConfig).
        ("grappa/defaults", dict(trainer="grappa", **DEFAULTS)),
    ]
    return [
        (label, {**base, "workers": 4, **opts}) for label, opts in runs if not only or label in only
    ]


@torch.no_grad()
def eval_modes(g, hist, model_path):
    """Test accuracy of a saved model: full, sampled (training fanouts), local (own partition)."""
    cfg = TrainConfig.from_dict(TrainConfig.saved_form(hist["config"]))
    model = zg.models.build(
        cfg.model,
        g.feat_dim,
        cfg.hidden_dim,
        g.num_classes,
        cfg.num_layers,
        dropout=cfg.dropout,
        kernel="auto",
    )
    model.load_state_dict(torch.load(model_path))
    model.eval()
    test = g.test_idx
    out = {"full": accuracy(full_forward(model, g)[test], g.y[test])}
    sampled = []
    for draw in range(3):  # 3 independent samples, the kit's one sampled evaluation
        logits = sampled_logits(model, g, test, cfg.fanouts, batch_size=None, seed=1000 + draw)
        sampled.append(accuracy(logits, g.y[test]))
    out["sampled"] = statistics.mean(sampled)
    if cfg.trainer in ("isolated", "grappa"):
        part = grappa.partition(
            g,
            cfg.workers,
            cfg.method,
            cfg.seed,
            num_chunks=cfg.num_chunks,
            halo=cfg.halo,
            schedule=cfg.schedule,
        )
        s = super_epoch_of(cfg, cfg.epochs - 1)
        correct = 0
        is_test = torch.zeros(g.num_nodes, dtype=torch.bool)
        is_test[test] = True
        for worker in range(cfg.workers):
            local = part.local_graph(g, worker, s)
            owned = torch.arange(local.num_owned)
            mine = owned[is_test[local.global_ids[: local.num_owned]]]
            logits = full_forward(model, local.graph)[mine]
            correct += int((logits.argmax(1) == local.graph.y[mine]).sum())
        out["local"] = correct / test.numel()
    return out


def run_dataset(label, spec, args, scratch, save):
    quick = args.quick
    g = load(spec["graph"])
    epochs = args.epochs or (spec["quick_epochs"] if quick else spec["epochs"])
    base = dict(COMMON, batch_size=spec["batch_size"], epochs=epochs)
    if args.lr is not None:
        base["lr"] = args.lr
    print(f"{label}: {g}, {epochs} epochs", flush=True)
    records = []
    t = time.perf_counter()
    singles = [
        dict(
            base,
            workers=1,
            trainer="single",
            seed=s,
            model_path=os.path.join(scratch, f"{label}_single_{s}.pt"),
        )
        for s in args.seeds
    ]
    runs = [("single", r) for r in singles]
    dist_runs = []
    for s in args.seeds:
        for name, opts in distributed_runs(base, args.runs):
            path = os.path.join(
                scratch, f"{label}_{name.replace('/', '_').replace(' ', '_')}_{s}.pt"
            )
            dist_runs.append((name, dict(opts, seed=s, model_path=path)))
    histories = grappa.train_many(g, [r for _, r in runs])
    print(f"  single: {time.perf_counter() - t:.0f}s", flush=True)
    t = time.perf_counter()
    histories += grappa.train_many(g, [r for _, r in dist_runs])
    print(f"  4-worker runs: {time.perf_counter() - t:.0f}s", flush=True)
    for (name, run), hist in zip(runs + dist_runs, histories):
        modes = eval_modes(g, hist, run["model_path"])
        rec = {
            "run": name,
            "seed": run["seed"],
            "val_curve": [e["val_acc"] for e in hist["epochs"]],
            "test_curve": [e["test_acc"] for e in hist["epochs"]],
            "loss_curve": [e["loss"] for e in hist["epochs"]],
            "final_test_acc": hist["final"]["test_acc"],
            "test_acc_at_best_val": hist["final"]["test_acc_at_best_val"],
            "eval": modes,
            "mean_coverage": statistics.mean(hist["epochs"][-1]["mean_coverage"]),
        }
        records.append(rec)
        print(
            f"  {name:22s} seed={run['seed']} final test={rec['final_test_acc']:.4f} "
            f"full={modes['full']:.4f} sampled={modes['sampled']:.4f} "
            f"local={modes.get('local', float('nan')):.4f}",
            flush=True,
        )
    summary = summarise(records, epochs)
    result = {
        "graph": str(g),
        "epochs": epochs,
        "argv": sys.argv[1:],
        "settings": {
            **base,
            "lr": base.get("lr", TrainConfig().lr),
            "workers": 4,
            "seeds": list(args.seeds),
        },
        "runs": records,
        "summary": summary,
        "gradient_error": None,
    }
    save(result)  # the runs are kept even if what follows fails
    print_summary(label, result)
    if not args.no_gradient:
        result["gradient_error"] = gradient_along_training(g, label, spec, base, quick, scratch)
        save(result)
    return result


def summarise(records, epochs):
    names = list(dict.fromkeys(r["run"] for r in records))
    out = {}
    single = [r for r in records if r["run"] == "single"]
    for name in names:
        rs = [r for r in records if r["run"] == name]
        curve = [spread([r["val_curve"][e] for r in rs]) for e in range(epochs)]
        test_curve = [spread([r["test_curve"][e] for r in rs]) for e in range(epochs)]
        gap_curve = [
            100
            * (
                statistics.mean(r["test_curve"][e] for r in single)
                - statistics.mean(r["test_curve"][e] for r in rs)
            )
            for e in range(epochs)
        ]
        out[name] = {
            "val_curve": curve,
            "test_curve": test_curve,
            "test_gap_points_curve": gap_curve,
            "final_test_acc": spread([r["final_test_acc"] for r in rs]),
            "test_acc_at_best_val": spread([r["test_acc_at_best_val"] for r in rs]),
            "eval_full": spread([r["eval"]["full"] for r in rs]),
            "eval_sampled": spread([r["eval"]["sampled"] for r in rs]),
            "eval_local": spread([r["eval"].get("local") for r in rs]),
            "gap_points_final": 100
            * (
                statistics.mean(r["final_test_acc"] for r in single)
                - statistics.mean(r["final_test_acc"] for r in rs)
            ),
        }
    return out


def gradient_along_training(g, label, spec, base, quick, scratch):
    """Every estimator's error against g* at a few points of the grappa/batch trajectory
    (seed 0, random chunks, repartition every 5) and at its end."""
    checkpoints = spec["quick_checkpoints"] if quick else spec["checkpoints"]
    epochs = base["epochs"]
    points = sorted({k for k in checkpoints if k < epochs} | {epochs})
    final = os.path.join(scratch, f"{label}_grappa_batch_0.pt")  # the seed-0 run's model
    if os.path.exists(final):
        os.replace(final, os.path.join(scratch, f"{label}_traj_{epochs}.pt"))
    runs = []
    for k in points:
        if k == 0 or os.path.exists(os.path.join(scratch, f"{label}_traj_{k}.pt")):
            continue
        runs.append(
            dict(
                base,
                workers=4,
                trainer="grappa",
                estimator="batch",
                repartition_every=5,
                seed=0,
                epochs=k,
                model_path=os.path.join(scratch, f"{label}_traj_{k}.pt"),
            )
        )
    if runs:
        grappa.train_many(g, runs)
    parts = grappa.random_partitions(g, 4, count=3, method="random", seed=0)
    rows = []
    for k in points:
        torch.manual_seed(0)  # the initial parameters of every seed-0 run
        model = zg.models.build(
            "sage", g.feat_dim, 64, g.num_classes, 2, dropout=0.5, kernel="auto"
        )
        if k:
            model.load_state_dict(torch.load(os.path.join(scratch, f"{label}_traj_{k}.pt")))
        model.eval()
        ref = grappa.exact_gradient(g, model)
        err = grappa.gradient_error(
            g, model, parts, estimator="all", super_epochs=[0, 1], reference=ref
        )
        for name, e in err.items():
            e.pop("per_draw")
            rows.append({"epoch": k, "estimator": name, **e})
        print(
            f"  grad-error {label} epoch {k}: "
            + "  ".join(
                f"{n}={e['relative_error']:.3f}/cos {e['cosine']:.3f}" for n, e in err.items()
            ),
            flush=True,
        )
    return rows


def print_summary(label, result):
    rows = []
    for name, s in result["summary"].items():
        fmt = lambda m: "" if m is None else pm(m["mean"], m["std"], "{:.1f}", 100)  # noqa: E731
        rows.append(
            [
                label,
                name,
                fmt(s["final_test_acc"]),
                fmt(s["test_acc_at_best_val"]),
                f"{s['gap_points_final']:+.1f}",
                fmt(s["eval_full"]),
                fmt(s["eval_sampled"]),
                fmt(s["eval_local"]),
            ]
        )
    print(
        "\n"
        + table(
            rows,
            [
                "data",
                "run",
                "final test %",
                "test % @ best val",
                "gap to single (pts)",
                "eval full %",
                "eval sampled %",
                "eval local %",
            ],
        )
    )


def combine(names, target):
    """--combine: the datasets of several result files in one (no measurement)."""
    results = RESULTS
    datasets, sources = {}, []
    for name in [target, *names] if (results / f"{target}.json").exists() else names:
        path = results / f"{name}.json"
        if not path.exists():
            raise SystemExit(f"error: --combine: {path} does not exist")
        part = read_json(path)
        for key, dataset in (part.get("datasets") or {}).items():
            dataset.setdefault("machine", part.get("machine"))
            dataset.setdefault("argv", part.get("command"))
            datasets[key] = dataset
        sources.append(path.name)
    out = {
        "machine": machine_note(),
        "machine_note": "the machine of the --combine step; each dataset holds "
        "the machine note of the run that measured it",
        "quick": False,
        "argv": sys.argv[1:],
        "combined_from": sources,
        "datasets": datasets,
    }
    print(f"wrote {write_json(target, out)}: datasets {list(datasets)} from {sources}")


POOL_SETTINGS = ("fanouts", "batch_size", "epochs", "lr", "workers", "method", "halo")


def pool_datasets(datasets, keys):
    """The runs that every one of ``datasets[k] for k in keys`` has, over all their seeds, as one
    new dataset whose summary is recomputed from the pooled runs (no measurement).

    The datasets must be of the same graph and epochs with the same training settings (all but
    the seeds), and no (run, seed) may occur twice. Runs missing from any of them are left out:
    the pooled summary compares only runs measured on every seed. Raises ValueError otherwise."""
    if len(keys) < 2:
        raise ValueError(f"--pool needs at least two datasets, got {list(keys)}")
    missing = [k for k in keys if k not in datasets]
    if missing:
        raise ValueError(f"--pool: no dataset {missing} (there are {list(datasets)})")
    parts = [datasets[k] for k in keys]
    first = parts[0]
    for key, part in zip(keys[1:], parts[1:]):
        if part["graph"] != first["graph"] or part["epochs"] != first["epochs"]:
            raise ValueError(f"--pool: {key!r} is another graph or length than {keys[0]!r}")
        differ = [f for f in POOL_SETTINGS if part["settings"].get(f) != first["settings"].get(f)]
        if differ:
            raise ValueError(f"--pool: {key!r} differs from {keys[0]!r} in {differ}")
    common = set.intersection(*({r["run"] for r in part["runs"]} for part in parts))
    if "single" not in common:
        raise ValueError("--pool: the datasets do not all have the single-process run")
    records = [r for part in parts for r in part["runs"] if r["run"] in common]
    seen = set()
    for r in records:
        if (r["run"], r["seed"]) in seen:
            raise ValueError(f"--pool: run {r['run']!r} seed {r['seed']} occurs twice")
        seen.add((r["run"], r["seed"]))
    seeds = sorted({r["seed"] for r in records})
    order = [name for name in dict.fromkeys(r["run"] for r in first["runs"]) if name in common]
    records.sort(key=lambda r: (order.index(r["run"]), r["seed"]))
    return {
        "graph": first["graph"],
        "epochs": first["epochs"],
        "pooled_from": list(keys),
        "machines": {k: part.get("machine") for k, part in zip(keys, parts)},
        "argvs": {k: part.get("argv") for k, part in zip(keys, parts)},
        "settings": {**first["settings"], "seeds": seeds},
        "runs": records,
        "summary": summarise(records, first["epochs"]),
        "gradient_error": None,
    }


def pool(keys, tag, target):
    """--pool: :func:`pool_datasets` of the --name file's datasets, written back as ``tag``. A
    source all of whose runs the pooled dataset holds is dropped from the file (nothing is
    lost; its runs keep their seeds and its machine note and command stay in ``machines`` and
    ``argvs``); a source with other runs too stays."""
    path = RESULTS / f"{target}.json"
    if not path.exists():
        raise SystemExit(f"error: --pool: {path} does not exist")
    out = read_json(path)
    try:
        pooled = pool_datasets(out.get("datasets") or {}, keys)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None
    dropped = redundant_sources(out["datasets"], keys, pooled)
    out["datasets"] = {k: v for k, v in out["datasets"].items() if k not in dropped}
    out["datasets"][tag] = pooled
    out.pop("source", None)
    print(
        f"wrote {write_json(target, out)}: dataset {tag!r} = runs {sorted(pooled['summary'])} "
        f"over seeds {pooled['settings']['seeds']}, from {list(keys)}; dropped {dropped}"
    )


def redundant_sources(datasets, keys, pooled):
    """The pooled sources whose every (run, seed) the pooled dataset holds."""
    held = {(r["run"], r["seed"]) for r in pooled["runs"]}
    return [k for k in keys if all((r["run"], r["seed"]) in held for r in datasets[k]["runs"])]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few epochs: a smoke run")
    parser.add_argument("--only", choices=sorted(SPECS), help="one dataset")
    parser.add_argument(
        "--epochs", type=int, default=None, help="epochs of every run (default: per dataset)"
    )
    parser.add_argument(
        "--runs",
        type=lambda t: [x.strip() for x in t.split(",")],
        default=None,
        help="comma-separated 4-worker run labels to keep (default: all; single always runs)",
    )
    parser.add_argument("--no-gradient", action="store_true", help="skip the gradient-error part")
    parser.add_argument(
        "--lr",
        type=float,
        default=None,
        help="learning rate of every run (default: the kit's); the dataset is then "
        "recorded as '<name> lr=<lr>'",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=list(SEEDS),
        help=f"seeds of every run (default {' '.join(map(str, SEEDS))})",
    )
    parser.add_argument(
        "--tag",
        default=None,
        help="append this to the dataset's key in the result (e.g. '100 epochs, seed 0'), "
        "so --combine keeps it beside the dataset's other runs",
    )
    parser.add_argument("--name", default=None, help="result file name (default: from the options)")
    parser.add_argument(
        "--combine",
        nargs="+",
        default=None,
        metavar="RESULT",
        help="measure nothing: put the datasets of these result files (names in "
        "bench/results, e.g. grappa_diagnosis_csbm20k) into the --name file "
        "(default grappa_diagnosis), later files replacing earlier ones; each "
        "dataset keeps its own machine note and command line",
    )
    parser.add_argument(
        "--pool",
        nargs="+",
        default=None,
        metavar="DATASET",
        help="measure nothing: pool the runs that all these datasets of the --name file "
        "(default grappa_diagnosis) have, over all their seeds, into one dataset "
        "named by --tag, its summary recomputed (e.g. seed 0 and seeds 1-2 of one "
        "setting)",
    )
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the other datasets already in the result file (replace only the "
        "ones this run measures)",
    )
    args = parser.parse_args(argv)
    if args.combine:
        return combine(args.combine, args.name or "grappa_diagnosis")
    if args.pool:
        if not args.tag:
            raise SystemExit("error: --pool needs --tag, the pooled dataset's name")
        return pool(args.pool, args.tag, args.name or "grappa_diagnosis")
    start = time.perf_counter()
    note = machine_note()
    scratch = tempfile.mkdtemp(prefix="zg-diagnosis-")
    name = args.name or ("grappa_diagnosis_quick" if args.quick else "grappa_diagnosis")
    if args.only and not args.name:
        name += f"_{args.only}"
    results = {}
    kept = {}
    if args.merge:
        previous = RESULTS / f"{name}.json"
        if previous.exists():
            old = read_json(previous)
            kept = old.get("datasets") or {}
            for dataset in kept.values():  # each dataset keeps its own machine note
                dataset.setdefault("machine", old.get("machine"))
                dataset.setdefault("argv", old.get("command"))

    def save(_=None):
        out = {
            "machine": note,
            "machine_note": "the machine of this invocation; each dataset holds the "
            "machine note of the run that measured it",
            "quick": args.quick,
            "argv": sys.argv[1:],
            "datasets": {**{k: v for k, v in kept.items() if k not in results}, **results},
            "bench_seconds": time.perf_counter() - start,
            "load_average_at_end": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        }
        return write_json(name, out), out

    for label, spec in SPECS.items():
        if args.only and label != args.only:
            continue
        key = label if args.lr is None else f"{label} lr={args.lr:g}"
        if args.tag:
            key += f" {args.tag}"
        results[key] = run_dataset(
            label,
            spec,
            args,
            scratch,
            lambda partial, key=key: (
                results.__setitem__(key, {**partial, "machine": note}),
                save(),
            ),
        )
        results[key]["machine"] = note
    path, out = save()
    print(f"\nwrote {path} in {out['bench_seconds'] / 60:.1f} min")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The diagnosis's gaps to single-process training (points; single minus trainer, so lower is
    better), paired per seed: on Cora and the csbm 20k graph in the combined file, on the one
    dataset of each partial file (a long run, the ablations)."""
    datasets = doc["detail"].get("datasets") or {}
    main = [k for k in ("cora", "csbm20k") if k in datasets]
    out = []
    for dataset in main or list(datasets):
        d = datasets[dataset]
        by = {}
        for r in d.get("runs") or []:
            by.setdefault(r["run"], {})[r["seed"]] = r["final_test_acc"]
        single = by.get("single", {})
        slug = re.sub(r"[^a-z0-9]+", "_", dataset.lower()).strip("_")
        for run in (
            "isolated",
            "grappa/batch",
            "grappa/defaults",
            "grappa/batch halo",
            "grappa/batch every 1",
        ):
            seeds = sorted(set(by.get(run, {})) & set(single))
            if not seeds:
                continue
            gaps = [100.0 * (single[s] - by[run][s]) for s in seeds]
            name = re.sub(r"[^a-z0-9]+", "_", run.replace("grappa/", "grappa "))
            out.append(
                headline_from(
                    f"gap_{name}_{slug}",
                    gaps,
                    "points",
                    compared_to="single-process training, same seed (single minus this)",
                    where=f"{dataset}, {d.get('epochs')} epochs, final test accuracy",
                    higher_is_better=False,
                )
            )
    return out


if __name__ == "__main__":
    main()
