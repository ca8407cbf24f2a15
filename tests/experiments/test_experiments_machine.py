"""zg.experiments.machine: the notebooks' scale, the machine note and Markdown tables."""

import os

import pytest
import torch

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
