"""zg.experiments.throughput: where an iteration's time goes, stage by stage (notebooks 01, 04).

Where it sits: over the whole training step, ``sample -> compact -> gather -> forward -> loss
-> backward -> step`` (:data:`zg.pipeline.STAGES`). :func:`time_stages` puts one iteration of
a pipeline on a time axis, with the host syncs of each stretch; :func:`profile_pipelines`
times DGL, zg dynamic and zg envelope side by side on the same graph and batches;
:func:`load_gpu_results` and :func:`gpu_result_rows` read the measurements
``bench/gpu_check.py`` committed from a GPU machine, and say so. Figures:
:func:`zg.viz.stage_timeline`, :func:`zg.viz.stage_breakdown`, :func:`zg.viz.batch_scaling`,
:func:`zg.viz.gpu_results`.

    events = ex.time_stages(pipeline, seeds)                  # one iteration, stage by stage
    rows = ex.profile_pipelines(g, [10, 5], 256)              # DGL / zg dynamic / zg envelope
    committed = ex.load_gpu_results()                         # None until a GPU run is committed

Every number was measured on this machine when the function ran (seconds with
``time.perf_counter``, host syncs with :class:`zg.audit.SyncAudit`), except those
:func:`load_gpu_results` reads, which carry the note of the machine that measured them.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, List, Optional, Sequence

import torch

from ..audit import SyncAudit
from ..graph import Graph
from ..pipeline import STAGES, Pipeline
from ..sampling import check_fanouts

__all__ = ["time_stages", "profile_pipelines", "GPU_RESULTS", "load_gpu_results", "gpu_result_rows"]

# Where bench/gpu_check.py commits its GPU measurements (a checkout of the repository).
GPU_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "gpu_check_cuda.json"


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


def time_stages(pipeline: Pipeline, seeds: Any, *, epoch: int = 0, batch: int = 0,
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
    from ..baselines.dgl import DGLPipeline      # imports no DGL until a DGLPipeline is built

    return isinstance(pipeline, DGLPipeline)


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
    from .. import models
    from ..engine import Engine
    from ..profile import profile_engine

    fanouts = check_fanouts(fanouts)
    for name, value in (("iterations", iterations), ("repeats", repeats)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    rows: List[dict] = []
    if include_dgl and torch.device(device).type == "cpu":
        from ..baselines.dgl import DGLModel, DGLPipeline

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


def load_gpu_results(path: Any = None) -> Optional[dict]:
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
    """Flat rows of a :func:`load_gpu_results` dict: graph, batch_size, variant, ms per iteration,
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
