"""``python -m zg.grappa --config cfg.json``: one Grappa run from a JSON config.

Two ways to start it, the same worker code either way (:func:`zg.grappa.train.run_worker`):

    # one machine, P processes started by zg (torch.multiprocessing):
    python -m zg.grappa --config cfg.json --out history.json

    # torchrun: one process per worker, here 2 on this machine ...
    torchrun --standalone --nproc-per-node=2 -m zg.grappa --config cfg.json --out history.json
    # ... or across machines (run on each, with its own --node-rank):
    torchrun --nnodes=2 --nproc-per-node=4 --node-rank=0 --rdzv-backend=c10d \\
             --rdzv-endpoint=HOST:29500 -m zg.grappa --config cfg.json --out history.json

Under torchrun the world size comes from torchrun (it overrides ``workers``) and every rank
loads the graph and computes the same partition from the config's seed. The config is a JSON
object with :class:`zg.grappa.TrainConfig` fields plus ``dataset`` (which graph to load: the
command line's, not a TrainConfig field)::

    {"dataset": "cora", "trainer": "grappa", "estimator": "batch", "epochs": 5, ...}
    {"dataset": {"name": "csbm", "num_nodes": 20000, "avg_degree": 10, "num_classes": 5,
                 "feat_dim": 32, "seed": 0}, ...}
    {"dataset": {"npz": "path/to/graph.npz"}, ...}
    {"dataset": {"folder": "path/to/graph", "mmap": true}, ...}          # zg.datasets.save_folder
    {"dataset": {"name": "ogbn-arxiv", "root": "/data/ogb"}, ...}

``zg grappa`` (:mod:`zg.cli`) runs the same code with one command-line flag per field.

Kernels: one default for the command line and the library. A run started here (or by
``zg grappa``) whose config does not name ``kernel`` runs :class:`zg.grappa.TrainConfig`'s
default, the readable ``"torch"`` code (:data:`COMMAND_LINE_KERNEL`), as :func:`zg.grappa.train`
does; ``"kernel": "auto"`` in the config or ``--kernel auto`` opts into the compiled numba
kernels on the CPU. ``--kernel`` overrides the config's value.

Failure and restart: with ``"checkpoint_dir"`` in the config, a restarted command resumes from
the last checkpoint (see :mod:`zg.grappa.train`), so under torchrun a worker that dies is
survivable::

    torchrun --standalone --nproc-per-node=2 --max-restarts=3 -m zg.grappa --config cfg.json ...

Across machines, also set ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` for torchrun (torch 2.5 and
later), so that each restart gets a fresh rendezvous store (see
:func:`zg.grappa.launch.init_from_env`).

A config that cannot be read or is invalid ends the command with a message naming the file and
the field, exit status 2, before anything starts or is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

from .. import datasets, kernels, log
from .._checks import _shown, output_file_arg
from .._io import read_json_config
from ..errors import ZgError
from ..graph import Graph
from ._checks import check_output_paths
from .checkpoint import checkpoint_locks
from .launch import exit_worker, init_from_env
from .train import TrainConfig, launch_prepared, prepare_many, run_graph, run_worker

GENERATORS = {"csbm": datasets.csbm, "rmat": datasets.rmat}
# The kernel a command-line run takes when its config names none: the library's default (zg
# 0.4 and before: "auto" here, "torch" in the library).
COMMAND_LINE_KERNEL = TrainConfig.kernel


def dataset_paths(spec: Any) -> list[str]:
    """The files and folders a config's ``dataset`` reads (an npz file, a graph folder, an OGB
    root, a named dataset's own file such as the bundled ``cora.npz``): what no output of the
    run may overwrite."""
    if isinstance(spec, str):
        return [str(p) for p in datasets.dataset_paths(spec)]
    if not isinstance(spec, dict):
        return []
    paths = [str(spec[k]) for k in ("npz", "folder", "root") if isinstance(spec.get(k), str)]
    root = spec.get("root") if isinstance(spec.get("root"), str) else None
    return paths + [str(p) for p in datasets.dataset_paths(spec.get("name"), root)]


def load_dataset(spec: Any) -> Graph:
    """The graph a config's ``dataset`` names (see the module docstring)::

    "cora" | "ogbn-arxiv" | ...                          zg.datasets.load(name)
    {"name": "ogbn-arxiv", "root": DIR, ...}             zg.datasets.load(name, **options)
    {"name": "csbm" | "rmat", <generator arguments>}     a synthetic graph
    {"npz": path}                                        zg.datasets.load_npz(path)
    {"folder": path, "mmap": true}                       zg.datasets.load_folder(path, mmap=...)
    """
    if spec is None:
        raise ValueError('the config has no \'dataset\'; e.g. "dataset": "cora"')
    if isinstance(spec, str):
        return datasets.load(spec)
    if not isinstance(spec, dict):
        raise TypeError(f"dataset must be a name or an object, got {type(spec).__name__}")
    spec = dict(spec)
    for key in ("name", "npz", "folder", "root"):
        if key in spec and not isinstance(spec[key], str):
            raise TypeError(
                f"dataset's {key!r} must be a str, got {type(spec[key]).__name__} "
                f"{_shown(spec[key])}"
            )
    if "npz" in spec:
        return datasets.load_npz(spec.pop("npz"), **spec)
    if "folder" in spec:
        return datasets.load_folder(spec.pop("folder"), **spec)
    name = spec.pop("name", None)
    if name in GENERATORS:
        return GENERATORS[name](**spec)
    if isinstance(name, str) and name.lower() in {k.lower() for k in datasets.KNOWN_DATASETS}:
        return datasets.load(name, **spec)
    raise ValueError(
        f"dataset {name!r}: give a name of {list(datasets.KNOWN_DATASETS)} (with "
        f"root, symmetrize, download), {sorted(GENERATORS)} with their arguments, "
        '{"npz": path} or {"folder": path}'
    )


def under_torchrun() -> bool:
    """Whether this process was started by torchrun (which sets RANK and WORLD_SIZE)."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


