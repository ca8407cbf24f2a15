"""Memory-mapped against fully loaded: load time and memory of a graph the size of ogbn-products.

    .venv/bin/python bench/mmap_load.py                  # 2.4M nodes, 120M edges, 100 features
    .venv/bin/python bench/mmap_load.py --nodes 200000 --edges 10000000 --name mmap_load_small

Writes a random graph of that size (uniform random in-neighbours, N(0, 1) float32 features,
47 classes, an 8/2/90 % split; generated with numpy in a few seconds) with
``zg.datasets.save_folder`` into ``bench/data/`` (gitignored; about 2 GB at the default size),
then measures in fresh processes, alternating, ``--repeats`` times each:

    default zg.datasets.load_folder(path)              (x mapped, np.load(mmap_mode="c");
                                                        the structure, y and splits copied)
    all     zg.datasets.load_folder(path, mmap="all")  (every array mapped -> zg.Graph)
    eager   zg.datasets.load_folder(path, mmap=False)  (every array read into memory)

For each: seconds to load (zg.Graph's full validation included, which reads every array
once), peak RSS (VmHWM), resident anonymous memory (the process's own) and resident
file-backed pages (page cache mapped into the process, which the kernel can drop and
re-read) after loading, the peak of the anonymous part (polled every 5 ms), and the seconds
to sample ``--batches`` mini-batches of 1024 seeds with fanouts [15, 10, 5] (DynamicSampler)
and gather their input features. The folder is deleted at the end (``--keep`` keeps it).

The page cache is warm in every mode (the folder was just written, and nothing here drops
the kernel's caches); a cold read from disk adds the disk's time to each. Writes
bench/results/<name>.json with the machine note.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: idle OpenMP threads sleep

import argparse
import gc
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

DATA = Path(__file__).resolve().parent / "data"

MODES = ("default", "all", "eager")
# load_folder's mmap= for each mode.
MMAP = {"default": True, "all": "all", "eager": False}

# Runs in a fresh interpreter per measurement, so one mode's memory never counts for another.
CHILD = r"""
import json, os, sys, threading, time
import torch
import zg

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0]) * 1024          # kB -> bytes
    return out

def mapped_from(tensor):
    # The file the tensor's memory is mapped from (None: anonymous memory).
    address = tensor.data_ptr()
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            low, high = (int(v, 16) for v in fields[0].split("-"))
            if low <= address < high:
                return os.path.basename(fields[5]) if len(fields) > 5 and fields[5].startswith("/") else None
    return None

peak_anon = [0]
stop = threading.Event()
def poll():
    while not stop.is_set():
        peak_anon[0] = max(peak_anon[0], status()["RssAnon"])
        time.sleep(0.005)

path, mode, mmap, batches = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), int(sys.argv[4])
before = status()
watcher = threading.Thread(target=poll, daemon=True)
watcher.start()
start = time.perf_counter()
g = zg.datasets.load_folder(path, mmap=mmap)
load_seconds = time.perf_counter() - start
after_load = status()
peak_anon_load = peak_anon[0]
sampler = zg.DynamicSampler(g, [15, 10, 5])
gen = torch.Generator().manual_seed(0)
start = time.perf_counter()
gathered = 0
for b in range(batches):
    seeds = g.train_idx[torch.randint(g.train_idx.numel(), (1024,), generator=gen)].unique()
    mb = sampler.sample(seeds, 0, b)
    gathered += g.x[mb.input_nodes].shape[0]
