"""The Grappa authors' public code beside the kit's ``preset="reference"``, on one machine, in
one run, with both of the kit's CPU kernels (issue 50, item 5).

    GRAPPA_SRC=<git dir of chongyang-xu/grappa> PHMAP_SRC=<git dir of greg7mdp/parallel-hashmap> \\
        .venv/bin/python bench/grappa_peer.py                  # 30 epochs x 3 seeds: the file
    .venv/bin/python bench/grappa_peer.py --quick               # 5 epochs, one seed: a smoke run

Their side is measured by the peer, not by this script: ``../shared/grappa_peer/`` (``--peer`` or
``GRAPPA_PEER``; its README says what it needs) builds the public code
(github.com/chongyang-xu/grappa at 5b00124, patched only for the CPU, gloo and byte counters)
into a work folder (``--work`` or ``GRAPPA_PEER_WORK``, default /tmp/grappa-peer) the first time,
and runs it on Cora with 4 processes (``run.sh`` with ``VARIANTS=asis``: their ``t10n_train.py``
with its default setting: SAGE 3 x 128, fanouts 15,10,5, batch 1000 per worker, lr 0.003,
eval_every 5, one thread per process). zg's side is run by this script, in a subprocess of its
own (``bench/grappa_peer.py --zg-run KERNEL SEED HISTORY EPOCHS``, with the peer's Python, the
same environment and the settings of the peer's ``zg_reference.py`` plus the kernel):
``zg.grappa.train(cora, workers=4, preset="reference", num_layers=3, eval_every=5, threads=1,
timeout=900, kernel=K)``, once with ``kernel="auto"`` (the compiled CPU kernels, numba: the same
samples bit for bit) and once with ``kernel="torch"`` (the readable torch reference). Per seed,
back to back: theirs, then zg with "auto", then zg with "torch". Their rows are read back with
the peer's ``summarize.py``; the file is ``bench/results/grappa_peer.json``
(``grappa_peer_quick.json`` with --quick, ``grappa_peer_e150.json`` with ``--epochs 150``).

What each side's numbers are (per seed; the first epoch, epoch 0, left out of every median, as
zg.grappa.account.account_summary does):

    theirs   rank0_train_seconds: the median of rank 0's ``epoch_|...|epoch_seconds|`` lines
             (their epoch clock, which stops before the evaluation that follows every 5th
             epoch), epochs 1.. ; epoch_seconds_median_all_epochs: summarize.py's median over
             every epoch, epoch 0 included; test_acc_at_best_val: the ``infer_`` line (the
             best-validation model re-evaluated at the end); their per-part medians (rank 0,
             epochs 1..). Their code takes no seed (the chunking is drawn unseeded): a seed
             names the run.
    zg       per kernel ("auto", "torch"; ``kernel_ran``: the history's ``kernel``, what ran):
             rank0_train_seconds: the median over epochs 1.. of rank 0's own epoch clock minus
             rank 0's evaluation seconds (each record's ``account``: ``seconds[0] -
             parts["evaluation"][0]``): the clock theirs is read on; seconds_per_epoch: the
             kit's own figure (the history's ``seconds_per_epoch``: the median over every epoch
             of the slowest worker's epoch, evaluation waits included); test_acc_at_best_val:
             ``final.test_acc_at_best_val``; the epoch's account (zg.grappa.account).

The headline ``epoch_ratio_zg_over_theirs`` compares equal clocks: zg's rank0_train_seconds
with kernel "auto" over their rank0_train_seconds, paired per seed (mean ± sample std);
``epoch_ratio_zg_torch_over_theirs`` is the same with kernel "torch". So that nothing is hidden,
``epoch_ratio_zg_slowest_worker_over_theirs`` (kernel "auto") and
``epoch_ratio_zg_torch_slowest_worker_over_theirs`` put the kit's own seconds_per_epoch over
theirs. Each headline's ``where`` names the kernel and the clock. Accuracy: ``test_acc_zg``
(auto), ``test_acc_zg_torch``, their differences from theirs and whether each lies within their
spread (``test_acc_zg_within_their_spread``, ``test_acc_zg_torch_within_their_spread``).

The public repositories must be on the machine as git directories (the search tool's ``fetch``
of ``github:chongyang-xu/grappa`` and ``github:greg7mdp/parallel-hashmap``); given as
``--grappa-src`` / ``--phmap-src`` or GRAPPA_SRC / PHMAP_SRC. Once the work folder holds a build,
they may be left out. Earlier outputs in the work folder's ``data/`` are moved to
``previous/<date>/`` first, so the file holds this run's runs only.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import hashlib
import io
import json
import os
import runpy
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _machine import machine_note, pm, table, write_json

from zg.experiments.results import headline, headline_from, mean_std

WORKERS = 4
SEEDS = (0, 1, 2)
EPOCHS = 30
QUICK_EPOCHS = 5  # their code evaluates first after epoch 4 ((epoch + 1) % 5): fewer, no accuracy
LAYERS = 3
EVAL_EVERY = 5  # run.sh's setting for both sides (theirs: the default of t10n_train.py)
SKIP = 1  # epochs left out of every median (the first: starting), as account_summary does
THEIRS = "asis"  # run.sh's variant: the public code as published (CPU/gloo, byte counters)
# zg's kernels, in the order they run after theirs; the headline's name of each
KERNELS = ("auto", "torch")
NAME = {"auto": "zg", "torch": "zg_torch"}
# The clocks a zg row is read on: the headline's suffix and what it is.
CLOCKS = {
    "rank0_train_seconds": (
        "",
        "rank 0's epoch clock less its evaluation, median over epochs 1.. (their clock)",
    ),
    "seconds_per_epoch": (
        "_slowest_worker",
        "the kit's seconds_per_epoch (slowest worker's epoch, evaluation waits included, "
        "median over every epoch)",
    ),
}
THEIR_CLOCK = "rank 0's epoch_seconds (stops before their evaluation), median over epochs 1.."
DEFAULT_PEER = ROOT.parent / "shared" / "grappa_peer"
DEFAULT_WORK = Path("/tmp/grappa-peer")
PEER_FILES = ("run.sh", "summarize.py")
# rank 0's per-epoch line of their t10n_train.py: the parts of its epoch clock
THEIR_PARTS = ("sampling", "f_fetch", "pcie", "forward", "backward", "update", "account")
RETRIES = 3  # attempts per seed when only rank 0's last line was mangled (mangled())
RUN_TIMEOUT = 3600  # their run of one seed (plus the first build: about 5 minutes on 2 cores)
ZG_TIMEOUT = 1200  # one zg run (run.sh's limit for zg_reference.py)


class PeerMissing(SystemExit):
    """The peer (its scripts, the public repositories or the build) is not there."""


def peer_dir(arg: str | None) -> Path:
    """The peer's folder: ``--peer``, else GRAPPA_PEER, else ../shared/grappa_peer; it must
    hold run.sh and summarize.py."""
    where = arg or os.environ.get("GRAPPA_PEER") or str(DEFAULT_PEER)
    path = Path(where).resolve()
    missing = [f for f in PEER_FILES if not (path / f).is_file()]
    if missing:
        raise PeerMissing(
            f"grappa_peer: the peer folder {path} lacks {', '.join(missing)}: give --peer or "
            f"GRAPPA_PEER (the folder with run.sh, summarize.py and zg_reference.py; default "
            f"{DEFAULT_PEER})"
        )
    return path


def built(work: Path) -> bool:
    """Whether ``work`` already holds run.sh's build (its venv, both source trees, the _C module)."""
    return (
        (work / "venv" / "bin" / "python").exists()
        and (work / "phmap").is_dir()
        and any((work / "grappa" / "t10n").glob("_C*.so"))
    )


