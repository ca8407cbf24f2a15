"""Engine(mode="compiled"): the static step compiled whole (zg.compiled).

What it promises, each checked against the eager static step (the trusted reference): the same
batches sampled into the same blocks, bit for bit (the kit's keyed hash, compiled or not); the
same parameters after an epoch up to float reassociation; the overflow rewind exact; no graph
break (``fullgraph=True``: a host read in the step is an error, not a silent eager piece); no
recompile in a steady epoch (torch's own counter ``torch._dynamo.utils.counters`` and the
engine's backend count); 0 host syncs in a steady iteration (SyncAudit, as in every mode).
The tests that compile take tens of seconds each on a small CPU and are marked slow; the
structural ones compile nothing.
"""

from __future__ import annotations

import copy
import re

import pytest
import torch
from graphs import tiny

import zg
from zg.compiled import compile_support, compiler_counters
from zg.observe import AuditSyncs, Observer, Trace

BATCH = 32
needs_compiler = pytest.mark.skipif(compile_support() is not None, reason=str(compile_support()))


def build(mode: str, envelope=None, hooks=None, kind: str = "sage"):
    g = tiny()
    torch.manual_seed(0)
    model = zg.models.build(kind, g.feat_dim, 8, int(g.num_classes), 2, dropout=0.5)
    # Fanouts on both sides of Floyd's loop / pointer-doubling switch (zg.sampling).
    return zg.Engine(g, model, [6, 3], BATCH, envelope, mode=mode, seed=3, hooks=hooks)


class Blocks(Observer):
    """Every applied batch's sampled blocks (copies), in order."""

    def __init__(self):
        self.seen: list[list[torch.Tensor]] = []

    def batch_end(self, engine, epoch, batch):
        mb = engine.last_batch
        self.seen.append([t.clone() for b in mb.blocks for t in (b.nbr, b.mask, b.src_nodes)])


# ----------------------------------------------------------------------------- structure (fast)


def test_compiled_is_a_mode_of_the_static_launch():
    assert "compiled" in zg.settings.MODES
    assert zg.settings.MODE_PARTS["compiled"] == ("envelope", "compiled")
    engine = build("compiled")
    assert engine.launch == "compiled" and engine.kernel == "torch"
    # Nothing is compiled before the first step; the static buffers are the static mode's.
    assert engine.compiled.compiles == 0 and engine.compiled.calls == 0
    assert engine.counter.shape == () and engine.loss_buf.shape == ()


def test_the_sampler_caches_stay_eager_only():
    """Outside a trace the sampler keeps its constants and buffer (the eager fast path)."""
    engine = build("static")
    engine.train_epoch(max_batches=1)
    assert not zg.sampling.compiling()
    assert engine.sampler._rows, "the eager static step keeps its constants"


def test_what_the_compiled_launch_cannot_run_is_refused():
    with pytest.raises(ValueError, match="StepHooks.reduce"):
        build("compiled", hooks=zg.StepHooks(reduce=lambda: None))
    with pytest.raises(ValueError, match="StepHooks.features"):
        build("compiled", hooks=zg.StepHooks(features=lambda nodes: None))
    if zg.kernels.available():
        g = tiny()
        model = zg.models.SAGE(g.feat_dim, 8, int(g.num_classes), 2)
        with pytest.raises(ValueError, match="kernel='fused'"):
            zg.Engine(g, model, [6, 3], BATCH, mode="compiled", kernel="fused")


def test_a_torch_that_cannot_compile_is_named(monkeypatch):
    monkeypatch.setattr(zg.compiled, "MIN_TORCH", (99, 0))
    with pytest.raises(RuntimeError, match=rf"torch {re.escape(torch.__version__)}.*mode='static'"):
        build("compiled")


@needs_compiler
def test_the_compiler_counters_count_breaks_and_graphs():
    """compiler_counters() reads torch's own report: a function with one host read, compiled
    without fullgraph (the eager backend: nothing is generated), is split by one graph break
    into two graphs; calling it again with the same shapes adds nothing."""

    def split(x):
        x = x * 2
        if x.sum().item() > 0:  # a host read: the graph breaks here
            x = x + 1
        return x * 3

    from torch._dynamo.utils import counters

    saved = {k: dict(v) for k, v in counters.items()}  # torch's counters are the process's
    try:
        before = compiler_counters()
        compiled = torch.compile(split, backend="eager")
        compiled(torch.ones(4))
        once = compiler_counters()
        assert once["graph_breaks"] - before["graph_breaks"] >= 1
        assert once["graphs"] - before["graphs"] == 2
        compiled(torch.ones(4))
        assert compiler_counters() == once
    finally:  # this test's deliberate break must not be seen by the tests that count none
        counters.clear()
        for k, v in saved.items():
            counters[k].update(v)


