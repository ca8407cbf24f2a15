"""What a sampler or a model written outside the package returns is checked where it comes
back, in every mode that takes it: a wrong ``sample()`` / ``sample_static()`` result (not a
MiniBatch, the wrong number of blocks, seeds, counts or flags of the wrong kind or shape) and
wrong logits (not a tensor, the wrong rows, too few classes, an integer dtype) are refused with
one TypeError naming the class and the method, what it returned and what it must return, never
an IndexError or a torch error further down. The bad results are generated (hypothesis).
"""

import dataclasses

import pytest
import torch
from graphs import tiny
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import zg

GRAPH = tiny()
FANOUTS = [3, 3]
B = 16


def _mutations():
    """(name, MiniBatch -> what a broken sampler returns instead)."""
    return [
        ("none", lambda mb: None),
        ("tuple", lambda mb: (mb.seeds, mb.blocks)),
        ("dict", lambda mb: {"seeds": mb.seeds}),
        ("blocks_short", lambda mb: dataclasses.replace(mb, blocks=mb.blocks[:-1])),
        ("blocks_long", lambda mb: dataclasses.replace(mb, blocks=mb.blocks + mb.blocks[-1:])),
        ("blocks_not_list", lambda mb: dataclasses.replace(mb, blocks=mb.blocks[0])),
        ("seeds_float", lambda mb: dataclasses.replace(mb, seeds=mb.seeds.float())),
        ("seeds_2d", lambda mb: dataclasses.replace(mb, seeds=mb.seeds.view(-1, 1))),
        ("seeds_list", lambda mb: dataclasses.replace(mb, seeds=mb.seeds.tolist())),
        ("num_seeds_int", lambda mb: dataclasses.replace(mb, num_seeds=int(mb.num_seeds))),
        ("num_seeds_1d", lambda mb: dataclasses.replace(mb, num_seeds=mb.num_seeds.view(1))),
        ("counts_short", lambda mb: dataclasses.replace(mb, counts=mb.counts[:1])),
        ("counts_float", lambda mb: dataclasses.replace(mb, counts=mb.counts.float())),
        ("overflowed_bool", lambda mb: dataclasses.replace(mb, overflowed=False)),
        ("overflowed_int", lambda mb: dataclasses.replace(mb, overflowed=mb.overflowed.long())),
    ]


MUTATIONS = dict(_mutations())


class BrokenSampler:
    """A sampler that wraps a correct one and breaks what it returns (``mutate``)."""

    def __init__(self, inner, mutate):
        self.inner, self.mutate = inner, mutate
        self.fanouts = inner.fanouts
        if hasattr(inner, "sizes"):  # a static sampler: the same buffers
            self.batch_size, self.sizes = inner.batch_size, inner.sizes

    def sample(self, seeds, epoch=0, batch=0, *, clock=None):
        return self.mutate(self.inner.sample(seeds, epoch, batch, clock=clock))


class BrokenStaticSampler(BrokenSampler):
    def sample_static(self, seeds, num_seeds, key, clock=None, hop_keys=None):
        mb = self.inner.sample_static(seeds, num_seeds, key, clock=clock, hop_keys=hop_keys)
        return self.mutate(mb)


def _model():
    torch.manual_seed(0)
    return zg.models.SAGE(GRAPH.feat_dim, 8, int(GRAPH.num_classes), 2, dropout=0.0)


def _train_with_broken_sampler(mutate, mode):
    """One batch of an Engine whose plug-in sampler (the kit's own, wrapped) returns
    ``mutate(batch)`` -> (the sampler, the method the mode calls, the TypeError raised)."""
    if mode == "eager":
        inner = zg.DynamicSampler(GRAPH, FANOUTS, seed=0)
        sampler, method = BrokenSampler(inner, mutate), "sample"
    else:
        inner = zg.EnvelopeSampler(GRAPH, FANOUTS, B)
        sampler, method = BrokenStaticSampler(inner, mutate), "sample_static"
    eng = zg.Engine(GRAPH, _model(), FANOUTS, B, sampler=sampler, mode=mode, seed=0)
    with pytest.raises(TypeError) as caught:
        eng.train_epoch(max_batches=1)
    return sampler, method, caught


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(MUTATIONS)), mode=st.sampled_from(["eager", "static"]))
def test_a_broken_sampler_is_named_in_every_mode_that_takes_one(kind, mode):
    sampler, method, caught = _train_with_broken_sampler(MUTATIONS[kind], mode)
    message = str(caught.value)
    assert message.startswith(f"{type(sampler).__name__}.{method}()"), message
    assert " returned " in message and "expected" in message
    assert message.count(type(sampler).__name__) == 1


