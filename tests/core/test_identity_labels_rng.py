"""Identity checked where it is read (issue 46, item 4).

* A checkpoint names the run that wrote it: every field that defines the trajectory (settings,
  training nodes, model options, optimizer options, the step's hooks) is compared at load and a
  difference is refused naming the field; a crafted value anywhere is a ValueError; a matching
  checkpoint loads (also across kernels, modes and observing callbacks); the learning rate is
  state, restored by a load.
* Labels are checked wherever they are read: evaluation refuses labels outside
  ``[-1, num_classes)`` as training does and skips -1 as the loss does; a str names one split.
* Split masks and labels from PyG and DGL objects are checked by name.
* No global generator is changed by a public call of the kit.
"""

import math
import random

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import zg
from zg import checkpoint, inference, models
from zg.engine import Engine, StepHooks
from zg.optim import DeviceAdam
from zg.step import masked_cross_entropy

FEAT, CLASSES = 8, 3


@pytest.fixture(scope="module")
def graph():
    return zg.datasets.csbm(num_nodes=600, avg_degree=6, num_classes=CLASSES, feat_dim=FEAT, seed=0)


def build(
    g, *, model=None, hooks=None, mode="static", kernel="torch", optimizer=None, reseed=True, **kw
):
    if reseed:
        torch.manual_seed(0)
    model = models.SAGE(FEAT, 16, CLASSES, 2, dropout=0.5) if model is None else model
    if optimizer is None:
        optimizer = zg.optim.adam(lr=3e-3)
    elif callable(optimizer):
        optimizer = optimizer(model)
    kw.setdefault("seed", 1)
    eng = Engine(
        g, model, [4, 4], 64,
        "worst_case" if mode in ("eager", "static") and "sampler" not in kw else None,
        mode=mode, kernel=kernel, optimizer=optimizer, hooks=hooks, **kw,
    )  # fmt: skip
    eng.observers = []
    return eng


def params(eng):
    return [p.detach().clone() for p in eng.model.parameters()]


def unchanged(eng, before):
    return all(torch.equal(p, q) for p, q in zip(eng.model.parameters(), before)) and (
        eng.epoch,
        eng.batch,
    ) == (0, 0)


def my_loss(logits, labels, mb):
    return masked_cross_entropy(logits, labels, mb.valid)


