"""zg.Engine: zero syncs, stable buffers, exact overflow rewind, checkpoints, accuracy, errors."""

import copy
import dataclasses

import pytest
import torch

import zg
from zg import models
from zg.engine import Engine, StepHooks
from zg.envelope import Envelope
from zg.observe import AuditSyncs, Trace


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=3000, avg_degree=10, num_classes=4, feat_dim=16, seed=0)


def engine(
    g, envelope="worst_case", *, trace=False, audit=1, poll_every=8, lr=3e-3, optimizer="adam", **kw
):
    """A 2-layer SAGE engine; ``trace`` attaches a Trace, ``audit`` sets the audited iterations."""
    torch.manual_seed(0)
    model = models.SAGE(16, 32, 4, 2, dropout=0.5)
    kw.setdefault("seed", 1)
    eng = Engine(
        g,
        model,
        [5, 5],
        128,
        envelope,
        optimizer=zg.optim.OptimizerSpec(optimizer, lr),
        hooks=StepHooks(poll_every=poll_every),
        **kw,
    )
    eng.observers = [AuditSyncs(audit)] + ([Trace()] if trace else [])
    return eng


def trace_of(eng):
    return next(o for o in eng.observers if isinstance(o, Trace)).steps


def params(eng):
    return [p.detach().clone() for p in eng.model.parameters()]


# ----------------------------------------------------------------------------- the contract


def test_steady_state_iterations_have_zero_host_syncs(graph):
    eng = engine(graph, "profiled", audit=3)
    stats = eng.train_epoch()
    assert stats.host_syncs == 0
    assert stats.iterations == eng.batches(0).__len__() and stats.replays == stats.iterations


@pytest.mark.parametrize("kind", ["gcn", "gat"])
def test_static_step_of_every_model_has_zero_host_syncs(graph, kind):
    """The CPU aggregation paths (embedding_bag) inside the whole static step: no host sync,
    and the same seed gives the same parameters bit for bit."""
    runs = []
    for _ in range(2):
        torch.manual_seed(0)
        model = models.build(
            kind, 16, 8, 4, 2, dropout=0.5, **({"heads": 2} if kind == "gat" else {})
        )
        eng = Engine(graph, model, [5, 5], 128, "profiled", seed=1)
        eng.observers = [AuditSyncs(3)]
        stats = eng.train_epoch(max_batches=5)
        assert stats.host_syncs == 0 and stats.iterations == 5
        runs.append(params(eng))
    assert all(torch.equal(a, b) for a, b in zip(*runs))


def test_dynamic_mode_through_the_same_api_syncs(graph):
    eng = engine(graph, mode="dynamic", audit=2)
    stats = eng.train_epoch()
    assert stats.host_syncs > 0 and stats.iterations > 0


def test_static_buffers_keep_their_addresses(graph):
    eng = engine(graph)
    eng.train_epoch(max_batches=1)  # the first step creates the optimizer state

    def addresses():
        tensors = [
            eng.epoch_seeds,
            eng.epoch_counts,
            eng.counter,
            eng.epoch_keys,
            eng.overflowed,
            eng.guard.first,
            eng.guard.first_wanted,
            eng.loss_buf,
            eng.optimizer._lr[0],
            eng.g.x,
            eng.g.indices,
        ]
        # The sampler's marker array (torch path) or the fused kernel's. Gradients are not
        # state: each step's backward makes them afresh (zg.experiments.replay).
        tensors += [eng.sampler._first if eng.sampler.kernel == "torch" else eng.sampler._marker]
        tensors += [p for p in eng.model.parameters()]
        for state in eng.optimizer.state.values():
            tensors += [state["exp_avg"], state["exp_avg_sq"], state["step"]]
        return [t.data_ptr() for t in tensors]

    before = addresses()
    eng.train_epoch(max_batches=4)
    eng.train_epoch()  # into the next epoch: a new seed table, same buffer
    eng.train_epoch(max_batches=2)
    assert eng.epoch == 1
    assert addresses() == before


def test_static_step_reads_its_batch_on_the_device(graph):
    """The static step takes its seeds from the epoch table at the device counter and derives
    its key there: it applies exactly the batches (and node sets) the eager pipeline applies,
    bit for bit on the CPU, and the host copies nothing per iteration."""
    static = engine(graph, Envelope([2400, 700]), trace=True, mode="static")
    eager = engine(graph, Envelope([2400, 700]), trace=True, mode="eager")
    for _ in range(2):
        static.train_epoch()
        eager.train_epoch()
    assert static.applied_trace() == eager.applied_trace()
    assert all(torch.equal(p, q) for p, q in zip(params(static), params(eager)))
    # (the keys the static step reads: tests/core/test_rng.py checks its table bit for bit)


