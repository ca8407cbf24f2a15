"""One seed, one result: a model built with ``seed=`` holds the same parameters whatever torch's
generator held before, leaves that generator as it was, and the README's first example prints
the same numbers in two fresh processes."""

import os
import re
import sys
from pathlib import Path

import processes
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


def _first_readme_example() -> str:
    examples = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert examples and "zg.Engine(" in examples[0], "README.md's first example is the Engine's"
    return examples[0]


def _numbers(printed: str) -> str:
    """What the example printed less the wall-clock fields (``seconds=...``)."""
    return re.sub(r"\bseconds=[-+0-9.e]+", "seconds=_", printed.strip())


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_readme_engine_example_prints_the_same_numbers_twice(tmp_path):
    script = tmp_path / "example.py"
    script.write_text(_first_readme_example())
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }
    printed = []
    for _ in range(2):
        done = processes.run(
            [sys.executable, str(script)],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        printed.append(_numbers(done.stdout))
    assert printed[0], "the example printed nothing"
    assert re.match(r"0\.\d+ ", printed[0]), f"expected the test accuracy first: {printed[0]!r}"
    assert printed[0] == printed[1], f"one seed, two results:\n{printed[0]}\n{printed[1]}"
