"""zg._checks: every validator returns the value in canonical form, raises TypeError for the
wrong kind of thing and ValueError for a wrong value, and names the argument in both; nothing
is coerced silently (hypothesis property tests on what each accepts)."""

import math
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from zg import _checks as C

INT64 = st.integers(C.INT64_MIN, C.INT64_MAX)
# Anything a caller might pass by mistake.
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**100), 2**100),  # (huge ints too: real_arg names them)
    st.floats(allow_nan=True),
    st.text(max_size=5),
    st.binary(max_size=3),
    st.lists(st.integers(), max_size=3),
    st.lists(st.floats(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.tuples(st.integers()),
    st.sampled_from(
        [
            np.int64(3),
            np.float32(2.5),
            np.bool_(True),
            np.array([1, 2]),
            torch.tensor(1.5),
            torch.tensor([True]),
            object(),
            [[1, 2], [3]],
        ]
    ),
)
NAME = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=3, max_size=10).map(
    lambda s: f"arg_{s}"
)

FAST = settings(max_examples=60, deadline=None)


def call_all(value, name):
    """Every validator on ``value`` with the argument name ``name``."""
    return [
        lambda: C.int_arg(value, name, low=0, high=100),
        lambda: C.batch_size_arg(value, 50, name),
        lambda: C.seed_arg(value, name),
        lambda: C.key_arg(value, name),
        lambda: C.real_arg(value, name, low=0.0, high=1.0),
        lambda: C.choice_arg(value, name, ["a", "b"]),
        lambda: C.bool_arg(value, name),
        lambda: C.str_arg(value, name),
        lambda: C.positive_ints_arg(value, name),
        lambda: C.fanouts_arg(value, name),
        lambda: C.node_ids_arg(value, name, 10),
        lambda: C.device_arg(value, name),
        lambda: C.path_arg(value, name),
    ]


@pytest.mark.slow
@given(value=JUNK, name=NAME)
@settings(max_examples=150, deadline=None)
def test_every_validator_accepts_or_raises_a_type_or_value_error_naming_the_argument(value, name):
    for check in call_all(value, name):
        try:
            check()
        except (TypeError, ValueError) as exc:
            assert name in str(exc), (check, value, str(exc))


# ----------------------------------------------------------------------------- ints


@given(low=st.integers(-(10**6), 10**6), span=st.integers(0, 10**6), data=st.data())
@FAST
def test_int_arg_accepts_exactly_the_ints_in_the_interval(low, span, data):
    high = low + span
    value = data.draw(st.integers(low, high))
    for given_as in (value, np.int64(value)):
        out = C.int_arg(given_as, "n", low=low, high=high)
        assert out == value and type(out) is int
    outside = data.draw(st.one_of(st.integers(max_value=low - 1), st.integers(min_value=high + 1)))
    with pytest.raises(ValueError, match=rf"n must be in \[{low}, {high}\], got {outside}"):
        C.int_arg(outside, "n", low=low, high=high)
    assert C.int_arg(high + 10**30, "n", low=low) == high + 10**30  # no upper bound


@pytest.mark.parametrize(
    "value", [True, False, 1.0, 1.5, "3", None, np.float64(2.0), torch.tensor(3)]
)
def test_int_arg_refuses_what_is_not_an_int(value):
    with pytest.raises(TypeError, match="count must be an int"):
        C.int_arg(value, "count", low=0)


@given(n=st.integers(1, 10**6), data=st.data())
@FAST
def test_batch_size_arg_is_at_most_the_graph(n, data):
    assert C.batch_size_arg(data.draw(st.integers(1, n)), n) <= n
    with pytest.raises(
        ValueError, match=rf"batch_size={n + 1} is larger than the graph's {n} nodes.*at most {n}"
    ):
        C.batch_size_arg(n + 1, n)
    with pytest.raises(ValueError, match="size must be >= 1"):
        C.batch_size_arg(0, n, "size")


@given(seed=st.integers(0, C.INT64_MAX))
@FAST
def test_seed_arg_accepts_every_non_negative_int64(seed):
    assert C.seed_arg(seed) == seed


