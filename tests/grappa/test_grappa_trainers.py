"""zg.grappa.trainers: one class per trainer; the name is tested in one place (the registry)."""

import ast
from pathlib import Path

import pytest

from zg import grappa
from zg.grappa.roles import AveragingRole, FetchingRole, Role, SharingRole, role_for
from zg.grappa.trainers import (
    PSGDPA,
    TRAINERS,
    DataParallel,
    FeatureFetch,
    Grappa,
    Isolated,
    Single,
    Trainer,
    get_trainer,
)

PACKAGE = Path(grappa.__file__).resolve().parent


def test_the_registry_maps_each_name_to_its_class():
    assert TRAINERS == {
        "grappa": Grappa,
        "isolated": Isolated,
        "psgd_pa": PSGDPA,
        "feature_fetch": FeatureFetch,
        "data_parallel": DataParallel,
        "single": Single,
    }
    for name, cls in TRAINERS.items():
        assert isinstance(get_trainer(name), cls) and get_trainer(name).name == name
    with pytest.raises(ValueError, match="unknown trainer 'ddp'; choose one of"):
        get_trainer("ddp")
    with pytest.raises(TypeError, match="trainer must be a str"):
        get_trainer(3)


def test_what_differs_is_held_by_the_objects():
    assert [n for n, c in TRAINERS.items() if c.corrects] == ["grappa"]
    assert [n for n, c in TRAINERS.items() if c.repartitions] == ["grappa"]
    assert [n for n, c in TRAINERS.items() if c.averages_models] == ["psgd_pa"]
    assert [n for n, c in TRAINERS.items() if c.fetches_features] == ["feature_fetch"]
    assert [n for n, c in TRAINERS.items() if c.shares_batches] == ["data_parallel"]
    assert {n: c.workers for n, c in TRAINERS.items() if c.workers} == {"single": 1}
    assert get_trainer("psgd_pa").replicas(4) == 4 and get_trainer("grappa").replicas(4) == 1
    assert get_trainer("grappa").fixed() == {}
    assert set(get_trainer("single").fixed()) == {
        "estimator",
        "repartition_every",
        "workers",
        "num_chunks",
    }


def test_a_trainer_is_policy_and_its_role_builds():
    """trainers.py holds flags, defaults and checks; roles.py what a worker builds from them."""
    for method in ("make_local_data", "exchange", "after_step"):
        assert not hasattr(Trainer, method) and hasattr(Role, method)
    kinds = {name: type(role_for(get_trainer(name))) for name in TRAINERS}
    assert kinds == {
        "grappa": Role,
        "isolated": Role,
        "psgd_pa": AveragingRole,
        "feature_fetch": FetchingRole,
        "data_parallel": SharingRole,
        "single": Role,
    }
    assert role_for(get_trainer("psgd_pa")).trainer.name == "psgd_pa"
    with pytest.raises(TypeError, match="zg.grappa.Trainer"):
        role_for("grappa")


def test_shared_options_leave_out_what_the_trainer_fixes():
    common = {"repartition_every": 2, "estimator": "batch", "lr": 0.1, "workers": 3}
    assert get_trainer("grappa").shared_options(common) == common
    assert get_trainer("isolated").shared_options(common) == {"lr": 0.1, "workers": 3}
    assert get_trainer("single").shared_options(common) == {"lr": 0.1}


def _name_tests(tree):
    """Comparisons (==, !=, in, not in) that involve a trainer's name: a variable or attribute
    called ``trainer``, or a string literal naming a trainer."""

    def names_a_trainer(node):
        if isinstance(node, ast.Name):
            return node.id == "trainer"
        if isinstance(node, ast.Attribute):
            return node.attr == "trainer"
        if isinstance(node, ast.Constant):
            return node.value in TRAINERS
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(names_a_trainer(e) for e in node.elts)
        return False

    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Compare)
            and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) for op in node.ops)
            and any(names_a_trainer(n) for n in [node.left, *node.comparators])
        ):
            yield node.lineno


def test_the_trainer_name_is_tested_in_one_place():
    """Outside trainers.py (the registry) no module of zg/grappa compares a trainer's name."""
    offenders = [
        f"{path.name}:{line}"
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name != "trainers.py"
        for line in _name_tests(ast.parse(path.read_text()))
    ]
    assert offenders == []
    assert list(_name_tests(ast.parse("if cfg.trainer == 'x': pass"))) == [1]  # the check works
