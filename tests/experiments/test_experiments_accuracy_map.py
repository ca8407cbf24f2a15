"""zg.experiments.accuracy_map: reading the committed map and diagnosis for the notebooks."""

import json

import pytest

from zg import experiments as ex
from zg.experiments import results


def cell(method, degree, homophily, grappa_gap, single=0.8):
    out = {
        "method": method,
        "avg_degree": degree,
        "homophily": homophily,
        "feature_snr": 0.5,
        "workers": 4,
        "num_layers": 2,
        "design": "core",
        "single_acc_mean": single,
        "single_acc_std": 0.01,
    }
    for trainer, gap in (
        ("grappa", grappa_gap),
        ("isolated", grappa_gap - 0.01),
        ("psgd_pa", -0.2),
        ("feature_fetch", 0.0),
    ):
        out[trainer] = {"gap_mean": gap, "gap_std": 0.02, "acc_mean": single + gap, "acc_std": 0.02}
    return out


CELLS = [
    cell("random", 5, 0.8, -0.30),
    cell("random", 20, 0.8, -0.25),
    cell("random", 20, 0.3, -0.05),
    cell("metis", 20, 0.8, 0.004),
    cell("metis", 50, 0.8, -0.02),
]


def test_load_result(tmp_path):
    result, reason = ex.load_result("grappa_map", results_dir=tmp_path)
    assert result is None and "grappa_map.json is not committed" in reason
    (tmp_path / "grappa_map.json").write_text(json.dumps({"cells_table": CELLS}))  # legacy layout
    result, reason = ex.load_result("grappa_map", results_dir=tmp_path)
    assert result is None and "missing keys" in reason
    doc = results.make(
        "grappa_map",
        settings={},
        rows=[],
        detail={"cells_table": CELLS},
        machine={"cores": 2},
        command=[],
        source={"commit": None, "modified": None},
    )
    results.write(tmp_path / "grappa_map.json", doc)
    result, reason = ex.load_result("grappa_map", results_dir=tmp_path)
    assert reason is None and result["detail"]["cells_table"][0]["method"] == "random"
    (tmp_path / "broken.json").write_text("{")
    result, reason = ex.load_result("broken", results_dir=tmp_path)
    assert result is None and "cannot be read" in reason
    for bad in ("", "a/b", "grappa_map.json", None):
        with pytest.raises(ValueError, match="name"):
            ex.load_result(bad, results_dir=tmp_path)


def test_map_rows_are_points():
    rows = ex.map_rows(CELLS)
    assert rows[0]["grappa gap"] == "-30.0 ± 2.0" and rows[0]["single %"] == "80.0 ± 1.0"
    assert rows[3]["grappa gap"] == "+0.4 ± 2.0" and rows[3]["feature_fetch gap"] == "+0.0 ± 2.0"
    with pytest.raises(ValueError, match="'halo'"):
        ex.map_rows(CELLS, trainers=["halo"])
    with pytest.raises(ValueError, match="empty"):
        ex.map_rows([])
    with pytest.raises(ValueError, match="lacks"):
        ex.map_rows([{"method": "random"}])


def test_gap_summary_and_paper_regime():
    s = ex.gap_summary(CELLS, "grappa", method="random")
    assert s["cells"] == 3 and s["mean_gap_points"] == pytest.approx(-20.0)
    assert s["worst_gap_points"] == pytest.approx(-30.0) and "avg_degree=5" in s["worst_cell"]
    assert s["best_gap_points"] == pytest.approx(-5.0) and s["within_1_point"] == 0
    s = ex.gap_summary(CELLS, "grappa", method="metis", avg_degree=(20, 50))
    assert s["cells"] == 2 and s["within_1_point"] == 1
    paper = ex.paper_regime(CELLS)
    assert [(c["method"], c["avg_degree"]) for c in paper] == [
        ("random", 20),
        ("metis", 20),
        ("metis", 50),
    ]
    with pytest.raises(ValueError, match="no cell"):
        ex.gap_summary(CELLS, "grappa", workers=8)
    with pytest.raises(ValueError, match="unknown factor"):
        ex.gap_summary(CELLS, "grappa", colour="red")
    with pytest.raises(ValueError, match="not in the map"):
        ex.gap_summary(CELLS, "halo")
    # A trainer the design did not run in some cells: those cells are left out, and said so.
    cells = [dict(c) for c in CELLS]
    cells[0]["psgd_pa"] = None
    assert ex.gap_summary(cells, "psgd_pa", method="random")["cells"] == 2
    assert ex.map_rows(cells)[0]["psgd_pa gap"] == "not run"
    with pytest.raises(ValueError, match="was not run"):
        ex.gap_summary(cells, "psgd_pa", method="random", avg_degree=5)


def test_map_findings_read_every_number_from_the_cells():
    lines = ex.map_findings(CELLS)
    base = [line for line in lines if "base cell" in line]
    assert len(base) == 2 and "grappa -25.0 ± 2.0" in base[0] and "random" in base[0]
    assert "grappa +0.4 ± 2.0" in base[1] and "metis" in base[1]
    random = next(line for line in lines if line.startswith("**random chunks, all"))
    assert "averages -20.0 points" in random and "in 0 of 3 cells" in random
    wins = next(line for line in lines if line.startswith("**random chunks, what grappa wins back"))
    assert "+1.0 points on average over 3 cells" in wins
    assert lines[-1].startswith("**The paper's regime**") and lines[-1].count("layers") == 3