@pytest.mark.parametrize("seed", [-1, -(2**63), 2**63])
def test_seed_arg_refuses_negative_seeds_and_what_an_int64_cannot_hold(seed):
    with pytest.raises(ValueError, match=rf"seed must be in \[0, {2**63 - 1}\], got {seed}$"):
        C.seed_arg(seed)
    with pytest.raises(TypeError, match="seed must be an int"):
        C.seed_arg(0.0)


@given(key=INT64)
@FAST
def test_key_arg_accepts_every_int64(key):
    """Epoch and batch numbers key random streams: negative ones too (a profile's epoch -1)."""
    assert C.key_arg(key, "epoch") == key


@pytest.mark.parametrize("key", [2**63, -(2**63) - 1])
def test_key_arg_refuses_what_an_int64_cannot_hold(key):
    with pytest.raises(ValueError, match="epoch must be in"):
        C.key_arg(key, "epoch")
    with pytest.raises(TypeError, match="batch must be an int"):
        C.key_arg(0.0, "batch")


# ----------------------------------------------------------------------------- reals


@given(value=st.floats(-1e300, 1e300), low=st.floats(-1e6, 0), high=st.floats(0, 1e6))
@FAST
def test_real_arg_accepts_exactly_the_closed_interval(value, low, high):
    inside = low <= value <= high
    if inside:
        out = C.real_arg(value, "lr", low=low, high=high)
        assert out == value and type(out) is float
    else:
        with pytest.raises(ValueError, match=r"lr must be in \["):
            C.real_arg(value, "lr", low=low, high=high)


def test_real_arg_open_ends_exclude_the_bound():
    assert C.real_arg(0, "p", low=0.0, high=1.0) == 0.0
    with pytest.raises(ValueError, match=r"p must be in \(0.0, 1.0\), got 0.0"):
        C.real_arg(0, "p", low=0.0, high=1.0, low_open=True, high_open=True)
    with pytest.raises(ValueError, match=r"p must be in \[0.0, 1.0\), got 1.0"):
        C.real_arg(1.0, "p", low=0.0, high=1.0, high_open=True)
    assert C.real_arg(np.float32(0.5), "p", low=0.0, high=1.0, high_open=True) == 0.5


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float64("nan")])
def test_real_arg_refuses_non_finite_values(value):
    with pytest.raises(ValueError, match="rate must be finite"):
        C.real_arg(value, "rate")


@pytest.mark.parametrize("value", [True, "0.5", None, [0.5], torch.tensor(0.5)])
def test_real_arg_refuses_what_is_not_a_number(value):
    with pytest.raises(TypeError, match="rate must be a number"):
        C.real_arg(value, "rate")


def test_real_arg_refuses_an_int_too_large_for_a_float_naming_the_argument():
    with pytest.raises(ValueError, match="rate"):
        C.real_arg(10**400, "rate")


# ----------------------------------------------------------------------------- choices, bools, strs


@given(
    choices=st.lists(st.text(min_size=1, max_size=4), min_size=1, max_size=4, unique=True),
    data=st.data(),
)
@FAST
def test_choice_arg_accepts_exactly_the_choices(choices, data):
    pick = data.draw(st.sampled_from(choices))
    assert C.choice_arg(pick, "kind", choices) == pick
    other = data.draw(st.text(max_size=5).filter(lambda s: s not in choices))
    with pytest.raises(ValueError, match=r"unknown kind .*; choose one of"):
        C.choice_arg(other, "kind", choices)
    with pytest.raises(TypeError, match="kind must be a str, one of"):
        C.choice_arg(1, "kind", choices)


def test_bool_arg_takes_bools_only():
    assert C.bool_arg(True, "replace") is True
    assert C.bool_arg(np.bool_(False), "replace") is False
    for value in (0, 1, "True", None, torch.tensor(True)):
        with pytest.raises(TypeError, match="replace must be a bool"):
            C.bool_arg(value, "replace")


def test_str_arg_takes_strs_only():
    assert C.str_arg("", "label") == ""
    for value in (b"x", 1, None, Path("x")):
        with pytest.raises(TypeError, match="label must be a str"):
            C.str_arg(value, "label")


