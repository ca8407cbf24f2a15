"""zg.grappa.config: TrainConfig = Experiment + Runtime + Output; defaults that depend on the
trainer are resolved at construction by documented rules; validated() checks and changes nothing;
a setting that contradicts another is refused naming both."""

import dataclasses
import json
import warnings

import pytest

import zg
from zg import grappa
from zg.grappa.config import (
    ABLATIONS,
    UNSET,
    Experiment,
    Output,
    Runtime,
    TrainConfig,
    map_deprecated,
)


def test_the_three_groups_partition_the_fields():
    names = [[f.name for f in dataclasses.fields(cls)] for cls in (Experiment, Runtime, Output)]
    flat = [f.name for f in dataclasses.fields(TrainConfig)]
    assert flat == names[0] + names[1] + names[2]
    assert len(set(flat)) == len(flat)
    assert "ablation" not in flat and "dataset" not in flat
    assert {"trainer", "workers", "estimator", "epochs", "seed", "method", "model"} <= set(names[0])
    assert {"backend", "timeout", "threads", "step_shapes"} <= set(names[1])
    assert {"history_path", "checkpoint_dir", "model_path"} <= set(names[2])


def test_groups_round_trip_and_compose():
    cfg = TrainConfig(
        trainer="psgd_pa", epochs=3, step_shapes="envelope", checkpoint_dir="ckpt"
    ).validated()
    assert cfg.experiment.epochs == 3 and cfg.runtime.step_shapes == "envelope"
    assert cfg.output.checkpoint_dir == "ckpt"
    assert TrainConfig.compose(cfg.experiment, cfg.runtime, cfg.output) == cfg
    assert TrainConfig.compose(Experiment(trainer="single")).workers == 1
    with pytest.raises(TypeError, match="runtime must be a zg.grappa.Runtime"):
        TrainConfig.compose(runtime=Output())


@pytest.mark.parametrize(
    "trainer, workers, estimator, repartition_every, num_chunks",
    [
        ("grappa", 2, "batch", 5, None),
        ("isolated", 2, "mean", None, None),
        ("psgd_pa", 2, "mean", None, None),
        ("feature_fetch", 2, "mean", None, None),
        ("single", 1, "mean", None, 1),
    ],
)
def test_defaults_follow_the_trainer(trainer, workers, estimator, repartition_every, num_chunks):
    cfg = TrainConfig(trainer=trainer)
    assert (cfg.workers, cfg.estimator, cfg.repartition_every, cfg.num_chunks) == (
        workers,
        estimator,
        repartition_every,
        num_chunks,
    )
    assert cfg.fanouts == [10, 10]
    assert cfg.checkpoint_every == (repartition_every or 1)
    assert UNSET not in dataclasses.astuple(cfg)
    json.dumps(cfg.to_dict())  # the JSON form


def test_validated_changes_nothing():
    for cfg in (
        TrainConfig(),
        TrainConfig(trainer="single"),
        TrainConfig(repartition_every=0),
        TrainConfig(fanouts=(5, 5), num_chunks=None),
    ):
        before = dataclasses.replace(cfg)
        assert cfg.validated() is cfg and cfg == before
    assert TrainConfig(repartition_every=0).repartition_every == 0  # 0 stays 0 (= never)
    assert TrainConfig(fanouts=(5, 5)).fanouts == [5, 5]


@pytest.mark.parametrize(
    "options, first, second",
    [
        (dict(trainer="isolated", estimator="batch"), "trainer='isolated'", "estimator='batch'"),
        (
            dict(trainer="feature_fetch", repartition_every=3),
            "trainer='feature_fetch'",
            "repartition_every=3",
        ),
        (dict(trainer="psgd_pa", estimator="node"), "trainer='psgd_pa'", "estimator='node'"),
        (dict(trainer="single", workers=2), "trainer='single'", "workers=2"),
        (dict(trainer="single", num_chunks=4), "trainer='single'", "num_chunks=4"),
        (
            dict(trainer="feature_fetch", step_shapes="envelope"),
            "trainer='feature_fetch'",
            "step_shapes='envelope'",
        ),
        (
            dict(trainer="feature_fetch", batching="full"),
            "trainer='feature_fetch'",
            "batching='full'",
        ),
        (
            dict(step_shapes="envelope", batching="full"),
            "step_shapes='envelope'",
            "batching='full'",
        ),
    ],
)
def test_a_conflict_is_refused_naming_both_fields(options, first, second):
    with pytest.raises(ValueError) as info:
        TrainConfig(**options).validated()
    assert first in str(info.value) and second in str(info.value)