def other_split(g):
    """The graph with another training split (same structure, features, labels)."""
    train = g.train_idx[: g.train_idx.numel() // 2]
    return zg.Graph(
        g.indptr, g.indices, x=g.x, y=g.y, train_idx=train, val_idx=g.val_idx,
        test_idx=g.test_idx, num_classes=g.num_classes,
    )  # fmt: skip


# ----------------------------------------------------------------------------- identity

# Each field that defines the trajectory: (how the other engine differs, what the refusal names).
MISMATCHES = {
    "training nodes (StepHooks.nodes)": (
        lambda g: dict(hooks=StepHooks(nodes=g.train_idx[:-7])),
        "training_nodes",
    ),
    "training nodes (g.train_idx)": (lambda g: dict(g=other_split(g)), "splits"),
    "model dropout": (
        lambda g: dict(model=models.SAGE(FEAT, 16, CLASSES, 2, dropout=0.2)),
        r"dropout\.p",
    ),
    "model class": (lambda g: dict(model=models.GCN(FEAT, 16, CLASSES, 2)), "model"),
    "layer widths": (lambda g: dict(model=models.SAGE(FEAT, 8, CLASSES, 2)), "num_parameters"),
    "GAT heads": (
        lambda g: dict(model=models.GAT(FEAT, 8, CLASSES, 2, heads=2)),
        "model|num_parameters",
    ),
    "optimizer betas": (
        lambda g: dict(optimizer=lambda m: DeviceAdam(m.parameters(), lr=3e-3, betas=(0.8, 0.9))),
        "betas",
    ),
    "optimizer kind": (lambda g: dict(optimizer=zg.optim.sgd(lr=3e-3)), "optimizer"),
    "weight decay": (
        lambda g: dict(optimizer=zg.optim.adam(lr=3e-3, weight_decay=0.1)),
        "weight_decay",
    ),
    "loss hook": (lambda g: dict(hooks=StepHooks(loss=my_loss)), r"hooks.*loss"),
    "seed": (lambda g: dict(seed=2), "seed"),
    "replace (the sampler's)": (
        lambda g: dict(sampler=zg.EnvelopeSampler(g, [4, 4], 64, replace=True, seed=1)),
        "replace",
    ),
}


@pytest.fixture(scope="module")
def saved(graph, tmp_path_factory):
    eng = build(graph)
    eng.train_epoch(max_batches=2)
    return eng.save(tmp_path_factory.mktemp("identity") / "run.pt")


@pytest.mark.parametrize("field", list(MISMATCHES))
def test_a_checkpoint_of_another_run_is_refused_naming_the_field(graph, saved, field, tmp_path):
    """Both ways: the other run's engine refuses this run's checkpoint, and this run's engine
    refuses the other run's."""
    change, named = MISMATCHES[field]
    options = change(graph)
    g = options.pop("g", graph)
    other = build(g, **options)
    before = params(other)
    with pytest.raises(ValueError, match=named):
        other.load(saved)
    assert unchanged(other, before)
    other.train_epoch(max_batches=1)
    theirs = other.save(tmp_path / "other.pt")
    mine = build(graph)
    before = params(mine)
    with pytest.raises(ValueError, match=named):
        mine.load(theirs)
    assert unchanged(mine, before)


def test_what_does_not_define_the_trajectory_is_not_in_the_key(graph, tmp_path):
    """Mode, kernel, observing callbacks, poll_every and grow_factor: a checkpoint resumes
    across them, bit for bit (modes "eager" and "static" run the same envelope step)."""
    seen = []
    first = build(
        graph,
        mode="eager",
        kernel="auto",
        hooks=StepHooks(after=lambda e, b: seen.append(b), poll_every=3, grow_factor=2.0),
    )
    first.train_epoch(max_batches=3)
    path = first.save(tmp_path / "eager.pt")
    straight = build(graph, mode="eager", kernel="auto")
    straight.train_epoch()
    straight.train_epoch()
    resumed = build(graph, mode="static")  # torch kernels, no callback
    resumed.load(path)
    assert (resumed.epoch, resumed.batch) == (0, 3) and seen == [0, 1, 2]
    while resumed.epoch < 2:
        resumed.train_epoch()
    for a, b in zip(params(resumed), params(straight)):
        assert torch.allclose(a, b, atol=1e-6)  # fused vs torch kernels: same sums, any order


def test_the_identity_rule_is_stated_and_plain(graph):
    eng = build(graph, hooks=StepHooks(loss=my_loss, after=lambda e, b: None))
    ident = checkpoint.identity(eng)
    assert ident["hooks"] == {
        "batches": None,
        "forward": None,
        "loss": f"{__name__}.my_loss",
        "features": None,
        "reduce": None,
    }
    assert ident["training_nodes"]["count"] == graph.train_idx.numel()
    opts = ident["model"]
    assert opts["class"] == "zg.models.SAGE" and opts["dropout.p"] == 0.5
    assert opts["layers.0.fc_self.out_features"] == 16 and "kernel" not in opts
    # the identity does not change with training or the kernel
    before = checkpoint.model_options(eng.model)
    eng.train_epoch(max_batches=2)
    eng.model.set_kernel("auto")
    assert checkpoint.model_options(eng.model) == before


# ----------------------------------------------------------------------------- the learning rate


def test_the_checkpoints_learning_rate_wins_and_settings_say_so(graph, tmp_path):
    """set_lr then save: a fresh engine (built with another lr) resumes with the saved lr and
    the run continues exactly; set_lr then load: the checkpoint's lr replaces it."""
    a = build(graph)
    a.train_epoch(max_batches=2)
    a.set_lr(0.01)
    path = a.save(tmp_path / "scheduled.pt")
    b = build(graph, optimizer=zg.optim.adam(lr=0.5))
    b.set_lr(0.2)
    b.load(path)
    assert b.settings.lr == 0.01 == b.optimizer.param_groups[0]["lr"]
    assert float(b.optimizer._lr[0]) == pytest.approx(0.01)
    a.train_epoch()
    b.train_epoch()
    assert all(torch.equal(p, q) for p, q in zip(params(a), params(b)))
    b.set_lr(0.02)  # after the load: the caller's choice
    assert b.settings.lr == 0.02 == b.optimizer.param_groups[0]["lr"]


# ----------------------------------------------------------------------------- crafted files

PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True)
    | st.text(max_size=4)
    | st.builds(torch.zeros, st.integers(0, 3)),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = ["settings", "graph", "model", "optimizer", "envelope", "identity", "epoch", "batch"]


