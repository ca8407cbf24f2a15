"""zg.observe: what measures an epoch, attached from outside the loop. AuditSyncs counts what
SyncAudit counts over the same steps and skips the engine's first step; Trace records every
executed step (rewound ones with applied=False); Progress ticks once per batch of the epoch;
Callbacks run around every batch in order; observers given to one call are not kept."""

import pytest
import torch

import zg
from zg import models
from zg.audit import SyncAudit
from zg.engine import Engine, StepHooks
from zg.envelope import Envelope
from zg.observe import AuditSyncs, Callbacks, Observer, Progress, Trace, node_set_hash
from zg.sampling import DynamicSampler, EnvelopeSampler


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=3000, avg_degree=10, num_classes=4, feat_dim=16, seed=0)


def engine(g, envelope="worst_case", *, observers=(), poll_every=8, **kw):
    """A 2-layer SAGE engine (batch 128: 12 batches an epoch) with exactly ``observers``."""
    torch.manual_seed(0)
    kw.setdefault("seed", 1)
    eng = Engine(
        g,
        models.SAGE(16, 32, 4, 2, dropout=0.5),
        [5, 5],
        128,
        envelope,
        optimizer=zg.optim.adam(lr=3e-3),
        hooks=StepHooks(poll_every=poll_every),
        **kw,
    )
    eng.observers = list(observers)
    return eng


class Log(Observer):
    """Every call of the interface, in order, with what the engine showed at that moment."""

    def __init__(self):
        self.calls = []

    def epoch_start(self, engine, epoch, first_batch):
        self.calls.append(("epoch_start", epoch, first_batch))

    def batch_start(self, engine, epoch, batch):
        self.calls.append(("batch_start", epoch, batch, engine.steps_done))

    def batch_end(self, engine, epoch, batch):
        self.calls.append(("batch_end", epoch, batch, engine.steps_done))

    def epoch_end(self, engine, stats):
        self.calls.append(("epoch_end", stats.epoch))

    def executed(self):
        return [c[1:3] for c in self.calls if c[0] == "batch_end"]


class AuditEach(Observer):
    """A SyncAudit around each batch, by hand: the reference AuditSyncs must agree with."""

    def __init__(self):
        self.counts = []

    def batch_start(self, engine, epoch, batch):
        self.audit = SyncAudit().__enter__()

    def batch_end(self, engine, epoch, batch):
        self.audit.__exit__(None, None, None)
        self.counts.append(self.audit.host_syncs)


# ----------------------------------------------------------------------------- the interface


def test_observers_see_every_executed_batch_and_fill_the_stats(graph):
    class Count(Observer):
        def __init__(self):
            self.calls = []

        def epoch_start(self, engine, epoch, first_batch):
            self.calls.append(("start", epoch, first_batch))

        def batch_end(self, engine, epoch, batch):
            assert engine.last_batch is not None and engine.applied is not None
            self.calls.append(("batch", batch))

        def epoch_end(self, engine, stats):
            stats.loss_seen_by_observer = stats.loss

    eng = engine(graph, Envelope([200, 140]), poll_every=2, observers=[AuditSyncs(1)])
    count = Count()
    stats = eng.train_epoch(observers=[count])
    batches = [c for c in count.calls if c[0] == "batch"]
    assert count.calls[0] == ("start", 0, 0)
    assert len(batches) == stats.replays and stats.overflows >= 1
    assert stats.loss_seen_by_observer == stats.loss
    assert count not in eng.observers, "observers given to one call are not kept"
    with pytest.raises(ValueError, match="no zg.observe.Trace"):
        eng.applied_trace()