# ----------------------------------------------------------------------------- lists of ints


@given(values=st.lists(st.integers(1, 2**40), min_size=1, max_size=6), as_tuple=st.booleans())
@FAST
def test_positive_ints_arg_accepts_non_empty_lists_of_positive_ints(values, as_tuple):
    out = C.positive_ints_arg(tuple(values) if as_tuple else values, "sizes")
    assert out == values and type(out) is list


def test_positive_ints_arg_names_the_element_that_is_wrong():
    with pytest.raises(ValueError, match=r"sizes\[2\] must be >= 1, got 0"):
        C.positive_ints_arg([3, 4, 0], "sizes")
    with pytest.raises(TypeError, match=r"sizes\[1\] must be an int"):
        C.positive_ints_arg([3, 4.0], "sizes")
    for value in ([], "12", {1: 2}, 5, np.array([1, 2])):
        with pytest.raises(TypeError, match="sizes must be a non-empty list of ints"):
            C.positive_ints_arg(value, "sizes")


@given(fanouts=st.lists(st.integers(1, 10**6), min_size=1, max_size=5), as_numpy=st.booleans())
@FAST
def test_fanouts_arg_accepts_one_positive_int_per_layer(fanouts, as_numpy):
    given_as = [np.int64(k) for k in fanouts] if as_numpy else tuple(fanouts)
    out = C.fanouts_arg(given_as)
    assert out == fanouts and all(type(k) is int for k in out)


@pytest.mark.parametrize(
    "value, error, match",
    [
        ([], ValueError, "fanouts is empty"),
        ([5, -1], ValueError, r"fanouts\[1\] must be >= 1.*no fanout -1"),
        ([5, 0], ValueError, r"fanouts\[1\] must be >= 1"),
        ([5, True], TypeError, r"fanouts\[1\] must be an int"),
        ([5, 2.0], TypeError, r"fanouts\[1\] must be an int"),
        (5, TypeError, "fanouts must be a list of ints"),
        ("55", TypeError, "fanouts must be a list of ints"),
        (None, TypeError, "fanouts must be a list of ints"),
    ],
)
def test_fanouts_arg_errors(value, error, match):
    with pytest.raises(error, match=match):
        C.fanouts_arg(value)


# ----------------------------------------------------------------------------- node ids


@given(n=st.integers(1, 500), data=st.data(), kind=st.sampled_from(["list", "numpy32", "tensor"]))
@FAST
def test_node_ids_arg_accepts_unique_ids_in_range_and_keeps_their_order(n, data, kind):
    ids = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=min(n, 30), unique=True))
    given_as = {
        "list": ids,
        "numpy32": np.array(ids, dtype=np.int32),
        "tensor": torch.tensor(ids, dtype=torch.int32),
    }[kind]
    out = C.node_ids_arg(given_as, "seeds", n)
    assert out.dtype == torch.int64 and out.tolist() == ids
    bad = data.draw(st.one_of(st.integers(C.INT64_MIN, -1), st.integers(n, C.INT64_MAX)))
    with pytest.raises(ValueError, match=rf"seeds holds node id {bad}, out of range .* {n} nodes"):
        C.node_ids_arg(ids + [bad], "seeds", n)


def test_node_ids_arg_copies_host_lists_and_arrays():
    array = np.array([1, 2, 3])
    out = C.node_ids_arg(array, "seeds", 5)
    array[0] = 4
    assert out.tolist() == [1, 2, 3]


def test_node_ids_arg_repeats_and_max_len():
    with pytest.raises(ValueError, match="seeds holds repeated node ids"):
        C.node_ids_arg([1, 2, 1], "seeds", 5)
    assert C.node_ids_arg([1, 2, 1], "nodes", 5, unique=False).tolist() == [1, 2, 1]
    with pytest.raises(ValueError, match="seeds has 3 nodes but batch_size is 2"):
        C.node_ids_arg([1, 2, 3], "seeds", 5, max_len=2)
    assert C.node_ids_arg([1, 2], "seeds", 5, max_len=2).tolist() == [1, 2]