def test_settings_that_agree_with_the_trainer_are_accepted():
    TrainConfig(trainer="isolated", estimator="mean", repartition_every=None).validated()
    TrainConfig(trainer="isolated", repartition_every=0).validated()
    TrainConfig(trainer="single", workers=1, num_chunks=1).validated()


def test_the_ablation_keyword_maps_to_its_setting_with_a_warning():
    for ablation, (name, value) in ABLATIONS.items():
        with pytest.warns(DeprecationWarning, match=f"pass {name}={value!r} instead"):
            values = map_deprecated({"ablation": ablation})
        assert values == {name: value}
        with pytest.warns(DeprecationWarning):
            cfg = TrainConfig.from_dict({"ablation": ablation})
        assert getattr(cfg, name) == value
    with pytest.raises(
        ValueError, match="ablation='unweighted' means estimator='mean'.*estimator='node'"
    ):
        with pytest.warns(DeprecationWarning):
            map_deprecated({"ablation": "unweighted", "estimator": "node"})
    with pytest.raises(ValueError, match="ablation"):
        map_deprecated({"ablation": "no_halo"})
    with pytest.raises(ValueError, match="trainer='isolated'"):
        map_deprecated({"ablation": "fixed_partitions", "trainer": "isolated"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert map_deprecated({"ablation": None, "epochs": 2}) == {
            "epochs": 2
        }  # an old config's None


def test_dataset_belongs_to_the_command_line():
    with pytest.raises(ValueError, match="'dataset' is read by the command line"):
        TrainConfig.from_dict({"dataset": "cora"})
    g = zg.datasets.csbm(num_nodes=100, avg_degree=4, num_classes=2, feat_dim=4, seed=0)
    with pytest.raises(TypeError, match="'dataset' is the command line's"):
        grappa.train(g, dataset="cora")


def test_a_config_saved_before_the_split_reads_as_this_version_writes_it():
    old = {
        **TrainConfig(trainer="psgd_pa").to_dict(),
        "estimator": "batch",
        "ablation": None,
        "dataset": "cora",
    }
    assert TrainConfig.saved_form(old) == TrainConfig(trainer="psgd_pa").to_dict()


def test_train_defaults_to_four_workers_unless_the_trainer_has_its_own():
    from zg.grappa.train import TRAIN_WORKERS, _own_workers

    assert TRAIN_WORKERS == 4
    assert _own_workers("single") == 1 and _own_workers("grappa") is None
    assert _own_workers("no such trainer") is None


@pytest.mark.parametrize(
    "old, new, value", [("mode", "batching", "full"), ("sampler", "step_shapes", "envelope")]
)
def test_renamed_fields_map_with_a_warning_and_saved_configs_read_silently(old, new, value):
    """mode= and sampler= were renamed for what they choose (batching=, step_shapes=): the old
    name still reads, with a DeprecationWarning naming the new one; a saved config (a committed
    history) reads without a warning; both names at once is refused naming both."""
    import warnings

    from zg.grappa.config import map_deprecated

    with pytest.warns(DeprecationWarning, match=f"{old}= is now {new}="):
        mapped = map_deprecated({old: value})
    assert mapped == {new: value}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        saved = TrainConfig.saved_form({old: value, "trainer": "grappa"})
    assert saved[new] == value and old not in saved
    with pytest.raises(ValueError, match=f"give {new}= only: {old}= is its old name"):
        map_deprecated({old: value, new: value})
    assert not hasattr(TrainConfig(), old)
