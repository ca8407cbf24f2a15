"""bench/grappa_peer.py: zg's rows (rank 0's clock less its evaluation, the kit's own clock, the
kernel that ran) from made-up histories, its headline metrics by hand on a made-up document
(per zg kernel and clock), the clear errors when the peer is missing, the bridge to the peer's
own summarize.py on made-up logs (skipped without ../shared/grappa_peer), and the committed
file's schema and pairing (skipped when bench/results/grappa_peer.json is absent). Nothing here
runs either side or reads a time."""

import json
import statistics
from pathlib import Path

import pytest
from script_loader import load_script

from zg.experiments import results

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "bench" / "results" / "grappa_peer.json"


@pytest.fixture(scope="module")
def peer_bench():
    module, restore = load_script(ROOT / "bench" / "grappa_peer.py", "bench_grappa_peer")
    yield module
    restore()


SETTINGS = {
    "workers": 4,
    "num_layers": 3,
    "hidden_dim": 128,
    "fanouts": [15, 10, 5],
    "batch_size_per_worker": 1000,
    "eval_every": 5,
    "epochs": 30,
}
PARTS = ("sampling", "gather", "forward", "backward", "exchange", "step", "evaluation")
PARTS += ("repartitioning", "checkpointing", "other")


def made_up_history(rank0, evaluation, slowest, acc, kernel_ran="fused", workers=4):
    """A zg history in the kit's shape: per epoch rank 0's own clock ``rank0[e]`` with
    ``evaluation[e]`` of it rank 0's evaluation, the slowest worker's ``slowest[e]``."""
    epochs = []
    for e, (r0, ev, sl) in enumerate(zip(rank0, evaluation, slowest)):
        seconds = [r0] + [sl] * (workers - 1)
        parts = {p: [0.0] * workers for p in PARTS}
        parts["evaluation"][0] = ev
        parts["other"] = list(seconds)
        parts["other"][0] = r0 - ev
        epochs.append(
            {
                "epoch": e,
                "iterations": 1,
                "seconds": max(seconds),
                "val_acc": 0.5 if ev else None,
                "bytes_by_kind": {"gradients": [100] * workers},
                "account": {"seconds": seconds, "parts": parts},
            }
        )
    ordered = sorted(max(r0, sl) for r0, sl in zip(rank0, slowest))
    return {
        "kernel": kernel_ran,
        "epochs": epochs,
        "seconds_per_epoch": ordered[len(ordered) // 2],
        "final": {"test_acc_at_best_val": acc, "best_epoch": len(rank0) - 1},
    }


def made_up(theirs_sec, zg_sec, theirs_acc, zg_acc, torch_sec=None, torch_acc=None):
    """A made-up document: their rows by hand (as collect() writes them), zg's rows through the
    bench's own zg_row from made-up histories whose rank 0 clock, less its evaluation, is
    ``zg_sec`` in every epoch after the first (the slowest worker: twice that)."""
    torch_sec = torch_sec or [2 * x for x in zg_sec]
    torch_acc = torch_acc or zg_acc

    def zg_rows(sec, acc, kernel, ran, seed, module):
        h = made_up_history(
            [9.0]
            + [
                sec + 0.05 * (e % 2) for e in range(1, 6)
            ],  # epoch 0 (left out) slow; evaluations add 0.05
            [0.0] + [0.05 * (e % 2) for e in range(1, 6)],
            [9.0] + [2 * sec] * 5,
            acc,
            ran,
        )
        return module.zg_row(h, kernel, seed)

    def build(module):
        rows = []
        for seed, (ts, zs, ta, za, tts, tta) in enumerate(
            zip(theirs_sec, zg_sec, theirs_acc, zg_acc, torch_sec, torch_acc)
        ):
            rows.append(
                {
                    "side": "theirs",
                    "seed": seed,
                    "rank0_train_seconds": ts,
                    "test_acc_at_best_val": ta,
                }
            )
            rows.append(zg_rows(zs, za, "auto", "fused", seed, module))
            rows.append(zg_rows(tts, tta, "torch", "torch", seed, module))
        return {"bench": "grappa_peer", "settings": SETTINGS, "rows": rows, "detail": {}}

    return build


def by_name(metrics):
    return {m["name"]: m for m in metrics}


def test_zg_rows_read_rank0s_clock_less_its_evaluation(peer_bench):
    h = made_up_history(
        [5.0, 0.10, 0.30, 0.12, 0.50], [0.0, 0.0, 0.2, 0.0, 0.4], [6.0, 0.2, 0.4, 0.2, 0.6], 0.7
    )
    row = peer_bench.zg_row(h, "auto", 3)
    # epoch 0 left out; per epoch rank 0's seconds less its evaluation: 0.10, 0.10, 0.12, 0.10
    assert row["rank0_train_seconds_per_epoch"] == pytest.approx([0.10, 0.10, 0.12, 0.10])
    assert row["rank0_train_seconds"] == pytest.approx(0.10)
    assert row["seconds_per_epoch"] == h["seconds_per_epoch"]  # the kit's own figure, as is
    assert row["kernel"] == "auto" and row["kernel_ran"] == "fused" and row["seed"] == 3
    assert row["test_acc_at_best_val"] == 0.7 and row["epochs"] == 5
    assert row["bytes_per_epoch_worker0_by_kind"] == {"gradients": 100.0}
    assert row["account"]["evaluation_seconds"] == pytest.approx(0.3)


def test_headlines_pair_each_seed_per_kernel_and_clock(peer_bench):
    theirs, zg = [0.10, 0.12, 0.11], [0.08, 0.09, 0.10]
    torch = [0.12, 0.13, 0.14]
    doc = made_up(theirs, zg, [0.74, 0.76, 0.75], [0.745, 0.75, 0.75], torch_sec=torch)(peer_bench)
    m = by_name(peer_bench.headlines(doc))
    for name, zs in [
        ("epoch_ratio_zg_over_theirs", zg),
        ("epoch_ratio_zg_torch_over_theirs", torch),
        ("epoch_ratio_zg_slowest_worker_over_theirs", [2 * x for x in zg]),
        ("epoch_ratio_zg_torch_slowest_worker_over_theirs", [2 * x for x in torch]),
    ]:
        ratios = [z / t for z, t in zip(zs, theirs)]
        ratio = m[name]
        assert ratio["value"] == pytest.approx(statistics.mean(ratios)), name
        assert ratio["std"] == pytest.approx(statistics.stdev(ratios)) and ratio["n"] == 3
        assert not ratio["higher_is_better"] and ratio["unit"] == "x"
    # each ratio's text names the kernel and the clock
    assert "kernel='auto'" in m["epoch_ratio_zg_over_theirs"]["where"]
    assert "less its evaluation" in m["epoch_ratio_zg_over_theirs"]["where"]
    assert "kernel='torch'" in m["epoch_ratio_zg_torch_over_theirs"]["where"]
    assert "slowest worker" in m["epoch_ratio_zg_slowest_worker_over_theirs"]["where"]
    assert m["epoch_seconds_zg"]["value"] == pytest.approx(statistics.mean(zg))
    assert m["epoch_seconds_zg_torch"]["value"] == pytest.approx(statistics.mean(torch))
    assert m["epoch_seconds_theirs"]["value"] == pytest.approx(statistics.mean(theirs))
    assert m["test_acc_theirs"]["value"] == pytest.approx(0.75)
    assert m["test_acc_theirs"]["std"] == pytest.approx(0.01)
    assert m["test_acc_zg"]["value"] == pytest.approx(0.7483333, abs=1e-6)
    assert m["test_acc_zg_minus_theirs"]["value"] == pytest.approx(
        100 * (0.7483333 - 0.75), abs=1e-4
    )
    assert m["test_acc_zg_within_their_spread"]["value"] == 1.0
    assert m["test_acc_zg_torch_within_their_spread"]["value"] == 1.0
    # outside: zg's mean more than one of their sample stds from their mean (torch inside)
    far = made_up(theirs, zg, [0.74, 0.76, 0.75], [0.70] * 3, torch_acc=[0.75] * 3)(peer_bench)
    far = by_name(peer_bench.headlines(far))
    assert far["test_acc_zg_within_their_spread"]["value"] == 0.0
    assert far["test_acc_zg_torch_within_their_spread"]["value"] == 1.0
    for metric in m.values():
        results.fmt(metric)
    lines = peer_bench.table_lines(doc["rows"])
    assert [x[:2] for x in lines] == [
        ["theirs", "asis"],
        ["zg", "auto (fused)"],
        ["zg_torch", "torch (torch)"],
    ]


def test_one_seed_has_no_spread(peer_bench):
    m = by_name(peer_bench.headlines(made_up([0.1], [0.2], [0.7], [0.7])(peer_bench)))
    assert m["epoch_ratio_zg_over_theirs"]["value"] == pytest.approx(2.0)
    assert m["epoch_ratio_zg_over_theirs"]["std"] is None
    assert m["epoch_ratio_zg_torch_over_theirs"]["value"] == pytest.approx(4.0)
    assert m["test_acc_zg_within_their_spread"]["value"] is None  # no spread to be within


def test_a_missing_peer_is_named(peer_bench, tmp_path, monkeypatch):
    monkeypatch.delenv("GRAPPA_PEER", raising=False)
    with pytest.raises(SystemExit, match="lacks run.sh, summarize.py.*GRAPPA_PEER"):
        peer_bench.peer_dir(str(tmp_path))
    monkeypatch.delenv("GRAPPA_SRC", raising=False)
    with pytest.raises(SystemExit, match="GRAPPA_SRC.*github:chongyang-xu/grappa"):
        peer_bench.source(None, "GRAPPA_SRC", "chongyang-xu/grappa", tmp_path, "grappa")
    with pytest.raises(SystemExit, match="not a git directory"):
        peer_bench.source(str(tmp_path), "GRAPPA_SRC", "chongyang-xu/grappa", tmp_path, "grappa")


def test_main_refuses_too_few_epochs(peer_bench):
    with pytest.raises(SystemExit):
        peer_bench.main(["--epochs", "3"])


def test_a_mangled_last_line_is_recognised(peer_bench, tmp_path):
    log = tmp_path / "train.log"
    log.write_text("rank0rank2 infer_|epoch|0004|part|0002|val_acc|0.5\n infer_|epoch|0004|x\n")
    assert peer_bench.mangled(log)
    log.write_text("rank0 infer_|epoch|0004|part|0000|val_acc|0.5|test_acc|0.5\n")
    assert not peer_bench.mangled(log)
    log.write_text("Traceback: something else failed\n")
    assert not peer_bench.mangled(log)


def test_the_peers_summarize_reads_both_sides(peer_bench, tmp_path):
    """Made-up logs in the peer's format, read back through its own summarize.py, and made-up
    zg histories where the bench's own zg runs write them."""
    peer = ROOT.parent / "shared" / "grappa_peer"
    if not (peer / "summarize.py").is_file():
        pytest.skip(f"no peer at {peer}")
    run = tmp_path / "public_asis_s0"
    run.mkdir()
    lines = []
    for epoch, sec in enumerate([0.2, 0.1, 0.12, 0.11, 0.13]):
        parts = "|".join(f"{p}|0.0100" for p in peer_bench.THEIR_PARTS)
        lines.append(
            f"rank0 epoch_|epoch|{epoch:04d}|part|0000|epoch_seconds|{sec:.4f}|{parts}|n_seed|1"
        )
    lines.append("rank0 epoch=4, val_acc=0.5")
    lines.append(
        "rank0 infer_|epoch|0004|part|0000|val_acc|0.5000|test_acc|0.4900|train_acc|0.9|time_sec|1"
    )
    lines.append("t10n_count|rank|0|grad_allreduce_payload_bytes|100|hook_calls|5")
    (run / "train.log").write_text("\n".join(lines) + "\n")
    for kernel, ran in (("auto", "fused"), ("torch", "torch")):
        h = made_up_history([1.0, 0.1, 0.1, 0.1, 0.15], [0, 0, 0, 0, 0.05], [1.0] + [0.2] * 4, 0.55)
        h["kernel"] = ran
        path = peer_bench.zg_history_path(tmp_path, kernel, 0, 5)
        path.write_text(json.dumps(h))
    rows, _, printed = peer_bench.summarize(peer, tmp_path)
    assert "public_asis" in printed
    out = peer_bench.collect(tmp_path, rows, (0,), 5)
    theirs, auto, torch = out
    # epoch 0 left out: median of 0.1, 0.12, 0.11, 0.13; summarize's all-epoch median kept
    assert theirs["side"] == "theirs" and theirs["rank0_train_seconds"] == pytest.approx(0.115)
    assert theirs["epoch_seconds_median_all_epochs"] == pytest.approx(0.12)
    assert theirs["test_acc_at_best_val"] == pytest.approx(0.49) and theirs["epochs"] == 5
    assert theirs["parts_seconds_median_rank0"]["update"] == pytest.approx(0.01)
    assert (auto["kernel"], auto["kernel_ran"]) == ("auto", "fused")
    assert (torch["kernel"], torch["kernel_ran"]) == ("torch", "torch")
    assert auto["rank0_train_seconds"] == pytest.approx(0.1)
    assert auto["test_acc_at_best_val"] == 0.55
    peer_bench.zg_history_path(tmp_path, "torch", 0, 5).unlink()
    with pytest.raises(SystemExit, match=r"seed 0 lacks a side.*\['torch'\]"):
        peer_bench.collect(tmp_path, rows, (0,), 5)
    with pytest.raises(SystemExit, match="seed 1 lacks a side"):
        peer_bench.collect(tmp_path, rows, (1,), 5)


@pytest.fixture(scope="module")
def committed():
    if not COMMITTED.exists():
        pytest.skip("bench/results/grappa_peer.json is not committed yet")
    return results.load(COMMITTED)


def test_the_committed_file_pairs_three_seeds_of_one_run(committed, peer_bench):
    import _headlines

    assert committed["bench"] == "grappa_peer"
    assert committed["command"][0] == "bench/grappa_peer.py"
    assert committed["machine"]["load_average"] is not None
    assert _headlines.headlines(committed) == committed["headline"]
    seeds = committed["seeds"]
    assert len(seeds) >= 3 and committed["settings"]["epochs"] >= 30
    for side, kernel in (("theirs", None), ("zg", "auto"), ("zg", "torch")):
        mine = [r for r in committed["rows"] if r["side"] == side and r.get("kernel") == kernel]
        assert sorted(r["seed"] for r in mine) == sorted(seeds)
        assert all(r["rank0_train_seconds"] > 0 for r in mine)
        if kernel is not None:  # what ran is named
            assert all(r["kernel_ran"] for r in mine)
    m = by_name(committed["headline"])
    for name in (
        "epoch_ratio_zg_over_theirs",
        "epoch_ratio_zg_torch_over_theirs",
        "epoch_ratio_zg_slowest_worker_over_theirs",
    ):
        assert m[name]["n"] == len(seeds) and m[name]["std"] is not None
    assert m["test_acc_zg_within_their_spread"]["value"] in (0.0, 1.0)
    assert m["test_acc_zg_torch_within_their_spread"]["value"] in (0.0, 1.0)
