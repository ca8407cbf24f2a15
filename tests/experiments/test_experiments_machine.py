"""zg.experiments.machine: the notebooks' scale, the machine note and Markdown tables."""

import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from zg import experiments as ex


def test_scale_reads_ZG_SCALE(monkeypatch):
    monkeypatch.delenv("ZG_SCALE", raising=False)
    assert ex.scale() == "small"
    monkeypatch.setenv("ZG_SCALE", "")
    assert ex.scale() == "small"
    monkeypatch.setenv("ZG_SCALE", " Full ")
    assert ex.scale() == "full"
    assert ex.by_scale(1, 2) == 2
    assert ex.by_scale(1, 2, "small") == 1
    monkeypatch.setenv("ZG_SCALE", "huge")
    with pytest.raises(ValueError, match="ZG_SCALE"):
        ex.scale()
    with pytest.raises(TypeError):
        ex.scale(3)


def test_machine_note_names_this_machine():
    info = ex.machine_note()
    for key in ("date", "platform", "cpu", "cores", "torch", "cuda", "memory_gib"):
        assert key in info
    assert info["torch"] == torch.__version__
    assert (info["cuda"] is None) == (not torch.cuda.is_available())
    assert info["environment"].get("OMP_WAIT_POLICY") == os.environ.get("OMP_WAIT_POLICY")
    assert all(k.startswith(("MALLOC_", "OMP_", "MKL_", "LD_PRELOAD")) for k in info["environment"])
    label = ex.machine_label(info)
    assert f"{info['cores']} cores" in label and info["torch"] in label
    foreign = dict(info, cuda="NVIDIA H200", date="2026-01-01T00:00:00+00:00")
    assert "GPU NVIDIA H200" in ex.machine_label(foreign) and "2026-01-01" in ex.machine_label(
        foreign
    )
    with pytest.raises(TypeError):
        ex.machine_label("not a dict")


def test_markdown_table():
    text = ex.markdown_table(
        [{"a": 1234567, "b": 0.123456, "c": None}, {"a": 2, "b": 12345.6, "c": "x"}]
    )
    lines = text.splitlines()
    assert lines[0] == "| a | b | c |" and lines[1] == "|---|---|---|"
    assert lines[2] == "| 1,234,567 | 0.123 | None |"
    assert lines[3] == "| 2 | 12,346 | x |"
    assert ex.markdown_table([{"a": 1, "b": 2}], columns=["b"]).splitlines()[2] == "| 2 |"
    with pytest.raises(ValueError):
        ex.markdown_table([])


@given(
    cores=st.integers(1, 64),
    load=st.one_of(st.none(), st.floats(0, 200, allow_nan=False)),
    key=st.sampled_from(["load_average_before", "load_average_start", "load_average_after"]),
    at_end=st.floats(0, 200, allow_nan=False),
    cuda=st.sampled_from([None, "NVIDIA H200"]),
)
@settings(max_examples=150, deadline=None)
def test_a_busy_machine_is_named_beside_its_numbers(cores, load, key, at_end, cuda):
    """A result whose bench recorded, before its own work, a 1-minute load above the machine's
    cores says so in the short label the claims ledger and the docs' tables print; the load the
    machine note reads at the end (the bench's own processes counted) never flags it."""
    note = {"cores": cores, "cuda": cuda, "date": "2026-12-04T10:00:00+00:00"}
    note["load_average"] = [at_end, at_end, at_end]
    detail = {} if load is None else {key: [load, load / 2, load / 3]}
    short = ex.machine_short(note, detail)
    assert short.startswith(f"{cores} cores, {cuda or 'no GPU'}, 2026-12-04")
    assert ex.machine_short(note) == short.split(", busy")[0]  # no detail: no flag
    if load is not None and load > cores and key in ex.machine.LOAD_BEFORE_KEYS:
        flag = f"busy: load {load:.1f} on {cores} cores at the start"
        assert ex.busy(note, detail) == flag and short.endswith(flag)
    else:
        assert ex.busy(note, detail) is None and "busy" not in short
