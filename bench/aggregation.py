"""The CPU neighbour aggregation, A/B: the torch gather (kernel="torch") vs the CSR kernel (kernel="fused").

    .venv/bin/python bench/aggregation.py                       # SAGE on products_like (2.4M nodes)
    .venv/bin/python bench/aggregation.py --model gcn --model gat
    .venv/bin/python bench/aggregation.py --quick               # products_like 100k: checks it runs
    .venv/bin/python bench/aggregation.py --vs-dgl              # + DGL's SAGE pipeline in the rotation

One process, one Engine (zg.Engine(mode="static"): the static envelope step, fused sampler), a
3-layer model of hidden width 256 (GAT: 4 heads x 64), fanouts [15, 10, 5], batch 1024. Each
repeat trains the same batch index once with each variant, rotating which goes first, so all
see the same load. The variant is passed explicitly, as the model's kernel
(``model.set_kernel(...)``, no process-wide switch):

  * ``torch``: ``kernel="torch"``, the torch reference as CUDA runs it (the explicit
    ``[D, k, F]`` gather and sum, autograd's backward), ReLU after the layer;
  * ``csr``: ``kernel="fused"``, embedding_bag forward and zg.kernels.aggregate's parallel
    CSR backward (for SAGE's hidden layer the self term's gradient added in the same pass),
    ReLU after the layer;
  * ``csr_fused_relu``: ``kernel="fused"``, and the hidden SAGE / GCN layers zero their padded
    rows and apply ReLU as one autograd node (what zg runs on the CPU by default).

Timed per step with the stage clock (forward and backward, wall) and the whole step (wall and
process CPU seconds; CPU time is less disturbed by a busy machine); the medians over the
repeats and the ratios torch / variant of the medians are reported. For SAGE also the
aggregation alone (forward + backward, both backwards alternating, 3x the repeats, wall and CPU
seconds) on one batch's real blocks, for the layers whose input needs a gradient: there
"torch" is ``neighbour_sum(..., backward="torch")``, embedding_bag's own backward. All variants train the same model, so the
parameters move between steps: the steps have the same sizes, not the same numbers.

Writes bench/results/<name>.json (default ``aggregation``, ``aggregation_quick`` with --quick).
"""

from __future__ import annotations

import os
import sys

_THREADS = 2
for _i, _a in enumerate(sys.argv):
    if _a == "--threads" and _i + 1 < len(sys.argv):
        _THREADS = int(sys.argv[_i + 1])
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep
os.environ.setdefault("OMP_NUM_THREADS", str(_THREADS))
os.environ.setdefault("NUMBA_NUM_THREADS", str(_THREADS))
os.environ.setdefault("DGLBACKEND", "pytorch")

import argparse
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _machine import machine_note, paired, ran_kernel, table, write_json

import zg
from zg import models
from zg.engine import Engine
from zg.experiments.results import headline_from
from zg.kernels import aggregate as _aggregate
from zg.step import STAGES, StageClock

# torch: kernel="torch" (the explicit gather, ReLU after the layer); csr: kernel="fused" (the
# CSR backward); csr_fused_relu: the CSR backward and the hidden layers' fused padded-row
# zeroing + ReLU (what zg runs on the CPU by default).
VARIANTS = ("torch", "csr", "csr_fused_relu")
# Wall seconds of the forward and backward stages and of the whole step; the step's process CPU
# seconds (both threads), which a busy machine disturbs less than wall time.
MEASURES = ("forward", "backward", "step_total", "step_cpu")


def use_variant(model, variant: str) -> None:
    """Set the model's kernel and, for SAGE / GCN, the fused ReLU on or off."""
    model.set_kernel("torch" if variant == "torch" else "fused")
    if not isinstance(model, models._PlainModel):
        return
    fused = variant == "csr_fused_relu"
    last = len(model.layers) - 1
    for layer in model.layers[:last]:
        layer.activation = "relu" if fused else None
    if fused:
        model.__dict__.pop("after_layer", None)  # the class's: dropout only
    else:  # as before: ReLU, then dropout
        model.after_layer = lambda i, h: model.dropout(F.relu(h)) if i < last else h