@given(field=st.sampled_from(FIELDS), value=PLAIN)
@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_crafted_value_in_any_field_is_a_value_error(graph, saved, tmp_path, field, value):
    """Any value the loader accepts (plain containers, numbers, strings, tensors) in any field:
    a ValueError, never another class, and the engine untouched. (A value equal to the one
    saved is not crafted: the saved epoch is a plain 0, which hypothesis also draws; nor is a
    whole-number position, epoch or batch >= 0: it is another checkpoint's, which
    test_interruptions.py resumes bit for bit.)"""
    state = torch.load(saved, weights_only=True)
    original = state[field]
    assume(
        not (
            type(value) is type(original)
            and isinstance(value, (int, float, str))
            and value == original
        )
    )
    assume(not (field in ("epoch", "batch") and type(value) is int and value >= 0))
    state[field] = value
    path = tmp_path / "crafted.pt"
    torch.save(state, path)
    target = build(graph)
    before = params(target)
    with pytest.raises(ValueError):
        target.load(path)
    assert unchanged(target, before)


@pytest.mark.parametrize(
    "sizes",
    [["a", 64], [64.5, 64], [10**30, 10**30], [-1, 64], [64], {"0": 64}, [True, 64], [None, 64]],
)
def test_a_crafted_envelope_is_refused_naming_it(graph, saved, tmp_path, sizes):
    state = torch.load(saved, weights_only=True)
    state["envelope"] = sizes
    torch.save(state, tmp_path / "envelope.pt")
    with pytest.raises(ValueError, match="envelope"):
        build(graph).load(tmp_path / "envelope.pt")


@pytest.mark.parametrize("lr", [float("nan"), float("inf"), -1.0, 0.0, "0.1", None, True])
def test_a_crafted_learning_rate_is_refused_naming_it(graph, saved, tmp_path, lr):
    state = torch.load(saved, weights_only=True)
    state["optimizer"]["param_groups"][0]["lr"] = lr
    torch.save(state, tmp_path / "lr.pt")
    with pytest.raises(ValueError, match="lr"):
        build(graph).load(tmp_path / "lr.pt")


# ----------------------------------------------------------------------------- labels


@pytest.fixture(scope="module")
def trained(graph):
    eng = build(graph)
    eng.train_epoch()
    return eng


def _accuracy_of_labelled(logits, labels):
    known = labels >= 0
    if not bool(known.any()):
        return float("nan")
    return float((logits[known].argmax(1) == labels[known]).double().mean())


@given(
    edits=st.lists(
        st.tuples(st.integers(0, 599), st.integers(-3, CLASSES + 2)), min_size=1, max_size=6
    ),
    split=st.sampled_from(["train", "val", "test"]),
)
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_evaluation_reads_labels_as_training_does(graph, trained, edits, split):
    """Labels changed in place: outside [-1, C) in the split is refused naming the split (as
    train_epoch refuses it); -1 is skipped (as the loss skips it); the rest is counted."""
    y = graph.y
    kept = y.clone()
    try:
        for node, label in edits:
            y[node] = label
        labels = y[getattr(graph, f"{split}_idx")]
        bad = bool(((labels < -1) | (labels >= CLASSES)).any())
        if bad:
            with pytest.raises(
                ValueError, match=rf"evaluate\('{split}'\).*outside \[-1, {CLASSES}\)"
            ):
                trained.evaluate(split)
            return
        got = trained.evaluate(split)
        logits = inference.full_neighbour_logits(trained.model.eval(), graph)
        want = _accuracy_of_labelled(logits[getattr(graph, f"{split}_idx")], labels)
        assert got == want or (math.isnan(got) and math.isnan(want))
    finally:
        y.copy_(kept)
        trained.model.train()