def test_two_runs_with_equal_envelopes_are_bitwise_equal(graph):
    a, b = engine(graph, Envelope([2400, 700])), engine(graph, Envelope([2400, 700]))
    for _ in range(2):
        a.train_epoch()
        b.train_epoch()
    assert all(torch.equal(p, q) for p, q in zip(params(a), params(b)))
    c = engine(graph, Envelope([2400, 700]), seed=2)
    c.train_epoch()
    c.train_epoch()
    assert not all(torch.equal(p, q) for p, q in zip(params(a), params(c)))


# ----------------------------------------------------------------------------- rewind


@pytest.mark.parametrize("mode", ["static", "eager"])
@pytest.mark.parametrize("poll_every", [1, 3])
def test_tiny_envelope_applies_exactly_the_batches_of_a_worst_case_run(graph, poll_every, mode):
    ref = engine(graph, "worst_case", trace=True, mode=mode)
    tiny = engine(graph, Envelope([200, 140]), trace=True, poll_every=poll_every, mode=mode)
    for _ in range(2):
        ref_stats, tiny_stats = ref.train_epoch(), tiny.train_epoch()
        assert ref_stats.overflows == 0 and ref_stats.rewound_batches == 0
    first = tiny.history[0]
    assert first.overflows >= 1 and first.rewound_batches >= 1
    assert first.replays == first.iterations + first.rewound_batches
    assert first.iterations == len(ref.batches(0))
    # Each overflow is noticed within two poll periods, not at the end of the epoch.
    assert first.rewound_batches <= first.overflows * 2 * poll_every
    # Same batch ids, same sampled node sets (hash), same order: nothing skipped, repeated or reordered.
    assert tiny.applied_trace() == ref.applied_trace()
    assert [t[:2] for t in ref.applied_trace()] == [
        (e, b) for e in range(2) for b in range(len(ref.batches(e)))
    ]
    # Executed but not applied: exactly the rewound batches, never a step.
    skipped = [t for t in trace_of(tiny) if not t["applied"]]
    assert len(skipped) == sum(h.rewound_batches for h in tiny.history)
    diff = max(float((p - q).abs().max()) for p, q in zip(params(tiny), params(ref)))
    assert diff <= 1e-5, diff
    assert tiny.envelope.sizes != [200, 140], "the envelope grew"
    assert tiny_stats.loss == pytest.approx(ref_stats.loss, rel=1e-5)


def test_skipped_steps_leave_state_bitwise_unchanged(graph):
    eng = engine(graph, Envelope([200, 140]))
    before = params(eng)
    moments = copy.deepcopy(eng.optimizer.state_dict())
    eng.overflowed.fill_(True)  # as if an earlier batch had overflowed
    eng.run_batch(0)
    assert all(torch.equal(p, q) for p, q in zip(params(eng), before))
    for k, s in eng.optimizer.state_dict()["state"].items():
        for name, value in s.items():
            assert torch.equal(value, moments["state"][k][name])


# ----------------------------------------------------------------------------- accuracy


