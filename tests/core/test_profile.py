"""zg.profile: stage names, sync counts and memory fields (no wall-clock assertions)."""

import pytest
import torch

import zg
from zg import models
from zg.engine import Engine
from zg.experiments.throughput import STAGES as EXPERIMENT_STAGES
from zg.profile import StageClock, profile_engine
from zg.step import STAGES


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=2000, avg_degree=8, num_classes=3, feat_dim=8, seed=1)


def test_stage_names_are_the_same_everywhere():
    assert STAGES is EXPERIMENT_STAGES
    assert STAGES == ("sample", "compact", "gather", "forward", "loss", "backward", "step")


def test_every_stage_has_its_figure_colour(require):
    require("plotly")
    from zg import viz

    assert tuple(viz.STAGE_COLORS) == STAGES


@pytest.mark.parametrize(
    "mode, zero_syncs", [("static", True), ("eager", True), ("dynamic", False)]
)
def test_profile_engine(graph, mode, zero_syncs):
    eng = Engine(graph, models.SAGE(8, 16, 3, 2), [4, 4], 64, mode=mode)
    prof = profile_engine(eng, iterations=2, warmup=1)
    assert set(prof.stage_seconds) == set(STAGES)
    assert all(v >= 0 for v in prof.stage_seconds.values())
    assert prof.stage_seconds["sample"] > 0 and prof.stage_seconds["compact"] > 0
    assert prof.stage_seconds["loss"] > 0, "loss is timed on its own"
    assert (prof.host_syncs_per_iteration == 0) == zero_syncs
    assert prof.gpu_execution_fraction is None  # no GPU here: not measured, not invented
    assert prof.peak_bytes > 0
    if eng.envelope is not None:
        assert prof.memory_model_bytes["envelope"] <= prof.memory_model_bytes["worst_case"]


def test_stage_clock_accumulates_on_cpu():
    clock = StageClock(torch.device("cpu"))
    clock("sample")
    clock("sample")
    seconds = clock.finish()
    assert seconds["sample"] >= 0 and seconds["step"] == 0
    clock.laps([("compact", 0.25), ("compact", 0.5)])  # stages a compiled kernel timed
    assert clock.finish()["compact"] == 0.75 and clock.finish()["sample"] == seconds["sample"]


def test_profile_rejects_zero_iterations(graph):
    eng = Engine(graph, models.SAGE(8, 16, 3, 2), [4, 4], 64)
    with pytest.raises(ValueError, match="iterations"):
        profile_engine(eng, iterations=0)
