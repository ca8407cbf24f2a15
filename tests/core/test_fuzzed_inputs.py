"""Hostile input: fuzzed loaders, configs and checkpoints end in a clear error, never a crash, a
hang or a half-written file; a long run does not grow in memory."""

import contextlib
import io
import os
import signal
import time
from datetime import timedelta

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import zg
from zg import models
from zg.engine import Engine, StepHooks
from zg.envelope import Envelope

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def small():
    return zg.datasets.csbm(num_nodes=400, avg_degree=6, num_classes=3, feat_dim=4, seed=0)


@pytest.fixture(scope="module")
def npz_bytes(small, tmp_path_factory):
    path = tmp_path_factory.mktemp("npz") / "g.npz"
    zg.datasets.save_npz(small, path)
    return path.read_bytes()


# ----------------------------------------------------------------------------- load_npz


@FUZZ
@given(
    cut=st.integers(0, 10_000),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4),
)
def test_load_npz_on_truncated_or_corrupted_bytes(npz_bytes, tmp_path_factory, cut, flips):
    data = bytearray(npz_bytes[: min(cut, len(npz_bytes))] if cut < len(npz_bytes) else npz_bytes)
    for at, bits in flips:
        if data:
            data[at % len(data)] ^= bits
    path = tmp_path_factory.mktemp("fuzz") / "bad.npz"
    path.write_bytes(bytes(data))
    try:
        g = zg.datasets.load_npz(path)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    # Accepted: then it must be a well-formed graph (validation ran) — e.g. a flip in padding.
    assert g.indptr[-1] == g.num_edges and g.num_nodes >= 1


arrays = st.one_of(
    st.just(np.zeros(0, dtype=np.int64)),
    st.just(np.array([0, 5, 2])),
    st.just(np.array([[1, 2]])),
    st.just(np.array([0.5, 1.5])),
    st.just(np.array(["a", "b"])),
    st.just(np.array([np.nan])),
    st.just(np.array([-1, 0])),
    st.just(np.array(3)),
)


@pytest.mark.slow
@FUZZ
@given(
    replace=st.dictionaries(
        st.sampled_from(
            ["indptr", "indices", "x", "y", "train_idx", "num_classes", "format", "version", "name"]
        ),
        arrays,
        max_size=3,
    ),
    drop=st.lists(st.sampled_from(["indptr", "indices", "format", "version"]), max_size=2),
)
def test_load_npz_on_wrong_arrays(small, tmp_path_factory, replace, drop):
    path = tmp_path_factory.mktemp("fuzz") / "g.npz"
    zg.datasets.save_npz(small, path)
    with np.load(path, allow_pickle=False) as f:
        content = {k: f[k] for k in f.files}
    content.update(replace)
    for k in drop:
        content.pop(k, None)
    buf = io.BytesIO()
    np.savez(buf, **content)
    path.write_bytes(buf.getvalue())
    try:
        zg.datasets.load_npz(path)
    except (ValueError, TypeError) as exc:
        assert str(exc)


def test_save_npz_is_atomic_when_writing_fails(small, tmp_path, monkeypatch):
    path = tmp_path / "g.npz"
    zg.datasets.save_npz(small, path)
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np, "savez", broken)
    monkeypatch.setattr(np, "savez_compressed", broken)
    with pytest.raises(OSError):
        zg.datasets.save_npz(small, path)
    assert path.read_bytes() == before, "the old file is intact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.npz"], "no temp file left behind"


@pytest.mark.parametrize(
    "path, error, match",
    [
        (None, TypeError, "path must be a path"),
        (3, TypeError, "path must be a path"),
        ("", ValueError, "path is an empty string"),
        ("/", ValueError, "path '/' is a directory"),
    ],
)
def test_load_npz_names_a_bad_path(path, error, match):
    with pytest.raises(error, match=match):
        zg.datasets.load_npz(path)


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs /proc (Linux)")
def test_load_npz_names_a_file_it_cannot_read():
    with pytest.raises(OSError, match="could not read path '/proc/self/mem'"):
        zg.datasets.load_npz("/proc/self/mem")