def test_full_neighbour_inference_matches_a_dense_reference():
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=5, seed=2)
    torch.manual_seed(0)
    model = models.SAGE(5, 7, 3, 2, dropout=0.0).eval()
    from zg.inference import full_neighbour_logits

    got = full_neighbour_logits(model, g, budget=64)  # many small chunks
    src, dst = g.edges()
    h = g.x
    for i, layer in enumerate(model.layers):
        total = torch.zeros(g.num_nodes, h.shape[1]).index_add_(0, dst, h[src])
        mean = total / g.in_degrees().clamp(min=1).unsqueeze(1)
        h = layer.fc_self(h) + layer.fc_neigh(mean)
        h = torch.relu(h) if i == 0 else h
    assert torch.allclose(got, h, atol=1e-5)


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(batch_size=0), ValueError, "batch_size must be >= 1"),
        (dict(fanouts=[5, 0]), ValueError, r"fanouts\[1\]"),
        (dict(fanouts=[5, 5, 5]), ValueError, "2 layers but fanouts has 3"),
        (dict(envelope="tight"), ValueError, "envelope must be"),
        (dict(envelope=Envelope([50, 20])), ValueError, "smaller than its"),
        (dict(mode="magic"), ValueError, "mode must be one of"),
        (dict(mode="graph"), ValueError, "'static' is its twin"),
        (dict(mode="static", kernel="numba"), ValueError, "kernel must be"),
        (dict(hooks=dict(poll_every=2)), TypeError, "hooks must be a zg.StepHooks"),
        (dict(device="cuda:7"), ValueError, "CUDA is not available"),
        (dict(device="banana"), ValueError, "not a valid torch device"),
        (dict(optimizer="rmsprop"), ValueError, "optimizer must be"),
        (dict(optimizer="torch-adam"), ValueError, "optimizer must be"),
        (dict(optimizer=3), TypeError, "optimizer must be"),
        (dict(hooks=zg.StepHooks), TypeError, "hooks must be a zg.StepHooks"),
    ],
)
def test_bad_engine_arguments(graph, kwargs, error, match):
    if str(kwargs.get("device", "")).startswith("cuda") and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    if kwargs.get("mode") == "graph" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    base = dict(fanouts=[5, 5], batch_size=128, envelope="worst_case")
    base.update(kwargs)
    with pytest.raises(error, match=match):
        Engine(graph, models.SAGE(16, 8, 4, 2), **base)


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: zg.optim.adam(lr=-1.0), "lr must be"),
        (lambda: zg.optim.adam(lr=float("nan")), "lr must be finite"),
        (lambda: zg.optim.sgd(lr=float("inf")), "lr must be finite"),
        (lambda: zg.optim.adam(weight_decay=float("nan")), "weight_decay must be finite"),
        (lambda: zg.optim.OptimizerSpec("rmsprop"), "optimizer must be one of"),
    ],
)
def test_bad_optimizer_settings(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_both_optimizers_train_and_skip_on_overflow(graph, name):
    ref = engine(graph, "worst_case", optimizer=name, lr=0.05)
    tiny = engine(graph, Envelope([200, 140]), optimizer=name, lr=0.05)
    ref.train_epoch()
    stats = tiny.train_epoch()
    assert stats.overflows >= 1
    assert max(float((p - q).abs().max()) for p, q in zip(params(tiny), params(ref))) <= 1e-5


def test_learning_rate_lives_on_the_device(graph):
    a, b = engine(graph), engine(graph)
    a.set_lr(1e-9)
    a.train_epoch(max_batches=2)
    b.train_epoch(max_batches=2)
    assert a.optimizer._lr[0].item() == pytest.approx(1e-9)
    assert not all(torch.equal(p, q) for p, q in zip(params(a), params(b)))
    with pytest.raises(ValueError, match="lr must be finite"):
        a.set_lr(float("nan"))


def test_model_and_graph_must_fit(graph):
    with pytest.raises(ValueError, match="output classes"):
        Engine(graph, models.SAGE(16, 8, 3, 2), [5, 5], 64)
    with pytest.raises(ValueError, match="input features"):
        Engine(graph, models.SAGE(15, 8, 4, 2), [5, 5], 64)
    with pytest.raises(TypeError, match="zg model"):
        Engine(graph, torch.nn.Linear(16, 4), [5, 5], 64)


def test_batch_larger_than_the_training_set_sizes_buffers_by_the_training_set(graph):
    eng = Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 10**7, envelope="worst_case")
    assert eng.rows == graph.train_idx.numel()
    stats = eng.train_epoch()
    assert stats.iterations == 1 and eng.epoch_seeds.shape == (1, graph.train_idx.numel())


@pytest.mark.parametrize("mode", ["static", "eager", "dynamic"])
def test_run_batch_builds_the_epoch_order_once(graph, monkeypatch, mode):
    """run_batch in a loop (what profilers time) must not redo the epoch's permutation per call;
    a new epoch gets its own order."""
    eng = engine(graph, mode=mode)
    calls = []
    real = eng.batches
    monkeypatch.setattr(eng, "batches", lambda epoch: calls.append(epoch) or real(epoch))
    for b in range(4):
        eng.run_batch(b)
    assert calls == [0]
    eng.run_batch(0, epoch=1)
    assert calls == [0, 1]
    assert [t.tolist() for t in eng._load_epoch(1)] == [t.tolist() for t in real(1)]


def test_non_finite_loss_stops_training(graph):
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    torch.manual_seed(0)
    eng = Engine(g, models.SAGE(8, 16, 3, 2), [5, 5], 64)
    eng.g.x[eng.g.train_idx[:5]] = float("nan")
    with pytest.raises(FloatingPointError, match="non-finite features"):
        eng.train_epoch()


def test_bad_evaluate_arguments(graph):
    eng = engine(graph)
    with pytest.raises(ValueError, match="split must be"):
        eng.evaluate("dev")
    with pytest.raises(TypeError, match="sampled must be a bool"):
        eng.evaluate("val", sampled="yes")


