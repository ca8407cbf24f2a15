"""Presets: named sets of :class:`zg.grappa.TrainConfig` values, so a whole configuration is one
argument. ``train(g, workers=4, preset="reference", epochs=E, seed=s)``; ``zg grappa --preset
reference``; ``{"preset": "reference", ...}`` in a ``--config`` file.

Where it sits: before a config is built. The entry points (:func:`zg.grappa.train`,
:func:`~zg.grappa.train_many`, :meth:`TrainConfig.from_dict`, hence the command line) fill every
field the caller did not give from the preset (:func:`apply_preset`); a field given explicitly
wins, and the history records it under ``preset.overrides``. A setting the trainer fixes is not
taken from the preset (:meth:`zg.grappa.Trainer.shared_options`), so ``trainer="single"`` or
``trainer="isolated"`` with the same preset trains the same model with the same settings, and
each comparison is one argument apart. Without a preset (``preset=None``) the kit's defaults
apply (METIS chunks with the one-hop halo, the ``batch`` estimator, ...: :func:`zg.grappa.train`).

``"reference"``: Grappa as the authors' public code runs it (github.com/chongyang-xu/grappa, the
maintained copy of mpi-dsg/grappa, MIT licence), read at commit fd37d99 / b7c1716:

    chunks        every node to one of P chunks at random, one chunk per worker
                  (``t10n/dataset/chunk_dist.py``: ``random_assign_pid_for_nid``; each node's
                  global in-degree kept, ``split_ideg``)           -> method="random", num_chunks=P
    local graph   its own chunk, one partner chunk, and every bridge edge from any chunk into
                  either, the sources' features stored locally (``t10n/dataloader.py``,
                  ``explore_mode = 2``, ``load_nbr_chunk_v2``): both chunks' nodes keep every
                  in-edge, halo nodes have none             -> halo=True, schedule="partner_sweep"
    seeds         its own chunk's training nodes for the whole run; the partner adds structure
    partners      every ``repart_every`` epochs (default 50) the partner moves to the next chunk,
                  skipping the worker itself, starting at r + 1 (``get_cur_dataloader``)
                                                                    -> repartition_every=50
    weighting     one scalar per worker and step in the DDP hook: c_r = mean over its seeds of
                  min(1, d_local / (d_global + 1)), counted at the seeds' hop only, times 1 / P,
                  all-reduced with SUM, never normalised by the sum of the c_r
                  (``t10n/grad.py``: ``weighted_grad_hook``; ``csrc/graph/sampling_h.h``:
                  ``fill_w_reampling_sampling_result_to_coo``; ``csrc/python/py_graph.cc``: the
                  global degrees passed for the first hop only; ``t10n/sampler.py``: the sum
                  divided by the number of seeds)                    -> estimator="reference"
    model         SAGE, hidden 128, 3 layers, fanouts 15,10,5 (input layer first), dropout 0.5,
                  Adam lr 0.003, batch 1000 per worker (``experiments/grappa/train/t10n_train.py``);
                  other depths take the fanouts of ``experiments/grappa/t10nrun.py``: 1 layer 10,
                  2 layers 25,10, 4 layers 20,15,10,5
    metric        test accuracy of the best-validation model under full-neighbour evaluation:
                  the history's ``final.test_acc_at_best_val``

Deliberate differences from the public code, each for a reason:

* Chunks are a seeded *balanced* random cut (sizes differ by at most one node), not an
  independent draw per node: the kit's one random partition. The public code equalises the
  number of steps by shrinking each worker's batch (``max_batch``, all-reduced with MAX, under
  ``DDP.join()``); the kit gives every worker the same number of iterations I =
  ceil(|train| / batch_size) by cutting each worker's seeds into I near-equal batches (every
  trainer does; :mod:`zg.grappa.local`). With ``batch_size = 1000 * P`` (the public code's
  batch is per worker, the kit's is global) a worker's batch is about 1000 seeds, as there.
* The graph gets one self-loop per node (``self_loops="add"``), as the public code stores every
  graph (``t10n/dataset/dgl_to_t10n.py``, ``augmentation_dgl_g``: ``dgl.remove_self_loop`` then
  ``dgl.add_self_loop``): SAGE's neighbour mean then includes the node itself, in sampling, in
  training and in evaluation. Up to zg 0.4 the preset took the graph as given (the kit's models
  carry their own self term); on Cora that learned less in the same 30 epochs than the public
  code, and the self-loops were the difference (bench/grappa_ablation.py). d in c_r counts the
  in-edges, the self-loop included: with the complete halo d_local = d_global and c_r is the
  mean of (d + 1) / (d + 2) over the seeds, nearly constant, which is the point the measurement
  (bench/grappa_reference.py) makes. ``self_loops="keep"`` runs the graph as given.
* Rank 0 evaluates every ``eval_every`` epochs (default every epoch, the public code every 5)
  with the kit's full-neighbour evaluator (:func:`zg.inference.evaluate`) on the whole graph;
  the public code's inference exchanges embeddings between workers, with the same result. The
  history keeps the test accuracy at the best validation epoch; the kit does not keep that
  epoch's parameters (``model_path`` saves the last ones).
* Sampling without replacement is the kit's sampler (``step_shapes="dynamic"``), not the public
  code's C++ sampler; the distribution is the same (uniform without replacement per hop).
"""

