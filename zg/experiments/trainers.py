"""zg.experiments.trainers: the distributed trainers trained for real, side by side (notebooks
06, 08).

Where it sits: over :func:`zg.grappa.train_many`, which runs several trainings in one set of
worker processes. :func:`run_trainers` trains each run and returns its history;
:func:`trainer_rows` summarises each history in one row (accuracy, coverage, time, bytes per
epoch by kind) and :func:`average_rows` averages such tables over seeds. Figures:
:func:`zg.viz.curves`, :func:`zg.viz.bytes_per_epoch_by_run`, :func:`zg.viz.accuracy_vs_bytes`.

    histories = ex.run_trainers(g, ["grappa", "isolated", "feature_fetch"], workers=2, epochs=4)
    rows = ex.trainer_rows(histories)
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._progress import RunProgress
from .results import mean_std
from .traffic import bytes_sent

__all__ = [
    "run_trainers",
    "trainer_rows",
    "average_rows",
    "GRAPPA_RESULTS",
    "load_grappa_results",
    "epoch_time_rows",
    "depth_rows",
]


def run_trainers(g: Any, runs: Sequence[Any], **common: Any) -> dict[str, dict[str, Any]]:
    """Train each run for real and return ``{label: history}`` in the order given.

    Each run is a trainer name (``"grappa"``, ``"isolated"``, ``"psgd_pa"``,
    ``"feature_fetch"``, ``"single"``) or a dict of :func:`zg.grappa.train` options with a
    ``trainer`` and optionally a ``label`` (default: the trainer's name); ``common`` options
    (workers, epochs, seed, fanouts, batch_size, ...) apply to every run, except those a run's
    trainer fixes itself (:meth:`zg.grappa.Trainer.shared_options`: e.g. ``repartition_every``
    or ``estimator`` for isolated, ``workers`` for single). All distributed runs share one set
    of worker processes (:func:`zg.grappa.train_many`); runs of a trainer with its own number
    of workers (``single``: one process) run in their own launch. A bar ticks once per finished
    run (:mod:`zg.experiments._progress`: a person's notebook, not an unattended run).
    """
    from ..grappa.train import train_many
    from ..grappa.trainers import get_trainer

    if isinstance(runs, (str, dict)) or not list(runs):
        raise TypeError(
            "runs must be a non-empty list of trainer names or dicts of train() options"
        )
    labelled = []
    for run in runs:
        options = (
            {"trainer": run}
            if isinstance(run, str)
            else dict(run)
            if isinstance(run, dict)
            else None
        )
        if options is None or "trainer" not in options:
            raise TypeError(
                f"each run must be a trainer name or a dict with a 'trainer', got {run!r}"
            )
        label = options.pop("label", options["trainer"])
        if label in {lb for lb, _ in labelled}:
            raise ValueError(f"two runs are labelled {label!r}; give each a distinct 'label'")
        trainer = get_trainer(options["trainer"])
        labelled.append((label, {**trainer.shared_options(common), **options}))
    own = [(lb, o) for lb, o in labelled if get_trainer(o["trainer"]).workers is not None]
    many = [(lb, o) for lb, o in labelled if get_trainer(o["trainer"]).workers is None]
    out: dict[str, dict[str, Any]] = {}
    with RunProgress(len(labelled), desc="training runs") as bar:
        for group in (many, own):
            if group:
                histories = train_many(g, [bar.watch(o) for _, o in group])
                for (label, _), history in zip(group, histories):
                    out[label] = bar.forget(history)
    return {label: out[label] for label, _ in labelled}


def trainer_rows(histories: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One summary row per run of :func:`run_trainers`: accuracy, coverage, time and bytes.

    Keys: ``run``, ``trainer``, ``workers``, ``final_test_acc`` and ``final_val_acc`` (last
    epoch), ``best_val_acc``, ``test_acc_at_best_val``, ``mean_coverage`` (L-hop coverage of
    the training nodes, mean over workers, last epoch), ``late_val_acc`` (mean validation
    accuracy over the later half of the evaluated epochs: less noisy than any single epoch),
    ``seconds_per_epoch`` (median, measured), and ``<kind>_per_epoch``: bytes one worker sent
    per epoch (mean over workers).
    """
    if not isinstance(histories, dict) or not histories:
        raise ValueError("histories must be a non-empty dict {label: history}")
    rows = []
    for label, h in histories.items():
        sent = bytes_sent(h)
        E, P = len(h["epochs"]), int(h["workers"])
        last = h["epochs"][-1]
        evaluated = [e["val_acc"] for e in h["epochs"] if e["val_acc"] is not None]
        late = evaluated[len(evaluated) // 2 :]
        row = {
            "run": label,
            "trainer": h["config"]["trainer"],
            "workers": P,
            "final_test_acc": h["final"]["test_acc"],
            "final_val_acc": h["final"]["val_acc"],
            "best_val_acc": h["final"]["best_val_acc"],
            "test_acc_at_best_val": h["final"]["test_acc_at_best_val"],
            "late_val_acc": sum(late) / len(late),
            "mean_coverage": sum(last["mean_coverage"]) / P,
            "seconds_per_epoch": h["seconds_per_epoch"],
        }
        for kind, per_worker in sent.items():
            row[f"{kind}_per_epoch"] = sum(per_worker) / (P * E)
        rows.append(row)
    return rows


def average_rows(
    row_lists: Sequence[Sequence[dict[str, Any]]], key: str = "run"
) -> list[dict[str, Any]]:
    """Average several :func:`trainer_rows` tables (e.g. one per seed) run by run.

    Rows are matched by ``key``; numeric entries are averaged, other entries must agree across
    the tables (they are copied). Each row gains ``seeds``: how many tables were averaged.
    The order is the first table's.
    """
    tables = [list(rows) for rows in row_lists] if not isinstance(row_lists, dict) else []
    if not tables or not all(tables):
        raise ValueError("row_lists must be a non-empty list of non-empty row lists")
    out = []
    for first in tables[0]:
        matches = [next((r for r in rows if r.get(key) == first.get(key)), None) for rows in tables]
        if any(m is None for m in matches):
            raise ValueError(f"run {first.get(key)!r} is missing from some of the tables")
        row: dict[str, Any] = {}
        for name, value in first.items():
            values = [m.get(name) for m in matches]
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                row[name] = sum(values) / len(values)
            elif any(v != value for v in values):
                raise ValueError(
                    f"{name!r} of run {first.get(key)!r} differs between the tables: {values}"
                )
            else:
                row[name] = value
        row["seeds"] = len(tables)
        out.append(row)
    return out


# Where bench/grappa.py commits its measurements (a checkout of the repository).
GRAPPA_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "grappa.json"


def load_grappa_results(path: Any = None) -> dict[str, Any] | None:
    """The results ``bench/grappa.py`` committed (``bench/results/grappa.json``, or ``path``),
    or None if the file is absent. They were measured on the machine their ``machine`` note
    names, not on the machine reading them."""
    path = GRAPPA_RESULTS if path is None else Path(path)
    if not path.exists():
        return None
    from .results import load

    data = load(path)  # a zg-result/1 document: the runs are its rows
    if data["bench"] != "grappa":
        raise ValueError(f"{path} is not a bench/grappa.py result (its bench is {data['bench']!r})")
    data["path"] = str(path)
    return data


# The fields that say what a bench/grappa.py run was (its setting), beside the line's own match:
# runs pooled into one mean must agree on every one of them and differ only by seed.
RUN_SETTING_FIELDS = (
    "setting",
    "trainer",
    "estimator",
    "repartition",
    "method",
    "halo",
    "shrink_lambda",
    "batch_size",
    "epochs",
)


def epoch_time_rows(
    results: dict[str, Any],
    *,
    dataset: str,
    layers: int,
    runs: Sequence[tuple[str, dict[str, Any]]] = (
        ("single", {"trainer": "single", "setting": "comparison"}),
        ("isolated", {"trainer": "isolated", "method": "metis", "setting": "comparison"}),
        (
            "grappa (batch, repartitioned)",
            {
                "trainer": "grappa",
                "estimator": "batch",
                "repartition": True,
                "method": "metis",
                "setting": "comparison",
            },
        ),
        ("feature_fetch", {"trainer": "feature_fetch", "setting": "comparison"}),
    ),
) -> list[dict[str, Any]]:
    """Seconds per epoch against the worker count, from committed bench/grappa.py runs.

    ``runs`` names each line and the fields its runs must match (by default every line from
    the bench's "comparison" setting, so the lines drawn side by side ran the same setting).
    Runs averaged into one point must be the same setting (:data:`RUN_SETTING_FIELDS`) and
    differ only by seed: runs of two settings, or one seed twice, are refused (a ValueError
    naming the field), never pooled. Returns rows ``run``, ``workers``, ``seconds_mean``,
    ``seconds_std`` (sample std, n - 1, over the seeds; None for a single run) and ``runs``
    (how many were averaged), sorted by run and P. Figure: :func:`zg.viz.epoch_time_vs_workers`.
    """
    if not isinstance(results, dict) or not isinstance(results.get("rows"), list):
        raise ValueError("results must be a dict from load_grappa_results (with a 'rows' list)")
    rows = []
    for label, match in runs:
        mine = [
            r
            for r in results["rows"]
            if r.get("dataset") == dataset
            and r.get("layers") == layers
            and all(r.get(k) == v for k, v in match.items())
        ]
        for P in sorted({r["workers"] for r in mine}):
            group = [r for r in mine if r["workers"] == P]
            _same_setting(group, f"{label!r} at P={P} ({dataset}, {layers} layers)")
            secs = [float(r["measured_epoch_seconds"]) for r in group]
            mean, std = mean_std(secs)
            rows.append(
                {
                    "run": label,
                    "workers": P,
                    "seconds_mean": mean,
                    "seconds_std": std,
                    "runs": len(secs),
                }
            )
    if not rows:
        raise ValueError(f"no committed run matches dataset={dataset!r}, layers={layers}")
    return rows


def _same_setting(group: Sequence[dict[str, Any]], what: str) -> None:
    """Raise ValueError when the runs in ``group`` are not one setting over distinct seeds."""
    for field in RUN_SETTING_FIELDS:
        seen = {repr(r.get(field)) for r in group}
        if len(seen) > 1:
            raise ValueError(
                f"the runs of {what} differ in {field!r} ({', '.join(sorted(seen))}): runs of "
                f"different settings are not averaged; add {field!r} to the line's match"
            )
    seeds = [r.get("seed") for r in group]
    if len(set(map(repr, seeds))) != len(seeds):
        raise ValueError(f"the runs of {what} repeat a seed ({seeds}): each seed counts once")


def depth_rows(
    histories: dict[tuple[int, int], dict[str, dict[str, Any]]],
    metric: str = "test_acc_at_best_val",
) -> list[dict[str, Any]]:
    """Mean and std over seeds of ``metric`` per (trainer label, depth).

    ``histories`` maps ``(layers, seed)`` to a :func:`run_trainers` result ``{label: history}``;
    ``metric`` is a :func:`trainer_rows` column. Returns rows ``trainer``, ``layers``, ``mean``,
    ``std`` (sample std, n - 1, over the seeds; None for one seed), ``seeds``, ``values``.
    Figure: :func:`zg.viz.accuracy_vs_depth`.
    """
    if not isinstance(histories, dict) or not histories:
        raise ValueError("histories must be a non-empty dict {(layers, seed): {label: history}}")
    values: dict[tuple[str, int], list[float]] = {}
    for key, runs in histories.items():
        if not (isinstance(key, tuple) and len(key) == 2):
            raise ValueError(f"histories keys must be (layers, seed) pairs, got {key!r}")
        for row in trainer_rows(runs):
            if metric not in row:
                raise ValueError(
                    f"metric {metric!r} is not a trainer_rows column; try 'test_acc_at_best_val'"
                )
            values.setdefault((row["run"], key[0]), []).append(float(row[metric]))
    rows = []
    for (label, layers), vals in values.items():
        mean, std = mean_std(vals)
        rows.append(
            {
                "trainer": label,
                "layers": layers,
                "mean": mean,
                "std": std,
                "seeds": len(vals),
                "values": vals,
            }
        )
    return sorted(
        rows,
        key=lambda r: (
            list(dict.fromkeys(lb for lb, _ in values)).index(r["trainer"]),
            r["layers"],
        ),
    )
