"""The headline metrics of each bench's result file, computed from the file's own rows and detail.

One function per bench (``HEADLINES[bench](doc)``), used both when a bench writes its file
(``bench/_machine.write_json``) and when ``tools/convert_results.py`` converts a legacy file, so a
re-run and a conversion give the same metric names. Where a file has one value per seed, a
metric is the mean and the sample std over the seeds (``n`` = the number of seeds). A metric a
file lacks (a ``--quick`` run, an older layout) is left out rather than invented.

    from bench._headlines import headlines
    doc["headline"] = headlines(doc)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from zg.experiments.results import headline, headline_from

__all__ = ["HEADLINES", "headlines", "short"]


def short(graph) -> str:
    """A graph's name for a metric name: 'csbm_1000000' -> 'csbm1M', 'products_like' -> 'products'."""
    g = str(graph)
    m = re.fullmatch(r"([a-z]+)_?(\d+)", g)
    if m:
        n = int(m.group(2))
        size = (
            f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k" if n % 1000 == 0 else n
        )
        return f"{m.group(1)}{size}"
    return {"products_like": "products"}.get(g, re.sub(r"[^a-z0-9]+", "_", g.lower()).strip("_"))


def _paired(a, b):
    """Per-run ratios a[i] / b[i] (each run's own pair)."""
    return [float(x) / float(y) for x, y in zip(a, b) if y]


def _gpu_check(doc):
    d, out = doc["detail"], []
    for key, value in (d.get("ratios") or {}).items():
        graph, batch, kind = key.split("/")
        unit = "x"
        lower = kind.startswith("peak_")
        out.append(
            headline(
                f"{kind}_{short(graph)}_{batch}",
                value,
                unit,
                compared_to={
                    "captured_vs_dynamic": "dynamic pipeline",
                    "captured_vs_eager": "eager envelope",
                }.get(kind, "dynamic pipeline" if kind.endswith("dynamic") else "worst-case sizes"),
                where=f"{graph}, batch {batch[1:]}, 3-layer SAGE, one seed",
                higher_is_better=not lower,
            )
        )
    for r in doc["rows"]:
        if r.get("variant") == "envelope_captured" and r.get("gpu_execution_fraction") is not None:
            out.append(
                headline(
                    f"gpu_fraction_captured_{short(r['graph'])}_b{r['batch_size']}",
                    r["gpu_execution_fraction"],
                    "fraction",
                    where=f"{r['graph']}, batch {r['batch_size']}, busy fraction of wall time",
                )
            )
    syncs = {}
    for r in doc["rows"]:
        if r.get("cuda_sync_warnings_per_iteration") is not None:
            syncs.setdefault(r["variant"], []).append(r["cuda_sync_warnings_per_iteration"])
    for variant, values in syncs.items():
        out.append(
            headline(
                f"sync_warnings_{variant}_max",
                max(values),
                "per iteration",
                where=f"torch CUDA sync-debug warnings, max over {len(values)} graph x batch rows",
                higher_is_better=False,
            )
        )
    num = d.get("numerics") or {}
    for kind in ("captured", "eager", "tiny_envelope"):
        key = f"{kind}_vs_static_max_abs_param_diff"
        if key in num:
            measured = kind != "captured" or bool(num.get("captured"))
            out.append(
                headline(
                    key,
                    num[key] if measured else None,
                    "abs",
                    compared_to="static step",
                    where=f"max |param diff| after {num.get('batches_per_epoch')} batches; "
                    f"tolerance {(num.get('tolerance') or {}).get(kind)}; same batches: "
                    f"{num.get(kind + '_same_batches')}"
                    + ("" if measured else "; no CUDA Graph captured (no GPU)"),
                    higher_is_better=False,
                )
            )
    return out