from __future__ import annotations

from typing import Any

from ._checks import MAX_LAYERS, choice_arg
from .trainers import get_trainer

__all__ = ["PRESETS", "preset_values", "apply_preset", "preset_record", "REFERENCE_FANOUTS"]

PRESETS = ("reference",)

# Fanouts per depth of the public code's runs (experiments/grappa/t10nrun.py), input layer first.
REFERENCE_FANOUTS = {1: [10], 2: [25, 10], 3: [15, 10, 5], 4: [20, 15, 10, 5]}
REFERENCE_BATCH_PER_WORKER = 1000
REFERENCE_LAYERS = 3


def preset_values(
    name: str, trainer: Any = "grappa", workers: int = 4, num_layers: int | None = None
) -> dict[str, Any]:
    """The TrainConfig values preset ``name`` sets for ``trainer`` with ``workers`` workers
    (``num_layers``: the depth asked for, which picks the fanouts; default the preset's own).
    Settings the trainer fixes are left out (the trainer decides them)."""
    choice_arg(name, "preset", PRESETS)
    trainer_object = get_trainer(trainer)
    workers = trainer_object.workers or workers
    layers = REFERENCE_LAYERS if num_layers is None else num_layers
    values: dict[str, Any] = {
        "method": "random",
        "num_chunks": workers,
        "halo": True,
        "schedule": "partner_sweep",
        "repartition_every": 50,
        "estimator": "reference",
        "model": "sage",
        "hidden_dim": 128,
        "num_layers": REFERENCE_LAYERS,
        "dropout": 0.5,
        "fanouts": list(REFERENCE_FANOUTS.get(layers, _ten_per_layer(layers))),
        "batch_size": REFERENCE_BATCH_PER_WORKER * workers,
        "lr": 0.003,
        "weight_decay": 0.0,
        "self_loops": "add",
    }
    return trainer_object.shared_options(values)


def _ten_per_layer(layers: Any) -> list[int]:
    """Fanout 10 per layer for a depth the public code has no fanouts of. A depth beyond
    TrainConfig's bound (``MAX_LAYERS``) gets the preset's own fanouts instead of a list as
    long as it, so ``TrainConfig.validated`` refuses ``num_layers`` by name before anything of
    that size is allocated."""
    if isinstance(layers, int) and not isinstance(layers, bool) and 0 < layers <= MAX_LAYERS:
        return [10] * layers
    return list(REFERENCE_FANOUTS[REFERENCE_LAYERS])


def apply_preset(options: dict[str, Any], default_workers: int | None = None) -> dict[str, Any]:
    """``options`` (TrainConfig fields given by the caller) with every field the preset sets and
    the caller did not give filled in; unchanged without ``preset``. A bad preset name is a
    ValueError naming ``preset``; a bad trainer or worker count is left for
    :meth:`TrainConfig.validated` to name."""
    name = options.get("preset")
    if name is None:
        return options
    choice_arg(name, "preset", PRESETS)
    trainer = options.get("trainer", "grappa")
    try:
        trainer_object = get_trainer(trainer)
    except (TypeError, ValueError):
        return options
    workers = options.get("workers")
    if not (isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1):
        workers = trainer_object.workers or default_workers or trainer_object.defaults()["workers"]
    layers = options.get("num_layers")
    values = preset_values(name, trainer, workers, layers if isinstance(layers, int) else None)
    return {**values, **options}


def preset_record(config: dict[str, Any]) -> dict[str, Any] | None:
    """What a history says of its preset: ``{"name", "overrides": {field: {"preset", "run"}}}``,
    the fields whose value differs from the preset's (given explicitly); None without one."""
    name = config.get("preset")
    if name is None:
        return None
    values = preset_values(name, config["trainer"], config["workers"], config["num_layers"])
    overrides: dict[str, dict[str, Any]] = {}
    for key, value in values.items():
        run: list[Any] = config.get(key)
        if run != value:
            overrides[key] = {"preset": value, "run": run}
    return {"name": name, "overrides": overrides}