def time_kernel(mb, widths, repeats):
    """The aggregation alone on this batch's blocks (those whose input needs a gradient), the
    two backwards alternating: forward + backward, median wall and process CPU seconds. Where
    SAGE reads the table's first rows for its self term too (width = the layer's input width,
    no projection first), so does this: both gradients flow into the table."""
    gen = torch.Generator().manual_seed(0)
    out = {}
    for layer, (block, width, with_self) in enumerate(zip(mb.blocks, *zip(*widths))):
        if width is None:
            continue
        num_rows, num_dst = block.src_nodes.shape[0], block.nbr.shape[0]
        edge_mask = block.mask & (torch.arange(num_dst) < block.num_dst).unsqueeze(1)
        nbr = torch.where(edge_mask, block.nbr, 0)
        degree = edge_mask.sum(1, keepdim=True).clamp(min=1)
        weight = (edge_mask / degree).unsqueeze(-1)  # [D, k, 1]
        table = torch.randn(num_rows, 1, width, generator=gen).requires_grad_(True)
        grads = [torch.randn(num_dst, 1, width, generator=gen)] * (2 if with_self else 1)
        seconds = {"torch": [], "csr": []}
        cpu = {"torch": [], "csr": []}
        for rep in range(repeats + 1):
            for variant in ("torch", "csr") if rep % 2 == 0 else ("csr", "torch"):
                start, cpu_start = time.perf_counter(), time.process_time()
                result = _aggregate.neighbour_sum(
                    table,
                    nbr,
                    weight,
                    edge_mask,
                    backward=variant,
                    self_rows=num_dst if with_self else None,
                )
                torch.autograd.backward(list(result) if with_self else [result], grads)
                if rep:
                    seconds[variant].append(time.perf_counter() - start)
                    cpu[variant].append(time.process_time() - cpu_start)
                table.grad = None
        out[f"layer{layer}"] = {
            "rows": num_rows,
            "dst_rows": num_dst,
            "fanout": int(nbr.shape[1]),
            "width": width,
            "self_term": with_self,
            "seconds": seconds,
            "cpu_seconds": cpu,
            "median": {v: statistics.median(x) for v, x in seconds.items()},
            "median_cpu": {v: statistics.median(x) for v, x in cpu.items()},
        }
    return out


def parse_args(argv=None):
    """The command line, with --quick's settings filled in; refuses a run that cannot measure."""
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--model",
        action="append",
        choices=sorted(models.MODELS),
        default=None,
        help="model(s) to time (default: sage); repeat the flag for several",
    )
    p.add_argument("--nodes", type=int, default=2_400_000)
    p.add_argument("--repeats", type=int, default=7, help="steps per variant (median over them)")
    p.add_argument("--warmup", type=int, default=2, help="untimed steps per variant first")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--threads", type=int, default=_THREADS)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-dir", default=None, help="products_like cache (default: zg's)")
    p.add_argument("--quick", action="store_true", help="products_like 100k, 3 repeats")
    p.add_argument(
        "--vs-dgl",
        action="store_true",
        help="SAGE: also DGL's pipeline (NeighborSampler + dgl.nn.SAGEConv) in the rotation",
    )
    p.add_argument("--name", default=None)
    args = p.parse_args(argv)
    if args.repeats < 5 and not args.quick:
        p.error("--repeats must be >= 5 (the median of at least five steps)")
    if args.quick:
        args.nodes, args.repeats, args.warmup = 100_000, 3, 1
    if not _aggregate.available():
        p.error("the CSR backward needs numba, which did not import")
    return args


