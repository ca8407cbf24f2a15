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


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=["engine", "grappa"][: len(EXAMPLES)])
def test_a_readme_example_runs(tmp_path, index):
    script = tmp_path / f"example_{index}.py"
    script.write_text(EXAMPLES[index])
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "OMP_NUM_THREADS": "1",
    }
    done = processes.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=360,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip(), "the example printed nothing"


def test_the_commands_the_readme_names_exist():
    makefile = (ROOT / "Makefile").read_text()
    for target in re.findall(r"^make (\w[\w-]*)", README, re.MULTILINE):
        assert re.search(rf"^{re.escape(target)}:", makefile, re.MULTILINE), (
            f"README.md names `make {target}`, which the Makefile does not define"
        )
    assert re.findall(r"^make (\w[\w-]*)", README, re.MULTILINE)[:2] == ["lab", "test"]
