"""zg.grappa.comm: the byte and round model, the ledger, the link projection."""

import pytest
import torch

from zg.grappa.comm import LINKS, CommLedger, Link, project_seconds, rounds, wire_bytes


def test_wire_bytes_and_rounds_per_collective():
    assert wire_bytes("all_reduce", 1000, 4) == 1500  # 2 (P-1) / P * S
    assert wire_bytes("all_reduce", 1000, 2) == 1000
    assert wire_bytes("all_gather", 24, 4) == 72  # (P-1) * S
    assert wire_bytes("all_to_all", 123, 4) == 123  # exact, given
    assert all(
        wire_bytes(c, 1000, 1) == 0 for c in ("all_reduce", "all_gather", "all_to_all", "send")
    )
    assert (
        rounds("all_reduce", 4) == 6
        and rounds("all_gather", 4) == 3
        and rounds("all_to_all", 4) == 3
    )
    assert rounds("all_reduce", 1) == 0
    with pytest.raises(ValueError, match="collective"):
        wire_bytes("broadcast_everything", 1, 2)


def test_ledger_totals_and_take():
    ledger = CommLedger(4)
    ledger.record("gradients", "all_reduce", 1000)
    ledger.record("gradients", "all_reduce", 1000)
    ledger.record("scalars", "all_gather", 24)
    assert ledger.total_bytes == 3000 + 72
    taken = ledger.take()
    assert taken["bytes"]["gradients"] == 3000 and taken["payload"]["gradients"] == 2000
    assert taken["rounds"]["gradients"] == 12 and taken["calls"]["scalars"] == 1
    assert ledger.total_bytes == 0  # reset by take
    with pytest.raises(ValueError, match="kind"):
        ledger.record("activations", "all_reduce", 1)


def test_a_captured_steps_collectives_are_counted_once_per_replay(monkeypatch):
    """While a CUDA Graph is captured, record() puts the step's collectives on the tape and
    counts nothing (capturing sends nothing); replayed() counts the tape once per replay; a
    capture's warm-up steps run for real and count; a new capture starts a new tape. The same
    steps run without capture give the same totals, warm-up aside."""
    import zg.grappa.comm as comm

    assert not comm._capturing()  # a CPU process: False, without initialising CUDA
    assert not torch.cuda.is_initialized()
    capturing = [False]
    monkeypatch.setattr(comm, "_capturing", lambda: capturing[0])

    def step(ledger, payload=1000):
        ledger.record("scalars", "all_gather", 24)
        ledger.record("gradients", "all_reduce", payload)

    def captured(ledger, payload=1000):
        for _ in range(3):  # the warm-up
            step(ledger, payload)
        capturing[0] = True
        step(ledger, payload)
        capturing[0] = False

    ledger, plain = CommLedger(4), CommLedger(4)
    captured(ledger)
    assert ledger.total_bytes == 3 * (72 + 1500)  # the warm-up only
    warm = ledger.take()
    for _ in range(5):
        ledger.replayed()
        step(plain)
    assert ledger.take() == plain.take()
    captured(ledger, payload=2000)  # captured again (a grown envelope): a new tape
    ledger.take()
    ledger.replayed()
    assert ledger.bytes == {"gradients": 3000, "scalars": 72, "features": 0, "parameters": 0}
    assert ledger.calls["gradients"] == 1 and warm["calls"]["gradients"] == 3
    with pytest.raises(ValueError, match="collective"):
        ledger.record("gradients", "broadcast_everything", 1)


def test_link_projection_is_measured_plus_link_time():
    link = Link("test", bandwidth=1e6, latency=1e-3)
    out = project_seconds(2.0, [5e5, 1e6], [10, 4], link)
    assert out["link_seconds"] == pytest.approx(max(10e-3 + 0.5, 4e-3 + 1.0))
    assert out["projected_seconds"] == pytest.approx(2.0 + out["link_seconds"])
    assert out["measured_seconds"] == 2.0 and out["link"] == "test"
    assert LINKS["1GbE"].bandwidth < LINKS["10GbE"].bandwidth < LINKS["100GbE"].bandwidth
    with pytest.raises(ValueError, match="bandwidth"):
        Link("bad", bandwidth=0, latency=0)
    with pytest.raises(ValueError, match="latency"):
        Link("bad", bandwidth=1, latency=-1)
    with pytest.raises(ValueError, match="measured_seconds"):
        project_seconds(-1.0, [1], [1], link)
    with pytest.raises(ValueError, match="bytes_per_worker"):
        project_seconds(1.0, [1, 2], [1], link)