def _sampling(doc):
    d, out = doc["detail"], []
    res = d.get("results") or {}
    if "dgl" in res and "zg_envelope" in res:
        values = _paired(
            res["dgl"]["sample_epoch_seconds_all"], res["zg_envelope"]["sample_epoch_seconds_all"]
        )
        out.append(
            headline_from(
                "fused_vs_dgl_sampling",
                values,
                "x",
                compared_to="DGL's sampler, same threads",
                where=f"epoch sampling time, {len(values)} epochs paired (DGL / fused)",
            )
        )
    mem = d.get("memory") or {}
    for key, hib in (("envelope_over_oracle_mean", False), ("envelope_over_worst_case", False)):
        if key in mem:
            out.append(
                headline(
                    key,
                    mem[key],
                    "x",
                    compared_to=key.split("_over_")[1].replace("_", " "),
                    where="memory model bytes of the profiled envelope",
                    higher_is_better=hib,
                )
            )
    if "rate" in (d.get("overflow") or {}):
        out.append(
            headline(
                "overflow_rate",
                d["overflow"]["rate"],
                "fraction",
                where=f"held-out batches ({d['overflow'].get('sampled_batches')})",
                higher_is_better=False,
            )
        )
    return out


def _engine(doc):
    out = []
    for r in doc["rows"]:
        tag = f"{r['model']}_b{r['batch_size']}"
        where = f"{r['graph']}, {r['model']}, batch {r['batch_size']}"
        ratio = r.get("ratio_dgl_vs_envelope") or {}
        if ratio.get("values"):
            out.append(
                headline_from(
                    f"envelope_vs_dgl_{tag}",
                    ratio["values"],
                    "x",
                    compared_to="DGL (time DGL / time zg envelope)",
                    where=where,
                )
            )
        for pipe in ("zg_envelope", "zg_dynamic"):
            s = (r.get(pipe) or {}).get("host_syncs_per_iteration_steady")
            if s is not None:
                out.append(
                    headline(
                        f"host_syncs_{pipe[3:]}_{tag}",
                        s,
                        "per iteration",
                        where=where + ", steady state",
                        higher_is_better=False,
                    )
                )
    for m in doc["detail"].get("memory") or []:
        v = (m.get("envelope_vs_oracle_mean") or {}).get("values")
        if v:
            out.append(
                headline_from(
                    f"envelope_vs_oracle_mean_b{m['batch_size']}",
                    v,
                    "x",
                    compared_to="oracle's mean batch",
                    where=f"{m['graph']}, batch {m['batch_size']}",
                    higher_is_better=False,
                )
            )
    return out


def _network(doc):
    d, out = doc["detail"], []
    rows = {(r["trainer"], r["link"]): r for r in (d.get("measured") or {}).get("rows", [])}
    for trainer, link in rows:
        if trainer == "grappa" and ("feature_fetch", link) in rows:
            out.append(
                headline(
                    f"grappa_vs_feature_fetch_{link}",
                    rows["feature_fetch", link]["seconds_per_epoch"]
                    / rows["grappa", link]["seconds_per_epoch"],
                    "x",
                    compared_to="the kit's feature-fetching trainer",
                    where=f"measured, P={rows['grappa', link]['workers']}, {link}, namespace hosts sharing the cores",
                )
            )
    t = d.get("targets") or {}
    if "projected_products_P4_1gbit_at_least_4x" in t:
        out.append(
            headline(
                "projected_grappa_vs_feature_fetch_products_1gbit_cpu",
                t["projected_products_P4_1gbit_at_least_4x"],
                "x",
                compared_to="the kit's feature-fetching trainer",
                where="projected (link model), products-scale graph, P=4, 1 Gbit/s, CPU compute",
            )
        )
    g = (d.get("projected") or {}).get("gpu_compute_bound")
    if g and "1gbit" in g.get("speedups", {}):
        out.append(
            headline(
                "projected_grappa_vs_feature_fetch_products_1gbit_gpu",
                g["speedups"]["1gbit"],
                "x",
                compared_to="the kit's feature-fetching trainer",
                where="projected (link model), products-scale graph, P=4, 1 Gbit/s, GPU compute bound",
            )
        )
    return out


