"""No trainer reports a non-finite result as valid: a run whose loss turns inf or NaN stops with
the Engine's FloatingPointError on every trainer, estimator and batching, and no history file
holds ``Infinity`` or ``NaN`` (strict JSON)."""

import json

import pytest
from graphs import tiny

from zg import grappa
from zg.grappa.history import write_json

SMALL = dict(batch_size=64, hidden_dim=16, num_layers=2, fanouts=[5, 5], timeout=60, lr=0.02)


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "options",
    [
        dict(estimator="batch"),
        dict(estimator="mean"),
        dict(trainer="single"),
        dict(batching="full"),
        dict(trainer="psgd_pa"),
    ],
)
def test_an_infinite_loss_stops_the_run_with_a_floating_point_error(tmp_path, options):
    """Features times 3e37 overflow float32 in the first layer: the loss is inf. The run used to
    finish with exit 0 and write "loss": Infinity into the history."""
    g = tiny()
    g.x.mul_(3e37)
    history = tmp_path / "history.json"
    with pytest.raises(FloatingPointError, match="loss"):
        grappa.train(
            g,
            workers=1 if options.get("trainer") == "single" else 2,
            epochs=2,
            seed=0,
            history_path=str(history),
            **{**SMALL, **options},
        )
    assert not history.exists(), "no history of a run that trained on garbage"


def test_a_history_file_is_strict_json(tmp_path):
    """A non-finite float (an accuracy of a split the graph lacks) is written as null."""
    path = tmp_path / "h.json"
    write_json(
        {"epochs": [{"loss": 0.5, "test_acc": float("nan"), "x": [float("inf"), 1.0]}]}, str(path)
    )
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    assert loaded == {"epochs": [{"loss": 0.5, "test_acc": None, "x": [None, 1.0]}]}


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "bad, says", [(-5, "y holds label -5"), (7, "y holds label 7, out of range for num_classes=3")]
)
def test_labels_out_of_range_stop_a_full_batch_run_before_it_trains(tmp_path, bad, says):
    """batching="full" builds no Engine. The run's graph is checked once before any worker
    starts (zg.graph.graph_arg, train=True: labels changed in place since it was built):
    labels outside [-1, num_classes) are refused before any step, never trained on (the
    Engine's per-epoch device check covers labels changed in place during a run, which cannot
    reach a worker's copy)."""
    g = tiny()
    g.y[g.train_idx[:5]] = bad
    history = tmp_path / "history.json"
    with pytest.raises(ValueError, match=says):
        grappa.train(
            g, workers=2, epochs=2, seed=0, batching="full", history_path=str(history), **SMALL
        )
    assert not history.exists()
