"""Checks per repartition: what a Grappa worker re-checks when its local data changes.

    .venv/bin/python bench/regroup_checks.py            # Cora, P = 4, rank 0, every step shape

Counts, not time. One worker (rank 0 of P = 4; its regrouping needs no process group) is built
as :func:`zg.grappa.worker.run_worker` builds it, over the partition
:func:`zg.grappa.plan.make_partition` makes; then the counter watches two calls of
``worker.enter(s)``: super-epoch 0 (the first build: the local data and the worker's one
Engine) and super-epoch 1 (a repartition: new local data handed to the same Engine, through
:meth:`zg.Engine.regroup` up to d093158, through its internal twin
:meth:`zg.Engine._regroup_checked` since). :class:`CheckCount` counts every call of the kit's argument checks
(the ``*_arg`` functions of :mod:`zg._checks`, the Engine's ``check_*`` of
:mod:`zg.settings`, the graph's and the envelope's validators, a sampler's per-batch seed
check; the outermost ones: a check that calls another for its parts counts once), of the
public entry points that validate what they are given (``Graph(...)``, ``Envelope.profile`` /
``resolve``, a sampler's ``__init__`` / ``sample``, ``Engine(...)`` / ``regroup``,
``Partition.local_graph``), every read of the machine's memory
(:func:`zg._checks.machine_memory`: /proc/meminfo on Linux, ``cudaMemGetInfo`` on CUDA) and,
apart, every comparison of a new size with that memory (:func:`zg._checks.memory_arg`: the
sizes of the new local graph and envelope, which no earlier check saw).

Writes ``bench/results/regroup_checks.json`` with the machine note (the same count on the code
of d093158, the bench copied into its tree: ``bench/results/archive/regroup_checks_d093158.json``). Deterministic: the counts
depend on the code only (the test tests/grappa/test_grappa_regroup_checks.py asserts the
repartition's counts with the same counter).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch

import zg
import zg._checks
import zg.envelope
import zg.graph
import zg.grappa.partition  # (zg.grappa.partition is also a function: see Partition)
import zg.grappa.worker
import zg.kernels
import zg.sampling
import zg.settings

Partition = sys.modules["zg.grappa.partition"].Partition
from zg.experiments.results import headline

# What validates a value it is given: (module, function names) ...
CHECK_FUNCTIONS = {
    "zg._checks": None,  # every *_arg
    "zg.kernels": ("check",),
    "zg.graph": ("graph_arg", "_ids", "_features", "_labels", "_splits"),
    "zg.settings": (
        "check_engine_args",
        "check_model_kind",
        "check_sampler",
        "check_mode",
        "check_features",
        "check_model_fits",
        "check_guard",
    ),
    "zg.sampling": ("check_seeds", "check_fanouts", "_check_clock"),
}
# ... and (class, method names) of the checks that are methods.
CHECK_METHODS = (
    (zg.graph.Graph, ("check_structure",)),
    (zg.envelope.Envelope, ("check", "_check_fits")),
    (Partition, ("_check_graph",)),
)
# The public entry points that check what they are given.
PUBLIC_ENTRIES = (
    (zg.graph.Graph, ("__init__",)),
    (zg.envelope.Envelope, ("__init__", "profile", "resolve", "worst_case")),
    (zg.sampling.EnvelopeSampler, ("__init__", "sample")),
    (zg.sampling.DynamicSampler, ("__init__", "sample")),
    (zg.Engine, ("__init__", "regroup")),
    (Partition, ("local_graph",)),
)
MEMORY_READ = ("zg._checks", "machine_memory")
# A size compared with the machine's memory: a check of new sizes, counted on its own.
MEMORY_CHECK = ("zg._checks", "memory_arg")


def _code(function):
    """The code object a call of ``function`` runs (a classmethod's, a decorated one's)."""
    function = getattr(function, "__func__", function)
    return inspect.unwrap(function).__code__


def _codes() -> tuple[dict, dict, dict]:
    """{code: name} of the checks, of the public entry points and of the memory read."""
    checks, public = {}, {}
    for module_name, names in CHECK_FUNCTIONS.items():
        module = sys.modules[module_name]
        if names is None:
            names = [
                n
                for n, f in vars(module).items()
                if n.endswith("_arg")
                and getattr(f, "__module__", "") == module_name
                and (module_name, n) != MEMORY_CHECK
            ]
        for name in names:
            checks[_code(getattr(module, name))] = f"{module_name}.{name}"
    for cls, names in CHECK_METHODS:
        for name in names:
            checks[_code(cls.__dict__[name])] = f"{cls.__name__}.{name}"
    for cls, names in PUBLIC_ENTRIES:
        for name in names:
            public[_code(cls.__dict__[name])] = f"{cls.__name__}.{name}"
    memory = {}
    for kind, (module, name) in (("read", MEMORY_READ), ("check", MEMORY_CHECK)):
        memory[_code(getattr(sys.modules[module], name))] = (kind, f"{module}.{name}")
    return checks, public, memory


class CheckCount:
    """Count, while active, the calls of the kit's checks of values (``checks``: the outermost
    ones; a check that calls another for its parts counts once), of its validating public entry
    points (``public``), of the machine-memory read (``memory_reads``) and of the comparisons of
    a size with that memory (``memory_checks``, :func:`zg._checks.memory_arg`: new sizes, not a
    value checked again), each also by name (``by_name``). A profiler (``sys.setprofile``) sees
    every call, whatever name bound it."""

    def __init__(self):
        self.by_name: collections.Counter = collections.Counter()
        self.checks = self.public = self.memory_reads = self.memory_checks = 0
        self._codes = _codes()

    def _profile(self, frame, event, arg) -> None:
        if event == "return" and self._inside and self._inside[-1] is frame:
            self._inside.pop()
        if event != "call":
            return
        checks, public, memory = self._codes
        code = frame.f_code
        if code in checks and not self._inside:
            self.checks += 1
            self.by_name[checks[code]] += 1
            self._inside.append(frame)
        elif code in public:
            self.public += 1
            self.by_name[public[code]] += 1
        elif code in memory:
            kind, name = memory[code]
            if kind == "read":
                self.memory_reads += 1
            else:
                self.memory_checks += 1
            self.by_name[name] += 1

    def __enter__(self) -> CheckCount:
        self._inside: list = []  # the outermost check running
        self._saved = sys.getprofile()
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc) -> None:
        sys.setprofile(self._saved)

    def record(self) -> dict:
        return {
            "checks": self.checks,
            "public_entries": self.public,
            "memory_reads": self.memory_reads,
            "memory_checks": self.memory_checks,
            "by_name": dict(sorted(self.by_name.items())),
        }


def worker_config(step_shapes: str, batching: str = "minibatch", **extra):
    """The kit's defaults on P = 4 workers, repartitioning every epoch."""
    from zg.grappa.config import TrainConfig

    return TrainConfig(
        workers=4, step_shapes=step_shapes, batching=batching, repartition_every=1, epochs=3,
        seed=0, kernel="torch", **extra,
    ).validated()  # fmt: skip