def _grappa(doc):
    d, out = doc["detail"], []
    t = d.get("targets") or {}
    if "bytes" in t:
        out.append(
            headline(
                "bytes_grappa_over_feature_fetch",
                t["bytes"]["ratio"],
                "x",
                compared_to="feature fetching",
                where="bytes per epoch, grappa (batch) / feature fetch",
                higher_is_better=False,
            )
        )
    feats = [
        r["bytes_per_epoch_by_kind"]["features"]
        for r in doc["rows"]
        if r.get("trainer") in ("grappa", "isolated") and "bytes_per_epoch_by_kind" in r
    ]
    if feats:
        out.append(
            headline(
                "feature_bytes_grappa_max",
                max(feats),
                "B",
                where=f"feature bytes per epoch, max over {len(feats)} isolated/grappa runs",
                higher_is_better=False,
            )
        )
    for a in t.get("accuracy") or []:
        setting = a["grappa_default_setting"]
        single = {
            r["seed"]: r["test_acc"]
            for r in doc["rows"]
            if (r["dataset"], r["layers"], r["trainer"]) == (a["dataset"], a["layers"], "single")
        }
        grappa = {
            r["seed"]: r["test_acc"]
            for r in doc["rows"]
            if (r["dataset"], r["layers"], r["workers"], r["trainer"])
            == (a["dataset"], a["layers"], a["workers"], "grappa")
            and all(r.get(k) == v for k, v in setting.items())
        }
        diffs = [100 * (grappa[s] - single[s]) for s in sorted(grappa) if s in single]
        if diffs:
            out.append(
                headline_from(
                    f"grappa_minus_single_{a['dataset']}_L{a['layers']}_P{a['workers']}",
                    diffs,
                    "points",
                    compared_to="single-process training, same seed",
                    where=f"{a['dataset']}, {a['layers']} layers, P={a['workers']}, kit defaults, test accuracy",
                )
            )
    errs = [
        r
        for r in d.get("gradient_error") or []
        if (r["dataset"], r["layers"], r["workers"], r["parameters"], r["weighting"])
        == ("cora", 2, 4, "init", "inverse")
    ]
    mean_bias = next((r["bias"] for r in errs if r["estimator"] == "mean"), None)
    for r in errs:
        if mean_bias and r["estimator"] != "mean":
            out.append(
                headline(
                    f"gradient_bias_{r['estimator']}_over_mean_cora_L2_P4",
                    r["bias"] / mean_bias,
                    "x",
                    compared_to="plain averaging (mean)",
                    where="bias ratio, cora, 2 layers, P=4, METIS, inverse weights",
                    higher_is_better=False,
                )
            )
    epoch = {}
    for r in doc["rows"]:
        if (
            (r.get("dataset"), r.get("layers"), r.get("trainer"), r.get("estimator"))
            == (
                "csbm",
                2,
                "grappa",
                "batch",
            )
            and r.get("repartition")
            and r.get("method") == "metis"
        ):
            epoch.setdefault(r["workers"], []).append(r["measured_epoch_seconds"])
    if 2 in epoch and 4 in epoch:
        out.append(
            headline(
                "epoch_seconds_P4_over_P2_csbm_L2",
                (sum(epoch[4]) / len(epoch[4])) / (sum(epoch[2]) / len(epoch[2])),
                "x",
                compared_to="P=2",
                where=f"grappa (batch, repartitioned) on the shared cores, {len(epoch[4])} runs each",
                higher_is_better=False,
            )
        )
    for r in errs:
        out.append(
            headline(
                f"gradient_bias_{r['estimator']}_cora_L2_P4",
                r["bias"],
                "rel",
                compared_to="full-graph gradient",
                where=f"|mean G - g*| / |g*|, METIS, inverse weights, {r.get('draws')} draws",
                higher_is_better=False,
            )
        )
    return out