def test_the_loop_calls_the_four_points_in_order_and_ends_in_reverse(graph):
    """epoch_start, then per batch batch_start (before the step) / batch_end (after it), then
    epoch_end; batch_end runs in reverse order, so the first observer wraps the others."""
    outer, inner = Log(), Log()
    eng = engine(graph, observers=[outer])
    order = []
    outer.batch_end = lambda e, ep, b, f=outer.batch_end: (order.append("outer"), f(e, ep, b))
    inner.batch_end = lambda e, ep, b, f=inner.batch_end: (order.append("inner"), f(e, ep, b))
    eng.train_epoch(max_batches=3, observers=[inner])
    for log in (outer, inner):
        assert log.calls == [
            ("epoch_start", 0, 0),
            ("batch_start", 0, 0, 0),
            ("batch_end", 0, 0, 1),
            ("batch_start", 0, 1, 1),
            ("batch_end", 0, 1, 2),
            ("batch_start", 0, 2, 2),
            ("batch_end", 0, 2, 3),
            ("epoch_end", 0),
        ]
    assert order == ["inner", "outer"] * 3
    eng.train_epoch(max_batches=1)  # the next call starts where it stopped
    assert outer.calls[-4:] == [
        ("epoch_start", 0, 3),
        ("batch_start", 0, 3, 3),
        ("batch_end", 0, 3, 4),
        ("epoch_end", 0),
    ]
    assert len(inner.calls) == 8, "an observer given to one call is not kept"
    assert eng.observers == [outer]


def test_the_base_observer_does_nothing():
    o = Observer()
    assert o.epoch_start(None, 0, 0) is None and o.batch_start(None, 0, 0) is None
    assert o.batch_end(None, 0, 0) is None and o.epoch_end(None, None) is None


def test_the_default_engine_audits_one_steady_iteration(graph):
    eng = Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 128, "worst_case")
    assert [type(o) for o in eng.observers] == [AuditSyncs] and eng.observers[0].iterations == 1


# ----------------------------------------------------------------------------- AuditSyncs


def test_audit_syncs_counts_what_sync_audit_counts_over_the_same_steps(graph):
    """The dynamic mode syncs many times a step: AuditSyncs' mean over its audited batches is
    exactly the mean of SyncAudits opened by hand around those batches (the first step of the
    engine excluded)."""
    eng = engine(graph, mode="dynamic", observers=[AuditSyncs(3)])
    by_hand = AuditEach()
    stats = eng.train_epoch(max_batches=5, observers=[by_hand])
    assert len(by_hand.counts) == 5 and min(by_hand.counts) > 0
    assert stats.host_syncs == sum(by_hand.counts[1:4]) / 3
    assert stats.cuda_sync_warnings is None, "no second count on the CPU"
    # A later epoch: the engine's first step is behind it, so its first 3 batches are audited.
    stats = eng.train_epoch(max_batches=3, observers=[by_hand])
    assert stats.host_syncs == sum(by_hand.counts[5:8]) / 3


def test_audit_syncs_skips_the_engines_first_step(graph):
    eng = engine(graph, mode="dynamic", observers=[AuditSyncs(2)])
    assert eng.train_epoch(max_batches=1).host_syncs is None, (
        "only the first step ran: none audited"
    )
    by_hand = AuditEach()
    stats = eng.train_epoch(max_batches=1, observers=[by_hand])
    assert stats.host_syncs == by_hand.counts[0] > 0
    assert eng.observers[0].done == 1


def test_audit_syncs_zero_iterations_audits_nothing(graph):
    eng = engine(graph, mode="dynamic", observers=[AuditSyncs(0)])
    eng.train_epoch(max_batches=1)
    assert eng.train_epoch(max_batches=2).host_syncs is None


def test_the_static_step_audits_zero_syncs_with_a_trace_attached(graph):
    """Trace reads its device values once per epoch, so attached it adds no sync per step."""
    eng = engine(graph, mode="static", kernel="torch", observers=[AuditSyncs(4), Trace()])
    stats = eng.train_epoch(max_batches=6)
    assert stats.host_syncs == 0 and eng.observers[0].done == 4


@pytest.mark.parametrize(
    "bad, error",
    [(-1, ValueError), (1.0, TypeError), (True, TypeError), ("2", TypeError), (None, TypeError)],
)
def test_audit_syncs_refuses_a_bad_count(bad, error):
    with pytest.raises(error, match="iterations must be"):
        AuditSyncs(bad)