def _diag_run(final, gap_curve, full, sampled, local=None):
    mean_std = lambda m: {"mean": m, "std": 0.01, "n": 3}  # noqa: E731
    return {
        "final_test_acc": mean_std(final),
        "gap_points_final": gap_curve[-1],
        "test_gap_points_curve": gap_curve,
        "eval_full": mean_std(full),
        "eval_sampled": mean_std(sampled),
        "eval_local": None if local is None else mean_std(local),
    }


def test_diagnosis_findings_read_every_number_from_the_json():
    summary = {
        "single": _diag_run(0.75, [0.0] * 9, 0.75, 0.76),
        "isolated": _diag_run(0.65, [8.0] * 8 + [10.0], 0.65, 0.66, 0.53),
        "grappa/batch": _diag_run(0.69, [6.0] * 8 + [6.0], 0.69, 0.69, 0.56),
        "grappa/mean": _diag_run(0.68, [7.0] * 9, 0.68, 0.68, 0.55),
    }
    lines = ex.diagnosis_findings(
        {"cora lr=0.03": {"epochs": 9, "settings": {"lr": 0.03}, "summary": summary}}
    )
    assert lines[0].startswith("**cora lr=0.03** (9 epochs, lr 0.03, 3 seeds)")
    assert (
        "single ends at 75.0 ± 1.0 %" in lines[0]
        and "isolated +10.0, grappa/batch +6.0" in lines[0]
    )
    assert "after epoch 3 → after epoch 9: isolated +8.0 → +10.0" in lines[1]
    assert "from 68.0 % (grappa/mean) to 69.0 % (grappa/batch), a spread of 1.0 points" in lines[2]
    assert "+0.0 to +1.0 points over the runs" in lines[3] and "-13.0 to -12.0 points" in lines[3]
    with pytest.raises(ValueError, match="non-empty"):
        ex.diagnosis_findings({})
    with pytest.raises(ValueError, match="no 'single' run"):
        ex.diagnosis_findings({"x": {"epochs": 3, "summary": {"isolated": summary["isolated"]}}})


def test_diagnosis_findings_say_how_many_seeds_each_dataset_has():
    """A one-seed dataset is never labelled '3 seeds', and shows no ± it does not have."""
    one = lambda m: {"mean": m, "std": 0.0, "n": 1}  # noqa: E731

    def run(final, gap):
        return {
            "final_test_acc": one(final),
            "gap_points_final": gap,
            "test_gap_points_curve": [gap] * 6,
            "eval_full": None,
            "eval_sampled": None,
        }

    summary = {"single": run(0.967, 0.0), "isolated": run(0.689, 27.8)}
    lines = ex.diagnosis_findings(
        {
            "csbm20k 100 epochs, seed 0": {
                "epochs": 6,
                "settings": {"seeds": [0]},
                "summary": summary,
            }
        }
    )
    assert lines[0].startswith("**csbm20k 100 epochs, seed 0** (6 epochs, 1 seed)")
    assert "single ends at 96.7 %;" in lines[0] and "±" not in lines[0]
    summary["single"]["final_test_acc"]["n"] = 2  # no settings.seeds: the summary's count
    assert (
        "(6 epochs, 2 seeds)" in ex.diagnosis_findings({"x": {"epochs": 6, "summary": summary}})[0]
    )


def test_lr_rows_compare_the_runs_every_learning_rate_measured():
    def dataset(lr, epochs, gap):
        single = {"test_curve": [{"mean": 0.7, "std": 0.0, "n": 3}] * epochs}
        run = {"test_gap_points_curve": [gap + e for e in range(epochs)]}
        return {
            "epochs": epochs,
            "settings": {"lr": lr},
            "summary": {"single": single, "isolated": run, "grappa/batch": run},
        }

    datasets = {
        "cora": dataset(0.01, 100, 5.0),
        "cora lr=0.03": dataset(0.03, 30, 2.0),
        "csbm20k": dataset(0.01, 15, 9.0),
    }
    datasets["cora"]["summary"]["grappa/node"] = datasets["cora"]["summary"][
        "isolated"
    ]  # one lr only
    rows = ex.lr_rows(datasets)
    assert [(r["lr"], r["run"]) for r in rows] == [
        (0.01, "grappa/batch"),
        (0.01, "isolated"),
        (0.03, "grappa/batch"),
        (0.03, "isolated"),
    ]
    # Compared after the epochs every dataset trained (30), not at each one's end.
    assert rows[0]["epochs"] == 30 and rows[0]["gap to single (points)"] == 34.0
    assert rows[2]["gap to single (points)"] == 31.0 and rows[2]["single test %"] == 70.0
    assert ex.lr_rows({"cora": datasets["cora"]}) == []
    del datasets["cora"]["settings"]["lr"]
    with pytest.raises(ValueError, match="learning rate"):
        ex.lr_rows(datasets)