sample_seconds = time.perf_counter() - start
after_sample = status()
stop.set()
watcher.join()
print(json.dumps({
    "mode": mode, "mmap": mmap, "load_seconds": load_seconds, "sample_seconds": sample_seconds,
    "batches": batches, "input_rows_gathered": gathered,
    "rss_before_load": before["VmRSS"], "anon_before_load": before["RssAnon"],
    "peak_rss_load": after_load["VmHWM"], "anon_after_load": after_load["RssAnon"],
    "file_after_load": after_load["RssFile"], "peak_anon_load": peak_anon_load,
    "peak_rss_total": after_sample["VmHWM"], "peak_anon_total": peak_anon[0],
    "anon_after_sample": after_sample["RssAnon"], "file_after_sample": after_sample["RssFile"],
    "indices_mapped_from": mapped_from(g.indices),
    "x_mapped_from": mapped_from(g.x),
}))
"""


def generate(path: Path, nodes: int, edges: int, feat_dim: int, seed: int) -> dict:
    """Write the benchmark graph with zg.datasets.save_folder; returns what was written."""
    import torch

    import zg

    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    degrees = rng.multinomial(edges, np.full(nodes, 1.0 / nodes))  # [N], sums to E
    indptr = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(degrees, out=indptr[1:])
    del degrees
    indices = rng.integers(0, nodes, edges, dtype=np.int64)  # [E] sources
    x = rng.standard_normal((nodes, feat_dim), dtype=np.float32)  # [N, F]
    y = rng.integers(0, 47, nodes, dtype=np.int64)
    perm = rng.permutation(nodes)
    n_train, n_val = int(0.08 * nodes), int(0.02 * nodes)
    g = zg.Graph(
        indptr,
        indices,
        x=x,
        y=y,
        num_classes=47,
        name="mmap_bench",
        train_idx=np.sort(perm[:n_train]),
        val_idx=np.sort(perm[n_train : n_train + n_val]),
        test_idx=np.sort(perm[n_train + n_val :]),
    )
    generated = time.perf_counter() - start
    start = time.perf_counter()
    zg.datasets.save_folder(g, path)
    written = time.perf_counter() - start
    size = sum(p.stat().st_size for p in path.iterdir())
    del g, indptr, indices, x, y, perm, torch
    gc.collect()
    return {
        "generate_seconds": generated,
        "write_seconds": written,
        "bytes_on_disk": size,
        "files": {p.name: p.stat().st_size for p in sorted(path.iterdir())},
    }


def measure(path: Path, mode: str, batches: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), mode, json.dumps(MMAP[mode]), str(batches)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--nodes", type=int, default=2_400_000)
    ap.add_argument("--edges", type=int, default=120_000_000)
    ap.add_argument("--feat-dim", type=int, default=100)
    ap.add_argument("--batches", type=int, default=10, help="mini-batches sampled after loading")
    ap.add_argument(
        "--repeats", type=int, default=3, help="measurements per mode (alternating; default 3)"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--name", default="mmap_load")
    ap.add_argument("--keep", action="store_true", help="keep the graph folder in bench/data/")
    args = ap.parse_args()

    from _machine import machine_note, table, write_json

    DATA.mkdir(exist_ok=True)
    path = DATA / f"{args.name}_graph"
    if path.exists():
        shutil.rmtree(path)
    try:
        print(
            f"writing {args.nodes:,} nodes, {args.edges:,} edges, {args.feat_dim} features to {path}"
        )
        written = generate(path, args.nodes, args.edges, args.feat_dim, args.seed)
        print(
            f"  {written['bytes_on_disk'] / 2**30:.2f} GiB in {written['generate_seconds']:.1f} s "
            f"(generate) + {written['write_seconds']:.1f} s (save_folder)"
        )
        runs = []
        for repeat in range(args.repeats):
            for mode in MODES:
                run = measure(path, mode, args.batches)
                run["repeat"] = repeat
                runs.append(run)
                print(
                    f"  {mode:7s} load {run['load_seconds']:.2f} s, peak RSS "
                    f"{run['peak_rss_load'] / 2**30:.2f} GiB, anonymous {run['anon_after_load'] / 2**30:.2f} GiB"
                )
    finally:
        if not args.keep:
            shutil.rmtree(path, ignore_errors=True)

    def mean(mode: str, key: str) -> float:  # over the repeats
        return statistics.fmean(r[key] for r in runs if r["mode"] == mode)

    gib = 2**30
    summary = {
        mode: {
            "load_seconds": mean(mode, "load_seconds"),
            "sample_seconds": mean(mode, "sample_seconds"),
            "peak_rss_load_gib": mean(mode, "peak_rss_load") / gib,
            "peak_anon_load_gib": mean(mode, "peak_anon_load") / gib,
            "anon_after_load_gib": mean(mode, "anon_after_load") / gib,
            "file_after_load_gib": mean(mode, "file_after_load") / gib,
            "peak_anon_total_gib": mean(mode, "peak_anon_total") / gib,
            # what loading itself added to the process's own memory (torch and zg
            # imported before the clock starts are not counted)
            "anon_added_by_load_gib": statistics.fmean(
                r["anon_after_load"] - r["anon_before_load"] for r in runs if r["mode"] == mode
            )
            / gib,
            "peak_anon_added_by_load_gib": statistics.fmean(
                r["peak_anon_load"] - r["anon_before_load"] for r in runs if r["mode"] == mode
            )
            / gib,
        }
        for mode in MODES
    }
    # Each mapped mode against eager (every array read in).
    for mode in ("default", "all"):
        summary[mode]["load_speedup"] = (
            summary["eager"]["load_seconds"] / summary[mode]["load_seconds"]
        )
        summary[mode]["anonymous_memory_saved_gib"] = (
            summary["eager"]["anon_after_load_gib"] - summary[mode]["anon_after_load_gib"]
        )
        summary[mode]["sampling_slowdown"] = (
            summary[mode]["sample_seconds"] / summary["eager"]["sample_seconds"]
        )
    print()
    print(
        table(
            [
                [
                    m,
                    f"{summary[m]['load_seconds']:.2f}",
                    f"{summary[m]['peak_rss_load_gib']:.2f}",
                    f"{summary[m]['peak_anon_added_by_load_gib']:.2f}",
                    f"{summary[m]['anon_added_by_load_gib']:.2f}",
                    f"{summary[m]['file_after_load_gib']:.2f}",
                    f"{summary[m]['sample_seconds']:.2f}",
                ]
                for m in MODES
            ],
            [
                "mode",
                "load s",
                "peak RSS GiB",
                "peak anon added GiB",
                "anon added GiB",
                "file-backed GiB",
                f"sample {args.batches} batches s",
            ],
        )
    )
    out = write_json(
        args.name,
        {
            "machine": machine_note(),
            "setting": {
                "nodes": args.nodes,
                "edges": args.edges,
                "feat_dim": args.feat_dim,
                "batches": args.batches,
                "batch_size": 1024,
                "fanouts": [15, 10, 5],
                "repeats": args.repeats,
                "seed": args.seed,
                "page_cache": "warm (just written)",
            },
            "written": written,
            "runs": runs,
            "summary": summary,
            "modes": {
                mode: f"zg.datasets.load_folder(path, mmap={MMAP[mode]!r})" for mode in MODES
            },
            "notes": (
                "summary: the mean of the repeats per mode (its ratios: of those means); the "
                "headline ratios are paired per repeat (mean and sample std over repeats); "
                "seconds are wall clock in a fresh process "
                "(imports excluded); memory from /proc/self/status: VmHWM is the peak RSS, "
                "RssAnon the process's own memory, RssFile the mapped page cache that the "
                "kernel can reclaim. Loading includes zg.Graph's validation, which reads "
                "every array once in every mode. load_speedup, anonymous_memory_saved_gib and "
                "sampling_slowdown compare a mapped mode with eager."
            ),
        },
    )
    print(f"\nwrote {out}")


# ----------------------------------------------------------------------------- headline metrics


def headlines(doc: dict) -> list[dict]:
    """The headline metrics of a mmap_load result (bench/_headlines.py calls it): each repeat
    measured every mode back to back, so each ratio is paired within a repeat (eager's load over
    the mapped mode's, the same repeat) and reported as the mean and sample std over repeats,
    never the best of each side."""
    from zg.experiments.results import headline_from  # here: the bench's parent stays light

    runs, out = doc.get("rows") or [], []

    def per_repeat(mode: str, key) -> dict[int, float]:
        return {r["repeat"]: key(r) for r in runs if r["mode"] == mode}

    eager_load = per_repeat("eager", lambda r: r["load_seconds"])
    eager_anon = per_repeat("eager", lambda r: r["anon_after_load"] - r["anon_before_load"])
    for mode in ("default", "all"):
        load = per_repeat(mode, lambda r: r["load_seconds"])
        anon = per_repeat(mode, lambda r: r["anon_after_load"] - r["anon_before_load"])
        paired = sorted(set(load) & set(eager_load))
        if not paired:
            continue
        repeats = f"paired per repeat over {len(paired)} repeats"
        out.append(
            headline_from(
                f"load_speedup_{mode}",
                [eager_load[k] / load[k] for k in paired],
                "x",
                compared_to="reading every array in (mmap=False), the same repeat",
                where=f"mmap={mode!r}, load time, {repeats}",
            )
        )
        read_in = sum(eager_anon[k] for k in paired) / len(paired) / 2**30
        out.append(
            headline_from(
                f"anon_added_by_load_{mode}",
                [anon[k] / 2**30 for k in sorted(anon)],
                "GiB",
                compared_to=f"{read_in:.2f} GiB read in (mean)",
                where=f"mmap={mode!r}, process's own memory added by the load, every repeat",
                higher_is_better=False,
            )
        )
    return out


if __name__ == "__main__":
    main()