def test_the_unbroken_sampler_trains_in_both_modes():
    """The wrappers themselves are sound: with nothing broken both modes train."""
    for mode, cls, inner in [
        ("eager", BrokenSampler, zg.DynamicSampler(GRAPH, FANOUTS, seed=0)),
        ("static", BrokenStaticSampler, zg.EnvelopeSampler(GRAPH, FANOUTS, B)),
    ]:
        sampler = cls(inner, lambda mb: mb)
        eng = zg.Engine(GRAPH, _model(), FANOUTS, B, sampler=sampler, mode=mode, seed=0)
        assert eng.train_epoch(max_batches=2).iterations == 2


LOGITS = {
    "none": lambda z: None,
    "float": lambda z: 0.5,
    "1d": lambda z: z[:, 0],
    "3d": lambda z: z.unsqueeze(0),
    "rows_short": lambda z: z[:-1],
    "rows_long": lambda z: torch.cat([z, z[:1]]),
    "too_few_classes": lambda z: z[:, :1],
    "int": lambda z: z.long(),
    "tuple": lambda z: (z,),
}


class BrokenModel(zg.models.SAGE):
    """SAGE whose forward breaks its logits (``mutate``)."""

    mutate = staticmethod(lambda z: z)

    def forward(self, blocks, x):
        return self.mutate(super().forward(blocks, x))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(LOGITS)), mode=st.sampled_from(["dynamic", "eager", "static"]))
def test_a_broken_model_is_named_in_every_mode(kind, mode):
    torch.manual_seed(0)
    model = BrokenModel(GRAPH.feat_dim, 8, int(GRAPH.num_classes), 2, dropout=0.0)
    model.mutate = LOGITS[kind]
    envelope = None if mode == "dynamic" else "worst_case"
    eng = zg.Engine(GRAPH, model, FANOUTS, B, envelope, mode=mode, seed=0)
    with pytest.raises(TypeError) as caught:
        eng.train_epoch(max_batches=1)
    message = str(caught.value)
    assert message.startswith("BrokenModel.forward(blocks, x) returned "), message
    assert "; expected a 2-D float tensor of shape [rows=" in message


def test_the_shared_check_names_the_method_and_what_it_wants():
    from zg._checks import returned_tensor

    with pytest.raises(TypeError, match=r"^X\.f\(\) returned float 1\.0; expected a 1-D float"):
        returned_tensor(1.0, "X.f()", shape=[3])
    with pytest.raises(ValueError, match=r"holding -1\.0 at flat index 1; .* >= 0"):
        returned_tensor(
            torch.tensor([1.0, -1.0]), "X.f()", shape=[2], values=True, nonnegative=True
        )
    assert returned_tensor(torch.zeros(2, 3), "X.f()", shape=[2, None]).shape == (2, 3)


# ----------------------------------------------------------------------------- generated bad values
# One generator of bad results (tests/bad_results.py) over the one check and over every path
# that takes a model's logits or a hook's result: each error names the plug-in and method once,
# what came back, and the problem.

from bad_results import Contract, assert_names, bad, error_for  # noqa: E402

