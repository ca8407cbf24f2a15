"""Every committed result file is in the one format (zg-result/1), its headline metrics are what
its bench's own ``headlines`` function gives, and writing a bench's payload loses nothing: every
payload value is found in the written document."""

from __future__ import annotations

import json
import math
import shlex
import statistics
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "bench"), str(ROOT / "tools")]

import _headlines  # noqa: E402
import _machine  # noqa: E402

from zg.experiments import results  # noqa: E402

MACHINE = {"date": "2026-11-30T00:00:00+00:00", "cores": 2, "cuda": None, "torch": "2.2.1"}
LEGACY = {
    "benchmark": "engine",
    "command": "bench/engine.py --quick --name 'a b'",
    "machine": MACHINE,
    "threads": 2,
    "setting": {"batch_size": 1024, "fanouts": [15, 10, 5]},
    "seeds": [0, 1, 2],
    "rows": [
        {
            "graph": "csbm_200000",
            "model": "sage",
            "batch_size": 1024,
            "ratio_dgl_vs_envelope": {"mean": 1.1, "std": 0.1, "values": [1.0, 1.1, 1.2]},
            "zg_envelope": {"host_syncs_per_iteration_steady": 0.0},
        }
    ],
    "memory": [],
    "targets": {"dgl / zg >= 1": True},
    "note": "a fixture",
    "source": {"commit": "abc", "modified": False},
}
# where each legacy key must land (the rest: detail, verbatim)
MAPPED = {
    "benchmark": ("bench",),
    "command": ("command",),
    "argv": ("command",),
    "machine": ("machine",),
    "setting": ("settings",),
    "settings": ("settings",),
    "seeds": ("seeds",),
    "rows": ("rows",),
    "runs": ("rows",),
    "note": ("note",),
    "source": ("source",),
}


def _found(legacy: dict, doc: dict) -> list[str]:
    lost = []
    for key, value in legacy.items():
        target = MAPPED.get(key)
        got = doc[target[0]] if target else doc["detail"].get(key, KeyError)
        want = shlex.split(value) if key == "command" and isinstance(value, str) else value
        if got != want:
            lost.append(key)
    return lost


def test_document_keeps_every_payload_value():
    doc = _machine.document("engine_fixture", json.loads(json.dumps(LEGACY)))
    assert doc["source"] == _machine.SOURCE  # a fresh write: this checkout's commit
    payload = {k: v for k, v in LEGACY.items() if k != "source"}
    assert _found(payload, doc) == []
    assert doc["command"] == ["bench/engine.py", "--quick", "--name", "a b"]
    # and the load average before the bench's own work, read when it started
    assert set(doc["detail"]) == {"threads", "memory", "targets", "load_average_before"}
    assert doc["detail"]["load_average_before"] == _machine.LOAD_BEFORE
    m = results.metric(doc, "envelope_vs_dgl_sage_b1024")
    assert m["n"] == 3 and m["std"] == pytest.approx(0.1) and m["value"] == pytest.approx(1.1)
    # the check can fail: a dropped key is found missing
    broken = {**doc, "detail": {k: v for k, v in doc["detail"].items() if k != "targets"}}
    assert _found(payload, broken) == ["targets"]


def test_document_without_optional_keys():
    legacy = {"machine": MACHINE, "runs": [{"seed": 0}], "argv": ["--quick"], "seeds": [True]}
    doc = _machine.document("grappa_quick", legacy)
    assert doc["bench"] == "grappa" and doc["rows"] == [{"seed": 0}]
    assert doc["source"] == _machine.SOURCE and doc["command"] == ["--quick"]
    assert doc["seeds"] == []  # not a list of int: kept in detail
    assert doc["detail"] == {"seeds": [True], "load_average_before": _machine.LOAD_BEFORE}
    assert _found(legacy, {**doc, "seeds": [True]}) == []


