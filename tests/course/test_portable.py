"""zg_course.portable and the contracts' ``portable`` clause: numpy's default integer as 32 bits
(Windows with numpy 1.x) for a student's calls only.

The contract of :func:`zg_course.portable.narrow_ints`, checked over generated inputs:
* a computation whose numpy integers numpy inferred from Python ints runs in 32 bits, and its
  answer is the one int32 arithmetic gives (compared with numpy's own explicit int32);
* a computation that names its dtype (``np.int64``), counts in Python ints or runs in torch
  gives the same answer as without it;
* the kit's own code and numpy's are untouched, and everything is put back after.
"""

from __future__ import annotations

import hypothesis.strategies as st
import numpy as np
import pytest
import torch
from hypothesis import given, settings

from zg_course import portable
from zg_course.contract import Case, Contract, ContractFailure, check

needs_numpy1 = pytest.mark.skipif(
    not portable.SIMULATED, reason="the clause simulates numpy 1.x's rules; numpy 2 is installed"
)

# A student's code: compiled under a cell's file name, as the graders and notebooks run it.
STUDENT = """
import numpy as np

def product_default(values):
    return int(np.array(values).prod())

def product_function(values):
    return int(np.prod(values))

def sum_of_arange(n, k):
    return int((np.arange(n) * k).sum())

def product_int64(values):
    return int(np.array(values, dtype=np.int64).prod())

def product_python(values):
    out = 1
    for v in values:
        out *= v
    return out

def product_torch(values):
    return int(torch.tensor(values, dtype=torch.int64).prod())

def product_named_int(values):
    return int(np.array(values, dtype=int).prod())
"""


def _student() -> dict:
    namespace = {"torch": torch}
    exec(compile(STUDENT, "<lab-cell student>", "exec"), namespace)
    return namespace


S = _student()
VALUES = st.lists(st.integers(1, 2**15), min_size=1, max_size=4)  # products below 2**63


def _int32_product(values) -> int:
    return int(np.array(values, dtype=np.int32).prod(dtype=np.int32))


@needs_numpy1
@settings(max_examples=60, deadline=None)
@given(VALUES)
def test_default_integers_become_32_bits_and_wrap_as_int32_does(values):
    with np.errstate(over="ignore"), portable.narrow_ints():
        got = [S[name](values) for name in ("product_default", "product_function")]
        named = S["product_named_int"](values)
    want = _int32_product(values)
    assert got == [want, want] and named == want


@settings(max_examples=60, deadline=None)
@given(VALUES)
def test_an_explicit_dtype_python_ints_and_torch_are_unchanged(values):
    exact = int(np.prod(np.array(values, dtype=object)))
    with portable.narrow_ints():
        got = [S[n](values) for n in ("product_python", "product_torch")]
        explicit = S["product_int64"](values)
    assert got == [exact, exact]
    assert explicit == int(np.array(values, dtype=np.int64).prod())  # its own wrap, not 32-bit


@needs_numpy1
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 50), st.integers(-(2**31), 2**31 - 1))
def test_an_arange_times_a_python_int_sums_in_32_bits(n, k):
    with np.errstate(over="ignore"), portable.narrow_ints():
        got = S["sum_of_arange"](n, k)
    a = np.arange(n, dtype=np.int32)
    with np.errstate(over="ignore"):
        want = int((a * np.int32(k) if -(2**31) <= k < 2**31 else a * k).sum(dtype=np.int32))
    assert got == want


def test_the_kit_and_numpy_are_untouched_and_everything_is_put_back():
    import zg.datasets

    names = portable.CONSTRUCTORS + portable.TYPED + portable.REDUCTIONS
    originals = {name: getattr(np, name) for name in names}
    cum = np.cumsum(np.linspace(1.0, 3.0, 40))
    want = zg.datasets._guide_table(cum)  # np.arange(m + 1) with numpy's default integer
    used: list = []
    with portable.narrow_ints(), portable.watched(used):
        got = zg.datasets._guide_table(cum)
        ours = np.arange(5)  # this file is not the kit's: a student's call
    assert used == ["arange"]  # ours, not the kit's
    assert type(got) is np.ndarray and got.dtype == want.dtype and np.array_equal(got, want)
    assert ours.dtype == np.int32 and isinstance(ours, portable.Long32)
    assert {name: getattr(np, name) for name in names} == originals
    assert np.int_ is np.dtype(int).type


def test_watched_records_a_students_numpy_call_and_only_that():
    used: list = []
    with portable.watched(used):
        S["product_python"]([3, 4])
        S["product_torch"]([3, 4])
    assert used == []
    with portable.watched(used):
        S["product_default"]([3, 4])
    assert used == ["array"]


@needs_numpy1
def test_the_portable_clause_fails_a_default_integer_and_passes_the_rest():
    contract = Contract("product", part="Test Part P", device=False)
    cases = [Case(([2**16, 2**16, 3],), label="past 32 bits"), Case(([5, 6],), label="small")]

    def reference(values):
        out = 1
        for v in values:
            out *= v
        return out

    for name in ("product_python", "product_torch", "product_int64"):
        assert check(S[name], contract, cases, reference) == 2
    with pytest.raises(ContractFailure, match="clause 'portable'") as info:
        check(S["product_default"], contract, cases, reference)
    message = str(info.value)
    assert "np.array" in message and "Windows" in message and "past 32 bits" in message
    assert check(S["product_default"], Contract("product", part="P", device=False, portable=False),
                 cases, reference) == 2  # fmt: skip
    assert "portable" in contract.clauses
