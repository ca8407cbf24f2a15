"""zg._io.atomic_write: all or nothing, errors that name the user's path, no temporary file left."""

import os
import stat

import pytest

from zg._io import atomic_write


def test_writes_and_replaces(tmp_path):
    path = tmp_path / "out.bin"
    assert atomic_write(path, lambda f: f.write(b"one")) == path
    atomic_write(str(path), lambda f: f.write(b"two"))
    assert path.read_bytes() == b"two"
    atomic_write(path, lambda f: f.write("drei ü"), text=True)
    assert path.read_text(encoding="utf-8") == "drei ü"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # not mkstemp's owner-only 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_make_parents_creates_the_folders(tmp_path):
    path = tmp_path / "a" / "b" / "out.json"
    with pytest.raises(ValueError, match=r"history_path .*: the folder .* does not exist"):
        atomic_write(path, lambda f: f.write(b"{}"), name="history_path")
    atomic_write(path, lambda f: f.write(b"{}"), make_parents=True)
    assert path.read_bytes() == b"{}"


@pytest.mark.parametrize(
    "exception", [OSError(28, "No space left on device"), RuntimeError("bug"), KeyboardInterrupt()]
)
def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, exception):
    path = tmp_path / "out.bin"
    path.write_bytes(b"old")

    def write(f):
        f.write(b"partial")
        raise exception

    with pytest.raises(type(exception)) as info:
        atomic_write(path, write)
    if isinstance(exception, OSError):  # the user's path, not the temporary
        assert str(path) in str(info.value) and info.value.errno == 28
        assert ".tmp" not in str(info.value)
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


@pytest.mark.parametrize(
    "path, error, match",
    [
        (None, TypeError, "path must be a path"),
        (3, TypeError, "path must be a path"),
        (b"/tmp/x", TypeError, "path must be a path"),
        ("", ValueError, "path is an empty string"),
        ("a\0b", ValueError, "NUL"),
    ],
)
def test_what_is_not_a_path(path, error, match):
    with pytest.raises(error, match=match):
        atomic_write(path, lambda f: None)


def test_errors_name_the_path_the_user_gave(tmp_path):
    with pytest.raises(ValueError, match=rf"model_path '{tmp_path}' is a directory"):
        atomic_write(tmp_path, lambda f: None, name="model_path")
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(ValueError, match=r"is a file, not a folder"):
        atomic_write(tmp_path / "file" / "x", lambda f: None, make_parents=True)
    with pytest.raises(ValueError, match=r"the folder .*missing.* does not exist"):
        atomic_write(tmp_path / "missing" / "x", lambda f: None)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def read_only_folder(tmp_path):
    """A real folder this process cannot write into (root ignores permission bits: /proc/self)."""
    if os.geteuid() == 0:
        return "/proc/self"
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return str(folder)


def test_a_read_only_folder_is_named(tmp_path):
    folder = read_only_folder(tmp_path)
    target = os.path.join(folder, "out.bin")
    with pytest.raises((ValueError, OSError)) as info:
        atomic_write(target, lambda f: f.write(b"x"))
    assert target in str(info.value) and ".tmp" not in str(info.value)
    assert not os.path.exists(target)
