"""zg.step: the stage names, the clock, the overflow guard and the epoch loop's rewind logic."""

from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from zg.step import STAGES, OverflowGuard, StageClock, masked_cross_entropy
from zg_course.labs import rewind_loop


def test_the_chain_has_seven_stages_with_loss_on_its_own():
    assert STAGES == ("sample", "compact", "gather", "forward", "loss", "backward", "step")


def test_clock_adds_into_a_given_mapping():
    seen = {}
    clock = StageClock(torch.device("cpu"), into=seen)
    clock("loss")
    clock("loss")
    assert set(seen) == {"loss"} and seen["loss"] >= 0


def test_unlabelled_rows_never_count_in_the_loss():
    logits = torch.tensor([[2.0, 0.0], [0.0, 2.0], [5.0, -5.0]])
    labels = torch.tensor([0, 1, -1])
    valid = torch.tensor([True, True, True])
    expected = masked_cross_entropy(logits[:2], labels[:2], valid[:2])
    assert torch.equal(masked_cross_entropy(logits, labels, valid), expected)


def _batch(overflowed, wanted=(3, 2)):
    return SimpleNamespace(overflowed=torch.tensor(overflowed), wanted=torch.tensor(list(wanted)))


def test_guard_is_sticky_and_remembers_the_first_batch_and_its_counts():
    guard = OverflowGuard(2, torch.device("cpu"))
    guard.observe(_batch(False), 0)
    assert bool(guard.apply())
    guard.observe(_batch(True, (9, 4)), 1)
    guard.observe(_batch(True, (11, 5)), 2)
    guard.observe(_batch(False), 3)
    assert not bool(guard.apply()) and int(guard.first) == 1
    assert guard.first_wanted.tolist() == [9, 4]
    assert guard.poll_read(guard.poll_start()) == 1
    guard.reset()
    assert bool(guard.apply()) and guard.poll_read(guard.poll_start()) is None


def test_distributed_guard_waits_for_the_reduced_flag():
    guard = OverflowGuard(2, torch.device("cpu"), distributed=True)
    guard.observe(_batch(False), 4)
    assert bool(guard.apply()) and float(guard.outgoing()) == 0.0
    guard.merge(torch.tensor([1.0]))  # another worker overflowed at batch 4
    assert not bool(guard.apply()) and int(guard.first) == 4 and not bool(guard.local)


@pytest.mark.parametrize("poll_every", [1, 2, 5])
def test_rewind_loop_resumes_from_the_first_overflowed_batch(poll_every):
    """A fake step that overflows batch 3 once (until the 'envelope' grows): the loop applies
    every batch exactly once, in order, whatever the polling period."""
    guard = OverflowGuard(1, torch.device("cpu"))
    grown, applied, executed = [False], [], []

    def run(b):
        executed.append(b)
        guard.observe(_batch(b == 3 and not grown[0], (1,)), b)
        if bool(guard.apply()):
            applied.append(b)
        return torch.tensor(float(b))

    def rewind(first):
        assert first == 3
        grown[0] = True

    out = rewind_loop(run, 0, 40, guard, poll_every, rewind)
    assert applied == list(range(40))
    assert out.overflows == 1 and out.executed == len(executed)
    assert out.rewound == len(executed) - 40 >= 1
    # Noticed within two poll periods (the copy read at a poll point was started at the one
    # before), never only at the end of the epoch.
    assert out.rewound <= 2 * poll_every, (out.rewound, executed)
    assert sorted(out.losses) == list(range(40)) and out.mean_loss() == pytest.approx(19.5)


def test_train_step_calls_a_given_forward_and_loss_even_when_they_are_falsy():
    """``torch.compile(model)`` has a ``__len__`` that raises; an empty nn.Sequential is falsy.
    The step must test ``is None``, never truthiness (it once ran ``forward or model``)."""
    import zg
    from zg import models
    from zg.engine import StepHooks

    g = zg.datasets.csbm(num_nodes=300, avg_degree=5, num_classes=3, feat_dim=8, seed=0)
    torch.manual_seed(0)
    net = models.build("sage", g.feat_dim, 16, g.num_classes, 2)
    calls = {"forward": 0, "loss": 0}

    class Falsy:
        def __init__(self, fn, name):
            self.fn, self.name = fn, name

        def __len__(self):
            raise TypeError("no len()")

        def __call__(self, *args):
            calls[self.name] += 1
            return self.fn(*args)

    from zg.step import masked_cross_entropy

    eng = zg.Engine(
        g,
        net,
        [4, 4],
        64,
        hooks=StepHooks(
            forward=Falsy(net, "forward"),
            loss=Falsy(lambda logits, y, mb: masked_cross_entropy(logits, y, mb.valid), "loss"),
        ),
    )
    eng.train_epoch(max_batches=2)
    assert calls["forward"] >= 2 and calls["loss"] >= 2


def test_masked_cross_entropy_is_a_loss_hook_as_documented():
    """StepHooks' docstring: the loss hook is called ``loss(logits, labels, mb)`` and the default
    is zg.step.masked_cross_entropy. Given as the hook itself, it trains bit for bit as the
    default does (the reference: an Engine without hooks, same seed)."""
    import zg
    from zg import models
    from zg.engine import StepHooks

    g = zg.datasets.csbm(num_nodes=300, avg_degree=5, num_classes=3, feat_dim=8, seed=0)
    params = []
    for hooks in (None, StepHooks(loss=masked_cross_entropy)):
        torch.manual_seed(0)
        net = models.build("sage", g.feat_dim, 16, g.num_classes, 2)
        eng = zg.Engine(g, net, [4, 4], 64, seed=3, hooks=hooks)
        eng.train_epoch(max_batches=3)
        params.append([p.detach().clone() for p in net.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*params))
    mb = SimpleNamespace(valid=torch.tensor([True, False]))
    logits, labels = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 0])
    assert torch.equal(
        masked_cross_entropy(logits, labels, mb), masked_cross_entropy(logits, labels, mb.valid)
    )
    with pytest.raises(TypeError, match="valid must be a bool tensor"):
        masked_cross_entropy(logits, labels, [True, False])


@given(st.integers(1, 40), st.integers(2, 6), st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_the_mean_loss_is_the_weighted_per_seed_loss_bit_for_bit(rows, classes, seed):
    """masked_cross_entropy (ignore_index on the rows that do not count) gives the bits of the
    per-seed loss times its 0/1 weight over the weight's sum, loss and gradient alike, with
    padding rows, unlabelled rows and no counted row at all."""
    import torch.nn.functional as F

    from zg.step import per_seed_cross_entropy

    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(rows, classes, generator=gen, requires_grad=True)
    labels = torch.randint(-1, classes, (rows,), generator=gen)
    valid = torch.rand(rows, generator=gen) < 0.7
    counted = valid & (labels >= 0)
    rows_loss = F.cross_entropy(logits, labels.clamp(min=0), reduction="none")
    expected = (rows_loss * counted.float()).sum() / counted.float().sum().clamp(min=1.0)
    (expected_grad,) = torch.autograd.grad(expected, logits)
    got = masked_cross_entropy(logits, labels, valid)
    (got_grad,) = torch.autograd.grad(got, logits)
    assert got.dtype == expected.dtype and torch.equal(got, expected)
    assert torch.equal(got_grad, expected_grad)
    per_seed, flags = per_seed_cross_entropy(logits.detach(), labels, valid)
    assert torch.equal(flags, counted)
    assert torch.equal(per_seed, rows_loss.detach() * counted.float())