def test_sampled_evaluation_is_the_kits_one_sampled_evaluation(graph):
    """evaluate(split, sampled=True) is zg.inference.sampled_logits in batch_size batches, keyed
    by the engine's seed: the same accuracy computed from that function directly, and a
    different one under another seed."""
    from zg.inference import sampled_logits
    from zg.rng import EVAL_EPOCH

    eng = engine(graph, mode="eager")
    eng.train_epoch(max_batches=3)
    got = eng.evaluate("val", sampled=True)
    eng.model.eval()
    logits = sampled_logits(
        eng.model,
        eng.g,
        eng.g.val_idx,
        eng.fanouts,
        batch_size=eng.batch_size,
        seed=eng.seed,
        epoch=EVAL_EPOCH,
    )
    eng.model.train()
    want = float((logits.argmax(1) == eng.g.y[eng.g.val_idx]).double().mean())
    assert got == pytest.approx(want, abs=1e-12)
    assert eng.evaluate("val", sampled=True) == got  # reproducible


def test_evaluate_refuses_non_finite_logits(graph):
    eng = engine(graph, mode="eager")
    with torch.no_grad():
        next(eng.model.parameters()).fill_(float("nan"))
    for sampled in (False, True):
        with pytest.raises(FloatingPointError, match="NaN or inf"):
            eng.evaluate("val", sampled=sampled)


def test_in_graph_mode_every_process_of_a_shared_guard_captures_again(graph, monkeypatch):
    """After an overflow under a shared (distributed) guard only the processes that overflowed
    grow; in mode "graph" the others capture again too, at the same batch, because a capture's
    warm-up runs the step's collectives, which every process must meet in the same order. The
    CUDA capture itself is run by the CUDA-marked tests; this checks the branch on the CPU."""
    from zg.step import OverflowGuard

    def built(distributed):
        torch.manual_seed(0)
        guard = OverflowGuard(2, "cpu", distributed=distributed)
        return Engine(
            graph, models.SAGE(16, 32, 4, 2), [5, 5], 128, Envelope([2400, 700]),
            mode="static", seed=1, hooks=StepHooks(guard=guard),
        )  # fmt: skip

    for distributed, mode, rebuilt in [
        (True, "graph", 1),
        (True, "static", 0),
        (False, "graph", 0),
    ]:
        eng = built(distributed)
        calls = []
        monkeypatch.setattr(eng, "rebuild", lambda calls=calls: calls.append(1))
        # The branch only: nothing is captured on the CPU.
        monkeypatch.setattr(Engine, "mode", property(lambda self, m=mode: m))
        envelope = eng.envelope
        eng._grow()  # this process did not overflow
        assert len(calls) == rebuilt, (distributed, mode)
        assert eng.envelope is envelope  # not grown: it did not overflow


# ----------------------------------------------------------------------------- CUDA


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_captured_step_matches_eager_on_cuda(graph):
    captured = engine(
        graph.to("cuda"), Envelope([2400, 700]), device="cuda", mode="graph", trace=True
    )
    eager = engine(
        graph.to("cuda"), Envelope([2400, 700]), device="cuda", mode="static", trace=True
    )
    for _ in range(2):
        captured.train_epoch()
        eager.train_epoch()
    assert captured.cuda_graph is not None and eager.cuda_graph is None
    assert captured.applied_trace() == eager.applied_trace()
    for p, q in zip(params(captured), params(eager)):
        assert torch.allclose(p, q, rtol=1e-4, atol=1e-6)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["graph", "static", "eager"])
def test_tiny_envelope_matches_the_worst_case_on_cuda(graph, mode):
    """The one overflow policy on a GPU: float atomics make this a tolerance, not bitwise."""
    g = graph.to("cuda")
    ref = engine(g, "worst_case", device="cuda", mode=mode, trace=True)
    tiny = engine(g, Envelope([200, 140]), device="cuda", mode=mode, trace=True)
    for _ in range(2):
        ref.train_epoch()
        tiny.train_epoch()
    assert sum(h.overflows for h in tiny.history) >= 1
    assert [t[:2] for t in tiny.applied_trace()] == [t[:2] for t in ref.applied_trace()]
    for p, q in zip(params(tiny), params(ref)):
        assert torch.allclose(p, q, rtol=1e-4, atol=1e-5)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_envelope_step_makes_no_cuda_sync_on_cuda(graph, mode):
    """The property itself, as CUDA sees it: torch's sync-debug mode reports no host wait in a
    steady envelope iteration, eager or captured (scalars are written by fill kernels, never
    copied from pageable host memory). The dynamic pipeline, for contrast, must wait."""
    g = graph.to("cuda")
    eng = engine(g, Envelope([2400, 700]), device="cuda", mode=mode, audit=3)
    stats = eng.train_epoch()
    assert stats.cuda_sync_warnings == 0 and stats.host_syncs == 0
    dynamic = Engine(
        g, models.SAGE(g.feat_dim, 16, g.num_classes, 2), [5, 5], 32, device="cuda", mode="dynamic"
    )
    dynamic.observers = [AuditSyncs(3)]
    assert dynamic.train_epoch().cuda_sync_warnings > 0


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs")
def test_device_index_is_respected_on_a_second_gpu(graph):
    eng = engine(graph, "worst_case", device="cuda:1")
    eng.train_epoch(max_batches=2)
    assert all(p.device == torch.device("cuda", 1) for p in eng.model.parameters())


