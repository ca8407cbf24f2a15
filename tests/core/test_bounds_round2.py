"""Sizes and values read at the boundary, checked before anything is allocated or changed.

* The Cora loader's ``feat_dim`` (read from the file) against the bytes each packed row holds.
* A num_classes inferred from ``y`` bounded as an explicit one is: what save_npz writes,
  load_npz reads back.
* Tensors on a device the kit cannot read (meta) refused by name.
* Envelope sizes, policy and ``profile(num_batches=)`` bounded.
* A subnormal learning rate (1e-320: every update underflows to zero) refused.
"""

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg
from zg import _checks, cli, datasets
from zg import envelope as envelope_module
from zg.graph import MAX_NODES

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SUBNORMALS = st.floats(
    min_value=0.0, max_value=sys.float_info.min, exclude_min=True, exclude_max=True
)
NORMALS = st.floats(min_value=sys.float_info.min, max_value=1e4)


# ----------------------------------------------------------------------------- Cora's feat_dim


def small_cora(folder: Path, feat_dim: int, width: int = 3, num_nodes: int = 14) -> np.ndarray:
    """A Cora-format file of ``num_nodes`` nodes and ``width`` packed bytes per row at
    ``folder/cora.npz`` with the header field ``feat_dim``; returns the packed features."""
    rng = np.random.default_rng(0)
    packed = rng.integers(0, 256, size=(num_nodes, width), dtype=np.uint8)
    ids = np.arange(num_nodes, dtype=np.int64)
    np.savez(
        folder / "cora.npz",
        format=np.array(datasets.CORA_FORMAT),
        version=np.array(datasets.CORA_VERSION, dtype=np.int64),
        paper_id=ids + 1000,
        rel_source=ids,
        rel_target=(ids + 1) % num_nodes,
        features_packed=packed,
        feat_dim=np.array(feat_dim, dtype=np.int64),
        y=ids % len(datasets.CORA_SUBJECTS),
        train_idx=ids[:7],
        val_idx=ids[7:10],
        test_idx=ids[10:],
    )
    return packed


# Widths a test can unpack at once (14 rows), the probe's values, and far beyond.
FEAT_DIMS = st.integers(-(2**22), 2**22) | st.sampled_from([3_000_000, 200_000, -5, 2**40, 2**62])