def test_bench_of_takes_the_longest_script_prefix():
    assert _machine.bench_of("engine_products") == "engine"
    assert _machine.bench_of("grappa_map_deep") == "grappa_map_deep"
    assert _machine.bench_of("grappa_defaults_check_csbm_a") == "grappa_defaults_check"
    assert _machine.bench_of("gpu_check_cuda") == "gpu_check"


@pytest.mark.parametrize("path", sorted(results.RESULTS_DIR.glob("*.json")), ids=lambda p: p.name)
def test_every_committed_file_loads(path):
    doc = results.load(path)
    assert (ROOT / "bench" / f"{doc['bench']}.py").exists(), doc["bench"]
    assert doc["headline"], f"{path.name}: no headline metric (bench/_headlines.py)"
    for m in doc["headline"]:
        results.fmt(m)
        if m["std"] is not None:  # a spread is a sample std over n >= 2 runs
            assert m["n"] >= 2


@pytest.mark.parametrize("path", sorted(results.RESULTS_DIR.glob("*.json")), ids=lambda p: p.name)
def test_committed_headlines_are_what_the_headline_functions_give(path):
    """A committed file's headline list is recomputed from its own rows and detail by its bench's
    own function: no metric was edited by hand, and a re-run names the same metrics."""
    from bench._headlines import headlines

    doc = results.load(path)
    assert headlines(doc) == doc["headline"]


@pytest.mark.parametrize("path", sorted(results.RESULTS_DIR.glob("*.json")), ids=lambda p: p.name)
def test_a_files_seeds_are_the_seeds_its_settings_name(path):
    """The top-level ``seeds`` is never empty where the settings list the seeds the run used
    (a reader, and n, go by it); _machine.document fills it from the settings."""
    doc = results.load(path)
    listed = doc["settings"].get("seeds")
    if isinstance(listed, list) and listed:
        assert doc["seeds"] == listed, (doc["seeds"], listed)


def test_a_bench_that_lists_its_seeds_in_its_settings_gets_them_on_top():
    doc = _machine.document("mmap_load", {"settings": {"seeds": [0, 1, 2]}, "rows": []})
    assert doc["seeds"] == [0, 1, 2]


def test_no_logs_left_beside_the_results():
    assert not list(results.RESULTS_DIR.glob("*.log"))
    archived = (results.RESULTS_DIR / "archive" / "README.md").read_text()
    for p in (results.RESULTS_DIR / "archive").iterdir():
        if p.name != "README.md":
            assert p.name in archived or p.name.split("_seed")[0] in archived, p.name


def test_write_json_writes_the_format(tmp_path, monkeypatch):
    monkeypatch.setattr(_machine, "RESULTS", tmp_path)
    path = _machine.write_json(
        "depth_fixture",
        {
            "benchmark": "depth",
            "machine": MACHINE,
            "settings": {"workers": 4},
            "rows": [
                {"trainer": "single", "layers": 2, "values": [0.7, 0.8, 0.75]},
                {"trainer": "grappa", "layers": 2, "values": [0.7, 0.7, 0.7]},
            ],
            "metric": "test_acc",
        },
    )
    doc = results.load(path)
    assert doc["source"] == _machine.SOURCE
    assert doc["detail"] == {"metric": "test_acc", "load_average_before": _machine.LOAD_BEFORE}
    gap = results.metric(doc, "grappa_minus_single_L2")
    assert gap["value"] == pytest.approx(-5.0) and gap["n"] == 3
    assert _machine.read_json(path)["metric"] == "test_acc"


def test_validate_names_what_is_wrong():
    doc = _machine.document("engine_fixture", json.loads(json.dumps(LEGACY)))
    with pytest.raises(ValueError, match="unknown keys \\['extra'\\]"):
        results.validate({**doc, "extra": 1})
    with pytest.raises(ValueError, match="format is"):
        results.validate({**doc, "format": "zg-result/0"})
    bad = {**doc["headline"][0], "std": 0.1, "n": 1}
    with pytest.raises(ValueError, match="a std needs n >= 2"):
        results.validate({**doc, "headline": [bad]})


