"""zg.grappa.worker: the worker loop's plugin hook (what the restart tests use to inject faults).
The loop itself runs in every distributed test (test_grappa_train, test_grappa_restart, ...)."""

import pytest

from zg.grappa import worker


def test_a_plugin_file_is_imported_once_and_installs_its_hook(tmp_path, monkeypatch):
    plugin = tmp_path / "plugin.py"
    plugin.write_text(
        "from zg.grappa import worker\n"
        "calls = []\n"
        "worker.on_iteration.append(lambda rank, epoch, batch: calls.append((rank, epoch, batch)))\n"
    )
    monkeypatch.setattr(worker, "on_iteration", [])
    monkeypatch.setattr(worker, "_loaded_plugins", set())
    monkeypatch.setenv(worker.PLUGIN_ENV, str(plugin))
    worker.load_plugins()
    worker.load_plugins()  # a second run in the same process
    assert len(worker.on_iteration) == 1
    worker.on_iteration[0](1, 2, 3)


def test_a_missing_plugin_is_an_error_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.setattr(worker, "_loaded_plugins", set())
    monkeypatch.setenv(worker.PLUGIN_ENV, str(tmp_path / "absent.py"))
    with pytest.raises(ValueError, match="ZG_GRAPPA_WORKER_PLUGIN"):
        worker.load_plugins()


def test_no_plugin_by_default(monkeypatch):
    monkeypatch.delenv(worker.PLUGIN_ENV, raising=False)
    before = list(worker.on_iteration)
    worker.load_plugins()
    assert worker.on_iteration == before