@pytest.mark.parametrize(
    "value, error, match",
    [
        ([], ValueError, "seeds is empty"),
        (torch.tensor([], dtype=torch.int64), ValueError, "seeds is empty"),
        (torch.tensor([True, False]), TypeError, "boolean tensor"),
        ([True, False], TypeError, "boolean tensor"),
        (torch.tensor([1.0, 2.0]), TypeError, "seeds must hold integer node ids, got dtype"),
        ([1.0, 2.0], TypeError, "seeds must hold integer node ids"),
        (["1", "2"], TypeError, "seeds must hold integer node ids"),
        ([[1, 2], [3]], TypeError, "seeds could not be read as a list of node ids"),
        (torch.tensor([[1, 2]]), ValueError, r"seeds must be 1-dimensional, got shape \(1, 2\)"),
        (3, TypeError, "seeds must be a 1-d integer tensor"),
        (None, TypeError, "seeds must be a 1-d integer tensor"),
        ({1, 2}, TypeError, "seeds must be a 1-d integer tensor"),
        (
            np.array([2**64 - 1], dtype=np.uint64),
            ValueError,
            "seeds holds node id 18446744073709551615",
        ),
    ],
)
def test_node_ids_arg_errors(value, error, match):
    with pytest.raises(error, match=match):
        C.node_ids_arg(value, "seeds", 5)


# ----------------------------------------------------------------------------- devices and paths


def test_device_arg():
    dev = torch.device("cpu")
    assert C.device_arg(dev) is dev
    assert C.device_arg("cpu") == dev
    assert C.device_arg(0) == torch.device("cuda", 0) == C.device_arg(np.int64(0))
    for value, error, match in [
        (-1, ValueError, "gpu index must be >= 0"),
        ("nonsense", ValueError, "gpu 'nonsense' is not a torch device"),
        (True, TypeError, "gpu must be a torch.device"),
        (0.0, TypeError, "gpu must be a torch.device"),
        (None, TypeError, "gpu must be a torch.device"),
    ]:
        with pytest.raises(error, match=match):
            C.device_arg(value, "gpu")


class _BytesPath:
    def __fspath__(self):
        return b"/tmp/x"


def test_path_arg(tmp_path):
    assert C.path_arg("a/b.json", "out") == Path("a/b.json")
    assert C.path_arg(tmp_path, "out") == tmp_path
    with pytest.raises(ValueError, match="out is an empty string"):
        C.path_arg("", "out")
    with pytest.raises(ValueError, match="out .* holds a NUL character"):
        C.path_arg("a\0b", "out")
    for value in (b"a", _BytesPath(), None, 3):
        with pytest.raises(TypeError, match="out must be a path"):
            C.path_arg(value, "out")


def test_output_file_arg(tmp_path):
    assert C.output_file_arg(tmp_path / "f.json", "out") == tmp_path / "f.json"
    nested = tmp_path / "new" / "deeper" / "f.json"
    with pytest.raises(ValueError, match="out .*: the folder .* does not exist"):
        C.output_file_arg(nested, "out")
    assert C.output_file_arg(nested, "out", make_parents=True) == nested
    assert not (tmp_path / "new").exists(), "the check creates nothing"
    with pytest.raises(ValueError, match="out .* is a directory"):
        C.output_file_arg(tmp_path, "out")
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="out .*: .* is a file, not a folder"):
        C.output_file_arg(blocker / "f.json", "out", make_parents=True)


def test_output_folder_arg(tmp_path):
    assert C.output_folder_arg(tmp_path, "folder") == tmp_path
    assert C.output_folder_arg(tmp_path / "a" / "b", "folder") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists(), "the check creates nothing"
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ValueError, match="folder .* is a file, not a folder"):
        C.output_folder_arg(blocker, "folder")
    with pytest.raises(ValueError, match="folder .*: .* is a file, not a folder"):
        C.output_folder_arg(blocker / "sub", "folder")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder")
def test_output_paths_refuse_a_read_only_folder(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(ValueError, match="out .* is not writable"):
            C.output_file_arg(locked / "f.json", "out")
        with pytest.raises(ValueError, match="folder .* is not writable"):
            C.output_folder_arg(locked / "sub", "folder")
    finally:
        locked.chmod(0o700)