def source(arg: str | None, env: str, repo: str, work: Path, copy: str) -> str:
    """A public repository's git directory: the argument, else the environment variable, else
    (once built) the work folder's own clone; a clear error naming what is missing otherwise."""
    given = arg or os.environ.get(env)
    if not given:
        if built(work):
            return str(work / copy)
        raise PeerMissing(
            f"grappa_peer: no {repo} and no build in {work}: give --{env.lower().replace('_', '-')}"
            f" or {env} (a git directory of github.com/{repo}; the search tool's fetch of "
            f"github:{repo} brings one and prints its path)"
        )
    ok = subprocess.run(
        ["git", "-C", given, "rev-parse", "--git-dir"], capture_output=True, text=True
    )
    if ok.returncode != 0:
        raise PeerMissing(f"grappa_peer: {env}={given} is not a git directory of {repo}")
    return given


def set_aside(data: Path) -> Path | None:
    """Move earlier runs' outputs in ``data`` (public_*/, zg_*) to ../previous/<date>/ (the
    peer's summarize.py reads every file there, and zg_reference.py appends)."""
    old = [*data.glob("public_*"), *data.glob("zg_*")]
    if not old:
        return None
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    dest = data.parent / "previous" / stamp
    dest.mkdir(parents=True, exist_ok=True)
    for p in old:
        shutil.move(str(p), str(dest / p.name))
    return dest