@needs_compiler
def test_a_graph_break_is_an_error_not_an_eager_piece():
    """A host read inside the step (here a loss hook calling .item()) cannot be compiled
    into the graph: fullgraph=True makes it an error at the first step."""

    def loss(logits, labels, mb):
        value = zg.step.masked_cross_entropy(logits, labels, mb)
        return value * (1.0 if value.item() > 0 else 2.0)  # a host read

    engine = build("compiled", hooks=zg.StepHooks(loss=loss))
    with pytest.raises(Exception, match="(?i)item|unsupported|graph break|data-dependent"):
        engine.train_epoch(max_batches=1)


# ----------------------------------------------------------------------------- equal to the eager step


def run(mode: str, envelope=None, epochs: int = 2):
    engine = build(mode, envelope)
    trace, blocks = Trace(), Blocks()
    engine.observers = [AuditSyncs(2), trace, blocks]
    stats = [engine.train_epoch() for _ in range(epochs)]
    return engine, stats, trace.applied(), blocks.seen


@needs_compiler
@pytest.mark.slow
def test_compiled_equals_static_and_a_steady_epoch_never_recompiles():
    from torch._dynamo.utils import counters

    static, static_stats, static_trace, static_blocks = run("static", epochs=1)
    engine = build("compiled")
    trace, blocks = Trace(), Blocks()
    engine.observers = [AuditSyncs(2), trace, blocks]
    first = engine.train_epoch()
    assert engine.compiled.compiles >= 2  # forward (with its backward) and update
    # A steady epoch: torch's own counters and the engine's backend count stand still, no
    # graph break is recorded, and the audited iterations make no host sync.
    graphs = counters["stats"]["unique_graphs"]
    breaks = copy.deepcopy(dict(counters["graph_break"]))
    compiles = engine.compiled.total_compiles
    second = engine.train_epoch()
    assert counters["stats"]["unique_graphs"] == graphs
    assert dict(counters["graph_break"]) == breaks == {}
    assert engine.compiled.total_compiles == compiles
    assert first.host_syncs == second.host_syncs == 0
    # The same batches, sampled into the same blocks, bit for bit (epoch 0).
    assert trace.applied()[: len(static_trace)] == static_trace
    assert len(blocks.seen[: len(static_blocks)]) == len(static_blocks)
    for ours, theirs in zip(blocks.seen, static_blocks):
        assert all(torch.equal(a, b) for a, b in zip(ours, theirs))
    # The same parameters after epoch 0 (the same dropout masks: torch's own random ops).
    static.train_epoch()  # epoch 1, to compare after both
    assert first.loss == pytest.approx(static_stats[0].loss, rel=1e-5)
    for a, b in zip(static.model.parameters(), engine.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@needs_compiler
@pytest.mark.slow
def test_the_overflow_rewind_stays_exact_and_compiles_once_per_envelope():
    envelope = zg.Envelope([BATCH + 4, BATCH + 2])  # overflows on some batches of tiny()
    static, static_stats, static_trace, _ = run("static", envelope)
    engine, stats, trace, _ = run("compiled", envelope)
    overflows = sum(s.overflows for s in stats)
    assert overflows == sum(s.overflows for s in static_stats) > 0
    assert engine.envelope.sizes == static.envelope.sizes
    # The same batches applied in the same order, each once: the rewind is exact.
    assert trace == static_trace
    for a, b in zip(static.model.parameters(), engine.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    # Every envelope compiled its step once (forward and update, at most 3 graphs with a
    # separately compiled backward), never more.
    assert engine.compiled.total_compiles <= 3 * (overflows + 1)
    assert all(s.host_syncs == 0 for s in stats)


class Stop(KeyboardInterrupt):
    """What a user's Ctrl-C raises (a BaseException)."""


@needs_compiler
@pytest.mark.slow
def test_an_interrupted_compiled_epoch_continues_exactly():
    """Ctrl-C after a batch (tests/core/test_interruptions.py, in this mode): the position
    names the next batch, and continuing trains what the static step trains."""
    static, _, static_trace, _ = run("static")
    fired = []

    def after(epoch, batch):
        if (epoch, batch) == (0, 3) and not fired:
            fired.append(True)
            raise Stop

    engine = build("compiled", hooks=zg.StepHooks(poll_every=4, after=after))
    engine.observers = []
    with pytest.raises(Stop):
        engine.train_epoch()
    assert (engine.epoch, engine.batch) == (0, 4) and engine.history[-1].interrupted
    engine.train_epoch()
    engine.train_epoch()
    assert (engine.epoch, engine.batch, engine.steps_done) == (2, 0, len(static_trace))
    for a, b in zip(static.model.parameters(), engine.model.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
