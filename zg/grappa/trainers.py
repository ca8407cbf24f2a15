"""The five distributed trainers as *policy*: one small class each, holding only what differs.

Where it sits: every part of the Grappa half that must know which trainer runs asks the
trainer object (``cfg.trainer_object``), never its name; :data:`TRAINERS` is the one place that
maps a name to its class. A trainer is a record of flags and the rules that follow from them;
it builds nothing. What a worker builds from those flags (its local data, its exchange or the
parameter averaging) is :mod:`zg.grappa.roles`; the worker loop (:mod:`zg.grappa.worker`) is the
same for all five:

    trainer          local data (what it samples)     gradients                     corrects
    grappa           its local graph (isolated)        exchange, estimator s_p       yes (batch)
    isolated         its local graph, never regrouped  exchange, mean                no
    psgd_pa          its local graph, never regrouped  none: parameters averaged      no
                                                       every ``average_every`` steps
    feature_fetch    the whole structure, remote       exchange, mean                no
                     features fetched every iteration
    data_parallel    the whole graph; a share of       exchange, global-batch mean   no
                     every global batch
    single           the whole graph, one worker       (one worker: nothing sent)    no

A trainer also says which settings it fixes (:meth:`Trainer.fixed`) and which defaults it
resolves (:meth:`Trainer.defaults`); :meth:`zg.grappa.TrainConfig.validated` refuses a config
that contradicts them, naming both fields. This module imports nothing of the kit: the config
(:mod:`zg.grappa.config`), the presets and the roles all read it.
"""

from __future__ import annotations

from typing import Any

from ._checks import blamed_on

__all__ = [
    "Trainer",
    "Grappa",
    "Isolated",
    "PSGDPA",
    "FeatureFetch",
    "DataParallel",
    "Single",
    "TRAINERS",
    "get_trainer",
]