from zg._checks import returned_tensor  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    dims=st.integers(0, 3),
    kind=st.sampled_from(["float", "integer", "bool"]),
    device=st.booleans(),
    values=st.booleans(),
    nonnegative=st.booleans(),
    requires_grad=st.sampled_from([None, False, True]),
)
def test_the_one_check_refuses_every_generated_bad_value(
    data, dims, kind, device, values, nonnegative, requires_grad
):
    if kind != "float":
        requires_grad = None if requires_grad else requires_grad  # only floats carry grad
    sizes = data.draw(st.lists(st.integers(1, 4), min_size=dims, max_size=dims))
    dtype = {"float": torch.float32, "integer": torch.int64, "bool": torch.bool}[kind]
    good = torch.ones(sizes, dtype=dtype)
    if requires_grad:
        good.requires_grad_(True)
    check = dict(
        shape=sizes,
        kind=kind,
        device="cpu" if device else None,
        values=values,
        nonnegative=nonnegative,
        requires_grad=requires_grad,
    )
    assert returned_tensor(good, "Plug.method()", **check) is good
    contract = Contract(
        dims, kind, True, device, values and kind != "bool", nonnegative, requires_grad
    )
    problem = data.draw(st.sampled_from(contract.problems()))
    value = bad(problem, good)
    error, _ = error_for(problem, value)
    with pytest.raises(error) as caught:
        returned_tensor(value, "Plug.method()", **check)
    assert_names(str(caught.value), "Plug.method()", problem, value)


LOGIT_PROBLEMS = Contract(2).problems()  # shape, dtype, device (values: not at evaluation)


class MutatedModel(zg.models.SAGE):
    """SAGE whose forward and after_layer hand back a bad result made with ``problem``."""

    problem = ""
    in_forward = False

    def forward(self, blocks, x):
        self.in_forward = True  # its after_layer hands back sound rows to it
        try:
            logits = super().forward(blocks, x)
        finally:
            self.in_forward = False
        return bad(self.problem, logits) if self.problem else logits

    def after_layer(self, i, out):
        h = super().after_layer(i, out)
        last = i == len(self.layers) - 1 and self.problem and not self.in_forward
        return bad(self.problem, h) if last else h  # the full-neighbour pass's last rows


def _mutated(problem):
    torch.manual_seed(0)
    model = MutatedModel(GRAPH.feat_dim, 8, int(GRAPH.num_classes), 2, dropout=0.0)
    model.problem = problem
    return model


def _train_one(model, mode):
    envelope = None if mode == "dynamic" else "worst_case"
    zg.Engine(GRAPH, model, FANOUTS, B, envelope, mode=mode, seed=0).train_epoch(max_batches=1)


PATHS = {  # path -> (call(model), the method named)
    "engine_dynamic": (lambda m: _train_one(m, "dynamic"), "forward(blocks, x)"),
    "engine_eager": (lambda m: _train_one(m, "eager"), "forward(blocks, x)"),
    "engine_static": (lambda m: _train_one(m, "static"), "forward(blocks, x)"),
    "evaluate": (lambda m: zg.inference.evaluate(m, GRAPH, "val"), "after_layer(1, out)"),
    "evaluate_sampled": (
        lambda m: zg.inference.evaluate(m, GRAPH, "val", sampled=dict(fanouts=FANOUTS)),
        "forward(blocks, x)",
    ),
    "engine_evaluate": (
        lambda m: zg.Engine(GRAPH, m, FANOUTS, B, mode="eager", seed=0).evaluate("test"),
        "after_layer(1, out)",
    ),
    "full_forward": (lambda m: zg.grappa.fullgraph.full_forward(m, GRAPH), "forward(blocks, x)"),
    "exact_gradient": (
        lambda m: zg.grappa.gradient.exact_gradient(GRAPH, m),
        "forward(blocks, x)",
    ),
}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(sorted(PATHS)), problem=st.sampled_from(LOGIT_PROBLEMS))
def test_a_models_bad_logits_are_named_on_every_path_that_calls_it(path, problem):
    """The Engine's step (every mode), zg.inference.evaluate (full and sampled),
    Engine.evaluate and Grappa's full-graph forward (zg.grappa.fullgraph.full_forward): the same TypeError, naming the model's
    class and method, what it returned and what it must (floating [rows, C >= classes] on the
    graph's device)."""
    call, method = PATHS[path]
    model = _mutated(problem)
    with pytest.raises(TypeError) as caught:
        call(model)
    message = str(caught.value)
    assert message.startswith(f"MutatedModel.{method} returned "), message
    assert message.count("MutatedModel") == 1, message
    assert "expected a 2-D float tensor of shape [rows" in message and "classes >= " in message
    if problem == "other_device":
        assert "on meta" in message and "on cpu" in message


