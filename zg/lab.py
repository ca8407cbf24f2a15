"""zg.lab: the experiments the notebooks run, as functions that return plain measurements.

Where it sits: between the package and the notebooks. A notebook cell that would be longer
than a screen is a function here; the notebook calls it, hands the result to a figure builder
in :mod:`zg.viz` and asserts its claim. Nothing here plots and nothing here needs plotly or
ipywidgets, so every function is tested in ``tests/test_lab.py`` with the core alone.

    SCALE = zg.lab.scale()                  # "small" (default) or "full" (ZG_SCALE=full)
    rows = zg.lab.hop_metadata(g, [15, 10, 5], seeds)            # what one iteration produces
    audits = zg.lab.audit_samplers(g, [15, 10, 5], seeds)        # where the host waits
    events = zg.lab.stage_timeline(pipeline, seeds)              # one iteration, stage by stage
    curve = zg.lab.overflow_curve(g, [10, 5], 256, margins=[0, 0.05, 0.1])
    rows = zg.lab.profile_pipelines(g, [10, 5], 256)             # DGL / zg dynamic / zg envelope

Every number these functions return was measured on this machine when they ran (seconds
with ``time.perf_counter``, host syncs with :class:`zg.audit.SyncAudit`); :func:`machine`
says which machine that was. :func:`gpu_results` reads measurements committed by
``bench/gpu_check.py`` on a GPU machine, and says so.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

import torch

from .audit import SyncAudit
from .envelope import Envelope
from .graph import Graph
from .pipeline import STAGES, Pipeline
from .sampling import DynamicSampler, EnvelopeSampler, check_fanouts

__all__ = ["SCALES", "scale", "by_scale", "machine", "machine_label", "markdown_table",
           "hop_metadata", "audit_samplers", "stage_timeline", "sample_counts", "overflow_curve",
           "static_addresses", "parameters", "max_abs_difference", "bitwise_equal",
           "execution_trace", "profile_pipelines", "gpu_results", "gpu_result_rows",
           "GPU_RESULTS"]

SCALES = ("small", "full")
# Where bench/gpu_check.py commits its GPU measurements (a checkout of the repository).
GPU_RESULTS = Path(__file__).resolve().parent.parent / "bench" / "results" / "gpu_check_cuda.json"


# ----------------------------------------------------------------------------- scale, machine


def scale(value: Optional[str] = None) -> str:
    """The notebooks' size: ``"small"`` (default; CI and ``make test``) or ``"full"``.

    Read from the environment variable ``ZG_SCALE`` unless ``value`` is given. ``make report``
    sets ``ZG_SCALE=full``; anything other than "small", "full" or unset is an error, so a
    typo never silently runs the wrong size.
    """
    if value is None:
        value = os.environ.get("ZG_SCALE", "") or "small"
    if not isinstance(value, str):
        raise TypeError(f"scale must be a str, got {type(value).__name__}")
    value = value.strip().lower()
    if value not in SCALES:
        raise ValueError(f"ZG_SCALE must be one of {SCALES} (or unset for 'small'), got {value!r}")
    return value


def by_scale(small: Any, full: Any, scale_name: Optional[str] = None) -> Any:
    """``small`` or ``full``, whichever the current :func:`scale` asks for."""
    return full if scale(scale_name) == "full" else small


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return float("nan")


def machine() -> dict:
    """Platform, CPU, cores, memory, GPU (if any), library versions and the date (UTC).

    The same note ``bench/_machine.py`` writes beside every committed result, so a number in a
    notebook and a number in ``bench/results/`` are labelled the same way.
    """
    note = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "memory_gib": _memory_gib(),
        "torch": torch.__version__,
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        # Other processes compete for the cores; the 1/5/15-minute load average says how much.
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        # Settings that change CPU timings: OpenMP's wait policy, thread counts, and glibc
        # malloc tuning (which decides whether large tensors are page-faulted in every step).
        "environment": {k: v for k, v in sorted(os.environ.items())
                        if k.startswith(("MALLOC_", "OMP_", "MKL_", "LD_PRELOAD"))},
    }
    try:
        import importlib.metadata as md
        note["dgl"] = md.version("dgl")
    except Exception:
        note["dgl"] = None
    return note


def machine_label(info: Optional[dict] = None) -> str:
    """One line naming the machine of ``info`` (default: this one), for figure captions."""
    info = machine() if info is None else info
    if not isinstance(info, dict):
        raise TypeError(f"info must be a dict from zg.lab.machine(), got {type(info).__name__}")
    device = f"GPU {info['cuda']}" if info.get("cuda") else "no GPU"
    return (f"{info.get('cpu', '?')}, {info.get('cores', '?')} cores "
            f"({info.get('torch_threads', '?')} torch threads), {info.get('memory_gib', '?')} GiB, "
            f"{device}; torch {info.get('torch', '?')}; measured {info.get('date', '?')}")


def markdown_table(rows: Sequence[dict], columns: Optional[Sequence[str]] = None,
                   digits: int = 3) -> str:
    """A Markdown table of ``rows`` (dicts); floats get ``digits`` significant digits."""
    rows = list(rows)
    if not rows:
        raise ValueError("rows is empty: nothing to tabulate")
    if columns is None:
        columns = list(rows[0])

    def cell(v: Any) -> str:
        if isinstance(v, bool) or v is None:
            return str(v)
        if isinstance(v, float):
            if math.isnan(v) or math.isinf(v):
                return str(v)
            return f"{v:,.0f}" if abs(v) >= 10 ** digits else f"{v:.{digits}g}"
        if isinstance(v, int):
            return f"{v:,}"
        return str(v)

    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(r.get(c, "")) for c in columns) + " |" for r in rows]
    return "\n".join(lines)


# ----------------------------------------------------------------------------- notebook 01


def hop_metadata(g: Graph, fanouts: Sequence[int], seeds: Any, *, seed: int = 0, epoch: int = 0,
                 batch: int = 0, replace: bool = False) -> List[dict]:
    """The metadata one sampling iteration produces, hop by hop from the seeds outward.

    Runs the host-mediated :class:`~zg.sampling.DynamicSampler` (the sample every zg sampler
    draws for this ``(seed, epoch, batch)``) and reads its sizes on the host, as a framework
    does. One dict per hop: ``hop`` (1 = the seeds' neighbours), ``fanout``, ``frontier``
    (destination nodes this hop expands), ``slots`` (frontier x fanout), ``sampled_edges``
    (slots that hold a real edge: fewer when a node has fewer neighbours than the fanout),
    ``distinct_nodes`` (source nodes after deduplication: the number the next hop must
    allocate for), ``new_nodes`` (distinct nodes not already in the frontier).
    """
    fanouts = check_fanouts(fanouts)
    mb = DynamicSampler(g, fanouts, replace=replace, seed=seed).sample(seeds, epoch, batch)
    rows = []
    for hop, block in enumerate(reversed(mb.blocks), start=1):     # seeds outward
        frontier, distinct = int(block.num_dst), int(block.num_src)
        rows.append({"hop": hop, "fanout": block.fanout, "frontier": frontier,
                     "slots": frontier * block.fanout, "sampled_edges": int(block.mask.sum()),
                     "distinct_nodes": distinct, "new_nodes": distinct - frontier})
    return rows


def _audit_summary(audit: SyncAudit) -> dict:
    return {"host_syncs": audit.host_syncs, "dynamic_shape_ops": audit.dynamic_shape_ops,
            "allocations": audit.allocations, "allocated_bytes": audit.allocated_bytes,
            "per_op": dict(audit.per_op), "report": audit.report()}


def audit_samplers(g: Graph, fanouts: Sequence[int], seeds: Any, *,
                   envelope: Optional[Envelope] = None, seed: int = 0, epoch: int = 0,
                   batch: int = 0) -> dict:
    """Sample the same batch with both samplers under a :class:`~zg.audit.SyncAudit` each.

    Returns ``{"dynamic": summary, "envelope": summary, "same_sample": bool}``: each summary
    holds ``host_syncs``, ``dynamic_shape_ops``, ``allocations``, ``allocated_bytes``,
    ``per_op`` (op name -> count) and the audit's readable ``report``. ``same_sample`` says
    whether both drew exactly the same node set at every hop (they share one sampling kernel
    and key, so they must; only what happens to the metadata differs). ``envelope`` defaults
    to the worst case for ``len(seeds)`` seeds, which can never overflow.
    """
    fanouts = check_fanouts(fanouts)
    seeds = torch.as_tensor(seeds, dtype=torch.int64)
    dynamic = DynamicSampler(g, fanouts, seed=seed)
    enveloped = EnvelopeSampler(g, fanouts, seeds.numel(), envelope=envelope, seed=seed)
    dynamic.sample(seeds, epoch, batch)            # warm-up: first calls allocate lazily
    enveloped.sample(seeds, epoch, batch)
    with SyncAudit(where=True) as audit_dynamic:
        mb_dynamic = dynamic.sample(seeds, epoch, batch)
    with SyncAudit(where=True) as audit_envelope:
        mb_envelope = enveloped.sample(seeds, epoch, batch)
    same = (not bool(mb_envelope.overflowed)) and all(
        torch.equal(a, b) for a, b in zip(mb_dynamic.node_sets(), mb_envelope.node_sets()))
    return {"dynamic": _audit_summary(audit_dynamic), "envelope": _audit_summary(audit_envelope),
            "same_sample": same}


class _StageRecorder(dict):
    """A ``stage_seconds`` mapping that also remembers each lap as an event.

    :meth:`zg.pipeline.Pipeline.train_step` adds each stage's seconds into the mapping it is
    given (``stage_seconds[stage] += seconds``) the moment the stage ends; recording every
    such addition with its end time turns the totals into a timeline. With an ``audit``, each
    event also carries the host syncs counted since the previous one.
    """

    def __init__(self, audit: Optional[SyncAudit] = None):
        super().__init__({s: 0.0 for s in STAGES})
        self.audit = audit
        self.events: List[dict] = []
        self._syncs = 0

    def __setitem__(self, stage: str, total: float) -> None:
        now = time.perf_counter()
        seconds = total - self.get(stage, 0.0)
        syncs = None
        if self.audit is not None:
            syncs = self.audit.host_syncs - self._syncs
            self._syncs = self.audit.host_syncs
        self.events.append({"stage": stage, "start": now - seconds, "end": now, "host_syncs": syncs})
        super().__setitem__(stage, total)


def stage_timeline(pipeline: Pipeline, seeds: Any, *, epoch: int = 0, batch: int = 0,
                   count_syncs: bool = True, repeats: int = 3) -> List[dict]:
    """One training iteration of ``pipeline``, stage by stage, on a time axis.

    Runs ``pipeline.train_step(seeds, epoch, batch)`` (it trains: use a pipeline whose state
    you no longer need) and returns its events in order: ``stage`` (one of
    :data:`zg.pipeline.STAGES`; "sample" and "compact" repeat once per hop where the sampler
    reports them), ``start`` and ``end`` in seconds from the start of the iteration, and
    ``host_syncs`` in that stretch. Times come from runs without the audit (an audit slows
    every op down): the same batch ``repeats`` times, keeping the run of median length, so one
    stall of a busy machine does not become the picture. The sync counts come from one more
    run under :class:`~zg.audit.SyncAudit`, matched event by event.

    Works with every :class:`~zg.pipeline.Pipeline`: zg's dynamic and envelope pipelines and
    ``zg.baselines.dgl.DGLPipeline`` (whose sampling happens inside DGL's DataLoader, so it
    shows one "sample" stretch; its C++ sampler's syncs are invisible to SyncAudit and are
    reported as None).
    """
    if not isinstance(pipeline, Pipeline):
        raise TypeError(f"pipeline must be a zg.pipeline.Pipeline, got {type(pipeline).__name__}")
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be a positive int, got {repeats!r}")
    seeds = torch.as_tensor(seeds, dtype=torch.int64)
    in_loader = _samples_in_loader(pipeline)

    def one_step(recorder: _StageRecorder) -> List[dict]:
        if in_loader:
            # DGL samples inside its DataLoader, which batches() sets up for the epoch: advance
            # the loader to the batch asked for, then time that batch's whole step.
            for b, batch_seeds in pipeline.batches(epoch):
                if b == batch:
                    start = time.perf_counter()
                    pipeline.train_step(batch_seeds, epoch, b, recorder)
                    break
                pipeline.sample(batch_seeds, epoch, b)
            else:
                raise ValueError(f"batch {batch} is past the end of epoch {epoch}")
        else:
            start = time.perf_counter()
            pipeline.train_step(seeds, epoch, batch, recorder)
        return [dict(e, start=e["start"] - start, end=e["end"] - start) for e in recorder.events]

    one_step(_StageRecorder())                                   # warm-up (lazy allocations)
    runs = sorted((one_step(_StageRecorder()) for _ in range(repeats)),
                  key=lambda run: run[-1]["end"] if run else 0.0)
    events = runs[len(runs) // 2]
    if count_syncs:
        with SyncAudit() as audit:
            audited = one_step(_StageRecorder(audit))
        for event, counted in zip(events, audited):
            if event["stage"] == counted["stage"]:
                event["host_syncs"] = None if in_loader and event["stage"] == "sample" else counted["host_syncs"]
    return events


def _samples_in_loader(pipeline: Pipeline) -> bool:
    """True for DGL's pipeline, whose sample() reads the DataLoader that batches() prepares."""
    from .baselines.dgl import DGLPipeline      # imports no DGL until a DGLPipeline is built

    return isinstance(pipeline, DGLPipeline)


# ----------------------------------------------------------------------------- notebook 02


def sample_counts(g: Graph, fanouts: Sequence[int], batch_size: int, *, num_batches: int = 64,
                  seed: int = 1, epoch: int = 0, replace: bool = False,
                  nodes: Any = None) -> torch.Tensor:
    """int64 [K, L]: the true source-node count of every block (input layer first) for
    ``K = num_batches`` full batches, drawn as an epoch draws them.

    The batches are sampled with the worst-case envelope, which never overflows, so every
    count is exact: these are the sizes an *oracle* would allocate. Use a different ``seed``
    from the one an envelope was profiled with to get held-out batches.
    """
    fanouts = check_fanouts(fanouts)
    if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 1:
        raise ValueError(f"num_batches must be a positive int, got {num_batches!r}")
    if nodes is None:
        nodes = g.train_idx if g.train_idx is not None and g.train_idx.numel() else torch.arange(g.num_nodes)
    nodes = torch.as_tensor(nodes, dtype=torch.int64).cpu()
    if nodes.numel() < batch_size:
        raise ValueError(f"only {nodes.numel()} nodes to draw seeds from, fewer than batch_size={batch_size}")
    sampler = EnvelopeSampler(g, fanouts, batch_size, envelope=None, replace=replace, seed=seed)
    gen = torch.Generator().manual_seed(seed)
    counts: List[torch.Tensor] = []
    while len(counts) < num_batches:
        order = torch.randperm(nodes.numel(), generator=gen)
        for start in range(0, nodes.numel() - batch_size + 1, batch_size):
            counts.append(sampler.sample(nodes[order[start: start + batch_size]], epoch=epoch,
                                         batch=len(counts)).counts)
            if len(counts) == num_batches:
                break
    return torch.stack(counts).cpu()


def overflow_curve(g: Graph, fanouts: Sequence[int], batch_size: int, *,
                   margins: Iterable[float] = (0.0, 0.02, 0.05, 0.1, 0.2),
                   quantile: float = 0.99, profile_batches: int = 32,
                   held_out: Optional[torch.Tensor] = None, held_out_batches: int = 64,
                   hidden_dim: int = 64, seed: int = 0) -> dict:
    """How often a profiled envelope overflows, and what it costs in memory, per margin.

    For each margin the envelope is profiled exactly as the engine profiles it
    (:meth:`zg.Envelope.profile` with ``profile_batches``, ``quantile``, ``margin``, ``seed``)
    and checked against ``held_out`` batch counts (default: :func:`sample_counts` with seed
    ``seed + 1``, batches the profile never saw). A batch overflows if any block's true count
    exceeds that block's envelope size, which is exactly when the engine would rewind.

    Returns lists aligned with ``margins``: ``sizes`` (per block), ``overflow_probability``
    (fraction of held-out batches that overflow), ``envelope_bytes`` (memory model total),
    plus ``oracle_mean_bytes``, ``oracle_max_bytes`` and ``worst_case_bytes`` (scalars),
    ``worst_case_sizes`` and the settings.
    """
    fanouts = check_fanouts(fanouts)
    margins = [float(m) for m in margins]
    if not margins:
        raise ValueError("margins is empty: give at least one margin")
    if held_out is None:
        held_out = sample_counts(g, fanouts, batch_size, num_batches=held_out_batches, seed=seed + 1)
    held_out = torch.as_tensor(held_out, dtype=torch.int64)
    if held_out.dim() != 2 or held_out.shape[1] != len(fanouts):
        raise ValueError(f"held_out must be int [K, {len(fanouts)}], got shape {tuple(held_out.shape)}")
    classes = max(g.num_classes, 1)
    out: Dict[str, Any] = {"margins": margins, "quantile": float(quantile), "batch_size": batch_size,
                           "fanouts": fanouts, "profile_batches": profile_batches,
                           "held_out_batches": int(held_out.shape[0]), "sizes": [],
                           "overflow_probability": [], "envelope_bytes": []}
    for margin in margins:
        env = Envelope.profile(g, fanouts, batch_size, num_batches=profile_batches,
                               quantile=quantile, margin=margin, seed=seed)
        sizes = torch.tensor(env.sizes, dtype=torch.int64)
        overflowed = (held_out > sizes).any(dim=1)                      # [K]
        totals = env.memory_model(g.feat_dim, hidden_dim, classes, oracle_counts=held_out)["totals"]
        out["sizes"].append(list(env.sizes))
        out["overflow_probability"].append(float(overflowed.double().mean()))
        out["envelope_bytes"].append(int(totals["envelope"]))
    out["oracle_mean_bytes"] = int(totals["oracle_mean"])
    out["oracle_max_bytes"] = int(totals["oracle_max"])
    out["worst_case_bytes"] = int(totals["worst_case"])
    out["worst_case_sizes"] = Envelope.worst_case(g, fanouts, batch_size).sizes
    return out


# ----------------------------------------------------------------------------- notebook 03


def static_addresses(eng: Any) -> Dict[str, int]:
    """``name -> data_ptr()`` of every buffer a captured step reads or writes.

    A CUDA Graph replays raw addresses, so a step is capturable only if these never change
    between iterations: the engine's epoch seed table, batch counter and flag buffers, the
    overflow guard, the sampler's marker arrays, the graph's arrays, every parameter, gradient
    and optimizer state tensor (the learning rate included).
    """
    named: Dict[str, torch.Tensor] = {}
    for name in ("epoch_seeds", "epoch_counts", "counter", "epoch_buf", "seed_tensor",
                 "loss_buf", "hash_buf", "applied_buf"):
        if isinstance(getattr(eng, name, None), torch.Tensor):
            named[f"engine.{name}"] = getattr(eng, name)
    for name in ("overflowed", "first", "local", "first_wanted", "enabled"):
        named[f"guard.{name}"] = getattr(eng.guard, name)
    for i, lr in enumerate(getattr(eng.optimizer, "_lr", [])):
        named[f"optim.lr.{i}"] = lr
    sampler = getattr(eng, "sampler", None)
    for name in ("_first", "_local"):
        if isinstance(getattr(sampler, name, None), torch.Tensor):
            named[f"sampler.{name.lstrip('_')}"] = getattr(sampler, name)
    named["graph.x"], named["graph.indptr"], named["graph.indices"] = eng.g.x, eng.g.indptr, eng.g.indices
    for name, p in eng.model.named_parameters():
        named[f"param.{name}"] = p
        if p.grad is not None:
            named[f"grad.{name}"] = p.grad
    index = {id(p): name for name, p in eng.model.named_parameters()}
    for p, state in eng.optimizer.state.items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                named[f"optim.{index.get(id(p), '?')}.{key}"] = value
    return {name: t.data_ptr() for name, t in named.items()}


def parameters(model: torch.nn.Module) -> List[torch.Tensor]:
    """Detached copies of ``model``'s parameters (on the CPU), to compare runs later."""
    return [p.detach().cpu().clone() for p in model.parameters()]


def max_abs_difference(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> float:
    """Largest absolute elementwise difference between two parameter lists of equal shapes."""
    a, b = list(a), list(b)
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b)):
        raise ValueError("the two parameter lists differ in length or shapes")
    return max((float((x.double() - y.double()).abs().max()) for x, y in zip(a, b) if x.numel()),
               default=0.0)


