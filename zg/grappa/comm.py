"""Communication accounting: what each worker sends, and what it would cost on a given link.

Where it sits: every trainer (Grappa, its baselines) records each collective it calls in a
:class:`CommLedger`; the history reports bytes per epoch per worker by kind, and
:func:`project_seconds` turns them into a *projected* epoch time on a network link. The
projection is a model, never a measurement: reports show it beside the measured time and say so.

What "bytes sent" means, per call, for a worker of a group of P (``S`` = payload bytes that
worker hands to the collective):

    all_reduce          2 (P - 1) / P * S     ring all-reduce (reduce-scatter + all-gather):
                                              every worker sends that much, whatever P
    all_gather          (P - 1) * S           its S bytes must reach P - 1 others
    all_to_all          exact: the bytes of the rows addressed to other workers
    p2p (send)          S

These are the bytes a bandwidth-optimal algorithm moves; a library can move more, never less.
Rounds (sequential message latencies per call): all_reduce 2 (P - 1), all_gather P - 1,
all_to_all P - 1 (pairwise exchange), send 1. With P = 1 nothing is sent.

The link model (Hockney): a call costs ``rounds * latency + bytes_sent / bandwidth`` on each
worker (links full duplex, workers in parallel). A projected epoch is the measured epoch on this
machine (loopback transfers included) *plus* the link time of the bytes the epoch sent, so it
errs on the slow side.

Kinds: ``gradients`` (the exchange's all-reduce, :mod:`zg.grappa.exchange`), ``scalars`` (the estimators' per-iteration
stats), ``features`` (feature fetching: requests and responses), ``parameters`` (model
averaging). Bookkeeping collectives that only gather these numbers for the history are not
training traffic and are not recorded.

A captured step (``capture=True`` on CUDA) runs its Python once, while it is captured; its
replays send the same collectives without running :meth:`CommLedger.record`. So a record made
while a CUDA Graph is being captured goes on the ledger's *tape* (the captured step's
collectives), nothing is counted for it (capturing sends nothing), and :meth:`CommLedger.replayed`
counts the tape once per replay. A capture's warm-up steps run for real and are counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch

from ._checks import real_arg

__all__ = [
    "CommLedger",
    "Link",
    "LINKS",
    "KINDS",
    "wire_bytes",
    "rounds",
    "project_seconds",
    "link_seconds",
]

KINDS = ("gradients", "scalars", "features", "parameters")
COLLECTIVES = ("all_reduce", "all_gather", "all_to_all", "send")


def wire_bytes(collective: str, payload_bytes: int, world_size: int) -> int:
    """Bytes one worker sends for one call (see the module docstring)."""
    P, S = world_size, int(payload_bytes)
    if P <= 1:
        return 0
    if collective == "all_reduce":
        return (2 * (P - 1) * S) // P
    if collective == "all_gather":
        return (P - 1) * S
    if collective in ("all_to_all", "send"):
        return S
    raise ValueError(f"unknown collective {collective!r}; choose one of {list(COLLECTIVES)}")


def rounds(collective: str, world_size: int) -> int:
    """Sequential message latencies of one call."""
    P = world_size
    if P <= 1:
        return 0
    return {"all_reduce": 2 * (P - 1), "all_gather": P - 1, "all_to_all": P - 1, "send": 1}[
        collective
    ]


class CommLedger:
    """Per-worker running totals of bytes sent and rounds, by kind, since the last :meth:`take`.

    ``record(kind, collective, payload_bytes)`` for every training collective; for
    all_to_all pass the bytes addressed to *other* workers as the payload.
    """

    def __init__(self, world_size: int):
        self.world_size = int(world_size)
        self.tape: list[tuple[str, str, int]] = []  # the captured step's collectives
        self._taping = False
        self.reset()

    def reset(self) -> None:
        self.bytes: dict[str, int] = {k: 0 for k in KINDS}
        self.payload: dict[str, int] = {k: 0 for k in KINDS}
        self.rounds: dict[str, int] = {k: 0 for k in KINDS}
        self.calls: dict[str, int] = {k: 0 for k in KINDS}

    def record(self, kind: str, collective: str, payload_bytes: int) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; choose one of {list(KINDS)}")
        if collective not in COLLECTIVES:
            raise ValueError(
                f"unknown collective {collective!r}; choose one of {list(COLLECTIVES)}"
            )
        if _capturing():  # counted by replayed(), once per replay
            if not self._taping:  # the first record of a new capture: a new tape
                self.tape, self._taping = [], True
            self.tape.append((kind, collective, int(payload_bytes)))
            return
        self._taping = False
        self._count(kind, collective, payload_bytes)

    def replayed(self) -> None:
        """One replay of the captured step: count the collectives it recorded while captured."""
        for kind, collective, payload_bytes in self.tape:
            self._count(kind, collective, payload_bytes)

    def _count(self, kind: str, collective: str, payload_bytes: int) -> None:
        self.bytes[kind] += wire_bytes(collective, payload_bytes, self.world_size)
        self.payload[kind] += int(payload_bytes)
        self.rounds[kind] += rounds(collective, self.world_size)
        self.calls[kind] += 1

    def take(self) -> dict[str, dict[str, int]]:
        """The totals since the last take (then zeroed)."""
        out = {
            "bytes": dict(self.bytes),
            "payload": dict(self.payload),
            "rounds": dict(self.rounds),
            "calls": dict(self.calls),
        }
        self.reset()
        return out

    @property
    def total_bytes(self) -> int:
        return sum(self.bytes.values())


def _capturing() -> bool:
    """Whether this thread's current CUDA stream is capturing a CUDA Graph (no CUDA call in a
    process that never initialised CUDA)."""
    return torch.cuda.is_initialized() and torch.cuda.is_current_stream_capturing()


@dataclass(frozen=True)
class Link:
    """A network link: ``bandwidth`` in bytes per second, one-way ``latency`` in seconds."""

    name: str
    bandwidth: float
    latency: float

    def __post_init__(self):
        real_arg(self.bandwidth, "bandwidth", low=0.0, low_open=True)
        real_arg(self.latency, "latency", low=0.0)

    def seconds(self, bytes_sent: float, num_rounds: float) -> float:
        """Link time of a worker that sends ``bytes_sent`` bytes in ``num_rounds`` rounds."""
        return num_rounds * self.latency + bytes_sent / self.bandwidth


# Nominal figures (bytes/s, seconds); real links deliver less bandwidth than their label.
LINKS: Mapping[str, Link] = {
    "1GbE": Link("1GbE", 125e6, 50e-6),
    "10GbE": Link("10GbE", 1.25e9, 20e-6),
    "100GbE": Link("100GbE", 12.5e9, 5e-6),
}


def link_seconds(bytes_sent: float, num_rounds: float, link: Link) -> float:
    """See :meth:`Link.seconds`."""
    if not isinstance(link, Link):
        raise TypeError(f"link must be a zg.grappa.comm.Link, got {type(link).__name__}")
    return link.seconds(bytes_sent, num_rounds)


def project_seconds(
    measured_seconds: float,
    bytes_per_worker: list[float],
    rounds_per_worker: list[float],
    link: Link,
) -> dict[str, float]:
    """A *projection* of an epoch's time on ``link`` (see the module docstring).

    Args:
        measured_seconds: the epoch's measured wall time on this machine.
        bytes_per_worker, rounds_per_worker: what each worker sent in the epoch.
    Returns:
        {"measured_seconds", "link_seconds" (slowest worker), "projected_seconds", "link"}.
    """
    measured_seconds = real_arg(measured_seconds, "measured_seconds", low=0.0)
    if len(bytes_per_worker) != len(rounds_per_worker) or not bytes_per_worker:
        raise ValueError(
            "bytes_per_worker and rounds_per_worker must be non-empty and of equal length"
        )
    worst = max(link_seconds(b, r, link) for b, r in zip(bytes_per_worker, rounds_per_worker))
    return {
        "measured_seconds": measured_seconds,
        "link_seconds": worst,
        "projected_seconds": measured_seconds + worst,
        "link": link.name,
    }