def _depth(doc):
    out, by = [], {(r["trainer"], r["layers"]): r for r in doc["rows"]}
    for (trainer, layers), r in by.items():
        name = re.sub(r"[^a-z0-9]+", "_", trainer).strip("_")
        out.append(
            headline_from(
                f"{name}_L{layers}",
                r["values"],
                "acc",
                where=f"cora, {layers} layers, test accuracy",
            )
        )
        single = by.get(("single", layers))
        if trainer != "single" and single and len(single["values"]) == len(r["values"]):
            diffs = [100 * (x - y) for x, y in zip(r["values"], single["values"])]
            out.append(
                headline_from(
                    f"{name}_minus_single_L{layers}",
                    diffs,
                    "points",
                    compared_to="single-process training, same seed",
                    where=f"cora, {layers} layers, P={doc['settings'].get('workers')}, test accuracy",
                )
            )
    iso = by.get(("isolated", min(layers for _, layers in by)))
    for (trainer, layers), r in by.items():
        if trainer.startswith("grappa") and iso and iso["layers"] == layers:
            out.append(
                headline_from(
                    f"{re.sub(r'[^a-z0-9]+', '_', trainer).strip('_')}_minus_isolated_L{layers}",
                    [100 * (x - y) for x, y in zip(r["values"], iso["values"])],
                    "points",
                    compared_to="isolated training (no repartitioning, plain averaging), same seed",
                    where=f"cora, {layers} layers, test accuracy",
                )
            )
    return out


def _grappa_map(doc):
    out = []
    for c in doc["detail"].get("cells_table") or []:
        if (c["avg_degree"], c["homophily"], c["num_layers"]) != (20, 0.8, 2) or c["workers"] != 4:
            continue
        for trainer in ("grappa", "isolated"):
            cell = c.get(trainer)
            if not cell or cell.get("gap_mean") is None:
                continue
            part = c["method"] + ("_halo" if c.get("halo") else "")
            out.append(
                headline(
                    f"{trainer}_gap_{part}_P4_deg20_snr{c['feature_snr']}",
                    100 * cell["gap_mean"],
                    "points",
                    std=None if cell.get("gap_std") is None else 100 * cell["gap_std"],
                    n=len(doc["detail"].get("design", {}).get("seeds") or doc["seeds"]) or 3,
                    compared_to="single-process training",
                    where=f"csbm, degree 20, homophily 0.8, 2 layers, P=4, {part}",
                )
            )
    return out


def _grappa_map_deep(doc):
    out = []
    for c in doc["detail"].get("cells") or []:
        if c["run"] == "single" or c.get("gap_mean") is None:
            continue
        name = re.sub(r"[^a-z0-9]+", "_", c["run"]).strip("_")
        out.append(
            headline(
                f"gap_{name}_e{c['epochs']}",
                100 * c["gap_mean"],
                "points",
                std=100 * c["gap_std"]
                if c.get("gap_std") is not None and len(doc["seeds"]) > 1
                else None,
                n=len(doc["seeds"]) or 1,
                compared_to="single-process training",
                where=f"csbm, 3 layers, {c['epochs']} epochs",
            )
        )
    return out


def _defaults_check(doc):
    out = []
    for name, g in (doc["detail"].get("graphs") or {}).items():
        diffs = [100 * (x - y) for x, y in zip(g["grappa"]["values"], g["single"]["values"])]
        if diffs:
            out.append(
                headline_from(
                    f"grappa_minus_single_{name}",
                    diffs,
                    "points",
                    compared_to="single-process training, same seed",
                    where=f"{name} ({g['graph']['num_nodes']:,} nodes), kit defaults, P=4",
                )
            )
    return out