@contextlib.contextmanager
def quiet_threads():
    """The worker pins torch's threads (zg.grappa.worker.pin_threads); put them back."""
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def measure(g, step_shapes: str, batching: str = "minibatch") -> dict:
    """The counts of the first build (super-epoch 0) and of one repartition (super-epoch 1)."""
    from zg.grappa.plan import check_plan, make_partition
    from zg.grappa.worker import _Worker

    cfg = worker_config(step_shapes, batching)
    part = make_partition(g, cfg)
    check_plan(g, cfg, part)
    worker = _Worker(cfg, g, part, 0, cfg.workers, torch.device("cpu"))
    with CheckCount() as first:
        worker.enter(0)
    with CheckCount() as repartition:
        worker.enter(1)
    return {
        "step_shapes": step_shapes,
        "batching": batching,
        "mode": worker.engine.mode,
        "first_build": first.record(),
        "repartition": repartition.record(),
    }


COLUMNS = ("checks", "public_entries", "memory_reads")
SHAPES = (("dynamic", "minibatch"), ("envelope", "minibatch"), ("dynamic", "full"))


def main(argv=None):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _machine import machine_note, table, write_json

    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--label", default="", help="a note on the code measured (e.g. 'main')")
    args = parser.parse_args(argv)
    g = zg.datasets.load("cora")
    with quiet_threads():
        rows = [measure(g, s, b) for s, b in SHAPES]
    print(
        table(
            [
                [
                    f"{r['step_shapes']}/{r['batching']}",
                    *(r[when][k] for when in ("first_build", "repartition") for k in COLUMNS),
                ]
                for r in rows
            ],
            ["step / batching"]
            + [
                f"{when} {k}"
                for when in ("build", "regroup")
                for k in ("checks", "public", "reads")
            ],
        )
    )
    path = write_json(
        "regroup_checks",
        {
            "benchmark": "regroup_checks",
            "command": "bench/regroup_checks.py " + " ".join(argv),
            "machine": machine_note(),
            "settings": {
                "graph": str(g),
                "workers": 4,
                "rank": 0,
                "config": "the kit's defaults, repartition_every=1",
                "counter": "bench/regroup_checks.py CheckCount",
                "label": args.label,
            },
            "rows": rows,
            "torch": torch.__version__,
        },
    )
    print(f"wrote {path}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """Checks and memory reads per repartition of one worker (counts: n = 1, exact)."""
    out = []
    for r in doc["rows"]:
        tag = f"{r['step_shapes']}_{r['batching']}"
        where = (
            f"Grappa worker, step_shapes={r['step_shapes']}, batching={r['batching']}, one "
            "repartition (Engine.regroup), bench/regroup_checks.py CheckCount"
        )
        out.append(
            headline(
                f"regroup_checks_{tag}",
                r["repartition"]["checks"],
                "checks per repartition",
                where=where,
                higher_is_better=False,
            )
        )
        out.append(
            headline(
                f"regroup_memory_reads_{tag}",
                r["repartition"]["memory_reads"],
                "memory reads per repartition",
                where=where,
                higher_is_better=False,
            )
        )
    return out


if __name__ == "__main__":
    main()
