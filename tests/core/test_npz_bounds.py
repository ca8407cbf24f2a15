""".npz graph files are judged by their members' headers before any data is read.

A zip member's .npy header says its shape and dtype; the zip directory says how many bytes it
inflates to. ``zg.datasets._read_npz`` (load_npz, ``zg train --dataset FILE.npz``, ``zg grappa``,
the Cora loader) compares the two, the shapes with each other (indptr N + 1, x and y N rows,
indices ``indptr[-1]``) and the total with the machine's memory, and refuses a disagreement
with a ValueError naming the member, before its data is decompressed. Every crafted file here
is a few KB on disk and nothing large is ever allocated: numpy's array reader is watched, and
a test fails if a member it should not reach is read.
"""

import io
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zg import _checks, datasets


def npy(array: np.ndarray, shape=None) -> bytes:
    """The .npy bytes of ``array``; with ``shape``, its header claims that shape instead."""
    buf = io.BytesIO()
    np.save(buf, array, allow_pickle=False)
    raw = buf.getvalue()
    if shape is None:
        return raw
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        header, {"descr": array.dtype.str, "fortran_order": False, "shape": tuple(shape)}
    )
    return header.getvalue() + raw[len(raw) - array.nbytes :]


def graph_members(num_nodes=4, feat=3):
    """The arrays of a small valid zg graph file (a ring)."""
    ids = np.arange(num_nodes)
    return {
        "format": np.array("zg.graph"),
        "version": np.array(1, dtype=np.int64),
        "name": np.array("ring"),
        "indptr": np.arange(num_nodes + 1, dtype=np.int64),
        "indices": ((ids + 1) % num_nodes).astype(np.int64),
        "x": np.zeros((num_nodes, feat), np.float32),
        "y": (ids % 2).astype(np.int64),
        "num_classes": np.array(2, dtype=np.int64),
        "train_idx": ids[:2].astype(np.int64),
    }


def write_zip(path, members, claims=None, deflate=False, raw=None):
    """An .npz of ``members`` (name -> array); ``claims``: name -> shape its header claims;
    ``raw``: name -> bytes written as they are."""
    claims = claims or {}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED) as z:
        for key, array in members.items():
            z.writestr(f"{key}.npy", npy(array, claims.get(key)))
        for name, data in (raw or {}).items():
            z.writestr(name, data)
    return path


@pytest.fixture
def reads(monkeypatch):
    """The members whose data numpy's reader was asked for, in order."""
    seen = []
    real = np.lib.format.read_array

    def spy(f, *args, **kwargs):
        seen.append(getattr(f, "name", "?"))
        return real(f, *args, **kwargs)

    monkeypatch.setattr(np.lib.format, "read_array", spy)
    return seen


def test_a_valid_file_still_loads(tmp_path, reads):
    g = datasets.load_npz(write_zip(tmp_path / "g.npz", graph_members()))
    assert g.num_nodes == 4 and g.num_edges == 4 and g.x.shape == (4, 3)
    assert reads[:3] == ["format.npy", "version.npy", "indptr.npy"]


@pytest.mark.parametrize(
    "member, claim",
    [("indices", (10**10,)), ("x", (4, 10**12)), ("indptr", (10**18,)), ("y", (2**62,))],
)
def test_a_header_claiming_more_than_the_member_holds_is_refused_unread(
    tmp_path, reads, member, claim
):
    """The probe's file: a header claiming 10^10 int64 over a few bytes made numpy reserve
    74.5 GiB first and fail with a MemoryError naming nothing."""
    members = graph_members()
    path = write_zip(tmp_path / "g.npz", members, claims={member: claim})
    with pytest.raises(ValueError, match=rf"member '{member}' claims .*zip directory") as info:
        datasets.load_npz(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert f"{member}.npy" not in reads and "indices.npy" not in reads


@pytest.mark.parametrize("deflate", [False, True])
def test_indices_longer_than_indptr_says_is_refused_before_it_is_inflated(tmp_path, reads, deflate):
    """The probe's deflate bomb, scaled down: indices honestly holds 2^20 zeros (a few KB
    deflated) while indptr says 4 edges: refused after reading indptr, before indices."""
    members = graph_members()
    members["indices"] = np.zeros(2**20, np.int64)
    path = write_zip(tmp_path / "g.npz", members, deflate=deflate)
    with pytest.raises(
        ValueError, match=r"member 'indices' has shape \[1048576\].*indptr\[-1\] says 4"
    ):
        datasets.load_npz(path)
    assert "indices.npy" not in reads


@pytest.mark.parametrize(
    "member, array, words",
    [
        ("x", np.zeros((5, 3), np.float32), r"member 'x' has shape \[5, 3\].*4 nodes"),
        ("y", np.zeros(2**16, np.int64), r"member 'y' has shape \[65536\].*4 nodes"),
        ("indptr", np.zeros((5, 2), np.int64), r"member 'indptr' has shape \[5, 2\].*1-D"),
        ("version", np.array([1, 1]), r"has no integer format version"),
    ],
)
def test_shapes_that_disagree_are_refused_from_the_headers(tmp_path, reads, member, array, words):
    members = graph_members()
    members[member] = array
    with pytest.raises(ValueError, match=words):
        datasets.load_npz(write_zip(tmp_path / "g.npz", members))
    assert f"{member}.npy" not in reads


def test_a_member_that_is_not_an_array_is_refused_unread(tmp_path, reads):
    path = write_zip(tmp_path / "g.npz", graph_members(), raw={"notes.txt": b"x" * 1000})
    with pytest.raises(ValueError, match=r"member 'notes.txt' is not a \.npy array"):
        datasets.load_npz(path)
    assert reads == []


def test_a_file_larger_than_free_memory_is_a_memory_error_naming_it(tmp_path, monkeypatch):
    path = write_zip(tmp_path / "g.npz", graph_members(num_nodes=64, feat=32))
    monkeypatch.setattr(_checks, "machine_memory", lambda device=None: (4096, 4096))
    with pytest.raises(MemoryError, match=r"g\.npz.*uncompressed.*needs at least"):
        datasets.load_npz(path)


def test_a_cora_file_with_mismatched_rows_is_refused(tmp_path, reads):
    """The Cora loader reads through the same checks (features_packed / y rows = paper_id)."""
    members = {
        "format": np.array("zg.cora"),
        "version": np.array(1, dtype=np.int64),
        "paper_id": np.arange(5, dtype=np.int64),
        "feat_dim": np.array(8, dtype=np.int64),
        "features_packed": np.zeros((10**6, 1), np.uint8),
    }
    write_zip(tmp_path / "cora.npz", members, deflate=True)
    with pytest.raises(ValueError, match=r"member 'features_packed' has shape \[1000000, 1\]"):
        datasets.load("cora", root=tmp_path)
    assert "features_packed.npy" not in reads


@settings(max_examples=40, deadline=None)
@given(
    member=st.sampled_from(["indptr", "indices", "x", "y", "train_idx"]),
    extra=st.integers(1, 10**15),
    deflate=st.booleans(),
)
def test_any_header_claim_that_disagrees_with_the_directory_is_refused(
    tmp_path_factory, member, extra, deflate
):
    """Property: whatever member claims more elements than it holds, and by however much, the
    load is a ValueError naming that member, never an allocation of the claim."""
    members = graph_members()
    claim = list(members[member].shape)
    claim[0] += extra
    path = write_zip(
        tmp_path_factory.mktemp("p") / "g.npz", members, claims={member: claim}, deflate=deflate
    )
    with pytest.raises(ValueError, match=rf"member '{member}'"):
        datasets.load_npz(path)