def _reference(doc):
    """Each row against the single-process run of the same settings, paired per seed: the
    reference preset and isolated against single under the preset's settings, the kit's
    defaults against single under the kit's defaults (``single_kit``)."""
    ceiling = {"reference": "single", "kit": "single_kit", "isolated": "single"}
    out = []
    for graph, entry in (doc["detail"].get("graphs") or {}).items():
        for depth, cells in entry["depths"].items():
            for run, base in ceiling.items():
                if run in cells and base in cells:
                    v = cells[run]["test_acc_at_best_val"]["values"]
                    single = cells[base]["test_acc_at_best_val"]["values"]
                    out.append(
                        headline_from(
                            f"{run}_minus_{base}_{graph}_L{depth}",
                            [100 * (x - y) for x, y in zip(v, single)],
                            "points",
                            compared_to=f"{base} (single-process training, same settings), same seed",
                            where=f"{graph}, {depth} layers, {entry['epochs']} epochs, test acc at best val",
                        )
                    )
    return out


def _parallel(doc):
    out = []
    rows = doc["rows"]
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        out.append(
            headline(
                "parallel_speedup",
                a["seconds_per_epoch_mean"] / b["seconds_per_epoch_mean"],
                "x",
                compared_to=f"{a['workers']} process x {a['threads_per_worker']} threads",
                where=f"{b['workers']} processes x {b['threads_per_worker']} thread, seconds per epoch",
            )
        )
    if rows:
        out.append(
            headline(
                "host_syncs_max",
                max(r["host_syncs_per_iteration"] for r in rows),
                "per iteration",
                where="every data-parallel run",
                higher_is_better=False,
            )
        )
    return out


def _mmap(doc):
    s, out = doc["detail"].get("summary") or {}, []
    for mode in ("default", "all"):
        if mode in s:
            out.append(
                headline(
                    f"load_speedup_{mode}",
                    s[mode]["load_speedup"],
                    "x",
                    compared_to="reading every array in",
                    where=f"mmap={mode!r}, load time",
                )
            )
            out.append(
                headline(
                    f"anon_added_by_load_{mode}",
                    s[mode]["anon_added_by_load_gib"],
                    "GiB",
                    compared_to=f"{s['eager']['anon_added_by_load_gib']:.2f} GiB read in"
                    if "eager" in s
                    else None,
                    where=f"mmap={mode!r}, process's own memory added by the load",
                    higher_is_better=False,
                )
            )
    return out


def _dgl_check(doc):
    s = doc["detail"].get("seconds") or {}
    if not s.get("dgl"):
        return []
    return [
        headline_from(
            "envelope_vs_dgl_independent",
            _paired(s["dgl"], s["zg"]),
            "x",
            compared_to="DGL's own NeighborSampler + DataLoader + SAGEConv",
            where=f"{doc['settings'].get('nodes')} nodes, batch {doc['settings'].get('batch_size')}, runs paired",
        )
    ]


def _scaling(doc):
    return [
        headline(
            f"envelope_vs_dgl_n{short(r['num_nodes'])}_b{r['batch_size']}",
            r["dgl_over_zg_envelope"],
            "x",
            compared_to="DGL (time DGL / time zg envelope)",
            where=f"{r['num_nodes']:,} nodes, batch {r['batch_size']}, SAGE",
        )
        for r in doc["detail"].get("summary") or []
        if r.get("dgl_over_zg_envelope") is not None
    ]


def _gpu_sync_sources(doc):
    return [
        headline(
            f"syncs_{variant}",
            v["syncs_per_iteration"],
            "per iteration",
            where=f"{doc['detail'].get('graph')}, host syncs per iteration",
            higher_is_better=False,
        )
        for variant, v in (doc["detail"].get("variants") or {}).items()
    ]


