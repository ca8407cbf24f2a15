"""bench/gpu_check.py's measuring parts, run on the CPU at a small size: the kernel summary on
a hand-made event list, sample (not population) spreads, interleaved timing rounds, each row's
memory and audit, the overflow-and-rewind cost, and the compiled variants' engines."""

from pathlib import Path

import pytest
import torch
from script_loader import load_script

import zg

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def check():
    module, restore = load_script(ROOT / "bench" / "gpu_check.py", "bench_gpu_check_parts")
    yield module
    restore()


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=600, avg_degree=6, num_classes=3, feat_dim=12, seed=0)


def test_kernel_summary_of_a_hand_counted_trace(check):
    # Two replays: A 0-10, B 10-15 (touching A), a gap of 5, A 20-30 | A 100-110, B 112-115.
    events = [
        ("A", 0, 10),
        ("B", 10, 5),
        ("A", 20, 10),
        ("A", 100, 10),
        ("B", 112, 3),
        ("zero", 50, 0),
    ]  # a zero-length event is dropped
    s = check.kernel_summary(events, replays=2)
    assert s["kernels_per_replay"] == 2.5 and s["distinct_kernels"] == 2
    assert [t["name"] for t in s["top"]] == ["A", "B"]
    assert s["top"][0]["per_replay"] == 1.5 and s["top"][0]["total_us"] == 30
    assert s["top"][0]["share"] == pytest.approx(30 / 38)
    # Busy: [0, 15] + [20, 30] + [100, 110] + [112, 115] = 15 + 10 + 10 + 3 = 38 of a 115 span.
    assert s["busy_us_per_replay"] == 19 and s["span_us_per_replay"] == 57.5
    assert s["busy_fraction"] == pytest.approx(38 / 115)
    assert (
        s["gaps_per_replay"] == 1.5
        and s["median_gap_us"] == 5
        and s["idle_us_per_replay"] == (5 + 70 + 2) / 2
    )


def test_spread_is_the_sample_standard_deviation(check):
    s = check.timing_spread([1.0, 2.0, 4.0])
    assert s["median"] == 2.0 and s["n"] == 3
    assert s["std"] == pytest.approx(1.5275252, rel=1e-6)  # n - 1, not n (1.2472)
    assert check.timing_spread([3.0])["std"] is None


@pytest.mark.slow
def test_rows_time_audit_and_memory_on_the_cpu(check, graph):
    cpu = torch.device("cpu")
    env = zg.Envelope.profile(graph, check.FANOUTS, 64, seed=0)
    row = check.measure(graph, cpu, 64, "envelope_captured", env, max_batches=3)
    assert row["host_syncs_per_iteration"] == 0 and row["launches_per_iteration"] > 0
    assert row["peak_bytes"] is None and row["baseline_allocated_bytes"] is None  # no CUDA
    dynamic = check.measure(graph, cpu, 64, "dynamic", None, max_batches=3)
    assert dynamic["host_syncs_per_iteration"] > 0
    engines = {
        v: check.build_engine(graph, cpu, 64, v, env, audit_iterations=0)
        for v in ("dynamic", "envelope_captured")
    }
    for eng in engines.values():
        assert eng.observers == []  # the audit is off while timing
        eng.train_epoch(max_batches=2)
    rounds = check.time_rounds(engines, iterations=2, reps=3, device=cpu)
    assert set(rounds) == set(engines)
    assert all(r["n"] == 3 and r["median"] > 0 and r["std"] is not None for r in rounds.values())


@pytest.mark.slow
def test_overflow_cost_counts_the_rewinds(check, graph):
    env = zg.Envelope.profile(graph, check.FANOUTS, 64, seed=0)
    out = check.overflow_cost(graph, torch.device("cpu"), 64, env, batches=4, shrink=0.3)
    assert out["profiled"]["overflows"] == 0
    assert out["shrunk"]["overflows"] >= 1 and out["shrunk"]["rewound_batches"] >= 1
    assert out["shrunk"]["envelope_end"] != out["shrunk"]["envelope_start"]
    assert out["seconds_per_overflow"] is not None


def test_compiled_variants_build_the_same_step_with_a_compiled_forward(check, graph):
    env = zg.Envelope.profile(graph, check.FANOUTS, 64, seed=0)
    for name, (base, _mode) in check.COMPILED.items():
        eng = check.build_engine(graph, torch.device("cpu"), 64, name, env, audit_iterations=0)
        assert (
            eng.hooks.forward is not None and type(eng.hooks.forward).__name__ == "OptimizedModule"
        )
        assert eng.mode == {"dynamic": "dynamic", "envelope_eager": "eager"}[base]
    with pytest.raises(ValueError, match="variant must be one of"):
        check.build_engine(graph, torch.device("cpu"), 64, "nope", env)


