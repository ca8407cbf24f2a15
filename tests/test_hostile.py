"""Hostile input: fuzzed loaders, configs and checkpoints end in a clear error, never a crash, a
hang or a half-written file; a long run does not grow in memory."""

import io
import os
import zipfile

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg import models
from zg.engine import Engine
from zg.envelope import Envelope

FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


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
@given(cut=st.integers(0, 10_000), flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=4))
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
    st.just(np.zeros(0, dtype=np.int64)), st.just(np.array([0, 5, 2])), st.just(np.array([[1, 2]])),
    st.just(np.array([0.5, 1.5])), st.just(np.array(["a", "b"])), st.just(np.array([np.nan])),
    st.just(np.array([-1, 0])), st.just(np.array(3)),
)


@FUZZ
@given(replace=st.dictionaries(st.sampled_from(["indptr", "indices", "x", "y", "train_idx", "num_classes",
                                                "format", "version", "name"]), arrays, max_size=3),
       drop=st.lists(st.sampled_from(["indptr", "indices", "format", "version"]), max_size=2))
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


# ----------------------------------------------------------------------------- engine configs


values = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(-1, 1e3), st.just(float("nan")),
                   st.text(max_size=4), st.lists(st.integers(-2, 12), max_size=4))


@FUZZ
@given(batch_size=values, fanouts=values, lr=values, poll_every=values, envelope=values,
       seed=values, device=st.sampled_from(["cpu", "cuda", "tpu", "", None, 3]))
def test_engine_configs_fail_clearly_or_work(small, batch_size, fanouts, lr, poll_every, envelope, seed, device):
    if isinstance(envelope, list):
        envelope = Envelope(envelope) if envelope and all(v > 0 for v in envelope) else envelope
    kwargs = dict(batch_size=batch_size, fanouts=fanouts, lr=lr, poll_every=poll_every,
                  envelope=envelope, seed=seed, device=device, audit_iterations=0)
    kwargs = {k: v for k, v in kwargs.items() if v is not None or k in ("envelope", "device")}
    kwargs.setdefault("batch_size", 32)
    kwargs.setdefault("fanouts", [3, 3])
    try:
        eng = Engine(small, models.SAGE(4, 8, 3, 2), **kwargs)
    except (ValueError, TypeError) as exc:
        assert str(exc)
        return
    stats = eng.train_epoch(max_batches=2)
    assert stats.iterations >= 1 and np.isfinite(stats.loss)


# ----------------------------------------------------------------------------- checkpoints


@pytest.fixture(scope="module")
def checkpoint(small, tmp_path_factory):
    eng = Engine(small, models.SAGE(4, 8, 3, 2), [3, 3], 32, envelope="worst_case", audit_iterations=0)
    eng.train_epoch(max_batches=3)
    return eng.save(tmp_path_factory.mktemp("ckpt") / "engine.pt").read_bytes()


@FUZZ
@given(cut=st.integers(0, 200_000), flips=st.lists(st.tuples(st.integers(0, 10**7), st.integers(1, 255)), max_size=3))
def test_corrupt_checkpoints_never_half_load(small, checkpoint, tmp_path_factory, cut, flips):
    data = bytearray(checkpoint[:cut] if cut < len(checkpoint) else checkpoint)
    for at, bits in flips:
        if data:
            data[at % len(data)] ^= bits
    path = tmp_path_factory.mktemp("bad") / "engine.pt"
    path.write_bytes(bytes(data))
    torch.manual_seed(0)
    eng = Engine(small, models.SAGE(4, 8, 3, 2), [3, 3], 32, envelope="worst_case", audit_iterations=0)
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
    eng = Engine(small, models.SAGE(4, 8, 3, 2), [3, 3], 32, envelope="worst_case", audit_iterations=0)
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


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_long_run_on_cora_does_not_grow_in_memory():
    g = zg.datasets.load("cora")
    model, kwargs, _ = zg.recipes.cora_sage()
    eng = Engine(g, model, audit_iterations=0, **kwargs)
    for _ in range(10):                       # warm up allocator caches
        eng.train_epoch()
    eng.evaluate("val")
    start = _rss_bytes()
    for epoch in range(60):
        eng.train_epoch()
        if epoch % 20 == 0:
            eng.evaluate("val")
    growth = _rss_bytes() - start
    assert growth < 32 * 2**20, f"RSS grew by {growth / 2**20:.1f} MiB over 60 epochs"
    assert len(eng.history) == 70              # the history grows by design; nothing else may