def mangled(train_log: Path) -> bool:
    """Whether their run finished but rank 0's final line was interleaved with rank 2's output
    (both print to one file, block-buffered): ``run_public.sh``'s ``grep "^rank0 infer_"``
    then fails although nothing else did."""
    if not train_log.exists():
        return False
    lines = train_log.read_text(errors="replace").splitlines()
    return any("infer_|epoch|" in x for x in lines) and not any(
        x.startswith("rank0 infer_") for x in lines
    )


def run_theirs(peer: Path, env: dict, data: Path, seed: int, log: Path) -> tuple[float, int]:
    """run.sh for one seed, their side only (``VARIANTS=asis``); its output goes to ``log``. A
    run whose only fault is rank 0's mangled last line (:func:`mangled`) is run again, up to
    RETRIES times. Returns the seconds of the last attempt and the number of attempts."""
    for attempt in range(1, RETRIES + 1):
        t = time.perf_counter()
        with open(log, "a") as f:
            f.write(f"\n=== theirs, seed {seed}, attempt {attempt}: {datetime.datetime.now()}\n")
            f.flush()
            done = subprocess.run(
                ["bash", str(peer / "run.sh")],
                env={**env, "SEEDS": str(seed), "VARIANTS": THEIRS},
                stdout=f,
                stderr=subprocess.STDOUT,
                timeout=RUN_TIMEOUT,
            )
        if done.returncode == 0:
            return time.perf_counter() - t, attempt
        if not mangled(data / f"public_{THEIRS}_s{seed}" / "train.log"):
            break
        print(f"seed {seed}: rank 0's last line was interleaved; again", flush=True)
    tail = log.read_text().splitlines()[-25:]
    raise SystemExit(
        f"grappa_peer: run.sh failed for seed {seed} (exit {done.returncode}); the last lines "
        f"of {log}:\n" + "\n".join(tail)
    )


def zg_history_path(data: Path, kernel: str, seed: int, epochs: int) -> Path:
    return data / f"zg_{kernel}_L{LAYERS}_e{epochs}_s{seed}.json"


def zg_run(kernel: str, seed: int, out: str, epochs: int) -> None:
    """One zg run (the subprocess ``--zg-run``): the settings of the peer's zg_reference.py,
    plus ``kernel``; the history goes to ``out``, one JSON line (the kernel asked and ran, the
    run's wall seconds) to stdout."""
    import zg
    from zg import grappa

    g = zg.datasets.load("cora")
    t0 = time.perf_counter()
    h = grappa.train(
        g,
        workers=WORKERS,
        preset="reference",
        epochs=epochs,
        seed=seed,
        num_layers=LAYERS,
        eval_every=EVAL_EVERY,
        threads=1,
        timeout=900,
        kernel=kernel,
        history_path=out,
    )
    wall = time.perf_counter() - t0
    line = {"kernel": kernel, "kernel_ran": h["kernel"], "seed": seed, "wall_seconds": wall}
    print(json.dumps(line), flush=True)


