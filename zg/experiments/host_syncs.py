"""zg.experiments.host_syncs: where the host waits in one sampling iteration (notebooks 00, 01).

Where it sits: on the sampling step, seeds -> sample hop by hop -> compact. The host-mediated
:class:`~zg.sampling.DynamicSampler` reads each hop's metadata (how many distinct nodes it
found) on the host before it can allocate the next hop; :func:`measure_hop_metadata` returns
that metadata and :func:`audit_samplers` counts the host syncs it costs, against the
:class:`~zg.sampling.EnvelopeSampler` that draws the same sample with none. Figures:
:func:`zg.viz.hop_metadata`, :func:`zg.viz.sync_ops`, :func:`zg.viz.host_syncs`.

    rows = ex.measure_hop_metadata(g, [15, 10, 5], seeds)     # what one iteration produces
    audits = ex.audit_samplers(g, [15, 10, 5], seeds)         # where the host waits
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .._checks import seed_arg
from ..audit import SyncAudit
from ..envelope import Envelope
from ..graph import Graph
from ..sampling import DynamicSampler, EnvelopeSampler, check_fanouts

__all__ = ["measure_hop_metadata", "audit_samplers"]


def measure_hop_metadata(
    g: Graph,
    fanouts: Sequence[int],
    seeds: Any,
    *,
    seed: int = 0,
    epoch: int = 0,
    batch: int = 0,
    replace: bool = False,
) -> list[dict]:
    """The metadata one sampling iteration produces, hop by hop from the seeds outward.

    Runs the host-mediated :class:`~zg.sampling.DynamicSampler` (the sample every zg sampler
    draws for this ``(seed, epoch, batch)``) and reads its sizes on the host, as a framework
    does. One dict per hop: ``hop`` (1 = the seeds' neighbours), ``fanout``, ``frontier``
    (destination nodes this hop expands), ``slots`` (frontier x fanout), ``sampled_edges``
    (slots that hold a real edge: fewer when a node has fewer neighbours than the fanout),
    ``distinct_nodes`` (source nodes after deduplication: the number the next hop must
    allocate for), ``new_nodes`` (distinct nodes not already in the frontier).
    """
    fanouts, seed = check_fanouts(fanouts), seed_arg(seed)
    mb = DynamicSampler(g, fanouts, replace=replace, seed=seed).sample(seeds, epoch, batch)
    rows = []
    for hop, block in enumerate(reversed(mb.blocks), start=1):  # seeds outward
        frontier, distinct = int(block.num_dst), int(block.num_src)
        rows.append(
            {
                "hop": hop,
                "fanout": block.fanout,
                "frontier": frontier,
                "slots": frontier * block.fanout,
                "sampled_edges": int(block.mask.sum()),
                "distinct_nodes": distinct,
                "new_nodes": distinct - frontier,
            }
        )
    return rows


def _audit_summary(audit: SyncAudit) -> dict:
    return {
        "host_syncs": audit.host_syncs,
        "dynamic_shape_ops": audit.dynamic_shape_ops,
        "allocations": audit.allocations,
        "allocated_bytes": audit.allocated_bytes,
        "per_op": dict(audit.per_op),
        "report": audit.report(),
    }


def audit_samplers(
    g: Graph,
    fanouts: Sequence[int],
    seeds: Any,
    *,
    envelope: Envelope | None = None,
    seed: int = 0,
    epoch: int = 0,
    batch: int = 0,
) -> dict:
    """Sample the same batch with both samplers under a :class:`~zg.audit.SyncAudit` each.

    Returns ``{"dynamic": summary, "envelope": summary, "same_sample": bool}``: each summary
    holds ``host_syncs``, ``dynamic_shape_ops``, ``allocations``, ``allocated_bytes``,
    ``per_op`` (op name -> count) and the audit's readable ``report``. ``same_sample`` says
    whether both drew exactly the same node set at every hop (they share one sampling kernel
    and key, so they must; only what happens to the metadata differs). ``envelope`` defaults
    to the worst case for ``len(seeds)`` seeds, which can never overflow.
    """
    fanouts, seed = check_fanouts(fanouts), seed_arg(seed)
    seeds = torch.as_tensor(seeds, dtype=torch.int64)
    dynamic = DynamicSampler(g, fanouts, seed=seed)
    # The torch path: the fixed-shape ops a CUDA Graph captures (the fused CPU kernel runs
    # outside the dispatcher, where an audit sees nothing).
    enveloped = EnvelopeSampler(
        g, fanouts, seeds.numel(), envelope=envelope, seed=seed, kernel="torch"
    )
    dynamic.sample(seeds, epoch, batch)  # warm-up: first calls allocate lazily
    enveloped.sample(seeds, epoch, batch)
    with SyncAudit(where=True) as audit_dynamic:
        mb_dynamic = dynamic.sample(seeds, epoch, batch)
    with SyncAudit(where=True) as audit_envelope:
        mb_envelope = enveloped.sample(seeds, epoch, batch)
    same = (not bool(mb_envelope.overflowed)) and all(
        torch.equal(a, b) for a, b in zip(mb_dynamic.node_sets(), mb_envelope.node_sets())
    )
    return {
        "dynamic": _audit_summary(audit_dynamic),
        "envelope": _audit_summary(audit_envelope),
        "same_sample": same,
    }
