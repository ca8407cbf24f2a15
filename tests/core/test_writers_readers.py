"""zg._io's readers of inputs that are not configs: ``open_regular_file`` and ``read_text_file``
open a file only if it is a regular file, checked before any open, so a named pipe never blocks
and a device never streams forever; links are followed (the kit's one rule for paths). Real
files, FIFOs (os.mkfifo), symbolic links and /dev/zero; an alarm turns a blocked open into a
failure instead of a hang."""

import os
import signal
from pathlib import Path

import pytest

from zg._io import open_regular_file, read_text_file


@pytest.fixture
def alarm():
    def ring(signum, frame):
        raise TimeoutError("the reader blocked (opened a FIFO?)")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def special(kind: str, tmp_path: Path) -> Path:
    """A path to something that is not a regular file (a link to it where it is a device)."""
    path = tmp_path / f"in-{kind.replace('/', '_')}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    return path


KINDS = {
    "fifo": "a named pipe",
    "directory": "a directory",
    "link to /dev/zero": "a character device",
}


@pytest.mark.parametrize("kind", KINDS)
def test_what_is_not_a_regular_file_is_refused_before_it_is_opened(tmp_path, alarm, kind):
    path = special(kind, tmp_path)
    with pytest.raises(ValueError) as refused:
        open_regular_file(path, "--input", what="a notebook")
    message = str(refused.value)
    assert message.startswith(f"--input {str(path)!r}: is {KINDS[kind]}"), message
    assert "not a regular file; a notebook is a regular file" in message
    with pytest.raises(ValueError, match=rf"^--input .*{KINDS[kind]}"):
        read_text_file(path, "--input", limit=1 << 20)


def test_a_regular_file_and_a_link_to_one_are_read(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("héllo\n", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with open_regular_file(link, "path") as f:
        assert f.read() == "héllo\n".encode()
        assert os.get_blocking(f.fileno())  # an ordinary blocking file once opened
    assert read_text_file(real, "path", limit=100) == "héllo\n"
    assert read_text_file(link, "path", limit=100) == "héllo\n"


def test_missing_too_big_not_utf8_and_dangling_name_the_argument(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^--in: no such file"):
        read_text_file(tmp_path / "absent", "--in", limit=10)
    big = tmp_path / "big.txt"
    big.write_text("x" * 11)
    with pytest.raises(ValueError, match=r"^--in .*is over 10 bytes"):
        read_text_file(big, "--in", limit=10)
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ValueError, match=r"^--in .*is not UTF-8"):
        read_text_file(binary, "--in", limit=10)
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match=r"^--in .*dangling"):
        open_regular_file(dangling, "--in")
    with pytest.raises(TypeError, match=r"^--in must be a path"):
        open_regular_file(3, "--in")
