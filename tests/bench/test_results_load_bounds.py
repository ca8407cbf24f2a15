"""zg.experiments.results.load reads a result file with a size bound and no recursion error.

A result file is read by tools/render_docs.py, tools/claims.py and the notebooks; the probe's
crafted files (200,000 nested brackets, a 3 GiB sparse file) gave a RecursionError traceback
and a MemoryError. Now each is a one-line ValueError naming the file, decided before the
file is read (the size) or inside the parser (the depth)."""

import json
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from zg.experiments import results


def test_every_committed_result_is_far_under_the_bound():
    sizes = [p.stat().st_size for p in results.RESULTS_DIR.glob("*.json")]
    assert sizes and max(sizes) < results.RESULT_LIMIT // 8


def test_a_deeply_nested_file_is_a_value_error_naming_it(tmp_path):
    path = tmp_path / "crafted.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ValueError, match=r"crafted\.json: nested too deeply") as info:
        results.load(path)
    assert "\n" not in str(info.value)


def test_a_huge_sparse_file_is_refused_before_it_is_read(tmp_path):
    path = tmp_path / "crafted.json"
    with open(path, "wb") as f:
        f.truncate(3 << 30)  # sparse: nothing on disk, and never read (the size decides)
    with pytest.raises(ValueError, match=r"crafted\.json: is over 67,108,864 bytes"):
        results.load(path)


@pytest.mark.parametrize("kind", ["fifo", "directory", "dangling"])
def test_what_is_not_a_regular_file_is_refused(tmp_path, kind):
    path = tmp_path / "crafted.json"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to(tmp_path / "gone.json")
    with pytest.raises(ValueError, match=r"crafted\.json"):
        results.load(path)


def test_a_missing_file_is_still_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no result file .*missing\.json"):
        results.load(tmp_path / "missing.json")


@settings(max_examples=30, deadline=None)
@given(depth=st.integers(1, 3000), limit=st.integers(16, 4096))
def test_depth_and_size_are_refused_or_read_never_a_traceback(tmp_path_factory, depth, limit):
    """Property: a nested list read with any bound either parses to the same value as json
    does, or is a ValueError naming the file (too large, or too deep): never another error."""
    path = tmp_path_factory.mktemp("r") / "doc.json"
    text = "[" * depth + "]" * depth
    path.write_text(text)
    from zg._io import read_json_file

    size = len(text.encode())
    try:
        value = read_json_file(path, "result file doc.json", limit=limit, what="a result file")
    except ValueError as exc:
        assert "doc.json" in str(exc)
        assert size > limit or "nested too deeply" in str(exc)
    else:
        assert size <= limit and value == json.loads(text)
