"""One seed, one result: a model built with ``seed=`` holds the same parameters whatever torch's
generator held before, leaves that generator as it was, and the README's first example prints
the same numbers in two fresh processes."""

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import zg

ROOT = Path(__file__).resolve().parents[2]


def _parameters(model):
    return [p.detach().clone() for p in model.parameters()]


@settings(max_examples=12, deadline=None)
@given(
    name=st.sampled_from(sorted(zg.models.MODELS)),
    seed=st.integers(0, 2**63 - 1),
    before=st.integers(0, 2**32 - 1),
    num_layers=st.integers(1, 3),
)
def test_a_seeded_model_is_one_model_and_leaves_the_generator_alone(name, seed, before, num_layers):
    torch.manual_seed(before)
    state = torch.random.get_rng_state()
    first = zg.models.build(name, 5, 4, 3, num_layers, seed=seed)
    assert torch.equal(torch.random.get_rng_state(), state), "the caller's generator moved"
    torch.manual_seed(before + 1)  # another state: the same seed still builds the same model
    second = zg.models.build(name, 5, 4, 3, num_layers, seed=seed)
    assert all(torch.equal(a, b) for a, b in zip(_parameters(first), _parameters(second)))
    # The seeded class and build_seeded agree (one definition of "seeded").
    third = zg.models.build_seeded(name, 5, 4, 3, num_layers, seed=seed)
    assert all(torch.equal(a, b) for a, b in zip(_parameters(first), _parameters(third)))


def test_different_seeds_build_different_models():
    a = zg.models.SAGE(5, 4, 3, num_layers=2, seed=0)
    b = zg.models.SAGE(5, 4, 3, num_layers=2, seed=1)
    assert not all(torch.equal(x, y) for x, y in zip(_parameters(a), _parameters(b)))


def test_without_a_seed_the_model_draws_from_torch_as_it_stands():
    torch.manual_seed(3)
    a = zg.models.GCN(5, 4, 3, num_layers=2)
    torch.manual_seed(3)
    b = zg.models.GCN(5, 4, 3, num_layers=2)
    torch.manual_seed(4)
    c = zg.models.GCN(5, 4, 3, num_layers=2)
    assert all(torch.equal(x, y) for x, y in zip(_parameters(a), _parameters(b)))
    assert not all(torch.equal(x, y) for x, y in zip(_parameters(a), _parameters(c)))


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, "0", True])
def test_a_seed_that_is_not_a_seed_is_refused(seed):
    with pytest.raises((TypeError, ValueError), match="seed"):
        zg.models.SAGE(5, 4, 3, seed=seed)


# The README's first example printing the same numbers in two fresh processes:
# tests/docs/test_readme_examples.py::test_the_engine_example_prints_the_same_numbers_in_two_fresh_processes.
