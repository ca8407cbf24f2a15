"""bench/grappa_ablation.py's structure on a tiny setting: every ablation row is the base row
with one thing changed, the unbalanced chunks are a valid partition for the reference preset,
their logs are read as the public code prints them, and the headline metrics are the paired
differences (made-up histories and logs); the committed file's rows and headlines (skipped when
bench/results/grappa_ablation.json is absent). Nothing here starts a worker or reads a time."""

from pathlib import Path

import pytest
from graphs import tiny
from script_loader import load_script

from zg.experiments import results
from zg.grappa.train import prepare_many

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "bench" / "results" / "grappa_ablation.json"


@pytest.fixture(scope="module")
def bench():
    module, restore = load_script(ROOT / "bench" / "grappa_ablation.py", "bench_grappa_ablation")
    yield module
    restore()


def _difference(bench, row, g):
    """The options in which ``row`` differs from the base row (a partition counts as one)."""
    base = bench.run_options(bench.BASE, 0, 30, g)
    options = bench.run_options(row, 0, 30, g)
    keys = set(base) | set(options)
    return {k for k in keys if k == "partition" or base.get(k) != options.get(k)}


def test_each_ablation_row_changes_one_thing_from_the_base(bench):
    g = tiny()
    base = bench.run_options(bench.BASE, 0, 30, g)
    assert base["preset"] == "reference" and base["self_loops"] == "keep"
    assert (base["workers"], base["eval_every"], base["epochs"]) == (4, 5, 30)
    expect = {
        "self_loops": {"self_loops"},
        "estimator_mean": {"estimator"},
        "unbalanced_chunks": {"partition"},
        "eval_every_1": {"eval_every"},
    }
    assert set(bench.ABLATION_ROWS) == set(expect)
    for row, changed in expect.items():
        assert _difference(bench, row, g) == changed, row
    # The kit's rows give only the workers (or the trainer), epochs and seed, and self_loops.
    kit = bench.run_options("kit", 1, 7, g)
    assert "preset" not in kit and (kit["workers"], kit["epochs"], kit["seed"]) == (4, 7, 1)
    assert bench.run_options("kit_single", 1, 7, g)["trainer"] == "single"
    assert bench.run_options("kit_single_self_loops", 1, 7, g)["self_loops"] == "add"
    for kit_row, single_row in bench.KIT_PAIRS.items():
        assert {kit_row, single_row} <= set(bench.ROWS)


def test_unbalanced_chunks_are_a_partition_the_preset_accepts(bench):
    g = tiny()
    part = bench.unbalanced_partition(g, seed=3)
    again = bench.unbalanced_partition(g, seed=3)
    assert part.chunk_of.equal(again.chunk_of)  # seeded
    assert int(part.chunk_of.min()) >= 0 and int(part.chunk_of.max()) < 4
    assert int(part.chunk_sizes.sum()) == g.num_nodes
    assert len(set(part.chunk_sizes.tolist())) > 1  # not the balanced cut
    options = bench.run_options("unbalanced_chunks", 3, 2, g)
    cfg, used, *_ = prepare_many(g, [options])[0]
    assert used is options["partition"]
    assert (cfg.method, cfg.schedule, cfg.halo, cfg.num_chunks) == (
        "random",
        "partner_sweep",
        True,
        4,
    )


def _their_log(epochs, val, test):
    lines = ["rank0 NUM_BATCH: 1", "rank2 step_|epoch|0000|step|0000|part|0002|loss|9.0|x"]
    for e in range(epochs):
        lines.append(
            f"rank0 step_|epoch|{e:04d}|step|0000|part|0000|loss|{2.0 - 0.1 * e:.4f}|"
            "train_acc|0.5|sample_p_s|nan|gpu_mb|0.0|step_time|0.2|train:1.0,2.0"
        )
        if e in val:
            lines.append(f"rank0 epoch={e}, val_acc={val[e]}")
    lines.append(
        f"rank0 infer_|epoch|{epochs - 1:04d}|part|0000|val_acc|0.7000|test_acc|{test:.4f}|"
        "train_acc|1.0000|time_sec|1.0|val:500.0|test:1000.0|train:140.0"
    )
    return "\n".join(lines)