def test_device_index_beyond_the_count_is_an_error(graph):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA to have a device count")
    with pytest.raises(ValueError, match="only"):
        engine(graph, device=f"cuda:{torch.cuda.device_count()}")


@pytest.mark.slow
def test_csbm_graph_adds_accuracy_above_the_feature_floor():
    """With homophily 0.9 the graph must lift SAGE well above what the features alone give."""
    from zg.baselines.features import feature_only_accuracy

    g = zg.datasets.csbm(
        num_nodes=3000, avg_degree=10, num_classes=5, feat_dim=16, homophily=0.9, seed=3
    )
    torch.manual_seed(0)
    eng = Engine(
        g,
        models.SAGE(16, 32, 5, 2, dropout=0.3),
        [10, 10],
        256,
        seed=0,
        optimizer=zg.optim.adam(lr=5e-3),
    )
    eng.observers = []
    eng.fit(8, progress=False)
    assert eng.evaluate("test") > feature_only_accuracy(g) + 0.1


# ----------------------------------------------------------------------------- the API's shape


def test_the_constructor_is_short_and_takes_the_rest_by_keyword(graph):
    import inspect

    # "step" is hooks' old name, kept one release with a DeprecationWarning.
    params_ = [
        p for p in inspect.signature(Engine.__init__).parameters if p not in ("self", "step")
    ]
    assert len(params_) <= 13, params_
    with pytest.raises(TypeError, match="positional"):
        Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 128, "worst_case", "adam")
    for old in ("capture", "pipeline", "lr", "audit_iterations", "poll_every"):
        with pytest.raises(TypeError, match=old):
            Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 128, **{old: 1})


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(poll_every=0), "StepHooks.poll_every must be >= 1"),
        (dict(grow_factor=float("nan")), "StepHooks.grow_factor"),
        (dict(grow_factor=1.0), "StepHooks.grow_factor"),
    ],
)
def test_bad_step_settings(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StepHooks(**kwargs)
    with pytest.raises(TypeError, match="StepHooks.loss must be callable"):
        StepHooks(loss="cross-entropy")


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
def test_every_mode_trains_the_same_batches_in_the_same_order(graph, mode):
    """One loop for every mode: the same seed order, the same sampled node sets (dynamic compacts
    in another order, so only the node *sets* agree, which is what the hash sees)."""
    ref = engine(graph, "worst_case", trace=True, mode="static")
    other = engine(graph, "worst_case", trace=True, mode=mode)
    ref.train_epoch()
    stats = other.train_epoch()
    assert other.applied_trace() == ref.applied_trace()
    assert stats.iterations == len(ref.batches(0))
    if mode == "dynamic":
        assert other.envelope is None and stats.envelope_sizes == []


@pytest.mark.parametrize("mode", ["static", "eager", "dynamic"])
def test_the_model_is_at_most_four_calls_below_train_epoch(graph, mode):
    """The iteration is visible: from Engine.train_epoch to the model's forward at most 4 calls
    (train_epoch -> _train_batch -> [_static_step ->] train_step -> model)."""
    import inspect

    eng = engine(graph, "worst_case", mode=mode)
    chains = []
    real_forward = eng.model.forward

    def forward(*args, **kwargs):
        frames = [f.function for f in inspect.stack(0)[1:]]
        chains.append(frames[: frames.index("train_epoch")])  # the frames between the two
        return real_forward(*args, **kwargs)

    eng.model.forward = forward
    eng.train_epoch(max_batches=2)
    assert len(chains) == 2, "forward ran once per batch"
    for chain in chains:
        ours = [f for f in chain if f not in ("_call_impl", "_wrapped_call_impl")]  # nn.Module's
        expected = (
            ["train_step", "_static_step", "_train_batch"]
            if mode == "static"
            else ["train_step", "_train_batch"]
        )
        assert ours == expected, chain
        assert len(ours) + 1 <= 4  # + the call of forward itself


@pytest.mark.parametrize(
    "nodes, error, match",
    [
        ([0.5, 1.7, 2.2], TypeError, "StepHooks.nodes must hold integer node ids"),
        (torch.zeros(3000, dtype=torch.bool), TypeError, "a boolean tensor"),
        ([3, 4, 3], ValueError, "repeated"),
        ([0, 3000], ValueError, "3000"),
        ([], ValueError, "StepHooks.nodes is empty"),
    ],
)
def test_training_nodes_get_the_kits_own_id_checks_in_every_mode(graph, nodes, error, match):
    """Floats were truncated, a mask trained on nodes {0, 1}, duplicates passed in one mode:
    now every mode refuses them, naming StepHooks.nodes, before any work."""
    for mode in ("dynamic", "eager", "static"):
        with pytest.raises(error, match=match):
            Engine(
                graph,
                models.SAGE(16, 8, 4, 2),
                [5, 5],
                128,
                "worst_case",
                mode=mode,
                hooks=StepHooks(nodes=nodes),
            )


def test_training_on_nodes_without_labels_is_refused(graph):
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    unlabelled = g.train_idx[:10]
    g.y[unlabelled] = -1
    with pytest.raises(ValueError, match="none of the 10 training nodes has a label"):
        Engine(g, models.SAGE(8, 8, 3, 2), [5, 5], 32, hooks=StepHooks(nodes=unlabelled))
    Engine(
        g, models.SAGE(8, 8, 3, 2), [5, 5], 32, hooks=StepHooks(nodes=g.train_idx[:20])
    )  # some labelled: fine


def test_tf32_is_a_process_setting_the_engine_records_and_never_changes(graph):
    """TF32 is torch's process setting: the engine records the value it was built under
    (settings.allow_tf32), the step runs under whatever the process set (seen from the model's
    forward), and training leaves the flags as they were."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (matmul.allow_tf32, cudnn.allow_tf32)
    seen = {}
    try:
        for allow in (True, False):
            matmul.allow_tf32 = cudnn.allow_tf32 = allow
            for mode in ("static", "dynamic"):
                eng = zg.Engine(
                    graph,
                    models.build("sage", graph.feat_dim, 16, graph.num_classes, 2),
                    [4, 4],
                    64,
                    mode=mode,
                )

                def look(*_, key=(allow, mode)):
                    seen.setdefault(key, (matmul.allow_tf32, cudnn.allow_tf32))  # returns None

                hook = eng.model.register_forward_hook(look)
                eng.train_epoch(max_batches=1)
                hook.remove()
                assert eng.settings.allow_tf32 is allow
                assert (matmul.allow_tf32, cudnn.allow_tf32) == (allow, allow)
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = before
    assert seen == {(a, m): (a, a) for a in (True, False) for m in ("static", "dynamic")}
    assert "allow_tf32" not in {f.name for f in dataclasses.fields(StepHooks)}


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
def test_the_default_runs_the_torch_code_and_every_record_names_the_kernel_that_ran(graph, mode):
    """What runs is what is read: by default the torch sampler and aggregation run (an edit of
    that code is what trains); settings, repr and every EpochStats name the kernel that ran,
    never the choice "auto"."""
    eng = Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 128, mode=mode)
    assert eng.settings.kernel == eng.kernel == "torch"
    assert all(layer.kernel == "torch" for layer in eng.model.layers)
    if mode != "dynamic":
        assert eng.sampler.kernel == "torch"
    assert "kernel='torch'" in repr(eng)
    assert eng.train_epoch(max_batches=2).kernel == "torch"
    auto = Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 128, mode=mode, kernel="auto")
    ran = "fused" if zg.kernels.available() else "torch"
    assert auto.settings.kernel == ran and f"kernel={ran!r}" in repr(auto)
    assert all(layer.kernel == ran for layer in auto.model.layers)
    assert auto.train_epoch(max_batches=2).kernel == ran


def test_an_edit_of_the_torch_sampler_is_what_trains(graph, monkeypatch):
    """A student who changes the torch code a notebook shows sees the change: the default
    engine calls the torch sampling and aggregation functions."""
    from zg.kernels import aggregate

    calls = {"sample": 0, "aggregate": 0}
    real_sample = zg.sampling.sample_neighbors
    real_sum = aggregate.gather_sum

    def sample(*args, **kwargs):
        calls["sample"] += 1
        return real_sample(*args, **kwargs)

    def neighbour_sum(*args, **kwargs):
        calls["aggregate"] += 1
        return real_sum(*args, **kwargs)

    monkeypatch.setattr(zg.sampling, "sample_neighbors", sample)
    monkeypatch.setattr(aggregate, "gather_sum", neighbour_sum)
    for mode in ("eager", "static"):
        calls.update(sample=0, aggregate=0)
        Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 128, mode=mode).train_epoch(max_batches=1)
        assert calls["sample"] >= 2 and calls["aggregate"] >= 2, (mode, calls)  # per hop, layer


@pytest.mark.parametrize(
    "bad, error, match",
    [
        (torch.tensor([1.0, 2.7]), TypeError, r"StepHooks\.batches\(0\)\[1\] must hold integer"),
        (torch.zeros(3000, dtype=torch.bool), TypeError, r"StepHooks\.batches\(0\)\[1\].*boolean"),
        (torch.tensor([5, 6, 5]), ValueError, r"StepHooks\.batches\(0\)\[1\] holds repeated"),
        (torch.tensor([0, 3000]), ValueError, r"StepHooks\.batches\(0\)\[1\] holds node id 3000"),
        (torch.arange(200), ValueError, r"StepHooks\.batches\(0\)\[1\] has 200 nodes"),
        (torch.tensor([[1, 2]]), ValueError, r"StepHooks\.batches\(0\)\[1\] must be 1-dim"),
    ],
)
def test_every_batch_gets_the_checks_nodes_gets_in_every_mode(graph, bad, error, match):
    """Floats were truncated, a mask read as ids, duplicates trained in one mode and refused in
    the others: each batch of StepHooks.batches is now checked as nodes= is, named by its
    index, the same in every mode, before any step runs."""
    good = graph.train_idx[:128]
    for mode in ("dynamic", "eager", "static"):
        eng = Engine(
            graph,
            models.SAGE(16, 8, 4, 2),
            [5, 5],
            128,
            "worst_case",
            mode=mode,
            hooks=StepHooks(batches=lambda epoch, bad=bad: [good, bad]),
        )
        before = params(eng)
        with pytest.raises(error, match=match):
            eng.train_epoch()
        assert all(torch.equal(p, q) for p, q in zip(params(eng), before)), mode


@pytest.mark.parametrize("returned", [None, 5, torch.arange(4), []])
def test_a_batches_hook_that_returns_no_list_is_named(graph, returned):
    eng = Engine(
        graph,
        models.SAGE(16, 8, 4, 2),
        [5, 5],
        128,
        "worst_case",
        mode="eager",
        hooks=StepHooks(batches=lambda epoch: returned),
    )
    with pytest.raises((TypeError, ValueError), match=r"StepHooks\.batches\(0\)"):
        eng.train_epoch()


@pytest.mark.parametrize("bad", [-5, 4, 7])
@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
def test_labels_changed_in_place_after_the_build_are_refused(bad, mode):
    """g.y[train] = -5 trained at loss 0.0 without a word; g.y[train] = 7 raised a raw
    IndexError (on CUDA a device-side assert). The step now clamps its targets (nothing reads
    out of range) and every epoch checks the training nodes' labels on the device, read with the
    epoch's loss: a ValueError naming g.y."""
    g = zg.datasets.csbm(num_nodes=600, avg_degree=6, num_classes=4, feat_dim=8, seed=0)
    eng = Engine(g, models.SAGE(8, 8, 4, 2), [4, 4], 64, mode=mode)
    eng.train_epoch()  # fine as built
    g.y[g.train_idx[:5]] = bad  # shared with the engine: an in-place change
    with pytest.raises(ValueError, match=r"g\.y holds labels outside \[-1, 4\)"):
        eng.train_epoch()


def test_the_label_check_adds_no_host_sync_to_a_step(graph):
    eng = engine(graph, mode="static", kernel="torch", audit=4)
    assert eng.train_epoch(max_batches=6).host_syncs == 0


HOOK_RESULTS = {
    "forward returns None": (
        dict(forward=lambda b, x: None),
        r"StepHooks.forward\(blocks, x\) returned NoneType",
    ),
    "forward drops rows": (
        dict(forward=lambda b, x: torch.zeros(3, 3, requires_grad=True)),
        r"StepHooks.forward\(blocks, x\) returned a torch.float32 tensor of shape \(3, 3\)",
    ),
    "forward too few classes": (
        dict(forward=lambda b, x: torch.zeros(b[-1].num_dst_rows, 2, requires_grad=True)),
        "classes >= 4",
    ),
    "loss returns None": (
        dict(loss=lambda l, y, mb: None),
        r"StepHooks.loss\(logits, labels, mb\) returned NoneType",
    ),
    "loss per seed": (dict(loss=lambda l, y, mb: l.sum(1)), "expected a 0-D float tensor"),
    "loss a float": (dict(loss=lambda l, y, mb: 1.0), "returned float 1.0"),
    "loss detached": (
        dict(loss=lambda l, y, mb: torch.tensor(1.0)),
        "not requiring grad .*; expected a 0-D float tensor on cpu that requires grad",
    ),
    "features None": (
        dict(features=lambda n: None),
        r"StepHooks.features\(input_nodes\) returned NoneType",
    ),
    "features too few rows": (
        dict(features=lambda n: torch.zeros(3, 16)),
        r"expected a 2-D float tensor of shape \[rows=\d+, F=16\] on cpu",
    ),
    "features too narrow": (dict(features=lambda n: torch.zeros(len(n), 5)), r"shape \(\d+, 5\)"),
    "features integer": (
        dict(features=lambda n: torch.zeros(len(n), 16, dtype=torch.int64)),
        "torch.int64 tensor",
    ),
}


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
@pytest.mark.parametrize("case", sorted(HOOK_RESULTS))
def test_a_hook_that_returns_the_wrong_thing_is_named(graph, mode, case):
    """A StepHooks callback whose result has the wrong type, shape or dtype is refused with a
    TypeError naming the hook, what it returned and what it must return (a raw torch error
    deeper down, or a step trained on it, before); the parameters are untouched."""
    hooks, match = HOOK_RESULTS[case]
    eng = Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 32, mode=mode, hooks=StepHooks(**hooks))
    before = params(eng)
    with pytest.raises(TypeError, match=match):
        eng.train_epoch()
    assert all(torch.equal(a, b) for a, b in zip(before, params(eng)))


