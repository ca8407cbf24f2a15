"""zg.experiments: what the notebooks and benches measure, one concept per module.

Where it sits: between the package and the notebooks. A notebook cell that would be longer
than a screen is a function here; the notebook calls it, hands the result to a figure builder
in :mod:`zg.viz` and asserts its claim. Every function returns plain measurements (dicts,
rows of dicts, tensors) measured when it ran; nothing here plots or needs plotly or
ipywidgets, so each module is tested with the core alone (``tests/experiments/test_experiments_<module>.py``).
A measurement and its figure never share a name: ``ex.measure_hop_metadata`` measures,
``zg.viz.hop_metadata`` draws.

Following one batch through the kit:

    machine.py      the setting: scale (small / full), the machine note, Markdown tables
    host_syncs.py   each hop's metadata and the host syncs reading it costs (notebooks 00, 01)
    envelopes.py    exact per-block counts, overflow probability and memory per margin (02)
    replay.py       static buffer addresses, executed-step traces, parameter comparisons,
                    the same batches timed on engines side by side (03)
    throughput.py   stage timelines, DGL / zg pipelines side by side, committed GPU results (01, 04)
    floor.py        the part of an iteration any pipeline must pay, on a batch already sampled (04)
    scaling.py      cost growth with graph size and batch size, from bench/scaling.py's file (04)
    partitions.py   cut edges, balance and coverage of partitions, across super-epochs (05, 08)
    traffic.py      bytes each design sends: counted, checked against real runs, projected (05-08)
    trainers.py     the distributed trainers trained for real, summarised and averaged (06, 08)
    estimators.py   each gradient estimator's error against the exact gradient (07)
    together.py     Grappa workers running the ZeroGNN step, against both baselines (09)
    accuracy_map.py the committed map of where Grappa keeps its accuracy, and the diagnosis (06-08)
    results.py      the one format of bench/results/*.json: write, load, headline metrics, fmt
    training_budget.py  does training longer close Grappa's gap? the committed gaps (06-08)
    _progress.py    the bar a long measurement shows a person (``ex.progress(iterable, desc=...)``
                    for a notebook's own loop), none in unattended runs

Every public name is also here, so a notebook needs one import:

    from zg import experiments as ex
    SCALE = ex.scale()                                         # "small" (default) or "full"
    rows = ex.measure_hop_metadata(g, [15, 10, 5], seeds)      # what one iteration produces
    events = ex.time_stages(engine, batch=0)                   # one iteration, stage by stage
    q = ex.partition_quality(g, 4, "metis", hops=2)
"""

from . import (
    accuracy_map,
    envelopes,
    estimators,
    floor,
    host_syncs,
    machine,
    partitions,
    replay,
    results,
    scaling,
    throughput,
    together,
    traffic,
    trainers,
    training_budget,
)
from ._progress import progress
from .accuracy_map import (
    PAPER_REGIME,
    diagnosis_findings,
    gap_summary,
    load_result,
    lr_rows,
    map_findings,
    map_rows,
    paper_regime,
)
from .envelopes import overflow_curve, sample_counts
from .estimators import bias_vs_workers, error_rows, shrink_sweep
from .floor import FLOOR_STAGES, fixed_batch_step, floor_rows, resident_batches
from .host_syncs import audit_samplers, measure_hop_metadata
from .machine import (
    SCALES,
    busy,
    by_scale,
    machine_label,
    machine_note,
    machine_short,
    markdown_table,
    scale,
)
from .partitions import chunk_pairs_met, edges_exposed, partition_quality, sweep_partitions
from .replay import (
    bitwise_equal,
    max_abs_difference,
    parameters,
    static_addresses,
    step_seconds,
    trace_steps,
)
from .scaling import (
    SCALING_RESULTS,
    cost_growth_rows,
    cost_growth_summary,
    load_scaling_results,
    log_log_slope,
)
from .throughput import (
    GPU_RESULTS,
    MODE_NAMES,
    gpu_result_rows,
    load_gpu_results,
    profile_modes,
    time_stages,
)
from .together import TOGETHER, train_together, worker_syncs
from .traffic import (
    bytes_sent,
    expected_bytes,
    feature_fetch_traffic,
    fetch_traffic_model,
    gradient_traffic,
    project_epochs,
    repartition_bytes,
    scaling_rows,
    traffic_rows,
)
from .trainers import (
    GRAPPA_RESULTS,
    average_rows,
    depth_rows,
    epoch_time_rows,
    load_grappa_results,
    run_trainers,
    trainer_rows,
)

__all__ = [
    "progress",
    "machine",
    "host_syncs",
    "envelopes",
    "replay",
    "throughput",
    "floor",
    "FLOOR_STAGES",
    "resident_batches",
    "fixed_batch_step",
    "floor_rows",
    "partitions",
    "traffic",
    "trainers",
    "estimators",
    "together",
    "scaling",
    "SCALING_RESULTS",
    "load_scaling_results",
    "cost_growth_rows",
    "cost_growth_summary",
    "log_log_slope",
    "SCALES",
    "scale",
    "by_scale",
    "machine_note",
    "machine_label",
    "machine_short",
    "busy",
    "markdown_table",
    "measure_hop_metadata",
    "audit_samplers",
    "sample_counts",
    "overflow_curve",
    "static_addresses",
    "parameters",
    "max_abs_difference",
    "bitwise_equal",
    "trace_steps",
    "step_seconds",
    "time_stages",
    "profile_modes",
    "MODE_NAMES",
    "GPU_RESULTS",
    "load_gpu_results",
    "gpu_result_rows",
    "partition_quality",
    "sweep_partitions",
    "chunk_pairs_met",
    "edges_exposed",
    "traffic_rows",
    "bytes_sent",
    "expected_bytes",
    "repartition_bytes",
    "feature_fetch_traffic",
    "gradient_traffic",
    "scaling_rows",
    "fetch_traffic_model",
    "project_epochs",
    "run_trainers",
    "trainer_rows",
    "average_rows",
    "GRAPPA_RESULTS",
    "load_grappa_results",
    "epoch_time_rows",
    "depth_rows",
    "error_rows",
    "shrink_sweep",
    "bias_vs_workers",
    "TOGETHER",
    "worker_syncs",
    "train_together",
    "accuracy_map",
    "results",
    "training_budget",
    "load_result",
    "map_rows",
    "gap_summary",
    "paper_regime",
    "map_findings",
    "PAPER_REGIME",
    "diagnosis_findings",
    "lr_rows",
]
