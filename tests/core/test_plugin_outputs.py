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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(sorted(MUTATIONS)), mode=st.sampled_from(["eager", "static"]))
def test_a_broken_sampler_is_named_in_every_mode_that_takes_one(kind, mode):
    mutate = MUTATIONS[kind]
    if mode == "eager":
        inner = zg.DynamicSampler(GRAPH, FANOUTS, seed=0)
        sampler, method = BrokenSampler(inner, mutate), "sample"
    else:
        inner = zg.EnvelopeSampler(GRAPH, FANOUTS, B)
        sampler, method = BrokenStaticSampler(inner, mutate), "sample_static"
    eng = zg.Engine(GRAPH, _model(), FANOUTS, B, sampler=sampler, mode=mode, seed=0)
    with pytest.raises(TypeError) as caught:
        eng.train_epoch(max_batches=1)
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
    assert "float logits" in message


def test_the_shared_check_names_the_method_and_what_it_wants():
    from zg._checks import returned_tensor

    with pytest.raises(TypeError, match=r"^X\.f\(\) returned float 1\.0; expected a 1-D float"):
        returned_tensor(1.0, "X.f()", shape=[3])
    with pytest.raises(ValueError, match=r"holding -1\.0 at flat index 1; .* >= 0"):
        returned_tensor(
            torch.tensor([1.0, -1.0]), "X.f()", shape=[2], values=True, nonnegative=True
        )
    assert returned_tensor(torch.zeros(2, 3), "X.f()", shape=[2, None]).shape == (2, 3)