def test_hooks_that_return_the_right_thing_train_as_the_defaults_do(graph):
    """The checks change nothing for a correct hook: the same losses, bit for bit."""
    from zg.step import masked_cross_entropy

    plain = Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 32, mode="static")
    hooked = Engine(
        graph,
        models.SAGE(16, 8, 4, 2),
        [5, 5],
        32,
        mode="static",
        hooks=StepHooks(
            features=lambda n: graph.x.index_select(0, n),
            forward=lambda b, x: hooked.model(b, x),
            loss=lambda l, y, mb: masked_cross_entropy(l, y, mb.valid),
        ),
    )
    hooked.model.load_state_dict(plain.model.state_dict())
    assert plain.train_epoch().loss == hooked.train_epoch().loss


@pytest.mark.parametrize("hops, device", [(5, "cpu"), (1, "cpu")])
def test_a_guard_built_for_another_engine_is_refused(graph, hops, device):
    from zg.step import OverflowGuard

    guard = OverflowGuard(hops, torch.device(device))
    with pytest.raises(
        ValueError, match=r"StepHooks.guard was built for \d hop\(s\).*OverflowGuard\(2, 'cpu'\)"
    ):
        Engine(graph, models.SAGE(16, 8, 4, 2), [5, 5], 32, hooks=StepHooks(guard=guard))