def test_their_logs_are_read_as_their_code_prints_them(bench, tmp_path):
    text = _their_log(10, {4: 0.5, 9: 0.6}, 0.755)
    run = bench.their_run(text, 10)
    assert run["test_acc_at_best_val"] == 0.755 and run["best_epoch"] == 9
    assert run["curves"]["loss"][0] == 2.0 and len(run["curves"]["loss"]) == 10
    assert run["curves"]["val_acc"][4] == 0.5 and run["curves"]["val_acc"][5] is None
    assert bench.their_run(text, 30) is None  # a run of other epochs
    assert bench.their_run(text.rsplit("\n", 1)[0], 10) is None  # unfinished
    for seed, test in ((0, 0.75), (1, 0.77)):
        folder = tmp_path / f"public_everynode_s{seed}"
        folder.mkdir()
        (folder / "train.log").write_text(_their_log(10, {4: 0.5, 9: 0.6}, test))
    rows = bench.their_rows(tmp_path, (0, 1, 2), 10)
    assert list(rows) == ["everynode"]  # no asis logs, and seed 2 missing
    assert rows["everynode"]["seeds"] == [0, 1]
    assert rows["everynode"]["test_acc_at_best_val"]["mean"] == pytest.approx(0.76)


def _history(test_at_best, last, loss0=2.0):
    epochs = [{"epoch": e, "loss": loss0 - e, "val_acc": 0.5 if e == 1 else None} for e in (0, 1)]
    return {
        "config": {"trainer": "grappa", "preset": "reference", "self_loops": "keep"},
        "epochs": epochs,
        "final": {"test_acc_at_best_val": test_at_best, "test_acc": last, "best_epoch": 1},
        "partition": {"stats": [{"parts": [{"nodes": 10}, {"nodes": 12}]}]},
    }


def test_rows_and_headlines_are_the_paired_differences(bench):
    seeds = (0, 1, 2)
    made = {
        "reference": [0.70, 0.72, 0.74],
        "self_loops": [0.72, 0.73, 0.77],
        "estimator_mean": [0.70, 0.72, 0.74],
        "kit": [0.70, 0.70, 0.70],
        "kit_single": [0.71, 0.69, 0.72],
    }
    rows = []
    for row, accs in made.items():
        r = bench.row_result(row, [_history(a, a + 0.01) for a in accs], seeds)
        assert r["test_acc_at_best_val"]["values"] == accs
        assert r["chunk_nodes"] == [[10, 12]] * 3 and r["curves"][0]["val_acc"] == [None, 0.5]
        rows.append({"row": row, **r})
    their = {"test_acc_at_best_val": {"mean": 0.75, "std": 0.01, "n": 3, "values": [0.75] * 3}}
    doc = {"rows": rows, "settings": {"epochs": 30}, "detail": {"theirs": {"everynode": their}}}
    got = {h["name"]: h for h in bench.headlines(doc)}
    assert set(got) == {
        "test_acc_reference",
        "test_acc_self_loops",
        "test_acc_theirs_everynode",
        "self_loops_minus_reference",
        "estimator_mean_minus_reference",
        "kit_minus_single",
        "reference_minus_theirs",
        "self_loops_minus_theirs",
    }
    assert got["self_loops_minus_reference"]["value"] == pytest.approx(2.0)
    assert got["self_loops_minus_reference"]["n"] == 3
    assert got["estimator_mean_minus_reference"]["value"] == pytest.approx(0.0)
    assert got["kit_minus_single"]["value"] == pytest.approx(-0.6666667)
    assert got["reference_minus_theirs"]["value"] == pytest.approx(-3.0)


@pytest.mark.skipif(not COMMITTED.exists(), reason="no committed grappa_ablation.json")
def test_the_committed_file_has_every_row_and_its_headlines():
    doc = results.load(COMMITTED)
    rows = {r["row"]: r for r in doc["rows"]}
    module, restore = load_script(ROOT / "bench" / "grappa_ablation.py", "bench_ablation_file")
    try:
        assert set(rows) == set(module.ROWS)
        assert doc["settings"]["epochs"] == module.EPOCHS
        names = {h["name"] for h in doc["headline"]}
        assert {f"{row}_minus_reference" for row in module.ABLATION_ROWS} <= names
    finally:
        restore()
    for r in rows.values():
        assert r["seeds"] == [0, 1, 2] and r["test_acc_at_best_val"]["n"] == 3
    assert rows["self_loops"]["config"]["self_loops"] == "add"
    assert rows["reference"]["config"]["self_loops"] == "keep"
