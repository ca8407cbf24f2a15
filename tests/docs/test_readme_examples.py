"""The README's code examples run as written: each ```python block is a script of its own
(the Grappa one starts real worker processes, so it must run as a file, under its main guard),
and the make targets it names exist."""

import os
import re
import sys
from pathlib import Path

import processes
import pytest

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
EXAMPLES = re.findall(r"```python\n(.*?)```", README, re.DOTALL)


def test_the_readme_has_an_example_for_each_half():
    assert len(EXAMPLES) == 2, f"expected two ```python examples, found {len(EXAMPLES)}"
    assert "zg.Engine(" in EXAMPLES[0] and "grappa.train(" in EXAMPLES[1]


def _run(script: Path, cwd: Path, timeout: int) -> str:
    """``script`` run as a file in a fresh Python with this checkout first on the path: its
    stdout."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }
    done = processes.run(
        [sys.executable, str(script)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "the example printed nothing"
    return done.stdout


def _numbers(printed: str) -> str:
    """What an example printed less the wall-clock fields (``seconds=...``)."""
    return re.sub(r"\bseconds=[-+0-9.e]+", "seconds=_", printed.strip())


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_grappa_example_runs(tmp_path):
    script = tmp_path / "example_grappa.py"
    script.write_text(EXAMPLES[1])
    _run(script, tmp_path, timeout=360)


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_the_engine_example_prints_the_same_numbers_in_two_fresh_processes(tmp_path):
    """The README's first example with its seed: the model's initial weights, the sampling and
    the dropout all follow it, so two fresh processes print the same numbers."""
    script = tmp_path / "example_engine.py"
    script.write_text(EXAMPLES[0])
    printed = [_numbers(_run(script, tmp_path, timeout=180)) for _ in range(2)]
    assert re.match(r"0\.\d+ ", printed[0]), f"expected the test accuracy first: {printed[0]!r}"
    assert printed[0] == printed[1], f"one seed, two results:\n{printed[0]}\n{printed[1]}"


def test_the_commands_the_readme_names_exist():
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make (\w[\w-]*)", README, re.MULTILINE):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), (
            f"README.md names `make {target}`, which the Makefile does not define"
        )
    assert re.findall(r"^make (\w[\w-]*)", README, re.MULTILINE)[:2] == ["lab", "test"]
