"""zg.experiments.throughput: where an iteration's time goes, stage by stage (notebooks 01, 04).

Where it sits: over the whole training step, ``sample -> compact -> gather -> forward -> loss
-> backward -> step`` (:data:`zg.step.STAGES`). :func:`time_stages` puts one iteration of
an engine on a time axis, with the host syncs of each stretch; :func:`profile_modes`
times DGL, zg dynamic and zg envelope side by side on the same graph and batches;
:func:`load_gpu_results` and :func:`gpu_result_rows` read the measurements
``bench/gpu_check.py`` committed from a GPU machine, and say so. Figures:
:func:`zg.viz.stage_timeline`, :func:`zg.viz.stage_breakdown`, :func:`zg.viz.batch_scaling`,
:func:`zg.viz.gpu_results`.

    events = ex.time_stages(engine, batch=0)                  # one iteration, stage by stage
    rows = ex.profile_modes(g, [10, 5], 256)                  # DGL / zg dynamic / zg envelope
    committed = ex.load_gpu_results()                         # None until a GPU run is committed

Every number was measured on this machine when the function ran (seconds with
``time.perf_counter``, host syncs with :class:`zg.audit.SyncAudit`), except those
:func:`load_gpu_results` reads, which carry the note of the machine that measured them.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .._checks import int_arg, seed_arg
from ..audit import SyncAudit
from ..engine import Engine
from ..graph import Graph
from ..sampling import check_fanouts
from ..step import STAGES, StageClock
from ._progress import progress_bar

__all__ = [
    "time_stages",
    "profile_modes",
    "MODE_NAMES",
    "GPU_RESULTS",
    "load_gpu_results",
    "gpu_result_rows",
]

# Where bench/gpu_check.py commits its GPU measurements (a checkout of the repository).
GPU_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "gpu_check_cuda.json"


class _StageRecorder(dict):
    """A ``stage_seconds`` mapping that also lays each lap on a time axis.

    :class:`zg.step.StageClock` adds each stage's seconds into the mapping it is given
    (``into[stage] += seconds``) the moment the stage ends; its laps tile the iteration (each
    lap is the time since the previous one), so placing them end to end from 0 gives the
    timeline, laps a compiled kernel clocked itself (the fused sampler's) included. With an
    ``audit``, each event also carries the host syncs counted since the previous one.
    """

    def __init__(self, audit: SyncAudit | None = None):
        super().__init__({s: 0.0 for s in STAGES})
        self.audit = audit
        self.events: list[dict] = []
        self._syncs = 0
        self._cursor = 0.0

    def __setitem__(self, stage: str, total: float) -> None:
        seconds = total - self.get(stage, 0.0)
        syncs = None
        if self.audit is not None:
            syncs = self.audit.host_syncs - self._syncs
            self._syncs = self.audit.host_syncs
        self.events.append(
            {
                "stage": stage,
                "start": self._cursor,
                "end": self._cursor + seconds,
                "host_syncs": syncs,
            }
        )
        self._cursor += seconds
        super().__setitem__(stage, total)


def time_stages(
    engine: Engine, *, batch: int = 0, epoch: int = 0, count_syncs: bool = True, repeats: int = 3
) -> list[dict]:
    """One training iteration of ``engine``, stage by stage, on a time axis.

    Runs ``engine.run_batch(batch, epoch)`` with a stage clock (it trains: use an engine whose
    state you no longer need) and returns its events in order: ``stage`` (one of
    :data:`zg.step.STAGES`; "sample" and "compact" repeat once per hop where the sampler
    reports them), ``start`` and ``end`` in seconds from the start of the iteration, and
    ``host_syncs`` in that stretch. Times come from runs without the audit (an audit slows
    every op down): the same batch ``repeats`` times, keeping the run of median length, so one
    stall of a busy machine does not become the picture. The sync counts come from one more
    run under :class:`~zg.audit.SyncAudit`, matched event by event.

    Works in every mode. With DGL's sampler (mode "dgl", :class:`zg.DGLSampler`) sampling
    happens inside DGL's DataLoader (one "sample" stretch; its C++ sampler's syncs are invisible
    to SyncAudit and are reported as None); a sampler with ``prepare`` (that loader) is started
    at ``batch`` before the clock runs, so its start-up is not timed. In mode
    "graph" the clocked step runs uncaptured (a replay cannot be split).
    """
    if not isinstance(engine, Engine):
        raise TypeError(f"engine must be a zg.Engine, got {type(engine).__name__}")
    repeats = int_arg(repeats, "repeats", low=1)
    if not 0 <= batch < len(engine.batches(epoch)):
        raise ValueError(
            f"batch {batch} is past the end of epoch {epoch} ({len(engine.batches(epoch))} batches)"
        )

    prepare = getattr(engine.sampler, "prepare", None)  # a sampler of one stream per epoch

    def one_step(recorder: _StageRecorder) -> list[dict]:
        if prepare is not None:  # (DGL's loader) started at the batch before the clock runs
            prepare(epoch, batch, engine.batches(epoch))
        clock = StageClock(engine.device, into=recorder)
        engine.run_batch(batch, epoch=epoch, clock=clock)
        clock.finish()
        return recorder.events

    one_step(_StageRecorder())  # warm-up (lazy allocations)
    runs = sorted(
        (one_step(_StageRecorder()) for _ in range(repeats)),
        key=lambda run: run[-1]["end"] if run else 0.0,
    )
    events = runs[len(runs) // 2]
    if count_syncs:
        with SyncAudit() as audit:
            audited = one_step(_StageRecorder(audit))
        for event, counted in zip(events, audited):
            if event["stage"] == counted["stage"]:
                dgl_sampler = engine.kernel == "dgl" and event["stage"] == "sample"
                event["host_syncs"] = None if dgl_sampler else counted["host_syncs"]
    return events


# The names the kit shows for each mode (zg.viz.PIPELINE_COLORS keys).
MODE_NAMES = {
    "dgl": "DGL",
    "dynamic": "zg dynamic",
    "eager": "zg envelope (eager)",
    "static": "zg envelope",
    "graph": "zg envelope",
}


def profile_modes(
    g: Graph,
    fanouts: Sequence[int],
    batch_size: int,
    *,
    hidden_dim: int = 64,
    iterations: int = 3,
    warmup: int = 1,
    repeats: int = 3,
    seed: int = 0,
    device: Any = "cpu",
    include_dgl: bool = True,
    kernel: str = "torch",
) -> list[dict]:
    """DGL, zg dynamic and zg envelope on the same graph, model size and batches, side by side.

    One dict per mode: ``pipeline`` (its display name, :data:`MODE_NAMES`), ``mode``,
    ``batch_size``, ``step_seconds`` (mean wall time of a whole iteration), ``stage_seconds``
    (mean per iteration, by stage), ``seeds_per_second``, ``host_syncs_per_iteration``,
    ``gpu_execution_fraction`` (CUDA only), ``envelope_sizes``, ``repeats`` and
    ``step_seconds_range`` (fastest and slowest repeat), ``kernel`` (the kernels that ran:
    ``kernel`` resolved by the engine, "dgl" for DGL's own).

    Every mode is measured by :func:`zg.profile.profile_engine` on one fresh :class:`zg.Engine`
    (the envelope one in mode "static", "graph" on a GPU: a CUDA Graph replay); mode "dgl" only
    on the CPU (the reference environment's DGL has no CUDA). Each measurement is repeated
    ``repeats`` times and the repeat with the median step time is reported whole, so one stall
    of a shared machine does not become the result. DGL's sampler syncs in C++, out of
    SyncAudit's sight: its host syncs are None, not 0. The model is a ``len(fanouts)``-layer
    GraphSAGE of width ``hidden_dim``, same seed for all.
    """
    from .. import models
    from ..profile import profile_engine

    fanouts = check_fanouts(fanouts)
    iterations = int_arg(iterations, "iterations", low=1)
    repeats = int_arg(repeats, "repeats", low=1)
    seed = seed_arg(seed)
    cuda = torch.device(device).type == "cuda"
    modes = (["dgl"] if include_dgl and not cuda else []) + [
        "dynamic",
        "graph" if cuda else "static",
    ]
    rows: list[dict] = []
    with progress_bar(len(modes) * repeats, desc="profiling modes", unit="run") as bar:
        for mode in modes:
            torch.manual_seed(seed)
            if mode == "dgl":
                from ..baselines.dgl import DGLModel

                model = DGLModel(
                    "sage", g.feat_dim, hidden_dim, max(g.num_classes, 1), len(fanouts)
                )
            else:
                model = models.SAGE(g.feat_dim, hidden_dim, max(g.num_classes, 1), len(fanouts))
            eng = Engine(
                g,
                model,
                fanouts,
                batch_size,
                mode=mode,
                device=device,
                seed=seed,
                kernel="torch" if mode == "dgl" else kernel,
            )
            eng.observers = []
            runs = []
            for _ in range(repeats):
                prof = profile_engine(eng, iterations=iterations, warmup=warmup)
                runs.append(
                    {
                        "pipeline": MODE_NAMES[mode],
                        "mode": mode,
                        "step_seconds": prof.step_seconds,
                        "stage_seconds": dict(prof.stage_seconds),
                        "host_syncs_per_iteration": prof.host_syncs_per_iteration,
                        "gpu_execution_fraction": prof.gpu_execution_fraction,
                        "envelope_sizes": None
                        if eng.envelope is None
                        else list(eng.envelope.sizes),
                        "kernel": eng.kernel,
                    }
                )
                bar.update(1)
            rows.append(_median_run(runs))
    for row in rows:
        row["batch_size"] = batch_size
        row["seeds_per_second"] = batch_size / row["step_seconds"]
    return rows


def _median_run(runs: list[dict]) -> dict:
    """The run with the median whole-step time: one stall of a shared machine is not the result."""
    runs = sorted(runs, key=lambda r: r["step_seconds"])
    return dict(
        runs[len(runs) // 2],
        repeats=len(runs),
        step_seconds_range=[runs[0]["step_seconds"], runs[-1]["step_seconds"]],
    )


def load_gpu_results(path: Any = None) -> dict | None:
    """The GPU measurements committed by ``bench/gpu_check.py``, or None if there are none.

    Reads ``bench/results/gpu_check_cuda.json`` (or ``path``). A file that exists but was not
    measured on a CUDA device (its ``machine.cuda`` is empty) is refused with ValueError, so a
    CPU run can never be shown as a GPU result.
    """
    path = GPU_RESULTS if path is None else Path(path)
    if not path.exists():
        return None
    from .results import load

    data = load(path)  # a zg-result/1 document (zg.experiments.results); ValueError if not
    if data["bench"] != "gpu_check":
        raise ValueError(
            f"{path} is not a bench/gpu_check.py result (its bench is {data['bench']!r})"
        )
    if not data["machine"].get("cuda"):
        raise ValueError(
            f"{path} says it was measured without a CUDA device; it is not a GPU result"
        )
    data["path"] = str(path)
    return data


def gpu_result_rows(results: dict) -> list[dict]:
    """Flat rows of a :func:`load_gpu_results` dict: graph, batch_size, variant, ms per iteration,
    GPU execution fraction, host syncs per iteration, peak bytes."""
    rows = []
    for r in results.get("rows", []):
        rows.append(
            {
                "graph": r.get("graph"),
                "batch_size": r.get("batch_size"),
                "variant": r.get("variant"),
                "ms_per_iteration": 1e3 * float(r["seconds_per_iteration"]),
                "gpu_execution_fraction": r.get("gpu_execution_fraction"),
                "host_syncs_per_iteration": r.get("host_syncs_per_iteration"),
                "peak_bytes": r.get("peak_bytes"),
            }
        )
    return rows