# ----------------------------------------------------------------------------- Trace


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_trace_records_every_executed_step_and_rewound_ones_unapplied(graph, mode):
    trace, log = Trace(), Log()
    eng = engine(graph, Envelope([200, 140]), poll_every=3, mode=mode, observers=[trace, log])
    stats = eng.train_epoch()
    assert stats.overflows >= 1 and stats.rewound_batches >= 1
    assert len(trace.steps) == stats.replays == len(log.executed())
    assert [(s["epoch"], s["batch"]) for s in trace.steps] == log.executed(), "in executed order"
    assert all(set(s) == {"epoch", "batch", "hash", "applied"} for s in trace.steps), (
        "flushed at epoch_end"
    )
    unapplied = [s for s in trace.steps if not s["applied"]]
    assert len(unapplied) == stats.rewound_batches
    # Every batch is applied exactly once, in order; each unapplied step ran again later.
    applied = [s["batch"] for s in trace.steps if s["applied"]]
    assert applied == list(range(len(eng.batches(0))))
    for s in unapplied:
        later = trace.steps[trace.steps.index(s) + 1 :]
        assert any(t["batch"] == s["batch"] and t["applied"] for t in later)
    assert trace.applied() == [(0, s["batch"], s["hash"]) for s in trace.steps if s["applied"]]
    assert eng.applied_trace() == trace.applied()


def test_trace_hash_is_the_node_set_hash_of_each_executed_batch(graph):
    eng = engine(graph, mode="eager", observers=[trace := Trace()])
    hashes = []
    eng.observers.append(
        type(
            "Hash",
            (Observer,),
            {"batch_end": lambda self, e, ep, b: hashes.append(int(node_set_hash(e.last_batch)))},
        )()
    )
    eng.train_epoch(max_batches=4)
    assert [s["hash"] for s in trace.steps] == hashes and len(set(hashes)) == 4
    assert all(s["applied"] for s in trace.steps)


def test_trace_flush_before_the_epoch_ends(graph):
    """A step recorded but not yet read reads its values at flush (what applied() calls)."""
    trace = Trace()
    eng = engine(graph, mode="eager")
    eng.train_epoch(max_batches=1)
    eng.train_epoch(max_batches=2, observers=[_no_epoch_end(trace)])
    assert [set(s) for s in trace.steps] == [{"epoch", "batch"}] * 2
    assert [t[1] for t in trace.applied()] == [1, 2]
    assert all("hash" in s for s in trace.steps)


def _no_epoch_end(trace):
    class Wrapped(Observer):
        def batch_end(self, engine, epoch, batch):
            trace.batch_end(engine, epoch, batch)

    return Wrapped()


# ----------------------------------------------------------------------------- node_set_hash


def test_node_set_hash_sees_the_true_node_sets_only():
    g = zg.datasets.csbm(num_nodes=500, avg_degree=6, num_classes=3, feat_dim=4, seed=1)
    seeds = torch.arange(0, 500, 9)
    env = EnvelopeSampler(g, [4, 4], 64, seed=3).sample(seeds, epoch=2, batch=5)
    dyn = DynamicSampler(g, [4, 4], seed=3).sample(seeds, epoch=2, batch=5)
    assert [s.tolist() for s in env.node_sets()] == [s.tolist() for s in dyn.node_sets()]
    assert int(node_set_hash(env)) == int(node_set_hash(dyn)), "order and padding do not count"
    for b in env.blocks:  # garbage in the padding rows: no change
        b.src_nodes[int(b.num_src) :] = 7
    assert int(node_set_hash(env)) == int(node_set_hash(dyn))
    other = EnvelopeSampler(g, [4, 4], 64, seed=3).sample(seeds, epoch=2, batch=6)
    assert int(node_set_hash(other)) != int(node_set_hash(dyn))


# ----------------------------------------------------------------------------- Progress


class Bar:
    def __init__(self):
        self.ticks = []

    def update(self, n):
        self.ticks.append(n)