def run_zg(
    python: str, env: dict, data: Path, kernel: str, seed: int, epochs: int, log: Path
) -> tuple[float, dict]:
    """One zg run in a subprocess of this script (``--zg-run``), with ``python`` (the peer's,
    which runs zg_reference.py) and ``env``; its stderr goes to ``log``. Returns the subprocess's
    seconds and the run's JSON line."""
    out = zg_history_path(data, kernel, seed, epochs)
    t = time.perf_counter()
    with open(log, "a") as f:
        f.write(f"\n=== zg kernel={kernel}, seed {seed}: {datetime.datetime.now()}\n")
        f.flush()
        done = subprocess.run(
            [python, str(Path(__file__).resolve()), "--zg-run", kernel, str(seed), str(out)]
            + [str(epochs)],
            env={**env, "PYTHONPATH": env["ZG_SRC"]},
            stdout=subprocess.PIPE,
            stderr=f,
            text=True,
            timeout=ZG_TIMEOUT,
        )
        f.write(done.stdout)
    seconds = time.perf_counter() - t
    lines = [x for x in done.stdout.splitlines() if x.startswith('{"kernel"')]
    if done.returncode != 0 or not lines or not out.exists():
        tail = log.read_text().splitlines()[-25:]
        raise SystemExit(
            f"grappa_peer: zg kernel={kernel} failed for seed {seed} (exit {done.returncode}); "
            f"the last lines of {log}:\n" + "\n".join(tail)
        )
    return seconds, json.loads(lines[-1])


def summarize(peer: Path, data: Path) -> tuple[dict, dict, str]:
    """The peer's summarize.py over ``data``: its parsed runs (``rows``: theirs by variant,
    ``zg_rows``: zg's, none here) and the table it prints."""
    argv, out = sys.argv, io.StringIO()
    sys.argv = [str(peer / "summarize.py"), str(data)]
    try:
        with contextlib.redirect_stdout(out):
            names = runpy.run_path(str(peer / "summarize.py"), run_name="__main__")
    finally:
        sys.argv = argv
    return names["rows"], names["zg_rows"], out.getvalue()


def their_epochs(log: Path) -> dict[int, dict[str, float]]:
    """Rank 0's ``epoch_|...`` lines by epoch: ``epoch_seconds`` and each part's seconds."""
    out = {}
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("rank0 epoch_|"):
            f = line.split("|")
            out[int(f[f.index("epoch") + 1])] = {
                p: float(f[f.index(p) + 1]) for p in ("epoch_seconds", *THEIR_PARTS)
            }
    return out


def their_parts(log: Path) -> dict[str, float]:
    """Rank 0's median seconds per part of an epoch, epochs SKIP.. (their epoch lines)."""
    kept = [e for n, e in sorted(their_epochs(log).items()) if n >= SKIP]
    return {p: statistics.median(e[p] for e in kept) for p in THEIR_PARTS} if kept else {}


def rank0_train_seconds(history: dict) -> list[float]:
    """Per epoch SKIP.. with an account: rank 0's own epoch clock less rank 0's evaluation
    (``account["seconds"][0] - account["parts"]["evaluation"][0]``): the clock their
    ``epoch_seconds`` is read on."""
    return [
        r["account"]["seconds"][0] - r["account"]["parts"]["evaluation"][0]
        for r in history["epochs"][SKIP:]
        if "account" in r
    ]


def zg_account(history: dict) -> dict | None:
    """zg's epoch account (zg.grappa.account.account_summary) of one run's history."""
    from zg.grappa.account import account_summary

    try:
        a = account_summary(history, skip=SKIP)
    except ValueError:  # too few epochs for an account
        return None
    return {
        "seconds_median": a["seconds"],
        "parts_mean": a["parts"],
        "step_seconds": a["step_seconds"],
        "step_seconds_by_worker": a["step_seconds_by_worker"],
        "evaluation_seconds": a["evaluation_seconds"],
        "iterations_per_epoch": history["epochs"][0]["iterations"],
    }