def test_save_npz_names_the_path_and_leaves_nothing(small, tmp_path):
    for target, match in [
        (tmp_path / "missing" / "g.npz", "the folder .* does not exist"),
        (tmp_path, "is a directory"),
    ]:
        with pytest.raises(ValueError, match=match) as info:
            zg.datasets.save_npz(small, target)
        assert str(target) in str(info.value) and ".tmp" not in str(info.value)
    with pytest.raises(TypeError, match="path must be a path"):
        zg.datasets.save_npz(small, None)
    assert list(tmp_path.iterdir()) == []
    if os.geteuid() == 0:  # root ignores permission bits
        target = "/proc/self/g.npz"
    else:
        (tmp_path / "ro").mkdir(mode=0o555)
        target = str(tmp_path / "ro" / "g.npz")
    with pytest.raises((ValueError, OSError)) as info:
        zg.datasets.save_npz(small, target)
    assert target in str(info.value) and ".tmp" not in str(info.value)


# ----------------------------------------------------------------------------- engine configs


values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.floats(-1, 1e3),
    st.just(float("nan")),
    st.text(max_size=4),
    st.lists(st.integers(-2, 12), max_size=4),
)


@FUZZ
@given(
    batch_size=values,
    fanouts=values,
    lr=values,
    poll_every=values,
    envelope=values,
    seed=values,
    device=st.sampled_from(["cpu", "cuda", "tpu", "", None, 3]),
)
def test_engine_configs_fail_clearly_or_work(
    small, batch_size, fanouts, lr, poll_every, envelope, seed, device
):
    if isinstance(envelope, list):
        envelope = Envelope(envelope) if envelope and all(v > 0 for v in envelope) else envelope
    kwargs = dict(
        batch_size=batch_size, fanouts=fanouts, envelope=envelope, seed=seed, device=device
    )
    kwargs = {k: v for k, v in kwargs.items() if v is not None or k in ("envelope", "device")}
    kwargs.setdefault("batch_size", 32)
    kwargs.setdefault("fanouts", [3, 3])
    try:
        if lr is not None:
            kwargs["optimizer"] = zg.optim.adam(lr=lr)
        if poll_every is not None:
            kwargs["hooks"] = StepHooks(poll_every=poll_every)
        eng = Engine(small, models.SAGE(4, 8, 3, 2), **kwargs)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    eng.observers = []
    stats = eng.train_epoch(max_batches=2)
    assert stats.iterations >= 1 and np.isfinite(stats.loss)


# ----------------------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def checkpoint(small, tmp_path_factory):
    eng = Engine(small, models.SAGE(4, 8, 3, 2), [3, 3], 32, envelope="worst_case")
    eng.train_epoch(max_batches=3)
    return eng.save(tmp_path_factory.mktemp("ckpt") / "engine.pt").read_bytes()


@pytest.mark.slow
@FUZZ
@given(
    cut=st.integers(0, 200_000),
    flips=st.lists(st.tuples(st.integers(0, 10**7), st.integers(1, 255)), max_size=3),
)
def test_corrupt_checkpoints_never_half_load(small, checkpoint, tmp_path_factory, cut, flips):
    data = bytearray(checkpoint[:cut] if cut < len(checkpoint) else checkpoint)
    for at, bits in flips:
        if data:
            data[at % len(data)] ^= bits
    path = tmp_path_factory.mktemp("bad") / "engine.pt"
    path.write_bytes(bytes(data))
    torch.manual_seed(0)
    eng = Engine(small, models.SAGE(4, 8, 3, 2), [3, 3], 32, envelope="worst_case")
    before = [p.detach().clone() for p in eng.model.parameters()]
    try:
        eng.load(path)
    except ValueError as exc:
        assert str(exc)
        assert all(torch.equal(p, q) for p, q in zip(eng.model.parameters(), before))
        assert (eng.epoch, eng.batch) == (0, 0)
        return
    # Loaded (a harmless flip): the engine must still train.
    assert np.isfinite(eng.train_epoch(max_batches=1).loss)