def time_steps(eng, model, dgl_eng, variants, args):
    """Each repeat trains the same batch index once per variant, rotating which goes first;
    returns {variant: {measure: [seconds per timed repeat]}} (the warm-up repeats dropped)."""
    times = {v: {m: [] for m in MEASURES} for v in variants}
    batch = 0
    for rep in range(args.warmup + args.repeats):
        order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
        for variant in order:
            stages = {s: 0.0 for s in STAGES}
            start, cpu_start = time.perf_counter(), time.process_time()
            if variant == "dgl":
                dgl_eng.run_batch(batch, epoch=0, clock=StageClock(None, into=stages))
            else:
                use_variant(model, variant)
                eng.run_batch(batch, epoch=0, clock=StageClock(None, into=stages))
            total, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            if rep >= args.warmup:
                times[variant]["forward"].append(stages["forward"])
                times[variant]["backward"].append(stages["backward"])
                times[variant]["step_total"].append(total)
                times[variant]["step_cpu"].append(cpu)
        batch += 1
    return times


def measure_model(g, envelope, fanouts, kind, args):
    """One model's results entry: the step times of every variant (and DGL's with --vs-dgl, for
    SAGE), their medians and ratios, and for SAGE the aggregation alone."""
    hidden, extra = (args.hidden // 4, {"heads": 4}) if kind == "gat" else (args.hidden, {})
    torch.manual_seed(args.seed)
    model = models.build(kind, g.feat_dim, hidden, g.num_classes, len(fanouts), **extra)
    # The sampler's kernel: the fused one (the fastest); each variant sets the model's own.
    eng = Engine(
        g,
        model,
        fanouts,
        args.batch_size,
        envelope,
        mode="static",
        seed=args.seed,
        kernel="auto",
    )
    eng.observers = []
    variants, dgl_eng = VARIANTS, None
    if args.vs_dgl and kind == "sage":  # DGL's pipeline in the same rotation: DGL / zg
        from zg.baselines.dgl import DGLModel

        torch.manual_seed(args.seed)
        dgl_eng = Engine(
            g,
            DGLModel(kind, g.feat_dim, hidden, g.num_classes, len(fanouts)),
            fanouts,
            args.batch_size,
            mode="dgl",
            seed=args.seed,
        )
        dgl_eng.observers = []
        variants = VARIANTS + ("dgl",)
    times = time_steps(eng, model, dgl_eng, variants, args)
    use_variant(model, VARIANTS[-1])
    medians = {v: {m: statistics.median(x) for m, x in t.items()} for v, t in times.items()}
    ratios = {v: {m: medians["torch"][m] / medians[v][m] for m in MEASURES} for v in VARIANTS[1:]}
    result = {
        "sampler_kernel": ran_kernel(eng),
        "hidden": hidden,
        **extra,
        "seconds": times,
        "median": medians,
        "ratio_torch_over_variant": ratios,
    }
    if "dgl" in variants:
        result["ratio_dgl_over_variant"] = {
            v: {m: medians["dgl"][m] / medians[v][m] for m in MEASURES} for v in VARIANTS
        }
    if kind == "sage":  # the aggregation alone, on one batch's blocks (layers 1 and 2)
        mb = eng.sample(0, epoch=0)
        layers = [
            (None, False),
            (hidden, True),
            (g.num_classes, False),
        ]  # layer 2 projects first
        result["aggregation_alone"] = time_kernel(mb, layers, 3 * args.repeats)
    return result


def measure(args):
    """The graph, its envelope and every model's results entry, with the load average before."""
    torch.set_num_threads(args.threads)
    fanouts = [15, 10, 5]
    load_before = list(os.getloadavg())
    g = zg.datasets.products_like(
        num_nodes=args.nodes,
        avg_degree=50,
        feat_dim=100,
        num_classes=47,
        seed=0,
        cache_dir=args.cache_dir,
    )
    envelope = zg.Envelope.profile(g, fanouts, args.batch_size, num_batches=8, seed=args.seed)
    # (model, entry) in the order timed: a model named twice is timed and printed twice, and
    # the results dict keeps its last entry.
    measured = [
        (kind, measure_model(g, envelope, fanouts, kind, args)) for kind in args.model or ["sage"]
    ]
    return {
        "graph": g,
        "fanouts": fanouts,
        "load_average_before": load_before,
        "measured": measured,
        "results": dict(measured),
    }


def report(measured):
    """The table: per model, DGL's medians (where timed), the aggregation alone (SAGE), then
    every measure's medians and ratios."""
    rows = []
    for kind, r in measured:
        medians = r["median"]
        if "ratio_dgl_over_variant" in r:
            for m in MEASURES:
                rows.append(
                    [
                        kind,
                        f"dgl {m}",
                        f"{medians['dgl'][m]:.4f}",
                        "",
                        "",
                        "DGL / torch, DGL / csr+fused:",
                        f"{medians['dgl'][m] / medians['torch'][m]:.2f}, "
                        f"{medians['dgl'][m] / medians['csr_fused_relu'][m]:.2f}",
                    ]
                )
        for name, k in r.get("aggregation_alone", {}).items():
            for label, key in (("", "median"), (" cpu", "median_cpu")):
                rows.append(
                    [
                        kind,
                        f"{name} aggregation{label}",
                        f"{k[key]['torch']:.4f}",
                        f"{k[key]['csr']:.4f}",
                        "",
                        f"{k[key]['torch'] / k[key]['csr']:.2f}",
                        "",
                    ]
                )
        for m in MEASURES:
            rows.append(
                [kind, m]
                + [f"{medians[v][m]:.4f}" for v in VARIANTS]
                + [f"{r['ratio_torch_over_variant'][v][m]:.2f}" for v in VARIANTS[1:]]
            )
    print(
        table(
            rows,
            [
                "model",
                "measure",
                "torch (s)",
                "csr (s)",
                "csr+fused relu (s)",
                "torch / csr",
                "torch / csr+fused",
            ],
        )
    )


def write_result(args, argv, m):
    """bench/results/<name>.json: the settings, the load average around the run and the results."""
    results = m["results"]
    name = args.name or ("aggregation_quick" if args.quick else "aggregation")
    return write_json(
        name,
        {
            "machine": machine_note(),
            "threads": args.threads,
            "load_average_before": m["load_average_before"],
            "load_average_after": list(os.getloadavg()),
            "settings": {
                "nodes": args.nodes,
                "edges": m["graph"].num_edges,
                "fanouts": m["fanouts"],
                "batch_size": args.batch_size,
                "repeats": args.repeats,
                "warmup": args.warmup,
                "seed": args.seed,
                "sampler_kernel": sorted({r["sampler_kernel"] for r in results.values()}),
                "variants": {
                    "torch": "kernel='torch': the explicit gather and sum (as CUDA runs it); ReLU after the layer",
                    "csr": "kernel='fused': embedding_bag forward, zg.kernels.aggregate CSR backward (SAGE: self term's gradient in the same pass); ReLU after the layer",
                    "csr_fused_relu": "CSR backward; hidden layers fuse padded-row zeroing and ReLU (zg now)",
                },
            },
            "command": "bench/aggregation.py "
            + " ".join(argv if argv is not None else sys.argv[1:]),
            "results": results,
        },
    )


def main(argv=None) -> int:
    args = parse_args(argv)
    m = measure(args)
    report(m["measured"])
    path = write_result(args, argv, m)
    print(f"wrote {path}")
    return 0


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """Per model: the kit's CSR aggregation step against torch's embedding_bag step (and DGL's,
    where the file has it), paired per repeat (n = repeats, not seeds: one graph, one seed)."""
    out = []
    for model, r in (doc["detail"].get("results") or {}).items():
        sec = r.get("seconds") or {}
        zg_variant = "csr_fused_relu" if "csr_fused_relu" in sec else "csr"
        if zg_variant not in sec:
            continue
        ours = sec[zg_variant]["step_total"]
        for base, label in (("torch", "torch embedding_bag"), ("dgl", "DGL's layer")):
            if base in sec:
                ratios = paired(sec[base]["step_total"], ours)
                if ratios:
                    out.append(
                        headline_from(
                            f"{zg_variant}_vs_{base}_{model}",
                            ratios,
                            "x",
                            compared_to=f"{label} (step time {base} / {zg_variant}, per repeat)",
                            where=f"{model}, {doc['settings'].get('nodes')} nodes, "
                            f"batch {doc['settings'].get('batch_size')}, repeats of one seed",
                        )
                    )
    return out


if __name__ == "__main__":
    sys.exit(main())