Report = Callable[[dict[str, Any], str | None], None]

# What a started run can end in that the user should read as one line, not a traceback: a
# timeout (its message names the setting), any zg error (a checkpoint from another run, ...),
# a worker's non-finite loss, a file that cannot be written.
# (A ValueError here is a worker's, raised again in the parent as itself.)
RUN_FAILURES = (TimeoutError, ZgError, FloatingPointError, OSError, ValueError, MemoryError)


def _say_failure(source: str) -> Callable[[str], int]:
    def fail(message: str) -> int:
        print(f"{source}: error: {message}", file=sys.stderr, flush=True)
        return 1

    return fail


def run(
    values: Any,
    out: str | None,
    error: Callable[[str], NoReturn],
    *,
    source: str = "config",
    report: Report | None = None,
    failed: Callable[[str], int] | None = None,
    inputs: Sequence[Any] = (),
) -> int:
    """One Grappa run from config ``values`` (a dict of TrainConfig fields plus ``dataset``,
    which this function takes out: it names the graph). A config without ``kernel`` runs
    :data:`COMMAND_LINE_KERNEL` (TrainConfig's default, "torch").

    Shared by ``python -m zg.grappa --config`` and ``zg grappa``. Every problem with the input
    goes to ``error`` (argparse's ``parser.error``: the message, exit status 2), prefixed with
    ``source``, before any process starts or any file is written. Under torchrun this process
    is one rank (torchrun's world size replaces ``workers``) and ends in
    :func:`zg.grappa.launch.exit_worker`; otherwise it starts the workers itself.
    ``report(history, out)`` is called once with the finished history, in the process that
    has it (rank 0 under torchrun). ``out``: where to write the history JSON (default: the
    config's ``history_path``). A started run that fails in a way the user can act on
    (:data:`RUN_FAILURES`: a timeout, a zg error such as a checkpoint of another run, a
    non-finite loss, a file that cannot be written) goes to ``failed(message)`` (default: one
    line on stderr), whose return value is the exit status (1). Returns the exit status: 0.
    ``inputs``: files the run reads besides its dataset (the config file); no output may be one
    of them, the dataset's files or folder, or lie inside them.
    """
    dataset = None
    if isinstance(values, dict):
        values = dict(values)
        dataset = values.pop("dataset", None)
        values.setdefault("kernel", COMMAND_LINE_KERNEL)  # the library's default
        if under_torchrun():
            values["workers"] = int(os.environ["WORLD_SIZE"])
    try:
        cfg = TrainConfig.from_dict(values)
    except (TypeError, ValueError, RuntimeError, MemoryError) as exc:
        # RuntimeError: "fused" without numba; MemoryError: a model that cannot fit here.
        error(f"{source}: {exc}")
    if cfg.backend == "nccl" and not torch.cuda.is_available():  # a usage error: exit 2
        error(
            f"{source}: backend='nccl' trains on GPUs, and torch.cuda.is_available() is False "
            "here; use backend='gloo' (or leave backend out: the run picks it)"
        )
    out = out or cfg.history_path
    try:
        check_output_paths(
            out,
            cfg.model_path,
            cfg.checkpoint_dir,
            inputs=[*inputs, *dataset_paths(dataset)],
        )
    except (TypeError, ValueError) as exc:
        error(f"{source}: {exc}")
    try:
        g = load_dataset(dataset)
    except (OSError, TypeError, ValueError, KeyError, ImportError) as exc:
        error(f"{source}: dataset {dataset!r}: {exc}")
    if under_torchrun():
        rank, world, local_rank, _ = init_from_env(cfg.timeout, cfg.backend)
        # Rank 0 alone writes the history; with nowhere asked for, a temporary file lets
        # report() see it.
        path = out
        if rank == 0 and path is None and report is not None:
            fd, path = tempfile.mkstemp(prefix="zg-grappa-", suffix=".json")
            os.close(fd)
        # Rank 0 writes the checkpoints: it holds the folder for the run's lifetime.
        with checkpoint_locks([cfg.checkpoint_dir] if rank == 0 else []):
            run_worker(rank, world, cfg, run_graph(g, cfg), None, path, local_rank=local_rank)
        if rank == 0 and path:
            if report is not None:
                with open(path, encoding="utf-8") as f:
                    report(json.load(f), out)
            if out is None:
                os.unlink(path)
        exit_worker()  # see zg.grappa.launch.exit_worker
        return 0
    options = {**cfg.to_dict(), "history_path": out}
    try:  # the plan (partition, batches per worker, ...) before any process
        prepared = prepare_many(g, [options])
    except (TypeError, ValueError) as exc:
        error(f"{source}: {exc}")
    try:
        history = launch_prepared(g, prepared)[0]
    except RUN_FAILURES as exc:
        return (failed or _say_failure(source))(str(exc))
    if report is not None:
        report(history, out)
    return 0