def test_engine_save_is_atomic_when_writing_fails(small, tmp_path, monkeypatch):
    eng = Engine(small, models.SAGE(4, 8, 3, 2), [3, 3], 32, envelope="worst_case")
    path = eng.save(tmp_path / "engine.pt")
    before = path.read_bytes()

    def broken(obj, f, *args, **kwargs):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken)
    eng.train_epoch(max_batches=1)
    with pytest.raises(OSError):
        eng.save(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["engine.pt"]


# ----------------------------------------------------------------------------- resource bounds


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _settled_rss_bytes():
    """RSS after a full collection and glibc's malloc_trim.

    Raw RSS swings by tens of MiB either way between runs on the same machine (freed
    blocks stay in malloc's arenas until it decides to return them); CI once saw +44 MiB
    over 60 epochs with no leak. Trimmed RSS moves by under 0.1 MiB over 90 Cora epochs
    here, so a tight bound can catch a real leak without failing on allocator noise.
    """
    import ctypes
    import gc

    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return _rss_bytes()


def _has_malloc_trim():
    try:
        import ctypes

        return hasattr(ctypes.CDLL("libc.so.6"), "malloc_trim")
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(
    not os.path.exists("/proc/self/statm") or not _has_malloc_trim(),
    reason="needs /proc and glibc's malloc_trim (Linux)",
)
def test_long_run_on_cora_does_not_grow_in_memory():
    g = zg.datasets.load("cora")
    model, kwargs, _ = zg.recipes.cora_sage()
    eng = Engine(g, model, **kwargs)
    for _ in range(10):  # warm up allocator caches (training and inference:
        eng.train_epoch()  # full-neighbour inference settles after two calls)
    for _ in range(3):
        eng.evaluate("val")
    start = _settled_rss_bytes()
    for epoch in range(60):
        eng.train_epoch()
        if epoch % 20 == 0:
            eng.evaluate("val")
    growth = _settled_rss_bytes() - start
    # The recipe runs one iteration per epoch. Leaking one 140x10x10 int64 index tensor per
    # iteration (a sampled layer's worth, 109 KiB) shows up here as +6.6 MiB; the trimmed
    # baseline moves by under 0.1 MiB, so 4 MiB separates the two.
    assert growth < 4 * 2**20, (
        f"RSS grew by {growth / 2**20:.2f} MiB over 60 epochs (after malloc_trim)"
    )
    assert len(eng.history) == 70  # the history grows by design; nothing else may


# ----------------------------------------------------------------------------- samplers and envelopes
#
# Issue 16: no hangs, no silent wrong results. Every wrong argument of a sampler or an envelope
# is a ValueError / TypeError that names it; a hang fails the test instead of stalling it.


class Hang(BaseException):
    """Raised by `time_limit` (a BaseException, so no `except Exception` under test swallows it)."""


@contextlib.contextmanager
def time_limit(seconds):
    """Fail with Hang if the block runs longer than ``seconds`` (SIGALRM). pytest-timeout's own
    alarm, if set, is restored afterwards with the time it had left."""

    def alarm(signum, frame):
        raise Hang(f"one example ran longer than {seconds} s: a hang")

    handler = signal.signal(signal.SIGALRM, alarm)
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, handler)
        if outer_delay:
            left = max(outer_delay - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


# Per example: hypothesis reports a slow example (deadline), the alarm ends a hung one.
TIMED = settings(
    max_examples=150,
    deadline=timedelta(seconds=20),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
EXAMPLE_SECONDS = 30


@pytest.fixture(scope="module")
def g300():
    return zg.datasets.csbm(300, 6, 3, 8)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "nodes", [[], torch.zeros(0, dtype=torch.int64), np.zeros(0, dtype=np.int64)]
)
def test_profile_on_no_nodes_fails_instead_of_looping(g300, nodes):
    with time_limit(20), pytest.raises(ValueError, match="nodes is empty"):
        Envelope.profile(g300, [5, 5], 64, nodes=nodes)


@pytest.mark.timeout(60)
def test_a_huge_fanout_returns_at_once(g300):
    with time_limit(20):
        mb = zg.DynamicSampler(g300, [10**6]).sample([0, 1])
        assert mb.blocks[0].nbr.shape == (2, int(g300.in_degrees().max()))
        zg.EnvelopeSampler(g300, [10**6, 10**6], 64).sample(torch.arange(64))
        eng = Engine(g300, models.SAGE(8, 16, 3, 2), [10**6, 10**6], 64)
        assert max(eng.envelope.sizes) <= g300.num_nodes
        assert np.isfinite(eng.train_epoch(max_batches=2).loss)


def _dynamic(g, **kw):
    return zg.DynamicSampler(g, kw.pop("fanouts", [5]), **kw)


def _envelope(g, **kw):
    return zg.EnvelopeSampler(g, kw.pop("fanouts", [5]), kw.pop("batch_size", 8), **kw)


@pytest.mark.parametrize(
    "call, error, match",
    [
        # the wrong argument named: nodes, not seeds; "empty", not a dtype; seed, not int()
        (
            lambda g: Envelope.profile(g, [5, 5], 4, nodes=[1, 1, 2, 3]),
            ValueError,
            "nodes holds repeated",
        ),
        (
            lambda g: Envelope.profile(g, [5, 5], 64, nodes=[0.5, 1.5]),
            TypeError,
            "nodes must hold integer",
        ),
        (
            lambda g: Envelope.profile(g, [5, 5], 64, nodes=[[1, 2]]),
            ValueError,
            "nodes must be 1-dim",
        ),
        (
            lambda g: Envelope.profile(g, [5, 5], 64, nodes=[400]),
            ValueError,
            "nodes holds node id 400",
        ),
        (
            lambda g: Envelope.profile(g, [5, 5], 64, nodes=[True, False]),
            TypeError,
            "nodes must hold integer",
        ),
        (lambda g: Envelope.profile(g, [5, 5], 64, nodes="12"), TypeError, "nodes must be a 1-d"),
        (lambda g: _dynamic(g).sample([]), ValueError, "seeds is empty"),
        (lambda g: _envelope(g).sample([]), ValueError, "seeds is empty"),
        (lambda g: _dynamic(g).sample(None), TypeError, "seeds must be a 1-d"),
        (lambda g: _dynamic(g).sample(["1", "2"]), TypeError, "seeds must hold integer"),
        (lambda g: _dynamic(g).sample(3), TypeError, "seeds must be a 1-d"),
        (lambda g: _dynamic(g, seed="abc"), TypeError, "seed must be an int"),
        (lambda g: _envelope(g, seed="abc"), TypeError, "seed must be an int"),
        (lambda g: Envelope.profile(g, [5, 5], 64, seed="abc"), TypeError, "seed must be an int"),
        (lambda g: _dynamic(g, seed=1.5), TypeError, "seed must be an int"),
        (lambda g: _envelope(g, seed=True), TypeError, "seed must be an int"),
        (lambda g: _dynamic(g, seed=2**64), ValueError, "seed must be in"),
        (lambda g: _dynamic(g).sample([1], epoch=1.5), TypeError, "epoch must be an int"),
        (lambda g: _envelope(g).sample([1], batch="2"), TypeError, "batch must be an int"),
        (lambda g: _envelope(g).sample([1], key=3), TypeError, "key must be None or an int64"),
        (lambda g: _dynamic(g).sample([1], clock="yes"), TypeError, "clock must be callable"),
        (lambda g: _dynamic(g, replace=1), TypeError, "replace must be a bool"),
        (lambda g: _envelope(g, batch_size=8.0), TypeError, "batch_size must be an int"),
        (lambda g: _envelope(g, batch_size=True), TypeError, "batch_size must be an int"),
        (lambda g: _dynamic(g, fanouts=[5, True]), TypeError, r"fanouts\[1\] must be an int"),
        (lambda g: _dynamic(None), TypeError, "g must be a zg.Graph"),
        (lambda g: Envelope.worst_case(None, [5], 8), TypeError, "g must be a zg.Graph"),
        (lambda g: Envelope.worst_case(g, [5], 8.5), TypeError, "batch_size must be an int"),
        (
            lambda g: Envelope.profile(g, [5], 8, quantile="0.5"),
            TypeError,
            "quantile must be a number",
        ),
        (
            lambda g: Envelope.profile(g, [5], 8, quantile=True),
            TypeError,
            "quantile must be a number",
        ),
        (
            lambda g: Envelope.profile(g, [5], 8, margin=float("nan")),
            ValueError,
            "margin must be finite",
        ),
        (
            lambda g: Envelope.profile(g, [5], 8, num_batches=2.0),
            TypeError,
            "num_batches must be an int",
        ),
        (lambda g: Envelope.profile(g, [5], 8, replace=0), TypeError, "replace must be a bool"),
        (lambda g: Envelope([5], policy=3), TypeError, "policy must be a str"),
        (lambda g: Envelope([5], batch_size=3.5), TypeError, "batch_size must be an int"),
        (lambda g: Envelope([5], num_nodes="300"), TypeError, "num_nodes must be an int"),
        (lambda g: Envelope([5], max_degree=-1), ValueError, "max_degree must be >= 0"),
        (
            lambda g: Envelope([5], observed=[[1]]),
            TypeError,
            "observed must be None or an integer tensor",
        ),
        (lambda g: Envelope([5], settings="x"), TypeError, "settings must be a dict"),
        (lambda g: Envelope.worst_case(g, [5], 4).grow("2"), TypeError, "factor must be a number"),
        (
            lambda g: Envelope.worst_case(g, [5], 4).grow(float("inf")),
            ValueError,
            "factor must be finite",
        ),
        (
            lambda g: Envelope.worst_case(g, [5], 4).grow(2, observed=[1.5]),
            TypeError,
            r"observed\[0\] must be an int",
        ),
        (
            lambda g: Envelope.worst_case(g, [5], 4).grow(2, observed=[1, 2]),
            ValueError,
            "observed has 2 counts",
        ),
        (
            lambda g: Envelope.worst_case(g, [5], 4).memory_model(8.0, 16, 3),
            TypeError,
            "feat_dim must be an int",
        ),
        (
            lambda g: _envelope(g, envelope=Envelope([10**9])),
            ValueError,
            "larger than any batch can fill",
        ),
        (lambda g: g.to("xyz"), ValueError, "device 'xyz' is not a torch device"),
        (lambda g: g.to(None), TypeError, "device must be"),
    ],
)
def test_errors_name_the_argument_that_is_wrong(g300, call, error, match):
    with time_limit(20), pytest.raises(error, match=match):
        call(g300)


# Values for each argument, valid and invalid mixed: whatever the mix, the call works or raises
# a ValueError / TypeError that names an argument it was given, within EXAMPLE_SECONDS.
junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 40),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.sampled_from([2**63, -(2**63) - 1, 10**6]),
)
node_lists = st.one_of(
    st.lists(st.integers(-2, 305), max_size=12),
    st.just([]),
    st.just([[1, 2]]),
    st.lists(st.floats(0, 10), min_size=1, max_size=3),
    st.just(np.arange(5)),
    st.just(torch.arange(3, dtype=torch.int32)),
    st.just(torch.tensor([0.5])),
    st.just(np.array(["1"])),
    junk,
)
fanout_lists = st.one_of(
    st.lists(
        st.sampled_from([-1, 0, 1, 3, 13, 14, 1024, 1025, 10**6, 10**18]), min_size=1, max_size=3
    ),
    st.lists(junk, max_size=2),
    junk,
)
ARGUMENTS = {
    "fanouts": fanout_lists,
    "batch_size": st.one_of(st.integers(-1, 70), junk),
    "replace": st.one_of(st.booleans(), junk),
    "seed": junk,
    "seeds": node_lists,
    "epoch": junk,
    "batch": junk,
    "nodes": node_lists,
    "num_batches": st.one_of(st.integers(-1, 6), st.none(), st.floats(0, 4), st.text(max_size=2)),
    "quantile": st.one_of(st.floats(-0.5, 1.5), junk),
    "margin": st.one_of(st.floats(-1, 12), junk),
    "sizes": st.one_of(st.lists(st.sampled_from([0, 1, 64, 300, 10**9]), max_size=3), junk),
    "factor": st.one_of(st.floats(0, 1e6), junk),
    "observed": st.one_of(
        st.lists(st.integers(-1, 10**9), max_size=3), st.lists(junk, max_size=2), junk
    ),
}
VALID = {
    "fanouts": [3, 2],
    "batch_size": 16,
    "replace": False,
    "seed": 0,
    "seeds": [0, 5, 9, 120],
    "epoch": 0,
    "batch": 0,
    "nodes": None,
    "num_batches": 3,
    "quantile": 0.99,
    "margin": 0.05,
    "sizes": [200, 60],
    "factor": 1.5,
    "observed": None,
}


