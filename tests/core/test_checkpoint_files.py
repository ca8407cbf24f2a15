"""zg.checkpoint.load (Engine.load) reads only a regular file: a named pipe, a directory or a
device at ``path`` is a ValueError naming ``path`` and its kind, raised before the file is
opened (a FIFO never blocks the load), and the engine is left as it was. A link to a real
checkpoint is followed, as every path the kit reads (docs/reliability.md, "Writers and
files"). Real FIFOs (os.mkfifo), symbolic links and /dev/zero; an alarm turns a blocked load
into a failure instead of a hang."""

import os
import signal

import pytest
import torch

import zg


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)


def build(graph):
    torch.manual_seed(0)
    return zg.Engine(graph, zg.models.SAGE(8, 16, 3, num_layers=2), [5, 5], 16, mode="static")


def params(eng):
    return [p.detach().clone() for p in eng.model.parameters()]


@pytest.fixture
def alarm():
    def ring(signum, frame):
        raise TimeoutError("Engine.load blocked (opened a FIFO?)")

    old = signal.signal(signal.SIGALRM, ring)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


KINDS = {"fifo": "a named pipe", "directory": "a directory", "zero": "a character device"}


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_that_is_not_a_regular_file_is_refused_unopened(graph, tmp_path, alarm, kind):
    path = tmp_path / "ckpt.pt"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")  # followed: the link's end is what is read
    eng = build(graph)
    eng.train_epoch(max_batches=2)
    before, position = params(eng), (eng.epoch, eng.batch)
    with pytest.raises(ValueError) as refused:
        eng.load(path)
    message = str(refused.value)
    assert message.startswith(f"path {str(path)!r}: is {KINDS[kind]}"), message
    assert "not a regular file" in message
    assert all(torch.equal(p, q) for p, q in zip(params(eng), before))
    assert (eng.epoch, eng.batch) == position
    with pytest.raises(ValueError, match="not a regular file"):
        zg.checkpoint.load(eng, str(path))


def test_a_link_is_followed_to_its_end_a_checkpoint_loads_a_fifo_is_refused(graph, tmp_path, alarm):
    eng = build(graph)
    eng.train_epoch(max_batches=3)
    real = eng.save(tmp_path / "real.pt")
    link = tmp_path / "link.pt"
    link.symlink_to(real)
    fresh = build(graph)
    fresh.load(link)
    assert (fresh.epoch, fresh.batch) == (eng.epoch, eng.batch)
    assert all(torch.equal(p, q) for p, q in zip(params(fresh), params(eng)))
    assert link.is_symlink() and real.is_file()
    pipe = tmp_path / "pipe.pt"
    os.mkfifo(pipe)
    to_pipe = tmp_path / "to-pipe.pt"
    to_pipe.symlink_to(pipe)
    with pytest.raises(ValueError, match=rf"^path {str(to_pipe)!r}: is a named pipe"):
        fresh.load(to_pipe)
    assert all(torch.equal(p, q) for p, q in zip(params(fresh), params(eng)))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        fresh.load(tmp_path / "absent.pt")