class Trainer:
    """What a trainer is. Subclasses set the class attributes; the methods are shared.

    Attributes:
        name: the trainer's name in configs and histories.
        corrects: combines gradients with a coverage-correcting estimator (else "mean" only).
        repartitions: regroups the chunks every ``repartition_every`` epochs.
        averages_models: each worker steps on its own gradient and the parameters are averaged
            every ``average_every`` iterations (no per-iteration gradient exchange).
        fetches_features: samples the whole graph's structure and fetches remote features
            every iteration (mini-batches with the dynamic sampler only).
        shares_batches: ZeroGNN's data parallelism: every worker holds the whole graph and
            trains on its share of every global batch of ``batch_size`` seeds; the exchange
            sums gradients, loss and seed count, so each update is the single-process update
            on the global batch (the envelope step only: a share may be empty).
        workers: a fixed number of workers (None: any).
    """

    name = ""
    corrects = False
    repartitions = False
    averages_models = False
    fetches_features = False
    shares_batches = False
    workers: int | None = None

    def __repr__(self) -> str:
        return f"zg.grappa.trainers.{type(self).__name__}()"

    # ------------------------------------------------------------------------- configuration

    def defaults(self) -> dict[str, Any]:
        """The values of the trainer-dependent fields a config leaves unset."""
        out = {
            "workers": self.workers or 2,
            "estimator": "batch" if self.corrects else "mean",
            "repartition_every": 5 if self.repartitions else None,
        }
        if self.workers == 1:
            out["num_chunks"] = 1
        return out

    def fixed(self) -> dict[str, tuple[Any, str]]:
        """``{field: (value, why)}``: the settings this trainer only runs with."""
        out: dict[str, tuple[Any, str]] = {}
        if not self.corrects:
            out["estimator"] = ("mean", "combines gradients without coverage correction")
        if not self.repartitions:
            out["repartition_every"] = (None, "never repartitions")
        if self.workers is not None:
            out["workers"] = (self.workers, f"runs {self.workers} worker(s)")
        if self.workers == 1:
            out["num_chunks"] = (1, "trains on the whole graph as one chunk")
        return out

    def check(self, cfg: Any) -> None:
        """Refuse settings of ``cfg`` this trainer contradicts (a ValueError naming both)."""
        for field, (value, why) in self.fixed().items():
            given = getattr(cfg, field)
            same = given == value or (field == "repartition_every" and not given)
            if not same:
                raise blamed_on(
                    field,
                    ValueError(
                        f"trainer={self.name!r} {why} ({field}={value!r}); got "
                        f"{field}={given!r}: drop {field} or choose another trainer"
                    ),
                )
        if self.fetches_features and cfg.batching != "minibatch":
            raise blamed_on(
                "batching",
                ValueError(
                    f"trainer={self.name!r} trains with batching='minibatch' (it fetches the "
                    f"features of sampled neighbourhoods); got batching={cfg.batching!r}"
                ),
            )
        if self.shares_batches and (cfg.step_shapes != "envelope" or cfg.batching != "minibatch"):
            raise blamed_on(
                "step_shapes" if cfg.step_shapes != "envelope" else "batching",
                ValueError(
                    f"trainer={self.name!r} runs the static envelope step on shares of every global "
                    f"batch (a share may be empty: the static step joins the exchange with no seed); "
                    f"set step_shapes='envelope' (got step_shapes={cfg.step_shapes!r}, "
                    f"batching={cfg.batching!r})"
                ),
            )
        if self.fetches_features and cfg.step_shapes != "dynamic":
            raise blamed_on(
                "step_shapes",
                ValueError(
                    f"trainer={self.name!r} samples the whole structure with the dynamic "
                    f"sampler; step_shapes='envelope' samples each worker's local graph "
                    f"(trainers {[n for n, t in TRAINERS.items() if not t.fetches_features]})"
                ),
            )

    def shared_options(self, options: dict[str, Any]) -> dict[str, Any]:
        """``options`` without the settings this trainer fixes: for options shared by the runs
        of a comparison (a ``repartition_every`` meant for the trainers that repartition), which
        each run's trainer then decides. A run's own options go to train() as they are."""
        fixed = self.fixed()
        return {k: v for k, v in options.items() if k not in fixed}

    def replicas(self, world: int) -> int:
        """How many model copies a checkpoint holds: one under DDP (every worker applies the
        same gradient), one per worker when each steps on its own."""
        return world if self.averages_models else 1


class Grappa(Trainer):
    """Isolated local graphs, regrouped every super-epoch; the estimator corrects the gradients."""

    name, corrects, repartitions = "grappa", True, True


class Isolated(Trainer):
    """The same workers without correction or regrouping: what isolation alone costs."""

    name = "isolated"


class PSGDPA(Trainer):
    """Periodic model averaging: local steps, parameters averaged every ``average_every``
    iterations (default: once per epoch) with one all_reduce."""

    name, averages_models = "psgd_pa", True


class FeatureFetch(Trainer):
    """DistDGL-style: the whole structure on every worker, remote features fetched every
    iteration (:mod:`zg.grappa.remote`), gradients averaged."""

    name, fetches_features = "feature_fetch", True


class DataParallel(Trainer):
    """ZeroGNN's data parallelism: the whole graph on every worker, a share of every global
    batch each, gradients summed inside the static step (what ``zg.parallel.train`` runs)."""

    name, shares_batches = "data_parallel", True


class Single(Trainer):
    """One process on the whole graph: the accuracy ceiling."""

    name, workers = "single", 1


# The one place a trainer's name is tested.
TRAINERS: dict[str, type] = {
    cls.name: cls for cls in (Grappa, Isolated, PSGDPA, FeatureFetch, DataParallel, Single)
}


def get_trainer(name: Any) -> Trainer:
    """The trainer called ``name`` (a ValueError naming ``trainer`` and the choices otherwise)."""
    if not isinstance(name, str):
        raise TypeError(
            f"trainer must be a str, one of {list(TRAINERS)}; got {type(name).__name__} {name!r}"
        )
    if name not in TRAINERS:
        raise ValueError(f"unknown trainer {name!r}; choose one of {list(TRAINERS)}")
    return TRAINERS[name]()
