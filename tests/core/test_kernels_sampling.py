"""The fused CPU sampling kernel (zg.kernels.sampling) against the torch reference, tensor by tensor.

Every output of ``EnvelopeSampler.sample_static`` must be bit-identical between
``kernel="fused"`` and ``kernel="torch"`` for the same key: the node ids, the local ids, the
masks, the padding, the counts, the overflow flag and the ``wanted`` counts. Then: the stage
seconds from the one compiled call, which kernel "auto" picks (an argument, never the
environment), the fallback without numba, and training with either kernel giving the same
parameters.
"""

import os
import sys
from pathlib import Path

import graphs
import processes
import pytest
import torch
from graphs import random_graph

import zg
from zg.envelope import Envelope
from zg.kernels import resolve as resolve_kernel
from zg.kernels import sampling as _fused
from zg.rng import batch_key
from zg.sampling import EnvelopeSampler, worst_case_sizes
from zg.step import StageClock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def numba(require):
    """The fused kernel needs numba: an error in the reference env, a skip elsewhere."""
    return require("numba")


# The sample stage runs on numba's threads (the kernel follows torch's thread count, so the
# fixture sets that: 1 and 2 threads); the compact stage is sequential either way.
@pytest.fixture(params=[1, 2], ids=["1t", "2t"])
def threads(request, numba):
    _fused.warm_up()
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def mixed_degree_graph():
    """tests/graphs.py's graph plus edges among the neighbours, so later hops have something to sample."""
    return graphs.mixed_degree_graph(extra_edges=20_000)[0]


def assert_bit_identical(a, b):
    """Every tensor of two MiniBatches: same dtype, shape and values."""

    def same(x, y, what):
        assert x.dtype == y.dtype, f"{what}: dtype {x.dtype} vs {y.dtype}"
        assert x.shape == y.shape, f"{what}: shape {tuple(x.shape)} vs {tuple(y.shape)}"
        assert torch.equal(x, y), f"{what}: values differ"

    for name in ("seeds", "num_seeds", "counts", "overflowed", "wanted"):
        same(getattr(a, name), getattr(b, name), name)
    assert a.envelope_sizes == b.envelope_sizes
    assert len(a.blocks) == len(b.blocks)
    for i, (x, y) in enumerate(zip(a.blocks, b.blocks)):
        for name in ("nbr", "mask", "src_nodes", "num_src", "num_dst"):
            same(getattr(x, name), getattr(y, name), f"blocks[{i}].{name}")


def both(g, fanouts, rows, **kwargs):
    return (
        EnvelopeSampler(g, fanouts, rows, kernel="torch", **kwargs),
        EnvelopeSampler(g, fanouts, rows, kernel="fused", **kwargs),
    )


@pytest.mark.parametrize("replace", [False, True])
def test_mixed_degrees_hub_degree_zero_and_below_fanout(numba, threads, replace):
    g = mixed_degree_graph()
    reference, fused = both(g, [4, 3, 6], 8, replace=replace, seed=11)
    assert (reference.kernel, fused.kernel) == ("torch", "fused")
    # The hub (4), degree 0 (5), degrees below the fanout (0, 1, 2), and two padding rows.
    seeds = torch.tensor([4, 5, 0, 1, 2, 3])
    for epoch, batch in [(0, 0), (0, 1), (3, 7), (-1, 2)]:
        assert_bit_identical(
            reference.sample(seeds, epoch, batch), fused.sample(seeds, epoch, batch)
        )


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("fanouts", [[5], [3, 4], [15, 10, 5], [2, 1, 3, 2]])
def test_random_graphs_many_keys_and_hops(numba, threads, replace, fanouts):
    g = random_graph(n=900, e=9000, seed=len(fanouts))
    reference, fused = both(g, fanouts, 64, replace=replace, seed=5)
    perm = torch.randperm(g.num_nodes, generator=torch.Generator().manual_seed(1))
    for batch in range(6):
        seeds = perm[batch * 64 : (batch + 1) * 64]
        assert_bit_identical(reference.sample(seeds, 1, batch), fused.sample(seeds, 1, batch))


@pytest.mark.parametrize("replace", [False, True])
def test_padded_short_batches(numba, threads, replace):
    g = random_graph()
    reference, fused = both(g, [4, 3], 50, replace=replace)
    for count in (1, 7, 49, 50):
        seeds = torch.arange(100, 100 + count)
        assert_bit_identical(reference.sample(seeds, 0, count), fused.sample(seeds, 0, count))


