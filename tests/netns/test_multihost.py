"""Real torchrun across hosts: one agent per NetLab host, c10d rendezvous, Grappa training and the
feature-fetching baseline over the lab's links."""

import json
from pathlib import Path

import pytest
from netlab import NetLab, unavailable_reason

REASON = unavailable_reason()
pytestmark = [
    pytest.mark.skipif(REASON is not None, reason=f"NetLab unavailable: {REASON}"),
    pytest.mark.slow,
]


def train_across(lab: NetLab, config: dict, workdir: Path, port: int, timeout: float = 240):
    """``python -m zg.grappa`` under torchrun, one agent per host -> (exit codes, history path, logs)."""
    workdir.mkdir(exist_ok=True)
    cfg = workdir / "config.json"
    cfg.write_text(json.dumps(config))
    out = workdir / "history.json"
    codes, logs = lab.torchrun(
        ["-m", "zg.grappa", "--config", str(cfg), "--out", str(out)],
        workdir,
        port=port,
        timeout=timeout,
        rdzv_id=f"zg-netns-{port}",
        extra_env={"DGLBACKEND": "pytorch"},
    )
    return codes, out, logs


@pytest.mark.timeout(500)
def test_grappa_and_feature_fetch_train_across_two_hosts(tmp_path):
    base = {
        "dataset": "cora",
        "epochs": 2,
        "batch_size": 70,
        "hidden_dim": 16,
        "timeout": 60.0,
        "seed": 0,
    }
    runs = {
        "grappa": {"trainer": "grappa", "estimator": "batch", "repartition_every": 1},
        "feature_fetch": {"trainer": "feature_fetch"},
    }
    histories = {}
    with NetLab(hosts=2, bandwidth="1gbit", prefix="zgm") as lab:
        for port, (name, extra) in enumerate(runs.items(), start=29517):
            codes, out, logs = train_across(lab, {**base, **extra}, tmp_path / name, port)
            assert codes == [0, 0], logs
            histories[name] = json.loads(out.read_text())
    for name, history in histories.items():
        assert history["workers"] == 2 and history["format"] == "zg.grappa.history"
        assert history["config"]["trainer"] == name
        assert len(history["epochs"]) == 2
        sent = history["bytes_sent_per_worker"]
        assert len(sent) == 2 and all(b > 0 for b in sent)
    # Feature fetching moves feature rows over the link; Grappa moves none.
    fetched = [
        sum(e["bytes_by_kind"]["features"][p] for e in histories["feature_fetch"]["epochs"])
        for p in range(2)
    ]
    assert all(b > 0 for b in fetched)
    assert all(e["bytes_by_kind"]["features"] == [0, 0] for e in histories["grappa"]["epochs"])
