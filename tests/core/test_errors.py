"""zg.errors: what a caller can catch by name. ZgError catches every zg error; MainGuardError is
what starting workers from an unguarded main script raises; a worker's zg error reaches the
parent as itself (same class, same message)."""

import importlib
import inspect
import pkgutil

import pytest

import zg
import zg.errors
from zg.errors import MainGuardError, ZgError


def zg_exception_classes():
    """Every exception class defined in a zg module (the modules that import here)."""
    found = {}
    for info in pkgutil.walk_packages(zg.__path__, "zg."):
        if info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional dependency this env lacks
            continue
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == info.name:
                found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return found


def test_the_hierarchy():
    assert issubclass(ZgError, Exception) and not issubclass(ZgError, (ValueError, TypeError))
    assert issubclass(MainGuardError, ZgError)
    assert issubclass(MainGuardError, RuntimeError), "code that caught RuntimeError still does"
    assert issubclass(zg.errors.WorkerFailed, ZgError) and issubclass(
        zg.errors.WorkerFailed, RuntimeError
    )
    assert set(zg.errors.__all__) == {"ZgError", "MainGuardError", "WorkerFailed"}
    assert all(issubclass(getattr(zg.errors, name), ZgError) for name in zg.errors.__all__)


def test_except_zg_error_catches_every_zg_error():
    from zg.grappa import CheckpointError

    for cls in (MainGuardError, CheckpointError):
        with pytest.raises(ZgError, match="what went wrong"):
            raise cls("what went wrong")


def test_grappa_exports_the_same_classes():
    from zg import grappa

    assert grappa.ZgError is ZgError and grappa.MainGuardError is MainGuardError
    assert issubclass(grappa.CheckpointError, ZgError)


# zg.ogbn._DamagedFile is private: zg.ogbn turns it into a ValueError / FileNotFoundError naming
# the dataset and the file before anything leaves the module.
KNOWN_OUTSIDE = {"zg.cli.CommandError", "zg.ogbn._DamagedFile"}


def test_every_exception_class_in_zg_is_a_zg_error_built_from_its_message():
    """The rule of the module docstring, and what replaying a worker's error needs: the class
    rebuilds from its message alone."""
    classes = zg_exception_classes()
    assert {
        "zg.errors.ZgError",
        "zg.errors.MainGuardError",
        "zg.grappa.checkpoint.CheckpointError",
    } <= set(classes)
    for name, cls in classes.items():
        if name in KNOWN_OUTSIDE:
            continue
        assert issubclass(cls, ZgError), name
        assert str(cls("a message")) == "a message", name


def test_the_cli_command_error_is_a_zg_error():
    from zg.cli import CommandError

    assert issubclass(CommandError, ZgError)


# ----------------------------------------------------------------------------- what each is for


def test_a_worker_error_reaches_the_parent_as_itself(tmp_path):
    """What a worker records (class and message) the parent raises again: the same class, the
    same message, and the worker's rank."""
    from zg.grappa import launch

    launch._record_error(str(tmp_path), MainGuardError("worker 1 says so"), 1)
    again = launch._replayed(launch._worker_record(str(tmp_path), 1))
    assert type(again) is MainGuardError and str(again) == "worker 1 says so"
    assert again.worker_rank == 1


def test_an_unrecorded_foreign_error_is_not_replayed(tmp_path):
    from zg.grappa import launch

    launch._record_error(str(tmp_path), KeyError("not ours"), 0)
    assert launch._replayed(launch._worker_record(str(tmp_path), 0)) is None


def test_the_error_of_the_worker_that_ended_first_is_the_one_replayed(tmp_path):
    """Worker 0 ended first (killed: it recorded nothing); worker 1's later error (a peer that
    vanished) is not the cause and is not raised in its place."""
    from zg.grappa import launch

    launch._record_error(str(tmp_path), ValueError("peer 0 vanished"), 1)
    assert launch._worker_record(str(tmp_path), 0) is None
    assert launch._worker_record(str(tmp_path), 1)["message"] == "peer 0 vanished"


def test_main_guard_error_is_what_an_unguarded_main_script_gets(monkeypatch):
    """Starting workers while spawn re-runs the main script in a child raises MainGuardError
    naming the fix, before any process starts."""
    from zg.grappa import launch

    monkeypatch.delenv(launch.ERRORS_ENV, raising=False)
    monkeypatch.setattr(launch, "_reimporting_main", lambda: True)
    started = []
    monkeypatch.setattr(
        launch.mp, "start_processes", lambda *a, **k: started.append(a), raising=False
    )
    with pytest.raises(MainGuardError, match=r'if __name__ == "__main__":'):
        launch.spawn(print, 2)
    assert started == []


def test_checkpoint_error_names_the_file_that_cannot_be_read(tmp_path):
    from zg.grappa.checkpoint import CheckpointError, read_checkpoint

    bad = tmp_path / "ckpt.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(CheckpointError, match=rf"checkpoint {bad} cannot be read.*corrupt"):
        read_checkpoint(str(bad), None, None, 1)
    with pytest.raises(ZgError):
        read_checkpoint(str(bad), None, None, 1)