def _launches(doc):
    """Launches per steady static step, per model and batch size (a count: n = 1, exact)."""
    target = (doc.get("settings") or {}).get("target")
    return [
        headline(
            f"launches_{r['model']}_b{r['batch_size']}",
            r["launches_per_iteration"],
            "launches per iteration",
            compared_to=target if r["model"] == "sage" else None,
            where=f"{r['model']}, batch {r['batch_size']}, 3 layers h=256, [15, 10, 5], "
            "static step, torch path (zg.audit.LaunchCount)",
            higher_is_better=False,
        )
        for r in doc["rows"]
    ]


def _aggregation(doc):
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
                ratios = _paired(sec[base]["step_total"], ours)
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


def _accuracy(doc):
    """Test accuracy at the lowest and highest homophily the file swept (one seed each)."""
    rows = sorted(doc["rows"], key=lambda r: r["homophily_requested"])
    out = []
    for r in {id(x): x for x in rows[:1] + rows[-1:]}.values():
        h = r["homophily_requested"]
        out.append(
            headline(
                f"test_acc_h{h}",
                r["test_accuracy"],
                "acc",
                compared_to=f"features alone: {r['feature_only_test_accuracy']:.3f}",
                where=f"csbm, homophily {h}, SAGE, one seed",
            )
        )
    return out


def _grappa_diagnosis(doc):
    """The diagnosis's gaps to single-process training (points; single minus trainer, so lower is
    better), paired per seed: on Cora and the csbm 20k graph in the combined file, on the one
    dataset of each partial file (a long run, the ablations)."""
    datasets = doc["detail"].get("datasets") or {}
    main = [k for k in ("cora", "csbm20k") if k in datasets]
    out = []
    for dataset in main or list(datasets):
        d = datasets[dataset]
        by = {}
        for r in d.get("runs") or []:
            by.setdefault(r["run"], {})[r["seed"]] = r["final_test_acc"]
        single = by.get("single", {})
        slug = re.sub(r"[^a-z0-9]+", "_", dataset.lower()).strip("_")
        for run in (
            "isolated",
            "grappa/batch",
            "grappa/defaults",
            "grappa/batch halo",
            "grappa/batch every 1",
        ):
            seeds = sorted(set(by.get(run, {})) & set(single))
            if not seeds:
                continue
            gaps = [100.0 * (single[s] - by[run][s]) for s in seeds]
            name = re.sub(r"[^a-z0-9]+", "_", run.replace("grappa/", "grappa "))
            out.append(
                headline_from(
                    f"gap_{name}_{slug}",
                    gaps,
                    "points",
                    compared_to="single-process training, same seed (single minus this)",
                    where=f"{dataset}, {d.get('epochs')} epochs, final test accuracy",
                    higher_is_better=False,
                )
            )
    return out


def _none(doc):
    return []


HEADLINES: dict[str, Callable[[dict], list]] = {
    "gpu_check": _gpu_check,
    "sampling": _sampling,
    "engine": _engine,
    "network": _network,
    "grappa": _grappa,
    "depth": _depth,
    "grappa_map": _grappa_map,
    "grappa_map_deep": _grappa_map_deep,
    "grappa_defaults_check": _defaults_check,
    "grappa_reference": _reference,
    "parallel": _parallel,
    "mmap_load": _mmap,
    "dgl_check": _dgl_check,
    "scaling": _scaling,
    "gpu_sync_sources": _gpu_sync_sources,
    "launches": _launches,
    "accuracy": _accuracy,
    "aggregation": _aggregation,
    "grappa_diagnosis": _grappa_diagnosis,
}


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of ``doc`` (a zg-result/1 document, headline not yet needed)."""
    fn = HEADLINES.get(doc["bench"], _none)
    out = [m for m in fn(doc) if m["value"] is None or math.isfinite(m["value"])]
    seen = set()
    for m in out:
        if m["name"] in seen:
            raise ValueError(f"{doc['bench']}: headline metric {m['name']!r} computed twice")
        seen.add(m["name"])
    return out
