"""Grappa vs feature fetching across real (emulated) hosts on shaped links.

    sudo .venv/bin/python bench/network.py          # needs root and iproute2 (NetLab)

For each link bandwidth (tc tbf on every link of a NetLab virtual switch) and worker count P,
one torchrun agent per host (c10d rendezvous) trains csbm with a 3-layer SAGE twice: Grappa
(batch estimator, repartitioning) and the feature-fetching baseline. Measured: the median
epoch time and the bytes each worker sent. The link model of zg.grappa.comm is then checked
against the measurement: its projection for the shaped link is the same trainer's epoch time
measured on unshaped loopback links plus the modelled link time of the bytes sent; the JSON
reports projection / measurement.

Latency cannot be shaped on kernels without the netem qdisc; the JSON says whether it was.
Writes bench/results/network.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tools"))

from zg.grappa.comm import Link, project_seconds  # noqa: E402
from netlab import NetLab, supports_latency, unavailable_reason  # noqa: E402
from _machine import machine_note, table, write_json  # noqa: E402
from zg.grappa.history import bytes_per_worker  # noqa: E402

RATES = {"1gbit": 125e6, "10gbit": 1.25e9, "100mbit": 12.5e6}


def run_on_lab(lab: NetLab, config: dict, workdir: Path, port: int, timeout: float) -> dict:
    cfg = workdir / "config.json"
    cfg.write_text(json.dumps(config))
    out = workdir / "history.json"
    codes, logs = lab.torchrun(["-m", "zg.grappa", "--config", str(cfg), "--out", str(out)], workdir,
                               port=port, timeout=timeout, rdzv_id=f"net{port}")
    if codes != [0] * lab.hosts:
        raise RuntimeError(f"torchrun failed with {codes}: {logs[0][-2000:]}")
    return json.loads(out.read_text())


def summary(history: dict) -> dict:
    epochs = history["epochs"]
    return {"seconds_per_epoch": history["seconds_per_epoch"],
            "bytes_per_epoch_per_worker": history["bytes_per_epoch_per_worker"],
            "bytes_per_worker": [b / len(epochs) for b in bytes_per_worker(history)],
            "rounds_per_worker": [sum(e["rounds"][p] for e in epochs) / len(epochs)
                                  for p in range(history["workers"])],
            "test_acc": history["final"]["test_acc"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--rates", nargs="+", default=["1gbit", "10gbit"])
    ap.add_argument("--nodes", type=int, default=20_000)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args(argv)
    reason = unavailable_reason()
    if reason:
        print(f"skipped: {reason}")
        return 0
    dataset = {"name": "csbm", "num_nodes": args.nodes, "avg_degree": 20, "num_classes": 10,
               "feat_dim": 128, "seed": 0}
    base = {"dataset": dataset, "epochs": args.epochs, "num_layers": 3, "hidden_dim": 128,
            "fanouts": [15, 10, 5], "batch_size": 1024, "timeout": 300.0, "seed": 0, "eval_every": args.epochs}
    trainers = {"grappa": {"trainer": "grappa", "estimator": "batch", "repartition_every": 1},
                "feature_fetch": {"trainer": "feature_fetch"}}
    rows, port = [], 29600
    with tempfile.TemporaryDirectory() as tmp:
        for P in args.workers:
            for rate in ["loopback"] + list(args.rates):
                with NetLab(hosts=P, bandwidth=None if rate == "loopback" else rate, prefix="zgb") as lab:
                    for name, extra in trainers.items():
                        port += 1
                        work = Path(tmp) / f"{name}-{P}-{rate}"
                        work.mkdir()
                        t0 = time.perf_counter()
                        history = run_on_lab(lab, {**base, **extra}, work, port, args.timeout)
                        row = {"trainer": name, "workers": P, "link": rate, **summary(history),
                               "wall_seconds": time.perf_counter() - t0}
                        rows.append(row)
                        print(f"P={P} {rate:8s} {name:14s} {row['seconds_per_epoch']:8.2f} s/epoch  "
                              f"{row['bytes_per_epoch_per_worker'] / 2**20:9.2f} MiB/epoch/worker", flush=True)
    # Link-model check: projection from the loopback run vs the shaped measurement.
    for row in rows:
        if row["link"] == "loopback":
            continue
        loop = next(r for r in rows if r["link"] == "loopback" and r["trainer"] == row["trainer"]
                    and r["workers"] == row["workers"])
        link = Link(row["link"], RATES[row["link"]], 0.0)
        proj = project_seconds(loop["seconds_per_epoch"], row["bytes_per_worker"], row["rounds_per_worker"], link)
        row["projected_seconds_per_epoch"] = proj["projected_seconds"]
        row["projection_over_measurement"] = proj["projected_seconds"] / row["seconds_per_epoch"]
    speedups = {}
    for P in args.workers:
        for rate in args.rates:
            g = next(r for r in rows if r["trainer"] == "grappa" and r["workers"] == P and r["link"] == rate)
            f = next(r for r in rows if r["trainer"] == "feature_fetch" and r["workers"] == P and r["link"] == rate)
            speedups[f"P{P}/{rate}"] = f["seconds_per_epoch"] / g["seconds_per_epoch"]
    print()
    print(table([[r["trainer"], r["workers"], r["link"], f"{r['seconds_per_epoch']:.2f}",
                  f"{r.get('projected_seconds_per_epoch', float('nan')):.2f}",
                  f"{r['bytes_per_epoch_per_worker'] / 2**20:.2f}"] for r in rows],
                ["trainer", "P", "link", "measured s/epoch", "projected s/epoch", "MiB/epoch/worker"]))
    for k, v in speedups.items():
        print(f"feature_fetch / grappa epoch time, {k}: {v:.2f}x")
    target = speedups.get("P4/1gbit")
    print(f"  [{'met' if target and target >= 4 else 'MISSED'}] Grappa >= 4x faster than feature fetch at P=4 on 1 Gbit/s")
    path = write_json("network", {"benchmark": "network", "machine": machine_note(), "settings": vars(args),
                                  "config": base, "latency_shaped": False,
                                  "netem_available": supports_latency(), "rows": rows, "speedups": speedups,
                                  "note": "links shaped with tc tbf on both ends; no added latency "
                                          "(netem unavailable)" if not supports_latency() else ""})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