def _call(g, target, a):
    if target == "dynamic":
        return zg.DynamicSampler(g, a["fanouts"], replace=a["replace"], seed=a["seed"]).sample(
            a["seeds"], a["epoch"], a["batch"]
        )
    if target == "envelope":
        return zg.EnvelopeSampler(
            g, a["fanouts"], a["batch_size"], replace=a["replace"], seed=a["seed"]
        ).sample(a["seeds"], a["epoch"], a["batch"])
    if target == "profile":
        return Envelope.profile(
            g,
            a["fanouts"],
            a["batch_size"],
            num_batches=a["num_batches"],
            quantile=a["quantile"],
            margin=a["margin"],
            replace=a["replace"],
            seed=a["seed"],
            nodes=a["nodes"],
        )
    if target == "worst_case":
        return Envelope.worst_case(g, a["fanouts"], a["batch_size"])
    if target == "grow":
        env = Envelope(
            a["sizes"], fanouts=a["fanouts"], batch_size=a["batch_size"], num_nodes=g.num_nodes
        )
        return env.grow(a["factor"], observed=a["observed"])
    raise AssertionError(target)


USES = {
    "dynamic": ("fanouts", "replace", "seed", "seeds", "epoch", "batch"),
    "envelope": ("fanouts", "batch_size", "replace", "seed", "seeds", "epoch", "batch"),
    "profile": (
        "fanouts",
        "batch_size",
        "num_batches",
        "quantile",
        "margin",
        "replace",
        "seed",
        "nodes",
    ),
    "worst_case": ("fanouts", "batch_size"),
    "grow": ("sizes", "fanouts", "batch_size", "factor", "observed"),
}