def test_every_path_takes_a_sound_model():
    """The wrapper itself is sound: with nothing broken every path runs."""
    for call, _ in PATHS.values():
        call(_mutated(""))


HOOK_SITES = {  # hook -> (StepHooks keywords from a good hook and a problem, the name, contract)
    "forward": (
        lambda p, eng: dict(forward=lambda b, x: bad(p, eng[0].model(b, x))),
        "StepHooks.forward(blocks, x)",
        Contract(2),
    ),
    "loss": (
        lambda p, eng: dict(
            loss=lambda z, y, mb: bad(p, zg.step.masked_cross_entropy(z, y, mb.valid))
        ),
        "StepHooks.loss(logits, labels, mb)",
        Contract(0, requires_grad=True),
    ),
    "features": (
        lambda p, eng: dict(features=lambda n: bad(p, GRAPH.x.index_select(0, n))),
        "StepHooks.features(input_nodes)",
        Contract(2),
    ),
}
HOOK_CASES = [(h, p) for h, (_, _, c) in HOOK_SITES.items() for p in c.problems()]


@pytest.mark.parametrize("mode", ["dynamic", "static"])
@pytest.mark.parametrize("hook, problem", HOOK_CASES)
def test_a_hooks_generated_bad_result_is_named(hook, problem, mode):
    make, who, _ = HOOK_SITES[hook]
    holder = []
    model = _model()
    envelope = None if mode == "dynamic" else "worst_case"
    hooks = zg.StepHooks(**make(problem, holder))
    eng = zg.Engine(GRAPH, model, FANOUTS, B, envelope, mode=mode, seed=0, hooks=hooks)
    holder.append(eng)
    with pytest.raises(TypeError) as caught:
        eng.train_epoch(max_batches=1)
    message = str(caught.value)
    assert message.startswith(f"{who} returned "), message
    assert message.count("StepHooks") == 1, message
    if problem == "detached":
        assert "not requiring grad" in message and "that requires grad" in message
    elif problem == "other_device":
        assert "on meta" in message and "on cpu" in message
    else:
        assert "; expected a " in message


FIELDS = {  # MiniBatch field -> its contract (eager: any number of seeds; static: B rows)
    "seeds": Contract(1, kind="integer", sized=False),
    "num_seeds": Contract(0, kind="integer"),
    "counts": Contract(1, kind="integer"),
    "overflowed": Contract(0, kind="bool"),
}
FIELD_CASES = [(f, p) for f, c in FIELDS.items() for p in c.problems()]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(FIELD_CASES), mode=st.sampled_from(["eager", "static"]))
def test_a_samplers_generated_bad_field_is_named(case, mode):
    """Each field of a plug-in sampler's MiniBatch against the generated bad values: the wrong
    kind, shape, dtype or device is refused naming the class, the method and the field."""
    field, problem = case

    def mutate(mb):
        return dataclasses.replace(mb, **{field: bad(problem, getattr(mb, field))})

    sampler, method, caught = _train_with_broken_sampler(mutate, mode)
    who = f"{type(sampler).__name__}.{method}().{field}"
    message = str(caught.value)
    assert message.startswith(f"{who} returned "), message
    assert message.count(type(sampler).__name__) == 1, message
    assert "; expected a " in message, message
    if problem == "other_device":
        assert "on meta" in message and "on cpu" in message, message


@pytest.mark.parametrize("given", [None, 3, torch.arange(4), [], ()])
def test_a_batches_hook_that_returns_no_list_of_batches_is_named(given):
    """``StepHooks.batches(epoch)`` in the common wording: what came back, what must."""
    hooks = zg.StepHooks(batches=lambda epoch: given)
    eng = zg.Engine(GRAPH, _model(), FANOUTS, B, mode="eager", seed=0, hooks=hooks)
    with pytest.raises((TypeError, ValueError)) as caught:
        eng.train_epoch(max_batches=1)
    message = str(caught.value)
    assert message.startswith("StepHooks.batches(0) returned "), message
    assert "; expected a list of seed tensors" in message