def test_progress_ticks_once_per_batch_of_the_epoch_rewound_ones_not_again(graph):
    """A batch run again after a rewind does not tick again: the bar ends at its total."""
    bar = Bar()
    eng = engine(graph, Envelope([200, 140]), poll_every=2, mode="eager")
    stats = eng.train_epoch(observers=[Progress(bar)])
    assert stats.rewound_batches >= 1 and stats.replays > len(eng.batches(0))
    assert bar.ticks == [1] * len(eng.batches(0)) == [1] * stats.iterations
    eng.train_epoch(max_batches=2)
    assert len(bar.ticks) == stats.iterations, "not kept after its call"


def test_progress_counts_from_where_a_call_starts(graph):
    bar, log = Bar(), Log()
    eng = engine(graph, mode="eager")
    eng.train_epoch(max_batches=3)
    progress = Progress(bar)
    eng.train_epoch(max_batches=4, observers=[progress, log])
    assert bar.ticks == [1] * 4 and [b for _, b in log.executed()] == [3, 4, 5, 6]
    eng.train_epoch(observers=[progress])  # the rest of epoch 0
    assert len(bar.ticks) == len(eng.batches(0)) - 3


def test_progress_wants_a_bar():
    with pytest.raises(TypeError, match="bar must have an update"):
        Progress(object())


# ----------------------------------------------------------------------------- Callbacks


def test_callbacks_run_around_every_batch_in_order(graph):
    seen = []
    eng = engine(graph, Envelope([200, 140]), poll_every=2, mode="eager")
    cb = Callbacks(
        before=lambda e, b: seen.append(("before", e, b, eng.steps_done)),
        after=lambda e, b: seen.append(("after", e, b, eng.steps_done)),
    )
    log = Log()
    stats = eng.train_epoch(observers=[cb, log])
    assert len(seen) == 2 * stats.replays
    executed = log.executed()
    for i, (e, b) in enumerate(executed):
        assert seen[2 * i] == ("before", e, b, i), "before the step runs"
        assert seen[2 * i + 1] == ("after", e, b, i + 1), "after it ran"
    assert len(set(executed)) < len(executed), "rewound batches are called again"


def test_step_callbacks_are_callbacks_the_engine_keeps(graph):
    seen = []
    torch.manual_seed(0)
    eng = Engine(
        graph,
        models.SAGE(16, 8, 4, 2),
        [5, 5],
        128,
        "worst_case",
        mode="eager",
        hooks=StepHooks(after=lambda e, b: seen.append((e, b))),
    )
    eng.train_epoch(max_batches=2)
    eng.train_epoch(max_batches=1)
    assert seen == [(0, 0), (0, 1), (0, 2)]
    assert not any(isinstance(o, Callbacks) for o in eng.observers), "not in the replaceable list"


def test_callbacks_may_be_one_sided_and_must_be_callable():
    calls = []
    only_after = Callbacks(after=lambda e, b: calls.append(b))
    only_after.batch_start(None, 0, 1)
    only_after.batch_end(None, 0, 1)
    assert calls == [1]
    for name in ("before", "after"):
        with pytest.raises(TypeError, match=f"{name} must be callable or None"):
            Callbacks(**{name: "print"})


# ----------------------------------------------------------------------------- StageTimes


@pytest.mark.parametrize("mode", ["static", "eager", "dynamic"])
def test_stage_times_fill_every_stage_of_the_epoch_and_only_when_attached(graph, mode):
    from zg.observe import StageTimes
    from zg.step import STAGES

    eng = engine(graph, mode=mode)
    plain = eng.train_epoch(max_batches=3)
    assert plain.stage_seconds == {} and not hasattr(eng, "clock")
    times = StageTimes()
    stats = eng.train_epoch(max_batches=3, observers=[times])
    assert set(stats.stage_seconds) == set(STAGES) and stats.stage_seconds == times.seconds
    assert all(stats.stage_seconds[s] > 0 for s in STAGES), stats.stage_seconds
    # The laps tile the clocked batches, which lie inside the epoch's wall clock.
    assert sum(stats.stage_seconds.values()) <= stats.seconds
    assert not hasattr(eng, "clock"), "the loop asks its observers; no observer writes the engine"