@pytest.mark.slow
@pytest.mark.timeout(900)
@TIMED
@given(data=st.data(), target=st.sampled_from(sorted(USES)))
def test_samplers_and_envelopes_fail_clearly_or_work(g300, data, target):
    names = data.draw(st.lists(st.sampled_from(USES[target]), min_size=1, max_size=2, unique=True))
    bad = {name: data.draw(ARGUMENTS[name], label=name) for name in names}
    a = {**VALID, **bad}
    with time_limit(EXAMPLE_SECONDS):
        try:
            out = _call(g300, target, a)
        except (ValueError, TypeError) as exc:
            message = str(exc)
            assert any(name in message for name in bad), f"{message!r} names none of {sorted(bad)}"
            return
    if isinstance(out, zg.MiniBatch):
        assert bool((out.counts <= g300.num_nodes).all()) and not bool(out.overflowed)
    else:
        assert all(
            1 <= s <= max(g300.num_nodes, VALID["batch_size"], a["batch_size"]) for s in out.sizes
        )


ENGINE_ARGUMENTS = {
    "fanouts": fanout_lists,
    "batch_size": st.one_of(st.integers(-1, 70), junk),
    "envelope": st.one_of(
        st.sampled_from(["profiled", "worst_case", "oracle", ""]),
        junk,
        st.lists(st.sampled_from([0, 64, 300, 10**9]), min_size=1, max_size=2),
    ),
    "optimizer": st.one_of(st.sampled_from(["adam", "sgd", "torch-adam", "Adam"]), junk),
    "device": st.one_of(st.sampled_from(["cpu", "cuda", "tpu", "", "cpu:0"]), junk),
    "mode": st.one_of(
        st.sampled_from(["dynamic", "eager", "static", "graph", "dgl", "capture"]), junk
    ),
    "seed": junk,
    "replace": st.one_of(st.booleans(), junk),
    "kernel": st.one_of(st.sampled_from(["auto", "fused", "torch", "numba"]), junk),
    # Built inside the try: zg.optim.adam(lr=..., weight_decay=...) and zg.StepHooks(...).
    "lr": st.one_of(st.floats(-1, 1), junk),
    "weight_decay": st.one_of(st.floats(-1, 1), junk),
    "poll_every": st.one_of(st.integers(-1, 10), junk),
    "grow_factor": st.one_of(st.floats(0, 1e6), junk),
}
ENGINE_VALID = dict(fanouts=[3, 3], batch_size=32, envelope="worst_case")
_OPTIMIZER_FIELDS, _STEP_FIELDS = ("lr", "weight_decay"), ("poll_every", "grow_factor")


