"""The command line says what the library says: zg grappa's flags carry TrainConfig's own
descriptions and choices, the commands run the library's default kernel, and a graph file or
folder is a dataset for zg.datasets.load as for ``--dataset``."""

import argparse
import dataclasses
import inspect
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import zg
from zg import cli, datasets
from zg.grappa import TrainConfig
from zg.grappa import __main__ as grappa_main


def _subparser(name: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def _grappa_help() -> dict[str, str]:
    """TrainConfig field -> its flag's help."""
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    return {a.dest: a.help for a in _subparser("grappa")._actions if a.dest in fields}


def test_every_grappa_flag_is_described_from_the_config():
    helps = _grappa_help()
    assert set(helps) == {f.name for f in dataclasses.fields(TrainConfig)}
    bare = sorted(name for name, text in helps.items() if text.startswith("TrainConfig."))
    assert not bare, f"flags with no description: {bare}"
    for name, text in helps.items():
        assert re.search(r"\(default: [^)]*\)$", text), (name, text)
        assert len(text) < 400, f"--{name}: one clause, not the docstring's paragraph: {text}"


def test_every_grappa_flag_of_a_few_names_lists_them():
    helps, choices = _grappa_help(), cli._field_choices()
    for name, names in choices.items():
        assert names, name
        for choice in names:
            assert re.search(rf"\b{re.escape(str(choice))}\b", helps[name]), (name, choice)


@settings(max_examples=20, deadline=None)
@given(st.data())
def test_a_description_is_the_first_clause_the_docstring_gives(data):
    """Read back: each described flag's text appears, as written, in TrainConfig's docstring."""
    helps = _grappa_help()
    name = data.draw(st.sampled_from(sorted(helps)))
    described = helps[name].rsplit(" (default: ", 1)[0]
    if name in cli.CLI_ONLY_HELP:  # the command line's own addition, not the library's field
        described = described.removesuffix(f"; {cli.CLI_ONLY_HELP[name]}")
    doc = " ".join(TrainConfig.__doc__.split())
    doc = re.sub(r":\w+:`~?([^`]+)`", r"\1", doc).replace("``", "")
    assert described.replace("%%", "%") in doc, (name, described)


def test_the_help_renders():
    text = _subparser("grappa").format_help()
    assert "--kernel" in text and "TrainConfig.kernel" not in text


# ----------------------------------------------------------------------------- one default kernel


def test_the_commands_run_the_librarys_default_kernel():
    library = inspect.signature(zg.Engine).parameters["kernel"].default
    assert _subparser("train").get_default("kernel") == library
    assert grappa_main.COMMAND_LINE_KERNEL == TrainConfig().kernel == library


# ----------------------------------------------------------------------------- paths as datasets


@pytest.fixture(scope="module")
def graph():
    return datasets.csbm(num_nodes=120, avg_degree=4, num_classes=3, feat_dim=4, seed=0)


@pytest.mark.parametrize("as_path", [str, Path])
def test_load_takes_a_graph_file_or_folder(graph, tmp_path, monkeypatch, as_path):
    datasets.save_npz(graph, tmp_path / "g.npz")
    datasets.save_folder(graph, tmp_path / "g-folder")
    for where in (tmp_path / "g.npz", tmp_path / "g-folder"):
        loaded = datasets.load(as_path(where))
        assert loaded.num_nodes == graph.num_nodes and loaded.num_edges == graph.num_edges
    monkeypatch.chdir(tmp_path)  # a bare file name in the working folder
    assert datasets.load(as_path("g.npz")).num_nodes == graph.num_nodes
    assert datasets.load(as_path("g-folder")).num_nodes == graph.num_nodes


def test_load_names_a_missing_file_and_an_unknown_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.npz"):
        datasets.load(str(tmp_path / "missing.npz"))
    with pytest.raises(ValueError, match=r"unknown dataset 'no-such-name'.*graph file"):
        datasets.load("no-such-name")


def test_root_is_for_named_datasets_only(graph, tmp_path):
    datasets.save_npz(graph, tmp_path / "g.npz")
    with pytest.raises(ValueError, match="root applies to the named datasets"):
        datasets.load(str(tmp_path / "g.npz"), root=tmp_path)


def test_a_named_dataset_wins_over_a_file_of_its_name(tmp_path, monkeypatch):
    (tmp_path / "cora").mkdir()  # a folder named like the bundled dataset
    monkeypatch.chdir(tmp_path)
    assert datasets.load("cora").name == "cora"