@pytest.mark.parametrize("replace", [False, True])
def test_overflowing_envelopes_same_flag_and_wanted(numba, threads, replace):
    g = random_graph()
    tiny = Envelope([100, 70, 64])
    reference, fused = both(g, [5, 4, 3], 64, envelope=tiny, replace=replace)
    overflowed = 0
    for batch in range(4):
        seeds = torch.arange(batch * 64, (batch + 1) * 64)
        a, b = reference.sample(seeds, 0, batch), fused.sample(seeds, 0, batch)
        assert_bit_identical(a, b)
        overflowed += bool(b.overflowed)
    assert overflowed == 4  # the test really exercises the overflow path
    # After overflows the marker is clean again: a roomy batch matches a fresh sampler.
    seeds = torch.arange(300, 364)
    assert_bit_identical(
        fused.sample(seeds, 2, 0),
        both(g, [5, 4, 3], 64, envelope=tiny, replace=replace)[0].sample(seeds, 2, 0),
    )


def test_overflow_at_the_first_hop_only(numba, threads):
    """An envelope tight at the seeds' hop only: the later hops sample from a truncated frontier."""
    g = random_graph(n=2000, e=30_000)
    rows = 32
    worst = worst_case_sizes(g.num_nodes, [3, 3, 6], rows)
    sizes = [worst[0], worst[1], rows + 5]
    reference, fused = both(g, [3, 3, 6], rows, envelope=Envelope(sizes))
    a, b = reference.sample(torch.arange(rows), 0, 0), fused.sample(torch.arange(rows), 0, 0)
    assert bool(b.overflowed) and int(b.wanted[-1]) > rows + 5
    assert_bit_identical(a, b)


def test_sample_static_with_raw_keys(numba, threads):
    """Negative, zero and extreme keys go through the same uint64 hash on both paths."""
    g = random_graph()
    reference, fused = both(g, [3, 5], 16)
    seeds = torch.zeros(16, dtype=torch.int64)
    seeds[:10] = torch.arange(40, 50)
    for key in (0, 1, -1, -(2**63), 2**63 - 1, batch_key(9, 9, 9)):
        k = torch.tensor(key, dtype=torch.int64)
        n = torch.tensor(10)
        assert_bit_identical(reference.sample_static(seeds, n, k), fused.sample_static(seeds, n, k))


def test_fanout_at_or_above_the_largest_degree_and_graph_without_edges(numba, threads):
    g = random_graph(n=300, e=900)
    reference, fused = both(g, [1000, 1000], 20)  # every neighbour
    seeds = torch.arange(20)
    assert_bit_identical(reference.sample(seeds), fused.sample(seeds))
    empty = zg.Graph.from_edges([], [], num_nodes=10)
    for replace in (False, True):
        reference, fused = both(empty, [3, 2], 4, replace=replace)
        seeds = torch.tensor([1, 2])
        assert_bit_identical(reference.sample(seeds), fused.sample(seeds))


