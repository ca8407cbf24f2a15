"""zg.experiments.reference: the reference preset's rows and the deeper-models sentences, from
grappa_reference.json's layout, on synthetic results whose answers are known by hand."""

import statistics

import pytest

from zg.experiments import reference, results


def stat(values):
    return {"mean": statistics.fmean(values), "std": statistics.stdev(values), "values": values}


def doc(depths: dict[int, tuple[list, list]], graph="g", epochs=10):
    """A grappa_reference-shaped document: per depth (reference values, single values)."""
    cells = {
        str(d): {
            "reference": {"test_acc_at_best_val": stat(ref)},
            "single": {"test_acc_at_best_val": stat(single)},
        }
        for d, (ref, single) in depths.items()
    }
    return {"detail": {"graphs": {graph: {"epochs": epochs, "depths": cells}}}}


def test_level_at_every_depth_and_rising():
    rows, (sentence,) = reference.deeper_models(
        doc(
            {
                2: ([0.70, 0.71, 0.72], [0.70, 0.71, 0.72]),
                4: ([0.80, 0.81, 0.82], [0.80, 0.80, 0.83]),
            }
        )
    )
    assert [r["layers"] for r in rows] == [2, 4]
    assert all(r["level with single"] == "yes" for r in rows)
    assert "keeps level with single-process training at every depth" in sentence
    assert "rises from 2 to 4 layers" in sentence


def test_below_at_depth_and_falling():
    rows, (sentence,) = reference.deeper_models(
        doc(
            {
                2: ([0.70, 0.71, 0.72], [0.70, 0.71, 0.72]),
                3: ([0.30, 0.32, 0.31], [0.90, 0.91, 0.92]),
            }
        )
    )
    assert [r["level with single"] for r in rows] == ["yes", "no"]
    assert "level with single-process training at 2 layers and below it at 3" in sentence
    assert "falls from 2 to 3 layers" in sentence


def test_the_gap_is_paired_per_seed_with_the_sample_std():
    ref, single = [0.70, 0.74, 0.78], [0.72, 0.74, 0.74]
    rows, _ = reference.deeper_models(doc({2: (ref, single), 3: (ref, single)}))
    gaps = [100 * (a - b) for a, b in zip(ref, single)]
    want = f"{statistics.fmean(gaps):+.1f} ± {statistics.stdev(gaps):.1f} (n=3)"
    assert rows[0]["gap (points, paired)"] == want
    # 2 points below on average: not level (at most WITHIN_POINTS below)
    ref2 = [a - 0.02 for a in single]
    rows2, (sentence,) = reference.deeper_models(doc({2: (ref2, single), 3: (ref2, single)}))
    assert {r["level with single"] for r in rows2} == {"no"}
    assert "stays below single-process training at every depth" in sentence
    assert "does not change beyond the spread" in sentence


def test_the_committed_file_reads():
    path = results.RESULTS_DIR / "grappa_reference.json"
    if not path.exists():
        pytest.skip("no committed grappa_reference.json")
    committed = results.load(path)
    rows, sentences = reference.deeper_models(committed)
    assert len(sentences) == len(committed["detail"]["graphs"])
    assert {r["graph"] for r in rows} == set(committed["detail"]["graphs"])
    assert reference.reference_rows(committed)