def test_every_bench_declares_its_headlines():
    """Each bench script that writes a result file declares its headline metrics beside the code
    that writes it (a ``headlines(doc)`` function), and _headlines.py only dispatches to it."""
    for doc in results.load_all().values():
        assert callable(_headlines.bench_headlines(doc["bench"])), doc["bench"]
    assert _headlines.bench_headlines("no_such_bench") is None


@pytest.mark.parametrize(
    "values, want",
    [([1.0, 2.0, 3.0], (2.0, 1.0)), ([0.5], (0.5, None)), ([2, 2], (2.0, 0.0))],
)
def test_mean_std_is_the_sample_std_and_none_for_one_value(values, want):
    assert results.mean_std(values) == want
    with pytest.raises(ValueError, match="empty"):
        results.mean_std([])


def test_headline_readers_accept_a_null_or_zero_std():
    """Files written before mean_std say "std": 0.0 for one seed, newer ones null: both read."""
    for std, n in ((None, 1), (0.0, 3)):
        m = results.headline("x", 1.5, "x", std=std, n=n)
        assert results.fmt(m).startswith("1.50x")


finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


@given(
    value=st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False),
    std=st.one_of(st.none(), st.just(0.0), st.floats(1e-9, 1e3)),
    near=st.lists(st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False), max_size=3),
    offsets=st.lists(st.floats(-1e-3, 1e-3).filter(lambda d: abs(d) > 1e-8), max_size=2),
)
@settings(max_examples=300, deadline=None)
def test_a_printed_metric_hides_no_spread_and_meets_no_threshold_it_misses(
    value, std, near, offsets
):
    """fmt never prints a spread that is not zero as zero, and never rounds a value onto a
    claim's threshold it does not equal (e.g. 0.9027 beside a 0.9 criterion)."""
    near = near + [round(value + d, 4) for d in offsets]  # thresholds just beside the value
    m = results.headline("x", value, "x", std=std, n=3)
    text = results.fmt(m, near=near)
    shown = text.split("x", 1)[0]
    if std:
        printed = text.split(" ± ")[1].split(" ")[0]
        assert float(printed) > 0, text
    for t in near:
        if abs(value - t) > 1e-8 and not 0 < abs(value) < 0.01:
            decimals = len(shown.split(".")[1]) if "." in shown else 0
            assert shown != f"{t:.{decimals}f}", (text, t)


@given(values=st.lists(finite, min_size=1, max_size=8), where=st.sampled_from(["rows", "detail"]))
@settings(max_examples=150, deadline=None)
def test_a_summary_says_what_its_values_give(values, where):
    """Every ``{"values", "mean", "std"}`` in a file's rows or detail is their mean and their
    sample std (n - 1; null for one value): the written summary is what the values give, so a
    population std, a stale mean or "± 0.0" for one seed is refused by every writer and reader."""
    doc = _machine.document("engine_fixture", json.loads(json.dumps(LEGACY)))
    mean, std = results.mean_std(values)
    summary = {"mean": mean, "std": std, "values": values}
    nested = [{"a": {"seconds": summary}}] if where == "rows" else {"a": [summary]}
    results.validate({**doc, where: nested})
    wrong = []
    if len(values) > 1:
        pop = statistics.pstdev(values)
        if not math.isclose(pop, std, rel_tol=1e-9, abs_tol=1e-12):
            wrong.append(("std", pop, "sample std"))
    else:
        wrong.append(("std", 0.0, "sample std"))
    wrong.append(("mean", mean + max(1.0, abs(mean)) * 1e-6, "the mean"))
    for key, bad, says in wrong:
        broken = {**summary, key: bad}
        nested = [{"a": {"seconds": broken}}] if where == "rows" else {"a": [broken]}
        with pytest.raises(ValueError, match=f"{key} is .*{says.split()[0]}"):
            results.validate({**doc, where: nested})