def test_hypothesis_property(numba, threads, require):
    hypothesis = require("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=25, deadline=None, derandomize=True)
    @hypothesis.given(
        n=st.integers(2, 60),
        edges=st.integers(0, 400),
        fanouts=st.lists(st.integers(1, 6), min_size=1, max_size=3),
        rows=st.integers(1, 12),
        fill=st.integers(1, 12),
        replace=st.booleans(),
        tight=st.booleans(),
        seed=st.integers(0, 2**62),
        graph_seed=st.integers(0, 99),
    )
    def check(n, edges, fanouts, rows, fill, replace, tight, seed, graph_seed):
        rows = min(rows, n)
        g = random_graph(n=n, e=edges, seed=graph_seed)
        worst = worst_case_sizes(n, fanouts, rows)
        # tight: every envelope size at its smallest (rows of the next hop), so overflows happen
        envelope = Envelope([rows] * len(fanouts)) if tight else Envelope(worst)
        reference, fused = both(g, fanouts, rows, envelope=envelope, replace=replace, seed=seed)
        seeds = torch.randperm(n, generator=torch.Generator().manual_seed(graph_seed))[
            : min(fill, rows)
        ]
        assert_bit_identical(reference.sample(seeds, 0, 3), fused.sample(seeds, 0, 3))

    check()


class CountingLaps:
    """A clock that records what the fused sampler reports (StageClock's interface)."""

    def __init__(self):
        self.reported = []

    def __call__(self, stage):
        raise AssertionError(f"the fused sampler called clock({stage!r}): a per-hop Python path")

    def laps(self, durations):
        self.reported.append(list(durations))


@pytest.mark.parametrize("replace", [False, True])
def test_stage_seconds_come_from_the_one_compiled_call(numba, threads, replace, monkeypatch):
    """With a stage clock the fused sampler makes one compiled call per batch (no per-hop Python
    driver: pick and compact are never called from Python), gives the same tensors, and reports
    every hop's "sample" and "compact" seconds (> 0, clocked inside the kernel) to clock.laps."""
    g = random_graph(n=3000, e=60_000, seed=2)
    reference, fused = both(g, [3, 4, 2], 64, envelope=Envelope([1200, 600, 300]), replace=replace)
    calls = []
    compiled = _fused.sample_all

    def counted(*args):
        calls.append(args[-2])  # the "timed" flag
        return compiled(*args)

    def per_hop(*args):
        raise AssertionError("a stage kernel was called from Python: a per-hop driver")

    monkeypatch.setattr(_fused, "sample_all", counted)
    monkeypatch.setattr(_fused, "pick", per_hop)
    monkeypatch.setattr(_fused, "compact", per_hop)
    seeds = torch.zeros(64, dtype=torch.int64)
    seeds[:50] = torch.arange(200, 250)
    for key in (-7, 0, batch_key(1, 2, 3)):
        k, n = torch.tensor(key), torch.tensor(50)
        expected = reference.sample_static(seeds, n, k)
        clock = CountingLaps()
        assert_bit_identical(expected, fused.sample_static(seeds, n, k, clock=clock))
        (laps,) = clock.reported
        assert [stage for stage, _ in laps] == ["sample", "compact"] * 3
        assert all(isinstance(seconds, float) and seconds > 0 for _, seconds in laps), laps
        assert_bit_identical(expected, fused.sample_static(seeds, n, k))
    assert calls == [True, False] * 3  # one compiled call per batch
    # Into a StageClock: the seconds add up in its "sample" and "compact" stages, and reading
    # them back costs no host sync.
    from zg.audit import SyncAudit

    stages = {}
    clock = StageClock(None, into=stages)
    with SyncAudit() as audit:
        fused.sample_static(seeds, torch.tensor(50), torch.tensor(3), clock=clock)
    assert audit.host_syncs == 0, audit.report()
    assert set(stages) == {"sample", "compact"} and min(stages.values()) > 0
    with pytest.raises(ValueError, match="node ids"):
        fused.sample_static(
            torch.full((64,), g.num_nodes), torch.tensor(3), torch.tensor(0), clock=CountingLaps()
        )


def test_a_clock_without_laps_is_a_type_error_naming_clock(numba):
    g = random_graph()
    fused = EnvelopeSampler(g, [3, 2], 8, kernel="fused")
    with pytest.raises(TypeError, match="clock"):
        fused.sample(torch.arange(8), clock=lambda stage: None)
    stages = []  # the torch reference takes any callable
    EnvelopeSampler(g, [3, 2], 8, kernel="torch").sample(torch.arange(8), clock=stages.append)
    assert stages == ["sample", "compact"] * 2


def test_the_per_hop_driver_and_the_parallel_compact_are_gone(numba):
    import inspect

    for name in (
        "compact_parallel",
        "first_occurrences",
        "compact_hop",
        "Workspace",
        "PARALLEL_MIN_SLOTS",
    ):
        assert not hasattr(_fused, name), name
    parameters = inspect.signature(_fused.sample_fused).parameters
    assert "clock" not in parameters and "parallel_min_slots" not in parameters
    assert "stage_seconds" in parameters


def test_bad_static_inputs_are_errors_not_crashes(numba):
    g = random_graph()
    fused = EnvelopeSampler(g, [3], 4, kernel="fused")
    key = torch.tensor(1)
    with pytest.raises(ValueError, match="node ids"):
        fused.sample_static(torch.tensor([0, 1, g.num_nodes, 2]), torch.tensor(4), key)
    with pytest.raises(ValueError, match="num_seeds"):
        fused.sample_static(torch.tensor([0, 1, 2, 3]), torch.tensor(5), key)
    with pytest.raises(TypeError, match="seeds"):
        fused.sample_static(torch.tensor([0, 1, 2]), torch.tensor(3), key)
    # The sampler is unharmed.
    seeds = torch.tensor([0, 1, 2, 3])
    assert_bit_identical(
        fused.sample(seeds), EnvelopeSampler(g, [3], 4, kernel="torch").sample(seeds)
    )


@pytest.mark.slow
@pytest.mark.parametrize("replace", [False, True])
def test_an_int64_marker_duplicate_seeds_and_a_stale_marker(numba, replace):
    """The int64 marker (graphs with 2^31 nodes or more) gives the same samples; repeated seeds
    keep their first row, as in the reference. The marker's contents are never read unless the
    hop numbered the node: a marker full of stale ids gives the same samples, and the seen
    bitmap is left all zero."""
    g = random_graph(n=3000, e=40_000, seed=4)
    reference, _ = both(g, [6, 5], 700, replace=replace, seed=2)
    seeds = torch.randint(0, 3000, (700,), generator=torch.Generator().manual_seed(0))
    seeds[10:20] = seeds[0]  # duplicate seeds
    key = torch.tensor(batch_key(2, 0, 0))
    expected = reference.sample_static(seeds, torch.tensor(690), key)
    fanouts = list(reversed(reference.effective_fanouts))
    sizes = list(reversed(reference.sizes))
    for dtype in (torch.int32, torch.int64):
        for stale in (0, 3):
            marker = torch.randint(
                -5,
                5000,
                (g.num_nodes,),
                dtype=dtype,
                generator=torch.Generator().manual_seed(stale),
            )
            seen = _fused.new_seen_bitmap(g.num_nodes)
            hops, wanted, clamped, overflowed = _fused.sample_fused(
                g.indptr,
                g.indices,
                seeds,
                torch.tensor(690),
                key,
                fanouts,
                sizes,
                replace,
                reference.max_degree,
                marker,
                seen=seen,
            )
            assert torch.equal(wanted, expected.wanted.flip(0))
            assert torch.equal(overflowed, expected.overflowed)
            for (nbr, mask, src), block in zip(hops, reversed(expected.blocks)):
                assert torch.equal(nbr, block.nbr) and torch.equal(mask, block.mask)
                assert torch.equal(src, block.src_nodes)
            assert seen.shape == ((g.num_nodes + 63) // 64,) and not seen.any()
    with pytest.raises(TypeError, match="stage_seconds"):
        _fused.sample_fused(
            g.indptr,
            g.indices,
            seeds,
            torch.tensor(690),
            key,
            fanouts,
            sizes,
            replace,
            reference.max_degree,
            marker,
            stage_seconds=torch.zeros(len(fanouts), 2),
        )  # float32


# ----------------------------------------------------------------------------- choosing the kernel


def test_torch_by_default_auto_picks_fused_on_the_cpu_and_the_argument_forces_either(
    numba, monkeypatch
):
    g = random_graph()
    assert EnvelopeSampler(g, [3], 4).kernel == "torch"  # what runs is the code a reader reads
    assert EnvelopeSampler(g, [3], 4, kernel="auto").kernel == "fused"
    assert EnvelopeSampler(g, [3], 4, kernel="torch").kernel == "torch"
    assert EnvelopeSampler(g, [3], 4, kernel="fused").kernel == "fused"
    # The environment chooses nothing: the old override variable is ignored.
    monkeypatch.setenv("ZG_SAMPLING_KERNEL", "fused")
    assert EnvelopeSampler(g, [3], 4).kernel == "torch"
    with pytest.raises(ValueError, match="kernel must be one of"):
        EnvelopeSampler(g, [3], 4, kernel="numba")
    # On CUDA the torch path runs (it is the capturable one); asking for fused there is an error.
    assert resolve_kernel("auto", torch.device("cuda")) == "torch"
    with pytest.raises(ValueError, match="runs on the CPU"):
        resolve_kernel("fused", torch.device("cuda"))
    assert zg.kernels.resolve("torch", "cpu") == "torch" and zg.kernels.KERNELS == (
        "auto",
        "fused",
        "torch",
    )


def test_no_environment_variable_or_module_switch_chooses_the_kernel():
    """The kernel choice is an argument: no os.environ read in the modules that compute, no
    process-wide setter."""
    import zg.kernels.aggregate as aggregate
    import zg.sampling as sampling

    for path in [
        ROOT / "zg" / "sampling.py",
        ROOT / "zg" / "models.py",
        *sorted((ROOT / "zg" / "kernels").glob("*.py")),
    ]:
        source = path.read_text()
        assert "os.environ" not in source and "getenv" not in source, path
    assert not hasattr(sampling, "KERNEL_ENV")
    assert not hasattr(aggregate, "set_backward") and not hasattr(aggregate, "_backward")


def test_compile_time_is_reported(numba):
    seconds = _fused.warm_up()
    info = _fused.compile_info()
    assert info["seconds"] == seconds and seconds > 0
    assert isinstance(info["from_cache"], bool) and info["numba"] == numba.__version__


@pytest.mark.slow
def test_the_timed_driver_loads_from_numbas_cache(numba):
    """The clock read (objmode) does not stop numba caching the driver: once this process has
    compiled (or loaded) it, a fresh process loads every kernel from the cache."""
    _fused.warm_up()
    code = (
        "from zg.kernels import sampling; sampling.warm_up(); "
        "print(sampling.compile_info()['from_cache'])"
    )
    out = processes.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True"]


def test_numba_threads_follow_torch(numba):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert zg.kernels.set_threads() == 1 and numba.get_num_threads() == 1
        torch.set_num_threads(before)
        assert zg.kernels.set_threads() == min(before, numba.config.NUMBA_NUM_THREADS)
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow
def test_warm_up_keeps_torch_thread_count(numba):
    """numba's OpenMP layer resets torch's thread count at its first parallel launch; warm_up
    (the first launch of every fused sampler) puts it back, so "numba follows torch" holds."""
    code = (
        "import torch; torch.set_num_threads(1); from zg import kernels; "
        "kernels.sampling.warm_up(); print(torch.get_num_threads(), kernels.set_threads())"
    )
    out = processes.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "1"]


WITHOUT_NUMBA = """
import sys, warnings
sys.modules["numba"] = None            # any `import numba` now raises ImportError
import torch, zg
from zg import kernels
from zg.sampling import EnvelopeSampler
assert not kernels.available() and isinstance(kernels.import_error(), ImportError)
g = zg.Graph.from_edges(torch.tensor([0, 1, 2]), torch.tensor([1, 2, 0]), 3)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    a = EnvelopeSampler(g, [2], 2, kernel="auto")
    b = EnvelopeSampler(g, [2], 2, kernel="auto")
assert a.kernel == b.kernel == "torch"
notices = [str(w.message) for w in caught if "numba" in str(w.message)]
assert len(notices) == 1, notices                      # one notice per process
assert "\\n" not in notices[0]                          # one line
try:
    EnvelopeSampler(g, [2], 2, kernel="fused")
except RuntimeError as exc:
    assert "numba" in str(exc)
else:
    raise AssertionError("kernel='fused' without numba must fail")
mb = a.sample(torch.tensor([0, 1]))
# The models aggregate with the torch gather ("auto"); asking for the fused kernels fails early.
model = zg.models.SAGE(4, 8, 2, num_layers=1)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out = model(mb.blocks, torch.randn(mb.blocks[0].src_nodes.shape[0], 4))
assert out.shape == (2, 2) and not caught                 # the process's notice was given
try:
    zg.models.GAT(4, 8, 2, kernel="fused")
except RuntimeError as exc:
    assert "numba" in str(exc)
else:
    raise AssertionError("kernel='fused' without numba must fail")
print("ok", notices[0])
"""


@pytest.mark.slow
def test_without_numba_the_torch_path_runs_with_one_notice():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = processes.run(
        [sys.executable, "-c", WITHOUT_NUMBA],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ok zg: numba is not installed")


# ----------------------------------------------------------------------------- training


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["static", "eager"])
def test_engine_training_is_identical_with_either_kernel(numba, mode):
    g = zg.datasets.csbm(num_nodes=1500, avg_degree=8, num_classes=4, feat_dim=16, seed=0)
    params, losses = [], []
    for kernel in ("fused", "torch"):
        torch.manual_seed(0)
        model = zg.models.SAGE(16, 32, 4, num_layers=2)
        eng = zg.Engine(g, model, fanouts=[5, 4], batch_size=128, mode=mode, seed=3, kernel=kernel)
        assert eng.sampler.kernel == kernel and model.kernel == kernel
        model.set_kernel("fused")  # the same aggregation in both: only sampling differs
        stats = eng.train_epoch()
        assert stats.iterations > 1
        params.append({k: v.clone() for k, v in model.state_dict().items()})
        losses.append(stats.loss)
    assert losses[0] == losses[1]
    for name in params[0]:
        assert torch.equal(params[0][name], params[1][name]), name


def test_engine_rejects_a_bad_kernel():
    g = zg.datasets.csbm(num_nodes=200, avg_degree=4, num_classes=2, feat_dim=4, seed=0)
    with pytest.raises(ValueError, match="kernel must be"):
        zg.Engine(
            g, zg.models.SAGE(4, 8, 2, num_layers=1), fanouts=[3], batch_size=16, kernel="cuda"
        )
