"""What a student reads when a contract fails (issue 59, item 4): the clause, the expected and
the returned value, never an object's memory address; a length mismatch shows where the two
lists part and both sides there, not only the lengths.

Generated over values of every kind a graded function returns or a student's function may
return instead (numbers, strings, tensors, nested lists and dicts, sets, objects of a class
with the default repr or a repr that raises)."""

from __future__ import annotations

import re

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from zg_course.contract import ContractFailure, _short, compare_values

ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")


class Plain:
    """The default repr: ``<...Plain object at 0x7f...>``."""


class BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")


atoms = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=False, width=32),
    st.text(max_size=4),
    st.none(),
    st.booleans(),
    st.builds(Plain),
    st.builds(BadRepr),
    st.builds(lambda n: torch.arange(n), st.integers(0, 8)),
)
values = st.recursive(
    atoms,
    lambda inner: st.one_of(
        st.lists(inner, max_size=7),
        st.dictionaries(st.text(max_size=3), inner, max_size=4),
        st.frozensets(st.integers(-3, 3), max_size=4),
    ),
    max_leaves=12,
)


def message(expected, got):
    found = compare_values(expected, got, 1e-5, 1e-8, True, "out")
    return None if found is None else found[1]


@settings(max_examples=300, deadline=None)
@given(values, values)
def test_no_message_holds_an_object_address(expected, got):
    text = message(expected, got)
    if text is not None:
        assert not ADDRESS.search(text), text
        assert not ADDRESS.search(str(ContractFailure(text)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=12), st.lists(st.integers(0, 3), max_size=12))
def test_a_length_mismatch_shows_where_the_lists_part_and_both_sides(expected, got):
    text = message(expected, got)
    if len(expected) == len(got):
        assert (text is None) == (expected == got)
        return
    first = next(
        (i for i, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got))
    )
    assert f"expected {len(expected)} items, got {len(got)}" in text
    assert f"first differing at [{first}]: expected {_short(expected[first : first + 5])}" in text
    assert f"got {_short(got[first : first + 5])}" in text


def test_an_object_is_named_by_its_type_without_its_address():
    assert _short(Plain()).endswith("Plain object>")
    assert _short(BadRepr()) == "<BadRepr>"
    text = str(ContractFailure("returned <a.B object at 0x7f3a2b1c9d90> (id=0x7f3a2b1c9d90)"))
    assert "0x" not in text and "<a.B object>" in text
