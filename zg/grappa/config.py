"""Grappa's run configuration: the record :class:`TrainConfig` and its checks.

Where it sits: first thing :func:`zg.grappa.train` does (and ``python -m zg.grappa``); every
worker reads the same config. A config is three groups, each a dataclass, flattened into one
(every field name is unique, so ``TrainConfig(workers=4, step_shapes="envelope", history_path=...)``
and ``cfg.epochs`` read as before):

    Experiment   what defines the result: trainer, workers, estimator, partition, model,
                 optimisation, epochs, seed
    Runtime      how it runs: step shapes and envelope, backend, timeouts, threads, kernels
    Output       where output goes: history, model, checkpoints, evaluation period, progress

``cfg.experiment``, ``cfg.runtime``, ``cfg.output`` give each group on its own, and
:meth:`TrainConfig.compose` builds a config from the three. The JSON form (history, checkpoints,
``--config`` files) is the flat dict of :meth:`TrainConfig.to_dict`. What the record implies
for a graph (iterations per epoch, the partition, the check that every worker can run it) is
the run plan, :mod:`zg.grappa.plan`; the super-epoch of an epoch follows from the record alone
(:func:`super_epoch_of`). The record reads the trainers' policy (:mod:`zg.grappa.trainers`) and
the presets; it builds nothing.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

import torch

from .. import kernels
from .. import models as zg_models
from .._checks import memory_arg, seed_arg
from ..optim import MAX_HYPER, make_optimizer
from ..sampling import check_fanouts
from ._checks import MAX_LAYERS, blamed_on, blames, bool_arg, choice_arg, int_arg, real_arg
from .estimators import WEIGHTINGS, Estimator, _travelling_class, register_estimator
from .partition import METHODS, SCHEDULES
from .presets import PRESETS, apply_preset
from .trainers import TRAINERS, Trainer, get_trainer

__all__ = [
    "TrainConfig",
    "Experiment",
    "Runtime",
    "Output",
    "UNSET",
    "TRAINERS",
    "BATCHINGS",
    "STEP_SHAPES",
    "SELF_LOOPS",
    "RENAMED",
    "ABLATIONS",
    "super_epoch_of",
    "map_deprecated",
]

BATCHINGS = ("minibatch", "full")
STEP_SHAPES = ("dynamic", "envelope")
# What a run does to the graph's self-loops before anything else (zg.grappa.train.run_graph).
SELF_LOOPS = ("keep", "add")
# Fields renamed for what they choose (release 0.2): old name -> new name. A config or keyword
# with an old name is mapped (a DeprecationWarning; silently for a saved config).
RENAMED = {"mode": "batching", "sampler": "step_shapes"}
# The paper's ablations of Grappa, kept only as deprecated keywords of train() and of JSON
# configs: each is a shorthand for the setting it names.
ABLATIONS = {"unweighted": ("estimator", "mean"), "fixed_partitions": ("repartition_every", None)}
MAX_SECONDS = 1e7  # ~4 months: beyond this a timeout is a typo (and overflows timedelta)
MAX_THREADS = 1024  # torch threads per worker: more is a typo (torch.set_num_threads takes a C int)
# Weight matrices per layer of each model (zg.models: SAGE fc_self + fc_neigh, GCN one, GAT fc and
# its residual), and GAT's heads as zg.models.build makes it: the lower bound validated() checks.
_MATRICES = {"sage": 2, "gcn": 1, "gat": 2}
_GAT_HEADS = 4
KERNEL_BEFORE_FIELD = "auto"  # what a config saved before ``kernel`` existed ran (see saved_form)


class _Unset:
    """The default of a field whose default depends on the trainer (see TrainConfig)."""

    def __repr__(self) -> str:
        return "the trainer's default"

    def __reduce__(self):
        return "UNSET"  # one object, also across processes


UNSET: Any = _Unset()


# ----------------------------------------------------------------------------- configuration


@dataclass
class Experiment:
    """What defines a run's result (see :class:`TrainConfig` for every field)."""

    trainer: str = "grappa"
    workers: int = UNSET
    estimator: str = UNSET
    weighting: str = "inverse"
    coverage_floor: float = 0.05
    shrink: Any = "auto"
    repartition_every: int | None = UNSET
    epochs: int = 20
    seed: int = 0
    method: str = "metis"
    num_chunks: int | None = None
    halo: bool = True
    schedule: str = "round_robin"
    batching: str = "minibatch"
    model: str = "sage"
    hidden_dim: int = 64
    num_layers: int = 2
    dropout: float = 0.5
    fanouts: list[int] | None = None
    batch_size: int = 512
    lr: float = 0.01
    weight_decay: float = 0.0
    average_every: int | None = None
    preset: str | None = None
    self_loops: str = "keep"