def test_training_refuses_the_labels_evaluation_refuses(graph):
    eng = build(graph)
    y = graph.y
    kept = y.clone()
    try:
        y[graph.train_idx[0]] = CLASSES
        with pytest.raises(ValueError, match=rf"outside \[-1, {CLASSES}\)"):
            eng.train_epoch(max_batches=1)
    finally:
        y.copy_(kept)


def test_valid_labels_give_the_accuracy_of_every_node(graph, trained):
    """On a graph as built the numbers are those of the plain formula, bit for bit."""
    trained.model.eval()
    logits = inference.full_neighbour_logits(trained.model, graph)
    for split in ("train", "val", "test"):
        idx = getattr(graph, f"{split}_idx")
        want = float((logits[idx].argmax(1) == graph.y[idx]).double().mean())
        assert trained.evaluate(split) == want
    sampled = trained.evaluate("val", sampled=True)
    assert 0.0 <= sampled <= 1.0


@pytest.mark.parametrize("split", ["val", "test", "train"])
def test_a_str_is_one_split(graph, trained, split):
    got = inference.evaluate(trained.model, graph, split)
    assert list(got) == [split]
    assert got == inference.evaluate(trained.model, graph, [split])


@pytest.mark.parametrize(
    "splits, error",
    [("validation", ValueError), (["val", "v"], ValueError), ([1], ValueError), (7, TypeError)],
)
def test_a_bad_splits_argument_is_refused_naming_it(graph, trained, splits, error):
    with pytest.raises(error, match="split"):
        inference.evaluate(trained.model, graph, splits)


# ----------------------------------------------------------------------------- PyG and DGL


def _pyg_data(n=6, **extra):
    pyg = pytest.importorskip("torch_geometric")
    data = pyg.data.Data(edge_index=torch.tensor([[0, 1, 2], [1, 2, 3]]), num_nodes=n)
    for k, v in extra.items():
        setattr(data, k, v)
    return data


MASKS = {
    "shorter": torch.tensor([True, False, True]),
    "longer": torch.ones(9, dtype=torch.bool),
    "2-D": torch.ones(6, 2, dtype=torch.bool),
    "values 0/2": torch.tensor([0, 2, 0, 0, 1, 0]),
    "floats": torch.tensor([0.0, 1.0, 0.0, 0.0, 1.0, 0.0]),
}


@pytest.mark.parametrize("split", ["train", "val", "test"])
@pytest.mark.parametrize("kind", list(MASKS))
def test_pyg_split_masks_are_checked_by_name(split, kind):
    data = _pyg_data(**{f"{split}_mask": MASKS[kind]})
    with pytest.raises(ValueError, match=f"data.{split}_mask"):
        zg.Graph.from_pyg(data)


def test_pyg_masks_as_zero_one_integers_are_read():
    mask = torch.tensor([1, 0, 1, 0, 0, 0], dtype=torch.uint8)
    g = zg.Graph.from_pyg(_pyg_data(train_mask=mask, y=torch.tensor([0, 1, 0, 1, 0, 1])))
    assert g.train_idx.tolist() == [0, 2]


@pytest.mark.parametrize("kind", ["2-D", "values 0/2", "floats"])
def test_dgl_split_masks_are_checked_by_name(dgl, kind):
    graph = dgl.graph((torch.tensor([0, 1, 2]), torch.tensor([1, 2, 3])), num_nodes=6)
    graph.ndata["val_mask"] = MASKS[kind]
    with pytest.raises(ValueError, match=r"ndata\['val_mask'\]"):
        zg.Graph.from_dgl(graph)


@pytest.mark.parametrize("bad", [float("inf"), -float("inf"), 1e30])
def test_pyg_labels_that_are_no_class_id_are_named(bad):
    y = torch.tensor([0.0, 1.0, bad, 1.0, float("nan"), 0.0])
    with pytest.raises(ValueError, match=r"data\.y holds .* for node 2"):
        zg.Graph.from_pyg(_pyg_data(y=y))