def bitwise_equal(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor]) -> bool:
    """True if every tensor of ``a`` equals its partner in ``b`` bit for bit."""
    a, b = list(a), list(b)
    return len(a) == len(b) and all(x.shape == y.shape and x.dtype == y.dtype and
                                    torch.equal(x.view(torch.uint8) if x.numel() else x,
                                                y.view(torch.uint8) if y.numel() else y)
                                    for x, y in zip(a, b))


def execution_trace(eng: Any) -> List[dict]:
    """Every step an ``Engine(trace=True)`` executed, in order: ``order`` (0, 1, ...),
    ``epoch``, ``batch``, ``applied`` (False: the optimizer step was skipped on the device
    because an earlier batch had overflowed; the batch ran again after the rewind)."""
    if not getattr(eng, "trace_enabled", False):
        raise ValueError("the engine was built without trace=True; nothing was recorded")
    eng.applied_trace()                                   # reads the device-side records once
    return [{"order": i, "epoch": t["epoch"], "batch": t["batch"], "applied": bool(t.get("applied"))}
            for i, t in enumerate(eng.trace)]


# ----------------------------------------------------------------------------- notebook 04


def _median_run(runs: List[dict]) -> dict:
    """The run with the median whole-step time: one stall of a shared machine is not the result."""
    runs = sorted(runs, key=lambda r: r["step_seconds"])
    return dict(runs[len(runs) // 2], repeats=len(runs),
                step_seconds_range=[runs[0]["step_seconds"], runs[-1]["step_seconds"]])


def _profile_dgl(pipe: Pipeline, iterations: int, warmup: int, steps: Any) -> dict:
    """Time DGL's pipeline the way zg.profile.profile_engine times the engines: a warm-up, the
    mean of whole iterations, then the mean of each stage over as many more."""
    def step(stage=None):
        epoch, batch, seeds = next(steps)
        pipe.train_step(seeds, epoch, batch, stage)

    for _ in range(warmup):
        step()
    start = time.perf_counter()
    for _ in range(iterations):
        step()
    step_seconds = (time.perf_counter() - start) / iterations
    stage = {s: 0.0 for s in STAGES}
    for _ in range(iterations):
        step(stage)
    return {"pipeline": "DGL", "step_seconds": step_seconds,
            "stage_seconds": {s: v / iterations for s, v in stage.items()},
            "host_syncs_per_iteration": None, "gpu_execution_fraction": None, "envelope_sizes": None}


def _endless_batches(pipe: Pipeline):
    """(epoch, batch, seeds) of every batch, epoch after epoch, in the pipeline's own order."""
    epoch = 0
    while True:
        for b, seeds in pipe.batches(epoch):
            yield epoch, b, seeds
        epoch += 1


def profile_pipelines(g: Graph, fanouts: Sequence[int], batch_size: int, *, hidden_dim: int = 64,
                      iterations: int = 3, warmup: int = 1, repeats: int = 3, seed: int = 0,
                      device: Any = "cpu", include_dgl: bool = True) -> List[dict]:
    """DGL, zg dynamic and zg envelope on the same graph, model size and batches, side by side.

    One dict per pipeline: ``pipeline``, ``batch_size``, ``step_seconds`` (mean wall time of a
    whole iteration), ``stage_seconds`` (mean per iteration, by stage), ``seeds_per_second``,
    ``host_syncs_per_iteration``, ``gpu_execution_fraction`` (CUDA only), ``envelope_sizes``,
    ``repeats`` and ``step_seconds_range`` (fastest and slowest repeat).

    The zg pipelines are measured by :func:`zg.profile.profile_engine` on one fresh
    :class:`zg.Engine` each (the envelope one runs the static step: a CUDA Graph replay on a
    GPU); DGL's ``DGLPipeline`` by the same protocol (CPU only: the reference environment's DGL
    has no CUDA). Each measurement is repeated ``repeats`` times and the repeat with the median
    step time is reported whole, so one stall of a shared machine does not become the result.
    DGL's sampler syncs in C++, out of SyncAudit's sight: its host syncs are None, not 0.
    The model is a ``len(fanouts)``-layer GraphSAGE of width ``hidden_dim``, same seed for all.
    """
    from . import models
    from .engine import Engine
    from .profile import profile_engine

    fanouts = check_fanouts(fanouts)
    for name, value in (("iterations", iterations), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    rows: List[dict] = []
    if include_dgl and torch.device(device).type == "cpu":
        from .baselines.dgl import DGLModel, DGLPipeline

        torch.manual_seed(seed)
        model = DGLModel("sage", g.feat_dim, hidden_dim, max(g.num_classes, 1), len(fanouts))
        pipe = DGLPipeline(g, model, fanouts, batch_size, seed=seed)
        steps = _endless_batches(pipe)
        rows.append(_median_run([_profile_dgl(pipe, iterations, warmup, steps) for _ in range(repeats)]))
    for kind in ("dynamic", "envelope"):
        torch.manual_seed(seed)
        model = models.SAGE(g.feat_dim, hidden_dim, max(g.num_classes, 1), len(fanouts))
        eng = Engine(g, model, fanouts, batch_size, device=device, seed=seed, pipeline=kind,
                     audit_iterations=0)
        runs = []
        for _ in range(repeats):
            prof = profile_engine(eng, iterations=iterations, warmup=warmup)
            runs.append({"pipeline": f"zg {kind}", "step_seconds": prof.step_seconds,
                         "stage_seconds": dict(prof.stage_seconds),
                         "host_syncs_per_iteration": prof.host_syncs_per_iteration,
                         "gpu_execution_fraction": prof.gpu_execution_fraction,
                         "envelope_sizes": None if eng.envelope is None else list(eng.envelope.sizes)})
        rows.append(_median_run(runs))
    for row in rows:
        row["batch_size"] = batch_size
        row["seeds_per_second"] = batch_size / row["step_seconds"]
    return rows


def gpu_results(path: Any = None) -> Optional[dict]:
    """The GPU measurements committed by ``bench/gpu_check.py``, or None if there are none.

    Reads ``bench/results/gpu_check_cuda.json`` (or ``path``). A file that exists but was not
    measured on a CUDA device (its ``machine.cuda`` is empty) is refused with ValueError, so a
    CPU run can never be shown as a GPU result.
    """
    path = GPU_RESULTS if path is None else Path(path)
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    if not isinstance(data, dict) or not isinstance(data.get("machine"), dict):
        raise ValueError(f"{path} is not a bench/gpu_check.py result (no 'machine' note)")
    if not data["machine"].get("cuda"):
        raise ValueError(f"{path} says it was measured without a CUDA device; it is not a GPU result")
    data["path"] = str(path)
    return data


def gpu_result_rows(results: dict) -> List[dict]:
    """Flat rows of a :func:`gpu_results` dict: graph, batch_size, variant, ms per iteration,
    GPU execution fraction, host syncs per iteration, peak bytes."""
    rows = []
    for r in results.get("rows", []):
        rows.append({"graph": r.get("graph"), "batch_size": r.get("batch_size"),
                     "variant": r.get("variant"),
                     "ms_per_iteration": 1e3 * float(r["seconds_per_iteration"]),
                     "gpu_execution_fraction": r.get("gpu_execution_fraction"),
                     "host_syncs_per_iteration": r.get("host_syncs_per_iteration"),
                     "peak_bytes": r.get("peak_bytes")})
    return rows


# ----------------------------------------------------------------------------- notebook 09
# Grappa workers that each run the ZeroGNN fixed-shape step, against both baselines.

TOGETHER = {
    "grappa + envelope": dict(trainer="grappa", sampler="envelope"),
    "grappa + dynamic": dict(trainer="grappa", sampler="dynamic"),
    "feature fetch": dict(trainer="feature_fetch", sampler="dynamic"),
}


def worker_syncs(g: Graph, *, workers: int = 2, fanouts: Sequence[int] = (10, 10), batch_size: int = 256,
                 seed: int = 0, rank: int = 0) -> dict:
    """Host syncs of one training step of a Grappa worker's Engine, per sampler.

    Builds worker ``rank``'s source of a ``workers``-way random partition exactly as
    :func:`zg.grappa.train` does (its local graph, coverage weights and envelope) and the
    ``zg.Engine`` a worker runs on it (without the process group: the collectives are not
    counted), warms it up, then runs one step under a :class:`~zg.audit.SyncAudit` with each
    sampler.
    Returns ``{"dynamic": summary, "envelope": summary, "envelope_sizes": [...],
    "local_nodes": n, "rows": batch rows}`` (summaries as :func:`audit_samplers`).
    """
    from .engine import Engine
    from .grappa import partition as make_partition
    from .grappa.config import TrainConfig
    from .grappa.sources import IsolatedSource
    from .models import build

    fanouts = check_fanouts(fanouts)
    part = make_partition(g, workers, method="random", seed=seed)
    out: dict = {}
    for sampler in ("dynamic", "envelope"):
        cfg = TrainConfig(workers=workers, sampler=sampler, fanouts=list(fanouts), num_layers=len(fanouts),
                          batch_size=batch_size, seed=seed).validated()
        src = IsolatedSource(cfg, g, part, rank, workers, torch.device("cpu"), cfg.estimator_object)
        src.start_super_epoch(0)
        torch.manual_seed(seed)
        model = build(cfg.model, g.feat_dim, cfg.hidden_dim, g.num_classes, cfg.num_layers, dropout=cfg.dropout)
        # The worker's own Engine (as zg.grappa.worker builds it, minus the process group).
        eng = Engine(src.graph, model, cfg.fanouts, src.rows,
                     envelope=src.envelope if sampler == "envelope" else "worst_case",
                     capture=sampler == "envelope", seed=src.seed,
                     pipeline="envelope" if sampler == "envelope" else "dynamic",
                     audit_iterations=0, nodes=src.train_nodes, batches=src.batches)
        eng.run_batch(0)                              # warm-up: first calls allocate lazily
        with SyncAudit(where=True) as audit:
            eng.run_batch(1)
        out[sampler] = _audit_summary(audit)
        if sampler == "envelope":
            out["envelope_sizes"] = eng.envelope.sizes
            out["local_nodes"] = src.graph.num_nodes
            out["rows"] = eng.rows
    return out


def together(g: Graph, *, workers: int = 2, epochs: int = 10, batch_size: int = 256,
             fanouts: Sequence[int] = (10, 10), hidden_dim: int = 64, seed: int = 0,
             variants: Optional[Sequence[str]] = None, **options: Any) -> dict:
    """Train the :data:`TOGETHER` variants with real worker processes in one launch.

    ``grappa + envelope``: Grappa workers each running the ZeroGNN fixed-shape step on their
    local graph (``sampler="envelope"``). Baselines: the same Grappa workers with the
    host-mediated dynamic sampler, and feature fetching (every worker samples the whole
    graph's structure and fetches remote features each iteration). Same model, seed and
    batches everywhere; ``options`` go to every run (``lr``, ``repartition_every``, ...).

    Returns ``{"rows": [...], "histories": {variant: history}}``; a row holds the variant,
    ``seconds_per_epoch`` (median), ``bytes_per_epoch_per_worker``, ``test_acc`` (final),
    ``best_val_acc``, ``envelope_overflows`` and ``rewound_batches`` (totals: each overflow
    rewinds every worker to the first overflowed batch) and ``bytes_by_kind`` (summed over
    epochs, per worker).
    """
    from .grappa import train_many

    names = list(TOGETHER) if variants is None else list(variants)
    unknown = [n for n in names if n not in TOGETHER]
    if unknown or not names:
        raise ValueError(f"variants must be a non-empty list drawn from {list(TOGETHER)}, got {variants!r}")
    fanouts = check_fanouts(fanouts)
    common = dict(workers=workers, epochs=epochs, batch_size=batch_size, fanouts=list(fanouts),
                  num_layers=len(fanouts), hidden_dim=hidden_dim, seed=seed, **options)
    histories = train_many(g, [dict(common, **TOGETHER[n]) for n in names])
    rows = []
    for name, h in zip(names, histories):
        kinds: Dict[str, List[int]] = {}
        for e in h["epochs"]:
            for kind, per_worker in e["bytes_by_kind"].items():
                acc = kinds.setdefault(kind, [0] * len(per_worker))
                kinds[kind] = [a + b for a, b in zip(acc, per_worker)]
        rows.append({"variant": name, "seconds_per_epoch": h["seconds_per_epoch"],
                     "bytes_per_epoch_per_worker": h["bytes_per_epoch_per_worker"],
                     "test_acc": h["final"]["test_acc"], "best_val_acc": h["final"]["best_val_acc"],
                     "envelope_overflows": sum(e.get("envelope_overflows", 0) for e in h["epochs"]),
                     "rewound_batches": sum(e.get("rewound_batches", 0) for e in h["epochs"]),
                     "bytes_by_kind": {k: v for k, v in kinds.items() if any(v)}})
    return {"rows": rows, "histories": dict(zip(names, histories))}


__all__ += ["TOGETHER", "worker_syncs", "together"]