@dataclass
class Runtime:
    """How a run runs (see :class:`TrainConfig`)."""

    step_shapes: str = "dynamic"
    envelope: Any = "profiled"
    envelope_quantile: float = 0.99
    envelope_margin: float = 0.05
    backend: str | None = None
    timeout: float = 120.0
    run_timeout: float | None = None
    threads: int | None = None
    kernel: str = "torch"
    poll_every: int = 8
    capture: bool = False


@dataclass
class Output:
    """Where a run's output goes (see :class:`TrainConfig`)."""

    history_path: str | None = None
    model_path: str | None = None
    checkpoint_dir: str | None = None
    checkpoint_every: int | None = None
    eval_every: int = 1
    progress: bool | None = None


GROUPS = {"experiment": Experiment, "runtime": Runtime, "output": Output}


@dataclass
class TrainConfig(Output, Runtime, Experiment):
    """Everything a run needs besides the graph: :class:`Experiment`, :class:`Runtime` and
    :class:`Output` in one flat dataclass. JSON-serialisable (:meth:`to_dict`).

    Experiment. trainer: one of :data:`TRAINERS` (:mod:`zg.grappa.trainers`). workers: P, the
    number of worker processes. epochs: how many epochs to train (numbered from 0). seed: the
    run's one seed (every random choice of the run follows from it).
    estimator, weighting, coverage_floor, shrink: see :mod:`zg.grappa.estimators`.
    repartition_every: epochs per super-epoch (None or 0: never). method, num_chunks, halo,
    schedule: see :func:`zg.grappa.partition`; the defaults are METIS chunks (needs pymetis, a
    dependency of the kit) with the one-hop halo, because on random chunks *without a halo*
    isolation costs accuracy that no estimator wins back, and METIS without the halo still
    missed the 1-point acceptance bound on one unseen graph (docs/grappa_diagnosis.md).
    ``method="random", halo=False`` is the kit's isolation stress test, not the paper's setting:
    the authors' public code trains on random chunks *with* the complete one-hop halo of the
    worker's chunk and a sweeping partner chunk, which is ``preset="reference"``
    (:mod:`zg.grappa.presets`; how it compares: bench/results/grappa_reference.json). batching:
    "minibatch" (sampled mini-batches) or "full" (one full-graph batch per epoch). model, hidden_dim, num_layers, dropout: see :func:`zg.models.build`.
    fanouts: input layer first. batch_size: global seeds per iteration. lr, weight_decay: Adam.
    average_every: psgd_pa's averaging period in iterations (default one epoch; the other
    trainers do not read it). preset: None (the kit's defaults) or a name of
    :data:`zg.grappa.presets.PRESETS`; :func:`zg.grappa.train`, :meth:`from_dict` and the
    command line fill every field not given from it (a TrainConfig built directly takes its
    fields as given and only records the name). self_loops: "keep" (the graph as given) or
    "add" (every self-loop dropped, then one added per node, before the run partitions,
    trains or evaluates: the graph the authors' public code trains on, so SAGE's neighbour mean
    includes the node itself; ``preset="reference"`` sets it; bench/grappa_ablation.py).

    Runtime. step_shapes: the shapes of each worker's step, "dynamic" (host-mediated, exact
    sizes, the reference) or "envelope" (each worker runs the ZeroGNN fixed-shape step on its
    local graph: envelope sampler, padded blocks, no host syncs in the iteration). envelope, envelope_quantile, envelope_margin: how each worker sizes
    its envelope for every super-epoch ("profiled": :meth:`zg.Envelope.profile` on its local
    graph with that quantile and margin; "worst_case": never overflows; a list of sizes, one per
    block: explicit, grown on overflow). poll_every: iterations between the host's reads of the
    overflow flag. capture: with step_shapes="envelope", each worker's static step, the gradient
    exchange included, is captured once as a CUDA Graph and replayed on CUDA (nccl); on the CPU
    the same step runs uncaptured, its bookkeeping as captured (the twin the tests check). The
    epoch's account then has no per-stage split of the step; each replay counts the collectives
    the captured step recorded, and a capture's three warm-up steps (which run for real, their
    optimizer step off) count their bytes too. After an overflow every worker captures again,
    at the same batch. Overflow follows the
    one policy of :class:`zg.step.OverflowGuard`: an overflowed batch is never applied; every
    worker skips its optimizer step on the device (the flag rides the gradient all-reduce, so
    one worker's overflow stops them all); the host polls the flag every few iterations, the
    overflowing workers grow their envelopes, and all resume from the first overflowed batch.
    The history counts ``envelope_overflows`` and ``rewound_batches`` per epoch. backend: gloo /
    nccl / None (auto). timeout: seconds any collective may wait. run_timeout: seconds the whole
    run may take (None: no limit). threads: torch threads per worker (default cores / P).
    kernel: which kernels each worker's :class:`zg.Engine` runs, one of
    :data:`zg.kernels.KERNELS`: "torch" (default: the readable torch code, as CUDA runs it),
    "fused" (the compiled numba kernels, CPU only) or "auto" (fused on the CPU when numba
    imports, else torch); ``zg grappa`` and ``python -m zg.grappa`` default to "torch" as well.
    The history records the kernel that ran (``kernel``). A resumed run may change it
    (:data:`zg.grappa.checkpoint.RESUMABLE_CHANGES`: the kernels compute the same values).

    Output. history_path: where rank 0 writes the history JSON. model_path: where rank 0 saves
    the final ``state_dict`` (torch.save), if given. checkpoint_dir: a folder for the run's
    checkpoint (``checkpoint.pt``; None: no checkpoints); a run that finds one there resumes
    from it (see :mod:`zg.grappa.train`). Under torchrun across machines it only needs to be on
    rank 0's machine: rank 0 reads it and broadcasts it. checkpoint_every: epochs between
    checkpoints; the last epoch is always checkpointed, so a finished run started again only
    rewrites its history. eval_every: evaluate every k epochs (and after the last). progress:
    a bar of the run's epochs, drawn by the process that called :func:`zg.grappa.train` (a
    widget in a notebook cell, text on a terminal) from what rank 0 reports; True: shown,
    False: not; None (the default): shown where a person watches (stderr a terminal, or a
    notebook kernel not started by pytest or nbval) unless ``ZG_PROGRESS=0``
    (:func:`zg.grappa.progress.show_bar`). Under torchrun rank 0 draws it on its stderr.

    Defaults that depend on another field are resolved once, at construction, by these rules
    (a field given explicitly is never changed):

    * workers: the trainer's own number (single: 1), else 2;
    * estimator: "batch" for the trainer that corrects with an estimator (grappa), "mean" for
      the others;
    * repartition_every: 5 for the trainer that repartitions (grappa), None for the others;
    * num_chunks None: the trainer's own (single: 1), else the partition's default;
    * fanouts None: 10 per layer (a tuple is kept as a list);
    * checkpoint_every None: one super-epoch (``repartition_every``), or every epoch when never
      repartitioning.

    :meth:`validated` checks every field (errors name it) and changes nothing; a setting that
    contradicts its trainer (``trainer="isolated", estimator="batch"``) or another setting
    (``step_shapes="envelope", batching="full"``) is refused with a ValueError naming both fields.
    """

    def __post_init__(self):
        trainer = self._trainer_or_none()
        if trainer is not None:
            for name, value in trainer.defaults().items():
                if getattr(self, name) is UNSET or (
                    name == "num_chunks" and self.num_chunks is None
                ):
                    setattr(self, name, value)
        if self.fanouts is None and _is_int(self.num_layers) and 1 <= self.num_layers <= MAX_LAYERS:
            self.fanouts = [10] * self.num_layers
        elif isinstance(self.fanouts, tuple):
            self.fanouts = list(self.fanouts)  # the JSON form is a list
        if self.checkpoint_every is None and self.repartition_every is not UNSET:
            every = self.repartition_every
            self.checkpoint_every = every if _is_int(every) and every > 0 else 1

    def _trainer_or_none(self) -> Trainer | None:
        try:
            return get_trainer(self.trainer)
        except (TypeError, ValueError):
            return None  # validated() names the problem

    # ------------------------------------------------------------------------- groups and JSON

    @classmethod
    def compose(
        cls,
        experiment: Experiment | None = None,
        runtime: Runtime | None = None,
        output: Output | None = None,
    ) -> TrainConfig:
        """The config made of the three groups (each defaults to its own defaults)."""
        values: dict[str, Any] = {}
        for name, group in (("experiment", experiment), ("runtime", runtime), ("output", output)):
            if group is None:
                continue
            if not isinstance(group, GROUPS[name]):
                raise TypeError(
                    f"{name} must be a zg.grappa.{GROUPS[name].__name__}, got "
                    f"{type(group).__name__}"
                )
            values.update({f.name: getattr(group, f.name) for f in fields(group)})
        return cls(**values)

    def _group(self, cls):
        return cls(**{f.name: getattr(self, f.name) for f in fields(cls)})

    @property
    def experiment(self) -> Experiment:
        return self._group(Experiment)

    @property
    def runtime(self) -> Runtime:
        return self._group(Runtime)

    @property
    def output(self) -> Output:
        return self._group(Output)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: every field, flat (what histories and checkpoints store)."""
        return asdict(self)

    # Pickled (train() hands the config to its spawned workers): the fields, and the class of an
    # estimator registered outside the kit, by reference, so the worker registers it too
    # (:func:`zg.grappa.estimators.register_estimator`).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        carried = _travelling_class(self.estimator)
        if carried is not None:
            state[_ESTIMATOR_CLASS] = carried
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        carried = state.pop(_ESTIMATOR_CLASS, None)
        if carried is not None:
            register_estimator(carried)  # the same class again changes nothing
        self.__dict__.update(state)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        """A validated config from its JSON form (a dict of fields; absent ones take their
        defaults). ``ablation`` (deprecated) is mapped to the setting it names; ``dataset``
        belongs to the command line (``python -m zg.grappa`` reads it), not to the config."""
        if not isinstance(values, dict):
            raise TypeError(f"config must be a dict (a JSON object), got {type(values).__name__}")
        values = map_deprecated(values)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            hint = (
                "; 'dataset' is read by the command line (python -m zg.grappa, zg grappa), "
                "not by TrainConfig"
                if "dataset" in unknown
                else ""
            )
            raise ValueError(f"unknown config key(s) {unknown}; known keys: {sorted(known)}{hint}")
        return cls(**apply_preset(values)).validated()

    @classmethod
    def saved_form(cls, values: dict[str, Any]) -> dict[str, Any]:
        """The JSON form of a config saved by any version of the kit (a history's or a
        checkpoint's ``config``), as this version writes it: ``dataset`` (the command line's)
        and ``ablation`` (already applied to the fields it names when it was saved) are dropped,
        and a field the trainer fixes takes the value the trainer ran with (before the split,
        psgd_pa stored an ``estimator`` it never used). Unknown keys are dropped. A config saved
        before a field existed gets the value its run used: ``preset`` None, ``kernel``
        ``"auto"`` (the worker's Engine then ran its own default)."""
        known = {f.name for f in fields(cls)}
        values = _renamed(values, None)  # saved under the old names: read them as they were
        out = {k: v for k, v in values.items() if k in known}
        out.setdefault("preset", None)  # saved before presets existed: the kit's defaults
        # Saved before the kernel was a field: the worker's Engine ran its own default, "auto".
        out.setdefault("kernel", KERNEL_BEFORE_FIELD)
        try:
            fixed = get_trainer(out.get("trainer", Experiment.trainer)).fixed()
        except (TypeError, ValueError):
            return out
        for name, (value, _) in fixed.items():
            if name in out and name != "workers":
                out[name] = value
        return out

    # ------------------------------------------------------------------------- checks

    def validated(self) -> TrainConfig:
        """Check every field (errors name it) and every pair that must agree; change nothing.

        What it accepts, the workers accept: the optimizer is built on a stand-in parameter and
        the estimator's arithmetic run once on made-up batches (:meth:`zg.grappa.Estimator.
        check_outputs`), exactly as each worker builds and runs them, and the numbers derived
        from a field (``1 / coverage_floor`` in float32) must be representable. An error raised
        by one field's check carries that field's name as ``exc.config_field`` (the command line
        names its flag from it, never from the message's words)."""
        trainer = _blamed("trainer", get_trainer, self.trainer)
        _blamed("workers", int_arg, self.workers, "workers", low=1)
        # The estimator's settings, each blamed on its own field, then the estimator itself.
        _blamed("weighting", choice_arg, self.weighting, "weighting", WEIGHTINGS)
        _blamed(
            "coverage_floor",
            real_arg,
            self.coverage_floor,
            "coverage_floor",
            low=0.0,
            high=1.0,
            low_open=True,
        )
        with blames("shrink"):
            if not (isinstance(self.shrink, str) and self.shrink == "auto"):
                if isinstance(self.shrink, str):
                    raise ValueError(
                        f"shrink must be a number in [0, 1] or 'auto', got {self.shrink!r}"
                    )
                real_arg(self.shrink, "shrink", low=0.0, high=1.0)
        with blames("estimator"):
            estimator = Estimator(self.estimator, self.weighting, self.coverage_floor, self.shrink)
        _blamed("coverage_floor", _check_floor, estimator)
        with blames("estimator"):
            estimator.check_outputs(self.workers)
        if self.repartition_every is not None:
            _blamed(
                "repartition_every", int_arg, self.repartition_every, "repartition_every", low=0
            )
        _blamed("epochs", int_arg, self.epochs, "epochs", low=1)
        _blamed("seed", seed_arg, self.seed)  # the kit's one seed rule (zg._checks.seed_arg)
        _blamed("method", choice_arg, self.method, "method", METHODS)
        _blamed("halo", bool_arg, self.halo, "halo")
        _blamed("schedule", choice_arg, self.schedule, "schedule", SCHEDULES)
        _blamed("self_loops", choice_arg, self.self_loops, "self_loops", SELF_LOOPS)
        if self.num_chunks is not None:
            _blamed("num_chunks", int_arg, self.num_chunks, "num_chunks", low=1)
        _blamed("batching", choice_arg, self.batching, "batching", BATCHINGS)
        _blamed("model", choice_arg, self.model, "model", tuple(zg_models.MODELS))
        _blamed("hidden_dim", int_arg, self.hidden_dim, "hidden_dim", low=1)
        _blamed("num_layers", int_arg, self.num_layers, "num_layers", low=1, high=MAX_LAYERS)
        _blamed("dropout", real_arg, self.dropout, "dropout", low=0.0, high=0.999)
        _blamed("hidden_dim", self._check_model_fits)
        _blamed("fanouts", check_fanouts, self.fanouts)
        if len(self.fanouts) != self.num_layers:
            raise blamed_on(
                "fanouts",
                ValueError(
                    f"fanouts has {len(self.fanouts)} entries but num_layers="
                    f"{self.num_layers}; give one fanout per layer"
                ),
            )
        _blamed("batch_size", int_arg, self.batch_size, "batch_size", low=1)
        # The workers' optimizer itself (zg.optim.make_optimizer), on a stand-in parameter.
        with blames("lr"):
            real_arg(self.lr, "lr", low=0.0, low_open=True, high=MAX_HYPER, normal=True)
        _blamed(
            "weight_decay", real_arg, self.weight_decay, "weight_decay", low=0.0, high=MAX_HYPER
        )
        with blames("lr"):
            make_optimizer(_stand_in(), "adam", self.lr, self.weight_decay)
        if self.average_every is not None:
            _blamed("average_every", int_arg, self.average_every, "average_every", low=1)
        _blamed("step_shapes", choice_arg, self.step_shapes, "step_shapes", STEP_SHAPES)
        with blames("envelope"):
            if isinstance(self.envelope, (list, tuple)):  # explicit sizes (grown on overflow)
                sizes = [int_arg(v, f"envelope[{i}]", low=1) for i, v in enumerate(self.envelope)]
                if len(sizes) != self.num_layers:
                    raise ValueError(
                        f"envelope has {len(sizes)} sizes but num_layers={self.num_layers}: "
                        "give one size per block"
                    )
            else:
                choice_arg(self.envelope, "envelope", ("profiled", "worst_case"))
        _blamed("poll_every", int_arg, self.poll_every, "poll_every", low=1)
        _blamed("capture", bool_arg, self.capture, "capture")
        if self.capture and self.step_shapes != "envelope":
            raise blamed_on(
                "capture",
                ValueError(
                    "capture=True captures each worker's static step, exchange included, as one "
                    "CUDA Graph: it needs step_shapes='envelope' (the fixed-shape step); got "
                    f"step_shapes={self.step_shapes!r}"
                ),
            )
        _blamed(
            "envelope_quantile",
            real_arg,
            self.envelope_quantile,
            "envelope_quantile",
            low=0.0,
            high=1.0,
            low_open=True,
        )
        _blamed(
            "envelope_margin", real_arg, self.envelope_margin, "envelope_margin", low=0.0, high=10.0
        )
        if self.step_shapes == "envelope" and self.batching != "minibatch":
            raise ValueError(
                f"step_shapes='envelope' samples mini-batches; it cannot go with "
                f"batching={self.batching!r} (use batching='minibatch' or step_shapes='dynamic')"
            )
        if self.backend is not None:
            _blamed("backend", choice_arg, self.backend, "backend", ("gloo", "nccl"))
        _blamed(
            "timeout", real_arg, self.timeout, "timeout", low=0.0, high=MAX_SECONDS, low_open=True
        )
        if self.run_timeout is not None:
            _blamed(
                "run_timeout",
                real_arg,
                self.run_timeout,
                "run_timeout",
                low=0.0,
                high=MAX_SECONDS,
                low_open=True,
            )
        if self.threads is not None:
            _blamed("threads", int_arg, self.threads, "threads", low=1, high=MAX_THREADS)
        _blamed("kernel", kernels.check, self.kernel, "kernel")
        if self.kernel == "fused" and self.backend == "nccl":
            raise blamed_on(
                "kernel",
                ValueError(
                    "kernel='fused' runs on the CPU, but backend='nccl' trains on GPUs; use "
                    "kernel='torch' or 'auto' (or backend='gloo')"
                ),
            )
        for name in ("history_path", "model_path", "checkpoint_dir"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                with blames(name):
                    raise TypeError(
                        f"{name} must be a non-empty str (a path) or None, got "
                        f"{type(value).__name__} {value!r}"
                    )
        _blamed("checkpoint_every", int_arg, self.checkpoint_every, "checkpoint_every", low=1)
        _blamed("eval_every", int_arg, self.eval_every, "eval_every", low=1)
        if self.progress is not None:  # None: a bar where a person watches (grappa.progress)
            _blamed("progress", bool_arg, self.progress, "progress")
        if self.preset is not None:
            _blamed("preset", choice_arg, self.preset, "preset", PRESETS)
        trainer.check(self)
        self._check_chunks()
        return self

    def _check_chunks(self) -> None:
        """What :func:`zg.grappa.partition` refuses of num_chunks whatever the graph, named
        here (the workers would refuse it after starting)."""
        if self.num_chunks is None:
            return
        if self.num_chunks < self.workers:
            raise blamed_on(
                "num_chunks",
                ValueError(
                    f"num_chunks={self.num_chunks} is fewer than workers={self.workers}: every "
                    "worker owns at least one chunk"
                ),
            )
        if self.schedule == "partner_sweep" and self.num_chunks != self.workers:
            raise blamed_on(
                "num_chunks",
                ValueError(
                    f"schedule='partner_sweep' has one chunk per worker: num_chunks must equal "
                    f"workers={self.workers}, got {self.num_chunks}"
                ),
            )
        if self.num_chunks % self.workers:
            raise blamed_on(
                "num_chunks",
                ValueError(
                    f"num_chunks={self.num_chunks} must be a multiple of workers={self.workers} "
                    "(each worker owns the same number of chunks)"
                ),
            )

    def _check_model_fits(self) -> None:
        """Refuse a model whose weights cannot fit here whatever the graph (a MemoryError
        naming hidden_dim and num_layers, as the workers' zg.models would raise it after
        starting): the hidden layers' matrices, with one input feature and one class."""
        hidden = self.hidden_dim * (_GAT_HEADS if self.model == "gat" else 1)
        weights = hidden * (2 + hidden * max(self.num_layers - 2, 0))
        memory_arg(
            4 * _MATRICES.get(self.model, 1) * weights,
            # hidden_dim first: the command line shows the first field named as its flag
            f"hidden_dim={self.hidden_dim} with num_layers={self.num_layers} "
            f"(model={self.model!r}: its hidden layers' weights)",
        )

    @property
    def trainer_object(self) -> Trainer:
        """The trainer this config names (:mod:`zg.grappa.trainers`): what differs between
        trainers is asked of it, never of the name."""
        return get_trainer(self.trainer)

    @property
    def estimator_object(self) -> Estimator:
        return Estimator(self.estimator, self.weighting, self.coverage_floor, self.shrink)


_ESTIMATOR_CLASS = "__estimator_class__"  # the pickled state's key for a carried estimator

# The largest float32: a weight 1 / coverage_floor must stay below it (the workers hold node
# weights in float32), and so must a batch's sum of them.
_FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def _blamed(field: str, check: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``check(*args, **kwargs)`` with its refusal blamed on ``field`` (:func:`blames`)."""
    with blames(field):
        return check(*args, **kwargs)


def _stand_in() -> torch.nn.Module:
    """A module of one zero parameter, for building the workers' optimizer in validated()
    (made without drawing from torch's global generator: validating changes no random state)."""
    module = torch.nn.Module()
    module.weight = torch.nn.Parameter(torch.zeros(1))
    return module


def _check_floor(estimator: Estimator) -> None:
    """The weights the workers derive from ``coverage_floor`` must be finite float32 numbers:
    ``1 / floor`` (weighting "inverse") times the largest batch the kit can hold (2**31 seeds)
    below float32's largest value, and the floor itself a normal float32 (a subnormal one
    loses its digits)."""
    floor = estimator.floor
    tiny = float(torch.finfo(torch.float32).tiny)
    worst = 2.0**31 / floor if estimator.weighting == "inverse" else 1.0
    if floor < tiny or worst > _FLOAT32_MAX:
        low = max(tiny, 2.0**31 / _FLOAT32_MAX)
        raise ValueError(
            f"coverage_floor={floor!r} is too small: the workers hold node weights "
            f"(1 / coverage_floor) in float32, and a batch's weights must sum to less than "
            f"{_FLOAT32_MAX:.4g}; use coverage_floor >= {low:.3g}"
        )


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _renamed(values: dict[str, Any], stacklevel: int | None) -> dict[str, Any]:
    """``values`` with every field of :data:`RENAMED` under its new name (a DeprecationWarning
    unless ``stacklevel`` is None); both names at once is a ValueError naming them."""
    if not any(old in values for old in RENAMED):
        return values
    values = dict(values)
    for old, new in RENAMED.items():
        if old not in values:
            continue
        if new in values:
            raise ValueError(f"give {new}= only: {old}= is its old name")
        values[new] = values.pop(old)
        if stacklevel is not None:
            warnings.warn(
                f"{old}= is now {new}= (renamed for what it chooses); pass {new}={values[new]!r}",
                DeprecationWarning,
                stacklevel=stacklevel + 1,
            )
    return values


def map_deprecated(values: dict[str, Any], stacklevel: int = 3) -> dict[str, Any]:
    """``values`` with the deprecated ``ablation`` keyword replaced by the setting it names
    (a DeprecationWarning says which); ``ablation=None`` (an old config's "none") is dropped.
    An ablation together with a conflicting value of its setting is a ValueError naming both.
    Renamed fields (:data:`RENAMED`) are mapped to their new names, with a warning too."""
    values = _renamed(values, stacklevel)
    if "ablation" not in values:
        return values
    values = dict(values)
    ablation = values.pop("ablation")
    if ablation is None:
        return values
    choice_arg(ablation, "ablation", tuple(ABLATIONS))
    trainer = values.get("trainer", Experiment.trainer)
    try:
        corrects = get_trainer(trainer).corrects
    except (TypeError, ValueError):
        corrects = True  # validated() names the bad trainer
    if not corrects:
        raise ValueError(
            f"ablation={ablation!r} is an ablation of the correcting trainer "
            f"'grappa'; got trainer={trainer!r}"
        )
    name, value = ABLATIONS[ablation]
    warnings.warn(
        f"ablation={ablation!r} is deprecated; pass {name}={value!r} instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )
    if (
        name in values
        and values[name] is not UNSET
        and values[name] != value
        and not (name == "repartition_every" and values[name] == 0)
    ):
        raise ValueError(
            f"ablation={ablation!r} means {name}={value!r}, but {name}="
            f"{values[name]!r} was given too; pass {name} only"
        )
    values[name] = value
    return values


def super_epoch_of(cfg: TrainConfig, epoch: int) -> int:
    """The super-epoch that ``epoch`` belongs to (0 when never repartitioning)."""
    return 0 if not cfg.repartition_every else epoch // cfg.repartition_every