@given(feat_dim=FEAT_DIMS)
@FAST
def test_cora_feat_dim_must_fit_the_packed_rows(feat_dim):
    """feat_dim is a width in (8 * (bytes - 1), 8 * bytes]: larger padded every row with zeros
    (3,000,000 asked for 8 GB before any check), smaller or negative read padding bits."""
    width = 3
    with tempfile.TemporaryDirectory() as folder:
        packed = small_cora(Path(folder), feat_dim, width)
        if 8 * (width - 1) < feat_dim <= 8 * width:
            g = datasets.load("cora", root=folder)
            expected = np.unpackbits(packed, axis=1, count=feat_dim).astype(np.float32)
            assert g.feat_dim == feat_dim and np.array_equal(g.x.numpy(), expected)
        else:
            with pytest.raises(ValueError) as caught:
                datasets.load("cora", root=folder)
            text = str(caught.value)
            assert str(Path(folder) / "cora.npz") in text
            assert f"feat_dim is {feat_dim}, but features_packed has 3 bytes per row" in text


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("feat_dim", np.array(20.0), "feat_dim must be an integer, got float64 20.0"),
        ("feat_dim", np.array(True), "feat_dim must be an integer, got bool"),
        ("features_packed", np.zeros((14, 3), np.int64), "features_packed must be uint8"),
        ("y", np.zeros(14, np.float64), "y must hold integer class ids, got float64"),
    ],
)
def test_cora_header_fields_are_checked_not_truncated(tmp_path, field, value, expected):
    small_cora(tmp_path, 20)
    with np.load(tmp_path / "cora.npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays[field] = value
    np.savez(tmp_path / "cora.npz", **arrays)
    with pytest.raises(ValueError, match=expected) as caught:
        datasets.load("cora", root=tmp_path)
    assert str(tmp_path / "cora.npz") in str(caught.value)


# ----------------------------------------------------------------------------- inferred num_classes


def ring(n: int = 6, **kw) -> zg.Graph:
    return zg.Graph.from_edges(torch.arange(n), (torch.arange(n) + 1) % n, num_nodes=n, **kw)


@given(label=st.integers(MAX_NODES, 2**62))
@FAST
def test_an_inferred_num_classes_has_the_explicit_bound(label):
    """Refused past the bound (save_npz wrote a file load_npz refuses); at the bound the
    graph round-trips through save_npz / load_npz."""
    y = torch.zeros(6, dtype=torch.long)
    y[2] = label
    with pytest.raises(ValueError, match="larger than zg supports") as caught:
        ring(y=y)
    assert "num_classes" in str(caught.value) and "inferred from y" in str(caught.value)
    y[2] = MAX_NODES - 1
    g = ring(y=y)
    assert g.num_classes == MAX_NODES
    with tempfile.TemporaryDirectory() as folder:
        datasets.save_npz(g, Path(folder) / "g.npz")
        back = datasets.load_npz(Path(folder) / "g.npz")
    assert back.num_classes == MAX_NODES and torch.equal(back.y, y)


# ----------------------------------------------------------------------------- devices


@pytest.mark.parametrize("name", ["x", "y", "train_idx", "src", "indptr", "indices"])
def test_a_meta_tensor_is_refused_by_name(name):
    n = 4
    src, dst = torch.arange(n), (torch.arange(n) + 1) % n
    g = zg.Graph.from_edges(src, dst, num_nodes=n)
    given = dict(
        x=torch.randn(n, 3),
        y=torch.zeros(n, dtype=torch.long),
        train_idx=torch.arange(2),
        src=src,
        indptr=g.indptr,
        indices=g.indices,
    )
    given[name] = given[name].to("meta")
    with pytest.raises(ValueError, match=rf"^{name} is a meta tensor, which holds no values"):
        if name in ("indptr", "indices"):
            zg.Graph(given["indptr"], given["indices"])
        else:
            zg.Graph.from_edges(
                given["src"],
                dst,
                num_nodes=n,
                x=given["x"],
                y=given["y"],
                train_idx=given["train_idx"],
            )


# ----------------------------------------------------------------------------- Envelope


POLICIES = ("explicit", "worst_case", "profiled", "grown", "checkpoint")  # what the kit writes
MAX_PROFILE_BATCHES = 100_000


@given(size=st.integers(MAX_NODES + 1, 2**70), at=st.integers(0, 1))
@FAST
def test_envelope_sizes_are_bounded(size, at):
    sizes = [5, 5]
    sizes[at] = size
    with pytest.raises(ValueError, match=rf"sizes\[{at}\] must be in \[1, {MAX_NODES}\]"):
        zg.Envelope(sizes)
    sizes[at] = MAX_NODES
    assert zg.Envelope(sizes).sizes == sizes


@given(policy=st.text(max_size=12).filter(lambda p: p not in POLICIES))
@FAST
def test_envelope_policy_must_be_a_known_one(policy):
    with pytest.raises(ValueError, match="unknown policy"):
        zg.Envelope([5], policy)
    for known in POLICIES:  # every label the kit itself writes (zg.checkpoint: "checkpoint")
        assert zg.Envelope([5], known).policy == known


class Sampled(Exception):
    """Raised in place of the profile's first sampling step: only the checks before it run."""


def no_sampling(*args, **kwargs):
    raise Sampled


@given(num_batches=st.integers(MAX_PROFILE_BATCHES + 1, 2**63))
@settings(max_examples=20, deadline=None)
def test_profile_num_batches_is_bounded_before_sampling(num_batches):
    """1e12 sampled until killed; the bound itself still reaches the sampling."""
    g = zg.datasets.csbm(num_nodes=60, avg_degree=4, num_classes=3, feat_dim=4, seed=0)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(envelope_module, "_profile_fits", no_sampling)
        with pytest.raises(ValueError, match=r"num_batches must be in \[1, 100000\]"):
            zg.Envelope.profile(g, [3, 3], 8, num_batches=num_batches)
        with pytest.raises(Sampled):
            zg.Envelope.profile(g, [3, 3], 8, num_batches=MAX_PROFILE_BATCHES)


# ----------------------------------------------------------------------------- learning rates


@given(value=SUBNORMALS, sign=st.sampled_from([1.0, -1.0]))
@FAST
def test_real_arg_normal_refuses_subnormals(value, sign):
    with pytest.raises(ValueError, match="lr must be a normal float"):
        _checks.real_arg(sign * value, "lr", low=-1.0, normal=True)
    assert _checks.real_arg(sign * value, "lr", low=-1.0) == sign * value  # default: as before


@given(value=NORMALS)
@FAST
def test_real_arg_normal_keeps_normal_values(value):
    assert _checks.real_arg(value, "lr", normal=True) == value
    assert _checks.real_arg(0.0, "lr", normal=True) == 0.0


@given(subnormal=SUBNORMALS, normal=NORMALS)
@FAST
def test_cli_lr_refuses_subnormals(subnormal, normal):
    """`zg train --lr 1e-320` trained with a zero step; a normal rate is read as before."""
    with pytest.raises(argparse.ArgumentTypeError, match="a subnormal value"):
        cli._positive_float(repr(subnormal))
    assert cli._positive_float(repr(normal)) == normal


def test_an_optimizer_refuses_a_subnormal_learning_rate():
    """A learning rate of 1e-320 is no step at all: refused naming lr, as at the CLI."""
    import torch

    from zg.optim import make_optimizer

    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="lr"):
        make_optimizer(model, "adam", 1e-320)
    make_optimizer(model, "adam", 1e-6)  # a small normal rate is a rate
