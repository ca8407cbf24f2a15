"""zg.profile: where an iteration's time and memory go.

Where it sits: beside the engine; notebooks 01 and 04 and ``bench/`` call it. The stage names
are the ones used everywhere in the kit (code, profiler labels, plots):

    sample -> compact -> gather -> forward -> loss -> backward -> step   (zg.step.STAGES)

* Stage timings: the iteration runs with a stage clock: ``time.perf_counter`` on the CPU,
  CUDA events on a GPU (read once, after all iterations). On a GPU the stage-timed iterations
  run uncaptured (a CUDA Graph replay cannot be split); the captured replay is timed as a whole.
* GPU execution fraction (CUDA only): the union of GPU kernel intervals over the wall time of
  the profiled iterations, from ``torch.profiler``. 1.0 means the GPU never waited.
* Peak memory: ``torch.cuda.max_memory_allocated`` on a GPU; on the CPU the envelope memory
  model (what the buffers need) and the process's measured peak RSS (everything, Python
  included).
* Host syncs per iteration: ``zg.audit.SyncAudit`` around steady-state iterations.
"""

from __future__ import annotations

import resource
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ._checks import int_arg
from .audit import SyncAudit
from .engine import Engine
from .step import STAGES, StageClock

__all__ = ["Profile", "profile_engine", "gpu_execution_fraction", "StageClock", "peak_rss_bytes"]


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


@dataclass
class Profile:
    """Per-iteration measurements of one engine configuration (seconds are means)."""

    pipeline: str
    device: str
    iterations: int
    step_seconds: float
    stage_seconds: dict[str, float]
    host_syncs_per_iteration: float | None
    gpu_execution_fraction: float | None
    peak_bytes: int
    peak_bytes_source: str
    memory_model_bytes: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def gpu_execution_fraction(step: Callable[[int], None], iterations: int) -> float | None:
    """Busy fraction of the GPU while ``step(i)`` runs ``iterations`` times (CUDA only).

    Kernel and memcpy intervals from ``torch.profiler`` are merged (overlaps counted once) and
    divided by the wall time between the first launch and the synchronisation at the end.
    """
    if not torch.cuda.is_available():
        return None
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        wall_start = time.perf_counter()
        for i in range(iterations):
            step(i)
        torch.cuda.synchronize()
        wall = time.perf_counter() - wall_start
    intervals = []
    for event in prof.events():
        device_type = getattr(event, "device_type", None)
        if (
            device_type is not None
            and "CUDA" in str(device_type)
            and event.time_range.elapsed_us() > 0
        ):
            intervals.append((event.time_range.start, event.time_range.end))
    if not intervals or wall <= 0:
        return 0.0
    intervals.sort()
    busy, (cur_start, cur_end) = 0.0, intervals[0]
    for start, end in intervals[1:]:
        if start > cur_end:
            busy += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    busy += cur_end - cur_start
    return min(1.0, busy / 1e6 / wall)


def profile_engine(eng: Engine, iterations: int = 8, warmup: int = 2) -> Profile:
    """Profile ``iterations`` steady-state iterations of ``eng`` (after ``warmup``).

    The engine's position is saved and restored: profiling changes the model's parameters (it
    trains), so profile a fresh engine or one whose state you no longer need.
    """
    iterations = int_arg(iterations, "iterations", low=1)
    warmup = int_arg(warmup, "warmup", low=0)
    dev = eng.device
    run = lambda i, clock=None: eng.run_batch(i, epoch=0, clock=clock)  # noqa: E731
    name = {
        "dgl": "DGL",
        "dynamic": "zg dynamic",
        "eager": "zg envelope (eager)",
        "static": "zg envelope (static)",
        "graph": "zg envelope (captured)",
        "compiled": "zg envelope (compiled)",  # stage-timed steps run the eager static step
    }[eng.mode]
    for i in range(warmup):
        run(i)
    # Whole-step time on the real path (replays on a GPU).
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        torch.cuda.reset_peak_memory_stats(dev)
    start = time.perf_counter()
    for i in range(warmup, warmup + iterations):
        run(i)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    step_seconds = (time.perf_counter() - start) / iterations
    # Stage breakdown (on a GPU the stage-timed steps run uncaptured: a replay cannot be split).
    clock = StageClock(dev)
    for i in range(warmup + iterations, warmup + 2 * iterations):
        clock.start()
        run(i, clock)
    clock_seconds = clock.finish()
    stage_seconds = {s: clock_seconds.get(s, 0.0) / iterations for s in STAGES}
    # Host syncs (the audit's count; on CUDA torch's sync-debug count is kept apart).
    with SyncAudit() as audit:
        for i in range(warmup + 2 * iterations, warmup + 3 * iterations):
            run(i)
    # DGL's sampler syncs in C++, out of the audit's sight: unknown, not 0.
    syncs = None if eng.mode == "dgl" else audit.host_syncs / iterations
    fraction = gpu_execution_fraction(lambda i: run(i), iterations) if dev.type == "cuda" else None
    if dev.type == "cuda":
        peak, source = int(torch.cuda.max_memory_allocated(dev)), "torch.cuda.max_memory_allocated"
    else:
        peak, source = peak_rss_bytes(), "process peak RSS"
    mm = eng.memory_model()["totals"] if eng.envelope is not None else {}
    return Profile(
        pipeline=name,
        device=str(dev),
        iterations=iterations,
        step_seconds=step_seconds,
        stage_seconds=stage_seconds,
        host_syncs_per_iteration=syncs,
        gpu_execution_fraction=fraction,
        peak_bytes=peak,
        peak_bytes_source=source,
        memory_model_bytes=mm,
    )