def zg_row(history: dict, kernel: str, seed: int) -> dict:
    """One zg row from a run's history (``kernel``: what was asked; ``kernel_ran``: the
    history's ``kernel``)."""
    from zg.grappa.history import bytes_by_kind_per_worker

    epochs = len(history["epochs"])
    rank0 = rank0_train_seconds(history)
    if not rank0:
        raise SystemExit(f"grappa_peer: zg kernel={kernel} seed {seed}: no epoch account")
    return {
        "side": "zg",
        "variant": "reference preset",
        "kernel": kernel,
        "kernel_ran": history.get("kernel"),
        "seed": seed,
        "rank0_train_seconds": statistics.median(rank0),
        "seconds_per_epoch": history["seconds_per_epoch"],
        "test_acc_at_best_val": history["final"]["test_acc_at_best_val"],
        "epoch_of_best_val": history["final"]["best_epoch"],  # model selection, not a best-of
        "epochs": epochs,
        "rank0_train_seconds_per_epoch": rank0,
        "bytes_per_epoch_worker0_by_kind": {
            k: v[0] / epochs for k, v in bytes_by_kind_per_worker(history).items()
        },
        "account": zg_account(history),
    }


def collect(data: Path, rows: dict, seeds, epochs: int) -> list[dict]:
    """Per seed: their row (summarize.py's run and rank 0's epoch lines), then one zg row per
    kernel (its history); every side of a seed from the same run."""
    theirs = {r["name"]: r for r in rows.get(f"public_{THEIRS}", [])}
    out = []
    for seed in seeds:
        t = theirs.get(f"public_{THEIRS}_s{seed}")
        paths = {k: zg_history_path(data, k, seed, epochs) for k in KERNELS}
        missing = [k for k, p in paths.items() if not p.exists()]
        if t is None or t.get("failed") or not t["epochs"] or missing:
            raise SystemExit(
                f"grappa_peer: seed {seed} lacks a side (theirs: {t and not t.get('failed')}, "
                f"zg kernels missing: {missing or 'none'}); see {data}"
            )
        log = data / t["name"] / "train.log"
        per_epoch = their_epochs(log)
        kept = [e["epoch_seconds"] for n, e in sorted(per_epoch.items()) if n >= SKIP]
        out.append(
            {
                "side": "theirs",
                "variant": THEIRS,
                "seed": seed,
                "rank0_train_seconds": statistics.median(kept) if kept else t["sec"],
                "epoch_seconds_median_all_epochs": t["sec"],
                "test_acc_at_best_val": t["test"],
                "epochs": t["epochs"],
                "rank0_train_seconds_per_epoch": kept,
                "parts_seconds_median_rank0": their_parts(log),
                "byte_counts_as_printed": [list(c) for c in t["counts"]],
            }
        )
        for kernel in KERNELS:
            with open(paths[kernel]) as f:
                out.append(zg_row(json.load(f), kernel, seed))
    return out


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--zg-run"]:
        if len(argv) != 5:
            raise SystemExit("usage: grappa_peer.py --zg-run KERNEL SEED HISTORY.json EPOCHS")
        return zg_run(argv[1], int(argv[2]), argv[3], int(argv[4]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_EPOCHS} epochs, one seed")
    parser.add_argument("--epochs", type=int, default=None, help=f"default {EPOCHS}")
    parser.add_argument(
        "--seeds",
        type=lambda t: tuple(int(s) for s in t.split(",")),
        default=None,
        help="comma-separated (default 0,1,2)",
    )
    parser.add_argument("--peer", help=f"the peer folder (GRAPPA_PEER; default {DEFAULT_PEER})")
    parser.add_argument("--grappa-src", help="git dir of chongyang-xu/grappa (GRAPPA_SRC)")
    parser.add_argument("--phmap-src", help="git dir of greg7mdp/parallel-hashmap (PHMAP_SRC)")
    parser.add_argument(
        "--work", help=f"build and run folder (GRAPPA_PEER_WORK; default {DEFAULT_WORK})"
    )
    parser.add_argument(
        "--python", help="Python 3.11 with torch 2.2.1 (BASE_PY; default the repo's .venv)"
    )
    args = parser.parse_args(argv)
    epochs = args.epochs or (QUICK_EPOCHS if args.quick else EPOCHS)
    seeds = args.seeds or ((0,) if args.quick else SEEDS)
    if epochs < EVAL_EVERY:
        parser.error(f"--epochs: at least {EVAL_EVERY} (their code evaluates first at epoch 4)")
    from zg._checks import output_folder_arg
    from zg._io import command_output_arg, write_text

    given = args.work or os.environ.get("GRAPPA_PEER_WORK") or DEFAULT_WORK
    try:  # where the build, the data and the log go: checked before anything runs (exit 2)
        output_folder_arg(given, "--work")
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    command_output_arg(parser, Path(given) / "bench_grappa_peer.log", "--work", make_parents=True)
    peer = peer_dir(args.peer)
    work = Path(given).resolve()
    env = dict(os.environ)
    env.update(
        GRAPPA_SRC=source(args.grappa_src, "GRAPPA_SRC", "chongyang-xu/grappa", work, "grappa"),
        PHMAP_SRC=source(args.phmap_src, "PHMAP_SRC", "greg7mdp/parallel-hashmap", work, "phmap"),
        ZG_SRC=str(ROOT),
        BASE_PY=args.python or os.environ.get("BASE_PY") or str(ROOT / ".venv" / "bin" / "python"),
        WORK=str(work),
        EPOCHS=str(epochs),
        VARIANTS=THEIRS,
    )
    env.setdefault("DGLBACKEND", "pytorch")
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data"
    moved = set_aside(data) if data.is_dir() else None
    log = work / "bench_grappa_peer.log"
    write_text(log, "", name="--work")
    before = machine_note()
    start = time.perf_counter()
    seconds, attempts, ran = {}, {}, {}
    for seed in seeds:
        # theirs first: run.sh builds the peer (and its venv, the Python zg runs with) if needed
        sec, attempts[seed] = run_theirs(peer, env, data, seed, log)
        seconds[seed] = {"theirs": sec}
        python = str(work / "venv" / "bin" / "python")  # the peer's: it runs zg_reference.py
        for kernel in KERNELS:
            seconds[seed][kernel], ran[(seed, kernel)] = run_zg(
                python, env, data, kernel, seed, epochs, log
            )
        done = ", ".join(f"{k} {v:.0f} s" for k, v in seconds[seed].items())
        print(f"seed {seed}: theirs, zg auto, zg torch back to back: {done}", flush=True)
    rows_by_variant, _, printed = summarize(peer, data)
    rows = collect(data, rows_by_variant, seeds, epochs)
    print(printed)
    print(table(table_lines(rows), TABLE_HEADERS))
    # Another length than the default is its own file (grappa_peer_e150.json), never the default's.
    name = "grappa_peer_quick" if args.quick else "grappa_peer"
    if not args.quick and epochs != EPOCHS:
        name = f"grappa_peer_e{epochs}"
    zg_rows = [r for r in rows if r["side"] == "zg"]
    out = {
        "benchmark": "grappa_peer",
        "command": ["bench/grappa_peer.py", *argv],
        "settings": {
            "graph": "cora",
            "workers": WORKERS,
            "model": "sage",
            "hidden_dim": 128,
            "num_layers": LAYERS,
            "fanouts": [15, 10, 5],
            "batch_size_per_worker": 1000,
            "lr": 0.003,
            "dropout": 0.5,
            "eval_every": EVAL_EVERY,
            "epochs": epochs,
            "epochs_left_out_of_medians": SKIP,
            "threads_per_worker": 1,
            "theirs": "github.com/chongyang-xu/grappa at 5b00124, patched for CPU/gloo and byte "
            "counters (run.sh VARIANTS=asis): experiments/grappa/train/t10n_train.py defaults",
            "zg": "zg.grappa.train(g, workers=4, preset='reference', num_layers=3, eval_every=5, "
            "threads=1, timeout=900, kernel=K) on zg.datasets.load('cora'), K in "
            f"{list(KERNELS)}: bench/grappa_peer.py --zg-run (zg_reference.py's settings plus "
            "the kernel)",
            "zg_kernels": list(KERNELS),
            "zg_kernels_ran": {
                k: sorted({str(r["kernel_ran"]) for r in zg_rows if r["kernel"] == k})
                for k in KERNELS
            },
            "clocks": {
                "theirs": THEIR_CLOCK,
                **{f"zg {key}": text for key, (_, text) in CLOCKS.items()},
            },
        },
        "seeds": list(seeds),
        "rows": rows,
        "quick": args.quick,
        "order": "per seed, back to back: theirs (run.sh VARIANTS=asis), zg kernel='auto', zg "
        "kernel='torch'",
        "peer": {
            "folder": str(peer),
            "files_sha256_16": {p.name: digest(p) for p in sorted(peer.iterdir()) if p.is_file()},
            "grappa_src": env["GRAPPA_SRC"],
            "phmap_src": env["PHMAP_SRC"],
            "work": str(work),
            "python": env["BASE_PY"],
            "zg_python": str(work / "venv" / "bin" / "python"),
            "earlier_outputs_moved_to": str(moved) if moved else None,
        },
        "summarize_table": printed,
        "machine_at_start": before,
        "seconds_per_seed_run": {str(s): v for s, v in seconds.items()},
        "attempts_per_seed": {str(s): v for s, v in attempts.items()},
        "zg_runs": [ran[k] for k in sorted(ran)],
        "bench_seconds": time.perf_counter() - start,
        "note": "Compare only the sides of this run: absolute seconds move with the machine and "
        "its load (machine.load_average, machine_at_start). The headline epoch ratios read both "
        "sides on rank 0's clock without the evaluation (their epoch_seconds; zg's account: "
        "rank 0's seconds less its evaluation), epoch 0 left out; the *_slowest_worker ratios put "
        "the kit's own seconds_per_epoch (slowest worker, evaluation waits included) over theirs.",
    }
    path = write_json(name, out)
    print(f"wrote {path}")
    return path


TABLE_HEADERS = ["side", "kernel (ran)", "rank0 train s", "slowest-worker s", "test % at best val"]


def table_lines(rows: list[dict]) -> list[list[str]]:
    """The terminal table: one line per side (zg: per kernel), mean ± std over seeds."""
    lines = []
    groups = [("theirs", None)] + [("zg", k) for k in KERNELS]
    for side, kernel in groups:
        mine = [r for r in rows if r["side"] == side and r.get("kernel") == kernel]
        if not mine:
            continue
        rank0 = pm(*mean_std(r["rank0_train_seconds"] for r in mine), "{:.3f}")
        slowest = pm(*mean_std(r["seconds_per_epoch"] for r in mine), "{:.3f}") if kernel else "-"
        acc = pm(*mean_std(r["test_acc_at_best_val"] for r in mine), "{:.1f}", 100)
        ran = (
            ""
            if kernel is None
            else f"{kernel} ({','.join(sorted({str(r['kernel_ran']) for r in mine}))})"
        )
        lines.append([side if kernel is None else NAME[kernel], ran or THEIRS, rank0, slowest, acc])
    return lines


# ----------------------------------------------------------------------------- headline metrics


def _by_seed(doc: dict, side: str, kernel: str | None, key: str) -> dict[int, float]:
    return {
        r["seed"]: float(r[key])
        for r in doc["rows"]
        if r.get("side") == side and r.get("kernel") == kernel and r.get(key) is not None
    }


def headlines(doc: dict) -> list[dict]:
    """zg's epoch over theirs (paired per seed: one run, back to back) for each zg kernel and
    clock, each side's epoch seconds and test accuracy at the best validation epoch, and whether
    zg's mean accuracy lies within their spread (one sample standard deviation of their runs
    around their mean). ``epoch_ratio_zg_over_theirs``: kernel "auto", rank 0's clock without
    the evaluation on both sides."""
    s = doc["settings"]
    where = (
        f"cora, P = {s['workers']}, SAGE {s['num_layers']} x {s['hidden_dim']}, fanouts "
        f"{','.join(map(str, s['fanouts']))}, batch {s['batch_size_per_worker']} per worker, "
        f"eval_every {s['eval_every']}, {s['epochs']} epochs, one thread per worker"
    )
    compared = "the authors' public code (asis), same seed, same run, back to back"
    their_sec = _by_seed(doc, "theirs", None, "rank0_train_seconds")
    their_acc = _by_seed(doc, "theirs", None, "test_acc_at_best_val")
    out = []
    seeds_of = {}
    for kernel in KERNELS:
        zg_sec = {c: _by_seed(doc, "zg", kernel, c) for c in CLOCKS}
        seeds = sorted(set(their_sec) & set(zg_sec["rank0_train_seconds"]))
        seeds_of[kernel] = seeds
        if not seeds:
            continue
        for clock, (suffix, text) in CLOCKS.items():
            out.append(
                headline_from(
                    f"epoch_ratio_{NAME[kernel]}{suffix}_over_theirs",
                    [zg_sec[clock][k] / their_sec[k] for k in seeds],
                    "x",
                    compared_to=compared,
                    where=f"{where}; zg kernel='{kernel}', zg's clock: {text}; theirs: "
                    f"{THEIR_CLOCK}; zg / theirs per seed",
                    higher_is_better=False,
                )
            )
    if not any(seeds_of.values()):
        return []
    seeds = seeds_of["auto"] or seeds_of["torch"]
    out.append(
        headline_from(
            "epoch_seconds_theirs",
            [their_sec[k] for k in seeds],
            "s",
            where=f"{where}; theirs ({THEIRS}): {THEIR_CLOCK}; this machine and load",
            higher_is_better=False,
        )
    )
    out.append(
        headline_from(
            "test_acc_theirs",
            [their_acc[k] for k in seeds],
            "acc",
            where=f"{where}; theirs ({THEIRS}): test accuracy at the best validation epoch",
        )
    )
    for kernel in KERNELS:
        seeds = seeds_of[kernel]
        if not seeds:
            continue
        name = NAME[kernel]
        for clock, (suffix, text) in CLOCKS.items():
            sec = _by_seed(doc, "zg", kernel, clock)
            out.append(
                headline_from(
                    f"epoch_seconds_{name}{suffix}",
                    [sec[k] for k in seeds],
                    "s",
                    where=f"{where}; zg kernel='{kernel}': {text}; this machine and load",
                    higher_is_better=False,
                )
            )
        acc = _by_seed(doc, "zg", kernel, "test_acc_at_best_val")
        out.append(
            headline_from(
                f"test_acc_{name}",
                [acc[k] for k in seeds],
                "acc",
                where=f"{where}; zg kernel='{kernel}': test accuracy at the best validation epoch",
            )
        )
        out.append(
            headline_from(
                f"test_acc_{name}_minus_theirs",
                [100 * (acc[k] - their_acc[k]) for k in seeds],
                "points",
                compared_to=compared,
                where=f"{where}; zg kernel='{kernel}'; test accuracy at the best validation epoch",
            )
        )
        their_mean, their_std = mean_std(their_acc[k] for k in seeds)
        zg_mean, _ = mean_std(acc[k] for k in seeds)
        within = None if their_std is None else float(abs(zg_mean - their_mean) <= their_std)
        out.append(
            headline(
                f"test_acc_{name}_within_their_spread",
                within,
                "bool",
                n=len(seeds),
                compared_to="their mean test accuracy ± one sample std over the same seeds "
                "(1: zg's mean lies inside)",
                where=f"{where}; zg kernel='{kernel}'",
            )
        )
    return out


if __name__ == "__main__":
    main()