def test_an_observer_that_raises_at_epoch_end_loses_no_record(graph):
    """Ctrl-C while an observer closes the epoch (a logger, a progress bar): the epoch's record
    is in the history all the same, and its checks still ran."""
    from zg.observe import Observer

    class Closing(Observer):
        def epoch_end(self, engine, stats):
            raise KeyboardInterrupt

    eng = engine(graph, mode="eager")
    with pytest.raises(KeyboardInterrupt):
        eng.train_epoch(observers=[Closing()])
    assert (eng.epoch, eng.batch) == (1, 0)
    assert len(eng.history) == 1 and not eng.history[0].interrupted
    assert eng.history[0].iterations == len(eng.batches(0))


@pytest.mark.parametrize("observers", [[1], object(), "progress", [None]])
def test_observers_that_are_not_observers_are_refused_by_name(graph, observers):
    eng = engine(graph, mode="eager")
    with pytest.raises(TypeError, match="observers"):
        eng.train_epoch(observers=observers)
    assert (eng.epoch, eng.batch) == (0, 0)


def test_a_model_of_another_float_type_than_the_features_is_refused(graph):
    model = models.SAGE(16, 32, 4, 2).double()
    with pytest.raises(TypeError, match="float64.*g.x is torch.float32"):
        Engine(graph, model, [5, 5], 128)
