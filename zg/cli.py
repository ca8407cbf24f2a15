"""zg.cli: the ``zg`` command (also ``python -m zg``).

Where it sits: on top of the package, outside the training flow. Each subcommand is a thin
layer over a public API, so what the command does a notebook can do too:

    zg info                                 versions, CUDA devices, threads, the machine note
    zg train --dataset cora                 a GNN trained by zg.Engine; a table per epoch
    zg train --dataset ogbn-arxiv --root DIR --fanouts 15,10,5 --json run.json
    zg grappa --dataset cora --workers 2    a Grappa run (zg.grappa), one flag per TrainConfig field
    zg bench engine --nodes 20000           bench/engine.py from a checkout of the repository
    zg report --scale small                 tools/build_report.py over notebooks/

Exit status: 0 on success; 2 for a bad flag, an unknown dataset or an impossible combination
of flags (the message names the flag and the values it takes; nothing has been written or
started); 1 when a run fails after it started (e.g. dataset files missing on an offline
machine), with a one-line message instead of a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import math
import os
import stat
import subprocess
import sys
import time
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import ZgError

__all__ = ["main", "build_parser", "parse_fanouts", "repo_root", "REPO_ENV"]

REPO_ENV = "ZG_REPO"
HISTORY_FORMAT = "zg.train.history"
HISTORY_VERSION = 1
OPTIONAL_PACKAGES = ("dgl", "numba", "ogb", "torch_geometric", "pymetis", "tqdm", "plotly")


class CommandError(ZgError):
    """A failure after the run started: reported in one line, exit status 1."""


# What a started run can end in that is the machine's or the input's, not a bug of the kit: a
# full disk, memory that ran out, a non-finite loss, a worker stopped from outside, a timeout.
# Each is said in one line (what failed, and the message says what to do), exit status 1.
RUN_FAILURES = (FloatingPointError, OSError, MemoryError, TimeoutError, ZgError)
# torch's allocators raise RuntimeError when memory runs out.
OUT_OF_MEMORY = ("can't allocate memory", "out of memory", "not enough memory")


def _one_line(exc: BaseException) -> str:
    """``exc`` as one line: its class (unless a zg error, whose message is written to be read
    alone) and the first line of its message."""
    lines = str(exc).strip().splitlines() or [""]
    text = lines[0] if len(lines) == 1 else f"{lines[0]} ..."
    return text if isinstance(exc, ZgError) else f"{type(exc).__name__}: {text}"


# ----------------------------------------------------------------------------- flag parsing


# Layers of a model `zg train` builds: more is a typo (and [10] * layers must stay small). The
# same bound as zg grappa's num_layers (zg.grappa._checks.MAX_LAYERS; a test holds them equal).
MAX_LAYERS = 64


def _capped(text: Any, limit: int = 60, *, quote: bool = True) -> str:
    """``repr(text)`` (``str`` if not ``quote``), cut to about ``limit`` characters: an error
    message stays one short line whatever the user typed (a --layers of 100000 digits, a
    --fanouts of 100000 entries)."""
    shown = repr(str(text)) if quote else str(text)
    if len(shown) <= limit:
        return shown
    return f"{shown[: limit - 20]}...{shown[-12:]} ({len(str(text)):,} characters)"


def parse_fanouts(text: str) -> list[int]:
    """``"15,10,5"`` -> ``[15, 10, 5]`` (input layer first); argparse type for --fanouts. At most
    :data:`MAX_LAYERS` entries (one per layer)."""
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) > MAX_LAYERS:
        raise argparse.ArgumentTypeError(
            f"{_capped(text)} has {len(parts):,} fanouts; a model has at most {MAX_LAYERS} "
            "layers (one fanout each)"
        )
    try:
        fanouts = [int(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{_capped(text)} is not a list of fanouts: give positive integers separated by "
            "commas, input layer first, e.g. 15,10,5"
        ) from None
    if not fanouts or any(f < 1 for f in fanouts):
        raise argparse.ArgumentTypeError(
            f"{_capped(text)}: every fanout must be an integer >= 1, e.g. 15,10,5"
        )
    return fanouts


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_capped(text)} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(
            f"must be an integer >= 1, got {_capped(value, quote=False)}"
        )
    return value


def _layers(text: str) -> int:
    """--layers: an integer in [1, MAX_LAYERS]."""
    value = _positive_int(text)
    if value > MAX_LAYERS:
        raise argparse.ArgumentTypeError(
            f"must be an integer in [1, {MAX_LAYERS}], got {_capped(value, 30, quote=False)}; more layers "
            "than that is a typo"
        )
    return value


def _seed(text: str) -> int:
    """--seed: the kit's one seed rule (:func:`zg._checks.seed_arg`: an int in [0, 2**63 - 1]),
    with its message."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    from ._checks import seed_arg  # torch loads only when a run asks for it

    try:
        return seed_arg(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_float(text: str) -> float:
    """A finite float > 0 that is a normal float (--lr): a subnormal one (below
    ``sys.float_info.min``, 2.2e-308, e.g. 1e-320) scales every update to zero, so a run
    with it would train nothing while looking like training."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_capped(text)} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(
            f"must be a finite number > 0, got {_capped(text, quote=False)}"
        )
    if value < sys.float_info.min:
        raise argparse.ArgumentTypeError(
            f"must be a finite number > 0 and a normal float (at least {sys.float_info.min}), "
            f"got {_capped(text, quote=False)}, a subnormal value that makes every update zero"
        )
    return value


def _check_output(
    parser: argparse.ArgumentParser, flag: str, path: str | None, inputs: Sequence[Any] = ()
) -> None:
    """An output path must be writable before anything runs (exit 2 naming ``flag``
    otherwise): a regular file or nothing at its final target (links are followed, the kit's
    one rule, :func:`zg._checks.resolved_path`; a dangling link, a loop, a folder, a FIFO, a
    socket or a device is refused), its folder exists and a file can really be created in it
    (tried, not asked of ``os.access``), and it is none of the ``inputs`` (files or folders the
    run reads, a named dataset's own file included) nor inside an input folder, both sides
    followed to their final targets."""
    if path is None:
        return
    from ._checks import _nearest_existing, input_conflict, output_target, path_arg, path_kind

    try:
        target, kind = path_kind(path_arg(path, flag), flag)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    if kind is not None and stat.S_ISDIR(kind):
        parser.error(
            f"{flag} {path}: is a folder; give a file name, e.g. {Path(path) / 'history.json'}"
        )
    if not target.parent.is_dir():
        existing = _nearest_existing(target.parent)
        if not existing.is_dir():
            parser.error(f"{flag} {path}: {existing} is a file, not a folder")
        parser.error(
            f"{flag} {path}: the folder {Path(path).parent} does not exist (create it first)"
        )
    given = input_conflict(path, [i for i in inputs if i is not None], flag)
    if given is not None:
        parser.error(
            f"{flag} {path}: is the input {given} (or inside it); writing the "
            "output there would destroy the input. Give another file name"
        )
    try:
        output_target(path, flag)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))


def _device(parser: argparse.ArgumentParser, text: str) -> str:
    """--device: "auto" (CUDA if available), "cpu", "cuda" or "cuda:N"."""
    import torch

    if text == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(text)
    except (RuntimeError, TypeError):
        parser.error(f"--device {text!r} is not a device; use auto, cpu, cuda or cuda:N")
    if device.type not in ("cpu", "cuda"):
        parser.error(f"--device {text!r}: zg trains on auto, cpu, cuda or cuda:N")
    if device.type == "cuda":
        if not torch.cuda.is_available():
            parser.error(f"--device {text}: CUDA is not available here; use --device cpu (or auto)")
        if device.index is not None and device.index >= torch.cuda.device_count():
            parser.error(
                f"--device {text}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    return text


def _dataset_source(parser: argparse.ArgumentParser, dataset: str, root: str | None):
    """--dataset/--root -> ("name", name) | ("npz", path) | ("folder", path), or exit 2."""
    from . import datasets

    known = {name.lower(): name for name in datasets.KNOWN_DATASETS}
    if dataset.lower() in known:
        if root is not None and not Path(root).is_dir() and dataset.lower() == "cora":
            parser.error(f"--root {root}: no such folder (it must hold cora.npz)")
        return "name", known[dataset.lower()]
    from ._checks import path_arg, path_kind

    try:
        path = path_arg(dataset, "--dataset")
        _, kind = path_kind(path, "--dataset")  # a loop of links, a name too long: exit 2
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    looks_like_path = path.suffix == ".npz" or os.sep in dataset or kind is not None
    if not looks_like_path:
        parser.error(
            f"--dataset {dataset!r}: unknown dataset; choose one of "
            f"{', '.join(datasets.KNOWN_DATASETS)}, or give a .npz file "
            "(zg.datasets.save_npz) or a graph folder (zg.datasets.save_folder)"
        )
    if root is not None:
        parser.error(
            f"--root applies to the named datasets ({', '.join(datasets.KNOWN_DATASETS)}), "
            f"not to a file or folder like --dataset {dataset}"
        )
    if kind is not None and stat.S_ISREG(kind):
        return "npz", str(path)
    if kind is not None and stat.S_ISDIR(kind):
        return "folder", str(path)
    if kind is not None:
        from ._checks import _kind

        parser.error(f"--dataset {dataset}: is {_kind(kind)}, not a graph file or folder")
    parser.error(f"--dataset {dataset}: no such file or folder")


def _source_paths(source, root: str | None) -> list[Any]:
    """What a checked dataset source reads: its file or folder, or a named dataset's own files
    (Cora's cora.npz, an OGB graph's folder): no output may overwrite them."""
    kind, value = source
    if kind != "name":
        return [value]
    from . import datasets

    return list(datasets.dataset_paths(value, root))


def _load_graph(source, root: str | None, symmetrize: bool, download: bool):
    """The graph of a checked dataset source; a failure to read it is a CommandError."""
    from . import datasets

    kind, value = source
    try:
        if kind == "npz":
            return datasets.load_npz(value)
        if kind == "folder":
            return datasets.load_folder(value)
        return datasets.load(value, root=root, symmetrize=symmetrize, download=download)
    except (OSError, ValueError, ImportError) as exc:
        raise CommandError(f"--dataset {value}: {exc}") from None


# ----------------------------------------------------------------------------- zg info


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def info() -> dict[str, Any]:
    """What ``zg info`` reports, as a dict (JSON-serialisable)."""
    import torch

    import zg

    from .experiments import machine_label
    from .experiments import machine_note as machine

    devices = []
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            devices.append(
                {
                    "index": i,
                    "name": props.name,
                    "memory_gib": round(props.total_memory / 2**30, 1),
                    "capability": f"{props.major}.{props.minor}",
                }
            )
    note = machine()
    return {
        "zg": zg.__version__,
        "zg_path": str(Path(zg.__file__).resolve().parent),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": torch.__version__,
        "torch_cuda_build": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "cuda_devices": devices,
        "packages": {name: _version(name) for name in OPTIONAL_PACKAGES},
        "threads": {
            "torch_intra_op": torch.get_num_threads(),
            "torch_inter_op": torch.get_num_interop_threads(),
            "cores": os.cpu_count(),
            "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        },
        "repository": _repo_or_none(),
        "machine": note,
        "machine_label": machine_label(note),
    }


def _print_info(report: dict[str, Any]) -> None:
    packages = report["packages"]
    cuda = "not available"
    if report["cuda_available"]:
        cuda = "; ".join(
            f"{d['index']}: {d['name']} ({d['memory_gib']} GiB, sm {d['capability']})"
            for d in report["cuda_devices"]
        )
    threads = report["threads"]
    lines = [
        ("zg", f"{report['zg']}  ({report['zg_path']})"),
        ("python", f"{report['python']}  ({report['executable']})"),
        (
            "torch",
            f"{report['torch']}  (CUDA build: {report['torch_cuda_build'] or 'none, CPU only'})",
        ),
        ("DGL", packages["dgl"] or "not installed"),
        ("numba", packages["numba"] or "not installed"),
        ("ogb", packages["ogb"] or "not installed"),
        ("PyG", packages["torch_geometric"] or "not installed"),
        ("CUDA devices", cuda),
        (
            "threads",
            f"torch {threads['torch_intra_op']} intra-op, {threads['torch_inter_op']} "
            f"inter-op; {threads['cores']} cores; OMP_NUM_THREADS="
            f"{threads['OMP_NUM_THREADS'] or 'unset'}",
        ),
        ("repository", report["repository"] or "not found (bench and report need a checkout)"),
        ("machine", report["machine_label"]),
    ]
    width = max(len(k) for k, _ in lines)
    for key, value in lines:
        print(f"{key.ljust(width)}  {value}")
    env = report["machine"].get("environment") or {}
    if env:
        print(f"{'settings'.ljust(width)}  " + ", ".join(f"{k}={v}" for k, v in env.items()))


def cmd_info(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    report = info()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        _print_info(report)
    return 0


# ----------------------------------------------------------------------------- zg train


def _resolve_layers(
    parser: argparse.ArgumentParser, layers: int | None, fanouts: list[int] | None
) -> list[int]:
    if fanouts is None:
        fanouts = [15, 10, 5] if layers is None else [10] * layers
    if layers is not None and layers != len(fanouts):
        parser.error(
            f"--layers {layers} but --fanouts {','.join(map(str, fanouts))} has "
            f"{len(fanouts)} entries; give one fanout per layer (or leave out --layers)"
        )
    return fanouts


def _jsonable(value: Any) -> Any:
    """EpochStats values as JSON: tensors and numpy scalars become numbers or lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def write_json_atomic(path: str, payload: Any, stream: Any = None) -> None:
    """Write ``payload`` as JSON at ``path`` atomically (:func:`zg._io.atomic_write`); a path
    of ``-`` writes it to ``stream`` (stdout)."""
    from ._io import atomic_write

    def write(f):
        json.dump(payload, f, indent=1)
        f.write("\n")

    if path == "-":
        write(stream if stream is not None else sys.stdout)
        return
    atomic_write(path, write, name="--json", text=True)


def _cell(value: Any, digits: int = 4) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def table(rows: Sequence[Sequence[Any]], headers: Sequence[str]) -> str:
    """A plain-text table: the first column left-aligned, the others right-aligned."""
    cells = [list(map(str, headers))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
        for r in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _progress_bar(enabled: bool | None, total: int, desc: str):
    """A tqdm bar on stderr (None without tqdm or when disabled; auto: only on a terminal)."""
    if enabled is False:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return None
    return tqdm(
        total=total,
        desc=desc,
        unit="batch",
        leave=False,
        disable=None if enabled is None else False,
    )


def cmd_train(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.json == "-" and getattr(args, "json_stream", None) is None:
        # --json -: the history alone on stdout (for a pipe), everything else on stderr.
        import contextlib

        args.json_stream = sys.stdout
        with contextlib.redirect_stdout(sys.stderr):
            return cmd_train(args, parser)
    # Every check that can fail on the flags alone runs before the dataset is read.
    fanouts = _resolve_layers(parser, args.layers, args.fanouts)
    if args.pipeline is not None or args.capture is not None:
        parser.error(
            "--pipeline and --capture are replaced by --mode: dynamic (was --pipeline "
            "dynamic), eager (was --no-capture), static (was --capture on the CPU), "
            "graph (a CUDA Graph: was --capture on a GPU)"
        )
    device = _device(parser, args.device)
    mode = (
        args.mode if args.mode != "auto" else ("graph" if device.startswith("cuda") else "static")
    )
    if mode == "graph" and not device.startswith("cuda"):
        parser.error(
            "--mode graph captures a CUDA Graph and needs --device cuda; on the CPU "
            "--mode static is its twin"
        )
    source = _dataset_source(parser, args.dataset, args.root)
    json_file = None if args.json == "-" else args.json  # "-": stdout
    _check_output(parser, "--json", json_file, inputs=_source_paths(source, args.root))
    if args.eval_every > args.epochs:
        parser.error(f"--eval-every {args.eval_every} is more than --epochs {args.epochs}")

    import torch

    import zg

    torch.manual_seed(args.seed)
    g = _load_graph(source, args.root, args.symmetrize, args.download)
    missing = [
        what
        for what, value in (
            ("features (x)", g.x),
            ("labels (y)", g.y),
            ("a train split", g.train_idx),
            ("a val split", g.val_idx),
        )
        if value is None or (isinstance(value, torch.Tensor) and value.numel() == 0)
    ]
    if missing:
        parser.error(
            f"--dataset {args.dataset}: the graph has no {', '.join(missing)}; "
            "zg train needs features, labels and train/val splits"
        )
    try:
        model = zg.models.build(args.model, g.feat_dim, args.hidden, g.num_classes, len(fanouts))
        eng = zg.Engine(
            g,
            model,
            fanouts,
            args.batch_size,
            mode=mode,
            device=device,
            seed=args.seed,
            optimizer=zg.optim.adam(lr=args.lr),
            kernel=args.kernel,
        )
    except MemoryError as exc:  # name the flags and the dataset's fields that size it
        parser.error(
            f"cannot train this combination: too large for --hidden {args.hidden}, "
            f"--batch-size {args.batch_size}, --fanouts {','.join(map(str, fanouts))} with "
            f"--dataset {args.dataset}'s {g.feat_dim} features and num_classes="
            f"{g.num_classes}: {exc}"
        )
    except (TypeError, ValueError, RuntimeError) as exc:
        parser.error(f"cannot train this combination: {exc}")

    config = {
        "dataset": args.dataset,
        "root": args.root,
        "symmetrize": args.symmetrize,
        "download": args.download,
        "model": args.model,
        "layers": len(fanouts),
        "hidden": args.hidden,
        "fanouts": fanouts,
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "lr": args.lr,
        "mode": mode,
        "kernel": eng.settings.kernel,
        "device": device,
        "seed": args.seed,
        "eval_every": args.eval_every,
    }
    print(
        f"{g!r}\n{args.model} x{len(fanouts)} layers, hidden {args.hidden}, fanouts {fanouts}, "
        f"batch {args.batch_size}, mode {mode}, kernel {eng.settings.kernel} on {device}",
        flush=True,
    )
    batches = math.ceil(g.train_idx.numel() / args.batch_size)
    has_test = g.test_idx is not None and g.test_idx.numel() > 0
    rows: list[dict[str, Any]] = []
    # One line per epoch as it ends: on stdout, flushed, when stdout is a file or a pipe (a log
    # read while the run goes on); on a terminal, on stderr after the epoch's bar.
    piped = not sys.stdout.isatty()
    start = time.perf_counter()
    for epoch in range(args.epochs):
        bar = _progress_bar(args.progress, batches, f"epoch {epoch} ({epoch + 1}/{args.epochs})")
        try:  # one tick per batch
            stats = eng.train_epoch(observers=[zg.observe.Progress(bar)] if bar is not None else [])
        finally:
            if bar is not None:
                bar.close()
        # Every field EpochStats has, whatever the Engine adds to it later.
        fields = dataclasses.asdict(stats) if dataclasses.is_dataclass(stats) else vars(stats)
        row = {key: _jsonable(value) for key, value in fields.items()}
        row["val_acc"] = row["test_acc"] = None
        if (epoch + 1) % args.eval_every == 0 or epoch == args.epochs - 1:
            row["val_acc"] = eng.evaluate("val")
            row["test_acc"] = eng.evaluate("test") if has_test else None
        rows.append(row)
        if args.progress is not False and (piped or sys.stderr.isatty()):
            print(
                f"epoch {row.get('epoch', epoch)} ({epoch + 1}/{args.epochs}): loss "
                f"{row.get('loss', float('nan')):.4f}, val {_cell(row['val_acc'])}, "
                f"{row.get('seconds', 0.0):.2f} s",
                file=sys.stdout if piped else sys.stderr,
                flush=True,
            )
    total = time.perf_counter() - start

    print()
    # Epochs numbered as the Engine and the JSON number them (EpochStats.epoch, from 0), as
    # zg grappa's table and history do.
    print(
        table(
            [
                [
                    r.get("epoch", i),
                    _cell(r.get("seconds"), 3),
                    _cell(r.get("iterations")),
                    _cell(r.get("host_syncs"), 2),
                    _cell(r.get("overflows")),
                    _cell(r.get("replays")),
                    _cell(r.get("loss")),
                    _cell(r["val_acc"]),
                    _cell(r["test_acc"]),
                ]
                for i, r in enumerate(rows)
            ],
            [
                "epoch",
                "seconds",
                "iterations",
                "host syncs/iter",
                "overflows",
                "replays",
                "loss",
                "val acc",
                "test acc",
            ],
        )
    )
    evaluated = [r for r in rows if r["val_acc"] is not None]
    best = max(evaluated, key=lambda r: r["val_acc"])
    syncs = [r.get("host_syncs") for r in rows if r.get("host_syncs") is not None]
    final = {
        "val_acc": evaluated[-1]["val_acc"],
        "test_acc": evaluated[-1]["test_acc"],
        "best_val_acc": best["val_acc"],
        "test_acc_at_best_val": best["test_acc"],
        "best_epoch": best.get("epoch"),
        "host_syncs_per_iteration": syncs[-1] if syncs else None,
        "seconds": total,
    }
    print(
        f"\nfinal: val {_cell(final['val_acc'])}, test {_cell(final['test_acc'])}, "
        f"host syncs/iter {_cell(final['host_syncs_per_iteration'], 2)}, {total:.1f} s"
    )
    if args.json:
        from .experiments import machine_note as machine

        write_json_atomic(
            args.json,
            {
                "format": HISTORY_FORMAT,
                "version": HISTORY_VERSION,
                "command": ["zg", *args.argv],
                "config": config,
                "graph": {k: v for k, v in g.summary().items() if k != "device"},
                "machine": machine(),
                "epochs": rows,
                "final": final,
            },
            getattr(args, "json_stream", None),
        )
        if args.json != "-":
            print(f"history written to {args.json}")
    return 0


# ----------------------------------------------------------------------------- zg grappa


def _grappa_fields():
    """(field, type hint) of every TrainConfig field, in declaration order."""
    from .grappa.train import TrainConfig

    hints = typing.get_type_hints(TrainConfig)
    return [(f, hints[f.name]) for f in dataclasses.fields(TrainConfig)]


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _field_descriptions() -> dict[str, str]:
    """field -> the first sentence of what TrainConfig's docstring says of it, where the
    fields are described ("trainer: one of ...", "lr, weight_decay: Adam."): the help of
    ``zg grappa``'s flags, so the command line reads as the library's own reference."""
    import re

    from .grappa.train import TrainConfig

    names = [f.name for f, _ in _grappa_fields()]
    text = " ".join((TrainConfig.__doc__ or "").split())
    text = re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")  # reST roles, literals
    alt = "|".join(sorted(names, key=len, reverse=True))
    entry = re.compile(rf"(?<![\w.])((?:{alt})(?:(?:, | and )(?:{alt}))*)(?: \([^)]*\))?: ")
    starts = list(entry.finditer(text))
    found: dict[str, str] = {}
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(text)
        body = text[m.end() : end].strip()
        # The group headings and the rules after the descriptions end one.
        body = re.split(r"(?<=\.) (?:Experiment|Runtime|Output|Defaults)\b", body)[0]
        for name in re.split(r", | and ", m.group(1)):
            found.setdefault(name, _first_clause(body))
    return found


def _first_clause(text: str) -> str:
    """``text`` up to its first ". " or "; " outside parentheses."""
    depth = 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and c in ".;" and text[i + 1 : i + 2] in (" ", ""):
            return text[:i]
    return text.rstrip(".")


def _field_choices() -> dict[str, Sequence[str]]:
    """The TrainConfig fields that take one of a few names, and those names."""
    from . import kernels, models
    from .grappa import config, estimators, presets
    from .grappa.partition import METHODS, SCHEDULES

    return {
        "trainer": config.TRAINERS,
        "estimator": sorted(estimators.ESTIMATORS),
        "method": METHODS,
        "schedule": SCHEDULES,
        "batching": config.BATCHINGS,
        "model": sorted(models.MODELS),
        "preset": sorted(presets.PRESETS),
        "step_shapes": config.STEP_SHAPES,
        "self_loops": config.SELF_LOOPS,
        "kernel": kernels.KERNELS,
    }


def _optional(convert):
    def parse(text: str):
        return None if text.lower() in ("none", "null") else convert(text)

    parse.__name__ = getattr(convert, "__name__", "value")
    return parse


def _number_or_text(text: str) -> Any:
    """shrink and the like: a number if it reads as one, else the text (e.g. "auto")."""
    try:
        return float(text)
    except ValueError:
        return text


def _is_optional(hint: Any) -> bool:
    """``X | None`` or ``Optional[X]`` (two different origins: types.UnionType, typing.Union)."""
    origin = typing.get_origin(hint)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _converter(hint: Any):
    """argparse ``type`` for a TrainConfig field's type hint; bools get --x/--no-x instead."""
    args = typing.get_args(hint)
    optional = _is_optional(hint)
    inner = next((a for a in args if a is not type(None)), hint) if optional else hint
    if typing.get_origin(inner) is list:
        convert = parse_fanouts
    elif inner is int:
        convert = int
    elif inner is float:
        convert = float
    elif inner is str:
        convert = str
    else:  # Any: e.g. shrink = "auto" or a number
        convert = _number_or_text
    return _optional(convert) if optional else convert


# What a ``zg grappa`` flag means beyond its TrainConfig field (the rest of its help is the
# field's clause of the TrainConfig docstring).
CLI_ONLY_HELP = {"history_path": "-: the history alone on stdout"}


def _add_grappa_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per TrainConfig field, generated from the dataclass so they never drift apart.

    Defaults are argparse.SUPPRESS: only the flags given reach the config, so TrainConfig's
    own defaults (and a --config file's values) apply to the rest.
    """
    descriptions, choices = _field_descriptions(), _field_choices()
    for f, hint in _grappa_fields():
        default = f.default if f.default is not dataclasses.MISSING else None
        described = descriptions.get(f.name, f"TrainConfig.{f.name}")
        listed = f"; one of {', '.join(map(str, choices[f.name]))}" if f.name in choices else ""
        # argparse formats help with %: a literal percent sign is doubled.
        help_text = f"{described} (default: {default}{listed})".replace("%", "%%")
        if hint is bool or hint == bool | None:  # bool | None: absent means auto (None)
            parser.add_argument(
                _flag(f.name),
                action=argparse.BooleanOptionalAction,
                default=argparse.SUPPRESS,
                help=help_text,
            )
            continue
        names = [_flag(f.name)] + (["--json"] if f.name == "history_path" else [])
        if f.name in CLI_ONLY_HELP:  # what the command line adds to the library's field
            help_text = help_text.replace(" (default:", f"; {CLI_ONLY_HELP[f.name]} (default:", 1)
        optional = _is_optional(hint)
        parser.add_argument(
            *names,
            dest=f.name,
            type=_converter(hint),
            default=argparse.SUPPRESS,
            metavar="VALUE|none" if optional else "VALUE",
            help=help_text,
        )


def _grappa_values(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    values: dict[str, Any] = {}
    if args.config is not None:
        from ._io import read_json_config

        try:  # bounded: a config over 1 MiB, a FIFO or a device is refused
            values = read_json_config(args.config, "--config")
        except (TypeError, ValueError) as exc:
            parser.error(str(exc))
        if not isinstance(values, dict):
            parser.error(f"--config {args.config}: the config must be a JSON object")
    for f, _ in _grappa_fields():
        if hasattr(args, f.name):
            values[f.name] = getattr(args, f.name)
    if args.dataset is not None or "dataset" not in values:
        dataset = args.dataset or "cora"
        kind, value = _dataset_source(parser, dataset, args.root)
        if kind == "name":
            spec = {"name": value, "symmetrize": args.symmetrize, "download": args.download}
            if args.root is not None:
                spec["root"] = args.root
            plain = args.root is None and args.symmetrize and args.download
            values["dataset"] = value if plain else spec
        else:
            values["dataset"] = {kind: value}
    elif args.root is not None:
        parser.error("--root goes with --dataset NAME (the config's dataset is used as it is)")
    return values


def _grappa_flags(started: bool = False):
    """message -> message: the TrainConfig field whose own check refused the value is shown as
    its flag ("--estimator: unknown estimator 'x'; choose one of [...]"); run()'s source
    prefix goes. The field is the ``config_field`` the refusal carries (set by
    :func:`zg.grappa._checks.blames` in :meth:`zg.grappa.TrainConfig.validated`, the plan's
    checks and the output paths' checks), read from the exception being handled: a message
    that merely names a field ("every worker needs a share of the batch") names no flag.
    After the start (``started``) a message that begins ``field=value``, the form of a limit
    that ran out (``"run_timeout=0.5 s: ..."``), names that field too."""
    import re

    names = [f.name for f, _ in _grappa_fields()]
    alternatives = "|".join(sorted(names, key=len, reverse=True))
    pattern = re.compile(r"^(" + alternatives + r")=") if started else None

    def flagged(message: str) -> str:
        if message.startswith("zg grappa: "):
            message = message[len("zg grappa: ") :]
        if message.startswith("--"):
            return message
        field = getattr(sys.exc_info()[1], "config_field", None)
        if field in names:
            return f"{_flag(field)}: {message}"
        named = pattern.search(message) if pattern is not None else None
        if named is not None:
            message = f"{_flag(named.group(1))}: {message}"
        return message

    return flagged


def _grappa_error(parser: argparse.ArgumentParser):
    """parser.error for zg.grappa's run(), the field shown as its flag (exit 2)."""
    flagged = _grappa_flags()

    def error(message: str):
        parser.error(flagged(message))

    return error


def _grappa_failed(message: str) -> int:
    """A started run that failed (a timeout, another run's checkpoint, ...): one line, exit 1."""
    print(f"zg grappa: error: {_grappa_flags(started=True)(message)}", file=sys.stderr, flush=True)
    return 1


def _report_grappa(history: dict[str, Any], out: str | None) -> None:
    from .grappa.__main__ import print_final

    rows = []
    for r in history["epochs"]:
        sent = r.get("bytes_sent") or [0]
        rows.append(
            [
                r.get("epoch"),
                _cell(r.get("seconds"), 3),
                _cell(r.get("iterations")),
                _cell(r.get("loss")),
                _cell(r.get("val_acc")),
                _cell(r.get("test_acc")),
                f"{sum(sent) / len(sent):,.0f}",
            ]
        )
    print(
        table(
            rows,
            ["epoch", "seconds", "iterations", "loss", "val acc", "test acc", "bytes sent/worker"],
        )
    )
    print_final(history, out)


def cmd_grappa(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .grappa.__main__ import dataset_paths, run

    values = _grappa_values(args, parser)
    if values.get("history_path") == "-":
        return _grappa_to_stdout(args, parser, values)
    inputs = dataset_paths(values.get("dataset"))
    _check_output(parser, "--json", values.get("history_path"), inputs=inputs + [args.config])
    return run(
        values,
        values.get("history_path"),
        _grappa_error(parser),
        source="zg grappa",
        report=_report_grappa,
        failed=_grappa_failed,
        inputs=[args.config] if args.config else [],
    )


def _grappa_to_stdout(
    args: argparse.Namespace, parser: argparse.ArgumentParser, values: dict[str, Any]
) -> int:
    """``zg grappa --json -``: as ``zg train --json -``, the history alone on stdout (rank 0
    writes it to a file in a temporary folder, copied to stdout when the run ends), everything
    else the command prints on stderr."""
    import contextlib
    import tempfile

    from .grappa.__main__ import run

    stdout = sys.stdout
    with tempfile.TemporaryDirectory(prefix="zg-grappa-") as folder:
        path = str(Path(folder) / "history.json")
        values = {**values, "history_path": path}
        with contextlib.redirect_stdout(sys.stderr):
            status = run(
                values,
                path,
                _grappa_error(parser),
                source="zg grappa",
                report=lambda history, out: _report_grappa(history, None),
                failed=_grappa_failed,
                inputs=[args.config] if args.config else [],
            )
        if status == 0 and Path(path).is_file():
            stdout.write(Path(path).read_text(encoding="utf-8"))
            stdout.flush()
        return status


# ----------------------------------------------------------------------------- zg bench, zg report


def repo_root() -> Path:
    """The checkout of the zg repository this zg comes from (``$ZG_REPO`` if set).

    bench/ and tools/ are not part of the installed package: ``zg bench`` and ``zg report``
    need the repository beside it (an editable install, or a checkout named by ZG_REPO).
    """
    env = os.environ.get(REPO_ENV)
    return Path(env) if env else Path(__file__).resolve().parent.parent


def _repo_or_none() -> str | None:
    root = repo_root()
    return str(root) if (root / "bench").is_dir() and (root / "tools").is_dir() else None


def _require_repo(parser: argparse.ArgumentParser, relative: str) -> Path:
    root = repo_root()
    target = root / relative
    if not target.exists():
        how = (
            f"{REPO_ENV}={root}"
            if os.environ.get(REPO_ENV)
            else f"zg is installed at {Path(__file__).resolve().parent}"
        )
        parser.error(
            f"{relative} not found in {root} ({how}). bench/ and tools/ live in the zg "
            f"repository, not in the installed package: run from a checkout "
            f"(pip install -e .), or set {REPO_ENV} to one"
        )
    return target


def _script_env(root: Path) -> dict[str, str]:
    """The environment the Makefile gives the scripts, with this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(root)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env.setdefault("DGLBACKEND", "pytorch")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return env


def bench_names(folder: Path) -> list[str]:
    """The benchmarks in ``folder``: every bench/<name>.py not starting with "_"."""
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


def cmd_bench(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    folder = _require_repo(parser, "bench")
    names = bench_names(folder)
    if args.list or args.name is None:
        for name in names:
            doc = (folder / f"{name}.py").read_text(encoding="utf-8").split('"""')
            summary = doc[1].strip().splitlines()[0] if len(doc) > 2 else ""
            print(f"{name.ljust(max(map(len, names)))}  {summary}")
        return 0
    if args.name not in names:
        parser.error(
            f"unknown benchmark {args.name!r}; choose one of {', '.join(names)} "
            f"(the scripts in {folder})"
        )
    script = folder / f"{args.name}.py"
    return subprocess.run(
        [sys.executable, str(script), *args.args], cwd=folder.parent, env=_script_env(folder.parent)
    ).returncode


def cmd_report(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    script = _require_repo(parser, "tools/build_report.py")
    root = script.parent.parent
    notebooks = [Path(n) for n in args.notebooks] or sorted((root / "notebooks").glob("*.ipynb"))
    if not notebooks:
        parser.error(f"no notebooks given and none in {root / 'notebooks'}")
    for nb in notebooks:
        if not nb.is_file() or nb.suffix != ".ipynb":
            parser.error(f"{nb}: not a notebook file (.ipynb)")
    command = [sys.executable, str(script), "--scale", args.scale, "--out", str(args.out)]
    if args.timeout is not None:
        command += ["--timeout", str(args.timeout)]
    return subprocess.run(
        command + [str(nb) for nb in notebooks], cwd=root, env=_script_env(root)
    ).returncode


# ----------------------------------------------------------------------------- the parser


def build_parser() -> argparse.ArgumentParser:
    """The ``zg`` parser: subcommands info, train, grappa, bench, report."""
    from . import datasets

    parser = argparse.ArgumentParser(
        prog="zg",
        description="zg: ZeroGNN and Grappa, built and measured. "
        "Start with `zg info` and `zg train --dataset cora`.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "info",
        help="versions, CUDA devices, threads and the machine note",
        description="Versions of torch, DGL, numba and the optional packages, "
        "CUDA devices, threads, and the machine note the benchmarks record.",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=cmd_info, subparser=p)

    p = sub.add_parser(
        "train",
        help="train a GNN with zg.Engine and print a table per epoch",
        description="Train a GNN with zg.Engine: a progress bar per epoch, then a "
        "table per epoch (time, host syncs per iteration, overflows, replays, "
        "loss, val/test accuracy) and optionally the history as JSON.",
    )
    p.add_argument(
        "--dataset",
        default="cora",
        metavar="NAME|PATH",
        help=f"one of {', '.join(datasets.KNOWN_DATASETS)}, a .npz file "
        "(zg.datasets.save_npz) or a graph folder (zg.datasets.save_folder); default cora",
    )
    p.add_argument(
        "--root",
        default=None,
        metavar="DIR",
        help="the folder holding a named dataset's files (OGB default: $ZG_OGB_ROOT "
        "or ~/.cache/zg/ogb)",
    )
    p.add_argument(
        "--symmetrize",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="make directed citation graphs undirected (default: yes)",
    )
    p.add_argument(
        "--download",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="download missing OGB files (default: yes; never with a prompt)",
    )
    p.add_argument("--model", choices=("sage", "gcn", "gat"), default="sage", help="default sage")
    p.add_argument(
        "--layers",
        type=_layers,
        default=None,
        help=f"number of layers, 1 to {MAX_LAYERS} (default: one per fanout)",
    )
    p.add_argument("--hidden", type=_positive_int, default=64, help="hidden size (default 64)")
    p.add_argument(
        "--fanouts",
        type=parse_fanouts,
        default=None,
        metavar="F1,F2,...",
        help="neighbours sampled per layer, input layer first (default 15,10,5, "
        "or 10 per layer with --layers)",
    )
    p.add_argument(
        "--batch-size", type=_positive_int, default=1024, help="seeds per iteration (default 1024)"
    )
    p.add_argument("--epochs", type=_positive_int, default=10, help="default 10")
    p.add_argument(
        "--lr", type=_positive_float, default=0.01, help="Adam learning rate (default 0.01)"
    )
    p.add_argument(
        "--mode",
        choices=("auto", "dynamic", "eager", "static", "graph", "compiled"),
        default="auto",
        help="what runs (zg.Engine's mode): dynamic = host-mediated reference; eager = "
        "envelope shapes, fresh tensors; static = the capturable step on fixed buffers; "
        "graph = that step as a CUDA Graph (CUDA only); compiled = that step compiled whole "
        "by torch.compile (the torch kernels). auto (default): graph on a GPU, "
        "static on the CPU",
    )
    p.add_argument(
        "--kernel",
        choices=("auto", "fused", "torch"),
        default="torch",
        help="which kernels run (zg.kernels): torch (default, as the library's) = the torch "
        "code the notebooks show; auto = the compiled numba kernels on the CPU when numba is "
        "installed, else the torch code; fused = those kernels. The JSON records what ran",
    )
    # The old flags, refused with a message naming --mode.
    p.add_argument("--pipeline", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--capture", action=argparse.BooleanOptionalAction, default=None, help=argparse.SUPPRESS
    )
    p.add_argument("--device", default="auto", help="auto (CUDA if available), cpu, cuda or cuda:N")
    p.add_argument("--seed", type=_seed, default=0, help="default 0")
    p.add_argument(
        "--eval-every",
        type=_positive_int,
        default=1,
        metavar="K",
        help="evaluate val/test accuracy every K epochs and after the last (default 1)",
    )
    p.add_argument(
        "--json", default=None, metavar="OUT", help="write the history as JSON to OUT (-: stdout)"
    )
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="a progress bar per epoch on stderr (default: on a terminal); with stdout a file "
        "or a pipe, a line per epoch there as each ends. --no-progress: neither",
    )
    p.set_defaults(handler=cmd_train, subparser=p)

    p = sub.add_parser(
        "grappa",
        help="a Grappa run: one flag per zg.grappa.TrainConfig field",
        description="A Grappa run (zg.grappa): one flag per TrainConfig field, "
        "generated from the dataclass. Also works under torchrun: "
        "torchrun --standalone --nproc-per-node=2 -m zg grappa ...",
    )
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="a JSON config (as for python -m zg.grappa); flags override its fields",
    )
    p.add_argument(
        "--dataset",
        default=None,
        metavar="NAME|PATH",
        help="as for zg train (default: the config's, else cora)",
    )
    p.add_argument("--root", default=None, metavar="DIR", help="as for zg train")
    p.add_argument(
        "--symmetrize", action=argparse.BooleanOptionalAction, default=True, help="as for zg train"
    )
    p.add_argument(
        "--download", action=argparse.BooleanOptionalAction, default=True, help="as for zg train"
    )
    _add_grappa_flags(p)
    p.set_defaults(handler=cmd_grappa, subparser=p)

    p = sub.add_parser(
        "bench",
        help="run a benchmark script from bench/ (needs a checkout)",
        description="Run bench/NAME.py of the zg repository with this Python; "
        "ARGS go to the script (zg bench NAME --help shows them).",
    )
    p.add_argument("--list", action="store_true", help="list the benchmarks")
    p.add_argument("name", nargs="?", default=None, help="the benchmark (bench/NAME.py)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    p.set_defaults(handler=cmd_bench, subparser=p)

    p = sub.add_parser(
        "report",
        help="execute the notebooks into HTML reports (needs a checkout)",
        description="tools/build_report.py: execute notebooks into self-contained "
        "HTML reports, as `make report` does.",
    )
    p.add_argument(
        "notebooks",
        nargs="*",
        metavar="NOTEBOOK",
        help="notebooks to run (default: every notebook in notebooks/)",
    )
    p.add_argument(
        "--scale",
        choices=("small", "full"),
        default="full",
        help="ZG_SCALE for the notebooks (default full; small: CI size)",
    )
    p.add_argument(
        "--out", default="reports", metavar="DIR", help="where the HTML goes (default reports)"
    )
    p.add_argument(
        "--timeout",
        type=_positive_int,
        default=None,
        metavar="S",
        help="seconds each notebook cell may run",
    )
    p.set_defaults(handler=cmd_report, subparser=p)
    return parser


class _ClosedPipeSafe:
    """stdout for one command: once the reader has gone (``zg train ... | head -n 1``), further
    output is dropped instead of raising BrokenPipeError, so the run still finishes and writes
    its files (--json, --save). Everything else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream, self.closed_by_reader = stream, False

    def _dropped(self) -> None:
        self.closed_by_reader = True
        try:  # the interpreter's own flush at exit must not fail either
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def write(self, text: str) -> int:
        if self.closed_by_reader:
            return len(text)
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._dropped()
            return len(text)

    def flush(self) -> None:
        if self.closed_by_reader:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._dropped()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``zg`` command with ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    stdout = sys.stdout
    if not isinstance(stdout, _ClosedPipeSafe):
        sys.stdout = _ClosedPipeSafe(stdout)
    from . import log

    level, shown = log.LOGGER.level, log.show()  # the zg loggers' INFO lines on stderr
    try:
        # The subcommand's parser reports errors: "zg train: error: --fanouts ...", exit 2.
        return args.handler(args, args.subparser)
    except CommandError as exc:
        print(f"zg {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except RUN_FAILURES as exc:
        print(f"zg {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        if not any(words in str(exc).lower() for words in OUT_OF_MEMORY):
            raise  # a bug: its traceback is what a report needs
        print(
            f"zg {args.command}: error: out of memory ({_one_line(exc)}); choose smaller sizes "
            "(--hidden, --batch-size, --fanouts) or a smaller graph",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(f"zg {args.command}: interrupted", file=sys.stderr)
        return 130
    finally:
        sys.stdout = stdout
        log.LOGGER.removeHandler(shown)
        log.LOGGER.setLevel(level)


if __name__ == "__main__":
    sys.exit(main())