def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# What zg.Engine's constructor (engine.py, optim.py: being rewritten) gets wrong today: accepted
# silently, coerced, or failing later / with a message that does not name the argument
# (issue 16, listed in its report). Skipped here so the rest is checked; delete an entry once
# the Engine handles it.
# What the Engine still takes and only reports later: none left. (A finite but absurd lr or
# weight_decay, e.g. 1e308, trains to a non-finite loss, which stops the epoch with a
# FloatingPointError naming the likely causes; the test accepts that.)
ENGINE_PENDING: dict = {}


@pytest.mark.slow
@pytest.mark.timeout(900)
@TIMED
@given(data=st.data())
def test_engine_constructor_fails_clearly_or_works(g300, data):
    names = data.draw(
        st.lists(st.sampled_from(sorted(ENGINE_ARGUMENTS)), min_size=1, max_size=2, unique=True)
    )
    bad = {name: data.draw(ENGINE_ARGUMENTS[name], label=name) for name in names}
    assume(not any(name in ENGINE_PENDING and ENGINE_PENDING[name](v) for name, v in bad.items()))
    if isinstance(bad.get("envelope"), list) and all(
        isinstance(v, int) and v > 0 for v in bad["envelope"]
    ):
        bad["envelope"] = Envelope(bad["envelope"])
    kwargs = {
        **ENGINE_VALID,
        **{k: v for k, v in bad.items() if k not in _OPTIMIZER_FIELDS + _STEP_FIELDS},
    }
    with time_limit(EXAMPLE_SECONDS):
        try:
            if any(k in bad for k in _OPTIMIZER_FIELDS):
                kwargs["optimizer"] = zg.optim.adam(
                    **{k: bad[k] for k in _OPTIMIZER_FIELDS if k in bad}
                )
            if any(k in bad for k in _STEP_FIELDS):
                kwargs["hooks"] = StepHooks(**{k: bad[k] for k in _STEP_FIELDS if k in bad})
            eng = Engine(g300, models.SAGE(8, 16, 3, 2), **kwargs)
        except (ValueError, TypeError) as exc:
            message = str(exc)
            assert any(name in message for name in bad), f"{message!r} names none of {sorted(bad)}"
            return
        eng.observers = []
        try:
            stats = eng.train_epoch(max_batches=2)
        except FloatingPointError as exc:
            assert "learning rate" in str(exc) and any(n in ("lr", "weight_decay") for n in bad), (
                str(exc)
            )
            return
    assert stats.iterations >= 1 and np.isfinite(stats.loss)