def test_the_whole_step_compiled_is_the_engines_compiled_mode(check, graph):
    """Issue 58: the GPU session's compiled row is the kit's whole step compiled (mode
    "compiled", captured on CUDA), timed against the captured step and the model alone compiled;
    its forward is the model's own (nothing compiled beside the step)."""
    env = zg.Envelope.profile(graph, check.FANOUTS, 64, seed=0)
    for name, against in check.WHOLE.items():
        eng = check.build_engine(graph, torch.device("cpu"), 64, name, env, audit_iterations=0)
        assert eng.mode == "compiled" and eng.hooks.forward is None
        assert against in check.VARIANTS


def test_the_tf32_variant_is_the_captured_step_with_tf32_on(check, graph):
    """Its own row: the captured step (mode "static" on the CPU) built with TF32 on (and TF32
    on around its own batches); every other variant keeps the default, full FP32."""
    env = zg.Envelope.profile(graph, check.FANOUTS, 64, seed=0)
    cpu = torch.device("cpu")
    for name, base in check.TF32.items():
        eng = check.build_engine(graph, cpu, 64, name, env, audit_iterations=0)
        assert (
            eng.settings.allow_tf32 is True and eng.mode == "static" and eng.hooks.forward is None
        )
        assert base == "envelope_captured"
        assert eng.train_epoch(max_batches=2).iterations == 2
    for name in check.VARIANTS:
        eng = check.build_engine(graph, cpu, 64, name, env, audit_iterations=0)
        assert eng.settings.allow_tf32 is False


def test_headlines_read_the_ratio_names_main_writes(check):
    """main names its timing ratios graph/model/bN/kind; headlines() split them in three and
    raised ValueError at the final save of a full run. SAGE keeps the names CLAIMS.md reads."""
    doc = {
        "detail": {
            "ratios": {
                "csbm_1000000/sage/b1024/captured_vs_dynamic": 3.0,
                "csbm_1000000/gcn/b1024/captured_vs_dynamic": 2.0,
                "csbm_1000000/b1024/peak_captured_over_worst_case": 0.4,
            }
        },
        "rows": [],
    }
    names = {h["name"]: h["value"] for h in check.headlines(doc)}
    assert names["captured_vs_dynamic_csbm1M_b1024"] == 3.0
    assert names["captured_vs_dynamic_csbm1M_b1024_gcn"] == 2.0
    assert names["peak_captured_over_worst_case_csbm1M_b1024"] == 0.4


def test_the_gpu_session_fits_nine_minutes_and_refuses_a_cpu_machine(tmp_path):
    """bench/gpu_session.sh, the one command a lent GPU session runs: its parts' limits add up
    to at most 9 minutes (a second try fits in 15 minutes of device time), the CUDA-marked tests
    run first (the Grappa worker's captured step before the others), the GPU check's budget
    leaves its part time to write, at most 8 files land in its folder (what the device tool
    brings back), and without CUDA it stops at once."""
    import re
    import sys

    import processes

    script = (ROOT / "bench" / "gpu_session.sh").read_text()
    parts = re.findall(r"^part (\w+) (\d+) (.*)$", script, flags=re.M)
    limits = [int(limit) for _, limit, _ in parts]
    assert sum(limits) + len(limits) * 10 <= 540  # 10 s: each part's kill-after
    assert [name for name, _, _ in parts][:2] == ["cuda_tests", "gpu_check"]
    assert "-m cuda" in parts[0][2] and '"$first"' in parts[0][2]
    assert "first=tests/grappa/test_grappa_exchange.py" in script
    cuda_files = {p.relative_to(ROOT).as_posix() for p in ROOT.glob("tests/*/test_*.py")}
    cuda_files = {f for f in cuda_files if "mark.cuda" in (ROOT / f).read_text()}
    assert "tests/grappa/test_grappa_exchange.py" in cuda_files
    budget = float(re.search(r"--budget (\d+)", parts[1][2]).group(1))
    assert budget + 30 <= limits[1]  # gpu_check.py stops at its budget, then writes
    logs = re.findall(r"^part (\w+) ", script, flags=re.M)
    copied = re.search(r"^for f in (.*); do", script, flags=re.M).group(1).split()
    assert len(logs) + len(copied) + len(["summary.txt", "lab8.json"]) <= 8
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is here: the session would run")
    run = processes.run(
        ["bash", str(ROOT / "bench" / "gpu_session.sh"), str(tmp_path)],
        env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stdout + run.stderr
    assert "no CUDA GPU here" in run.stdout
    assert not list(tmp_path.glob("*.log"))  # nothing ran