def _accuracy(value: Any, missing: str) -> str:
    """An accuracy of a history for the final line: a number with four decimals, or ``missing``
    (a history holds null for an accuracy that was not measured: a graph without that split)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return f"{value:.4f}"
    return missing


def print_final(history: dict[str, Any], out: str | None) -> None:
    """One line: final accuracies ("no test split" for a graph without one), bytes per epoch
    and worker, where the history went."""
    final = history["final"]
    sent = history.get("bytes_per_epoch_per_worker")
    sent = f"{sent:,.0f}" if isinstance(sent, (int, float)) and math.isfinite(sent) else "?"
    val = _accuracy(final.get("val_acc"), "n/a")
    test = _accuracy(final.get("test_acc"), "")
    print(
        f"val {val}  "
        + (f"test {test}  " if test else "no test split  ")
        + f"{sent} bytes/epoch/worker"
        + (f"; history written to {out}" if out else ""),
        flush=True,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zg.grappa", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--config", required=True, help="JSON file with TrainConfig fields and 'dataset'"
    )
    parser.add_argument(
        "--out",
        default=None,
        help="where to write the history JSON (default: the config's history_path)",
    )
    parser.add_argument(
        "--kernel",
        choices=kernels.KERNELS,
        default=None,
        help="which kernels the workers' Engines run (zg.kernels.KERNELS; default: the "
        f"config's kernel, else {COMMAND_LINE_KERNEL!r})",
    )
    args = parser.parse_args(argv)
    # Everything that can be wrong with the input is reported before any process starts or
    # any file is written (argparse's error: usage, the message, exit status 2).
    try:  # bounded: a config over 1 MiB, a FIFO or a device is refused (zg._io.read_json_config)
        values = read_json_config(args.config, "--config")
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    if args.kernel is not None and isinstance(values, dict):
        values["kernel"] = args.kernel  # the flag wins over the config file
    # Where the run writes is checked now, not after training (a directory as --out, a missing
    # folder for model_path, a file as checkpoint_dir): exit status 2, nothing written.
    if args.out is not None:
        try:
            output_file_arg(args.out, "--out", make_parents=True)
        except (TypeError, ValueError) as exc:
            parser.error(str(exc))
    log.show()  # the zg records (a resumed run says so) on stderr, in every worker too
    return run(
        values,
        args.out,
        parser.error,
        source=f"--config {args.config}",
        report=print_final,
        inputs=[args.config],
    )


if __name__ == "__main__":
    sys.exit(main())
