"""zg.viz: the plotly figures of the notebooks and reports, and the notebook display setup.

Where it sits: at the very end of the flow. :mod:`zg.experiments` (and the rest of the package)
measures; a builder here turns those measurements into a ``plotly.graph_objects.Figure`` and
computes nothing experimental. ``import zg`` does not import this package: the core runs
without plotly; ``import zg.viz`` needs plotly (and ipywidgets for :func:`explore`).

    common.py     setup_notebook, explore, the renderer, colours (the palette, and how a colour
                  reads to every eye and on a dark page), curves, and layout: the
                  shared layout every figure ends with (sized for JupyterLab's 968 px),
                  describe (a graph in one short line for a subtitle), byte_ticks
    zerognn.py    the ZeroGNN half's figures (notebooks 00-04)
    grappa.py     the Grappa half's figures (notebooks 00, 05-09)

Every figure is also here, so a notebook writes ``zg.viz.<figure>``:

    import zg.viz
    zg.viz.setup_notebook()                         # once, at the top of every notebook
    zg.viz.host_syncs({"zg dynamic": 9, "zg envelope": 0}).show()

Names and colours are the kit's everywhere: the stages ``sample -> compact -> gather ->
forward -> loss -> backward -> step`` (:data:`zg.step.STAGES`, coloured by :data:`STAGE_COLORS`)
and the pipelines "DGL", "zg dynamic", "zg envelope" (:data:`PIPELINE_COLORS`), all from
Okabe and Ito's colour-blind-safe palette; every figure is drawn in the kit's plotly template
("zg": a transparent page, so a figure follows JupyterLab's light or dark theme). A figure keeps
the name of what it shows (``hop_metadata``, ``stage_timeline``); the measurement it draws is
named for what it does (``zg.experiments.measure_hop_metadata``, ``zg.experiments.time_stages``).
"""

from . import common, grappa, zerognn
from .common import (
    FIGURE_HEIGHT,
    FIGURE_WIDTH,
    PIPELINE_COLORS,
    RENDERER,
    STAGE_COLORS,
    Explorer,
    byte_ticks,
    curves,
    describe,
    explore,
    layout,
    offline_html,
    setup_notebook,
)
from .grappa import (
    METHOD_COLORS,
    accuracy_vs_bytes,
    accuracy_vs_depth,
    bytes_by_kind,
    bytes_per_epoch_by_run,
    coverage_distributions,
    coverage_histogram,
    epoch_account,
    epoch_projection,
    epoch_time_vs_workers,
    estimator_bias_vs_workers,
    estimator_errors,
    grappa_map,
    map_cell_label,
    partition_sweep,
    partition_view,
    rmat_scaling,
    shrink_curve,
    traffic_vs_batch,
    variant_summary,
)
from .zerognn import (
    MIB,
    batch_scaling,
    cost_growth,
    count_distributions,
    execution_trace,
    floor_split,
    gpu_results,
    gpu_timeline,
    hop_metadata,
    host_syncs,
    memory_per_hop,
    overflow_vs_margin,
    stage_breakdown,
    stage_timeline,
    step_times,
    sync_ops,
)

__all__ = [
    "common",
    "zerognn",
    "grappa",
    "setup_notebook",
    "explore",
    "Explorer",
    "RENDERER",
    "STAGE_COLORS",
    "PIPELINE_COLORS",
    "offline_html",
    "curves",
    "layout",
    "describe",
    "byte_ticks",
    "FIGURE_WIDTH",
    "FIGURE_HEIGHT",
    "host_syncs",
    "hop_metadata",
    "sync_ops",
    "stage_timeline",
    "count_distributions",
    "memory_per_hop",
    "overflow_vs_margin",
    "execution_trace",
    "step_times",
    "stage_breakdown",
    "floor_split",
    "batch_scaling",
    "gpu_results",
    "cost_growth",
    "gpu_timeline",
    "MIB",
    "coverage_histogram",
    "bytes_by_kind",
    "coverage_distributions",
    "partition_sweep",
    "traffic_vs_batch",
    "partition_view",
    "bytes_per_epoch_by_run",
    "estimator_errors",
    "shrink_curve",
    "accuracy_vs_bytes",
    "rmat_scaling",
    "epoch_account",
    "epoch_projection",
    "variant_summary",
    "epoch_time_vs_workers",
    "accuracy_vs_depth",
    "estimator_bias_vs_workers",
    "grappa_map",
    "map_cell_label",
    "METHOD_COLORS",
]