# ----------------------------------------------------------------------------- global generators


def _global_state():
    return torch.get_rng_state(), np.random.get_state(), random.getstate()


def _same(a, b):
    return (
        torch.equal(a[0], b[0])
        and a[1][0] == b[1][0]
        and np.array_equal(a[1][1], b[1][1])
        and a[1][2:] == b[1][2:]
        and a[2] == b[2]
    )


def _dgl_model():
    from zg.baselines.dgl import DGLModel

    return DGLModel("sage", FEAT, 16, CLASSES, 2)


MODES = ["static", "eager", "dynamic", "dgl"]


SHARED: dict = {}  # built before any state is taken: a model, a folder


def _engine(g, mode):
    model = _dgl_model() if mode == "dgl" else models.SAGE(FEAT, 16, CLASSES, 2)
    return build(g, mode=mode, model=model, reseed=False)


CALLS = {
    "build": lambda g, e: build(g, model=SHARED["model"], reseed=False),
    "train_epoch": lambda g, e: e.train_epoch(max_batches=3),
    "run_batch": lambda g, e: e.run_batch(1),
    "sample": lambda g, e: e.sample(0),
    "fit": lambda g, e: e.fit(1, progress=False),
    "evaluate": lambda g, e: e.evaluate("val") if e.mode != "dgl" else None,
    "evaluate sampled": lambda g, e: e.evaluate("val", sampled=True) if e.mode != "dgl" else None,
    "save and load": lambda g, e: e.load(e.save(SHARED["tmp"] / "state.pt")),
    "inference.evaluate": lambda g, e: inference.evaluate(SHARED["model"], g),
    "DynamicSampler": lambda g, e: zg.DynamicSampler(g, [3, 3], seed=4).sample(g.train_idx[:9]),
    "EnvelopeSampler": lambda g, e: zg.EnvelopeSampler(g, [3, 3], 16).sample(g.train_idx[:16]),
    "Envelope.profile": lambda g, e: zg.Envelope.profile(g, [3, 3], 32, num_batches=4, seed=5),
    "csbm": lambda g, e: zg.datasets.csbm(
        num_nodes=200, avg_degree=4, num_classes=2, feat_dim=4, seed=3
    ),
    "rmat": lambda g, e: zg.datasets.rmat(scale=7, edge_factor=4, seed=3),
    "grappa.partition random": lambda g, e: zg.grappa.partition(g, 2, "random", 3),
    "grappa.partition metis": lambda g, e: zg.grappa.partition(g, 2, "metis", 3),
}


@pytest.fixture(scope="module")
def engines(graph, tmp_path_factory):
    SHARED["tmp"] = tmp_path_factory.mktemp("rng")
    SHARED["model"] = models.SAGE(FEAT, 16, CLASSES, 2)
    return {mode: _engine(graph, mode) for mode in MODES if mode != "dgl" or zg.interop.has_dgl()}


@given(
    calls=st.lists(st.sampled_from(sorted(CALLS)), min_size=1, max_size=3),
    mode=st.sampled_from(MODES),
    seed=st.integers(0, 2**32 - 1),
)
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_no_public_call_changes_a_global_generator(graph, engines, calls, mode, seed):
    """Generated sequences of public calls, from generated global states: torch's, numpy's and
    Python's global generators are as the caller left them after each call."""
    if mode not in engines:
        return  # DGL is not installed
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    for name in calls:
        before = _global_state()
        CALLS[name](graph, engines[mode])
        assert _same(before, _global_state()), (name, mode)


def test_dropout_masks_do_not_depend_on_the_global_generator(graph):
    """The masks are keyed by (seed, epoch, batch): whatever the caller drew before, the same
    parameters after an epoch (what makes restoring the generator safe)."""
    results = []
    for state in (0, 12345):
        eng = build(graph)
        torch.manual_seed(state)
        torch.rand(7)
        eng.train_epoch()
        results.append(params(eng))
    assert all(torch.equal(p, q) for p, q in zip(*results))
