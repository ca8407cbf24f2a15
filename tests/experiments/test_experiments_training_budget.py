"""zg.experiments.training_budget reads every committed gap in one sign convention."""

import pytest

from zg.experiments import results
from zg.experiments.training_budget import GAP_FILES, budget_sentences, gap_rows


def test_every_gap_is_points_below_single():
    rows = gap_rows()
    assert {r["file"] for r in rows} == set(GAP_FILES)
    deep = {(r["run"], r["epochs"]): r for r in rows if r["file"] == "grappa_map_deep"}
    stored = {m["name"]: m["value"] for m in results.load("grappa_map_deep")["headline"]}
    # the deep file stores run - single: a run below single is a negative value there
    assert deep["grappa_batch", 32]["below_single"] == -stored["gap_grappa_batch_e32"] > 0
    diag = {
        r["run"]: r for r in rows if r["file"] == "grappa_diagnosis" and "csbm20k" in r["where"]
    }
    stored = {m["name"]: m["value"] for m in results.load("grappa_diagnosis")["headline"]}
    assert diag["grappa_batch"]["below_single"] == stored["gap_grappa_batch_csbm20k"]
    assert {r["graph"] for r in rows} == {"cora", "csbm20k", "csbm map, 3 layers"}
    assert all(isinstance(r["epochs"], int) and r["epochs"] > 0 for r in rows)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="files"):
        gap_rows({})
    with pytest.raises(ValueError, match="must be \\+1 or -1"):
        gap_rows({"grappa_map_deep": 2.0})
    with pytest.raises((ValueError, FileNotFoundError)):
        gap_rows({"no_such_result_file": 1.0})


def test_budget_sentences_read_the_rows():
    rows = gap_rows()
    sentences = budget_sentences(rows)
    assert (
        len(sentences) == 3
        and "closes the gap" in sentences[0]
        and "does not close" in sentences[1]
    )
    # the numbers come from the rows: change one and the sentence changes
    changed = [dict(r) for r in rows]
    for r in changed:
        if r["graph"] == "csbm20k" and r["run"] == "grappa_batch" and r["epochs"] == 12:
            r["below_single"] = 99.0
    assert "99.0 points below single after 12 epochs" in budget_sentences(changed)[1]
    with pytest.raises(ValueError, match="no gap"):
        budget_sentences([r for r in rows if r["graph"] != "csbm20k"])
