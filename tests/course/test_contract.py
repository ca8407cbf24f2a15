"""zg_course.contract: every clause catches the submission that breaks it, on generated inputs, and
passes answers written differently that keep the whole contract."""

from __future__ import annotations

import functools

import hypothesis.strategies as st
import pytest
import torch
import torch.distributed as dist
from hypothesis import given, settings

import zg_course.labs
from zg_course.contract import Case, Contract, ContractFailure, ContractSetupError, check

# ----------------------------------------------------------------------------- an exercise:
# first_seen(x) -> bool [M]: x[i] is the first occurrence of its value. Pure, 0 host syncs,
# new tensors on x's device.


def brute_first_seen(x):
    seen, out = set(), []
    for v in x.tolist():
        out.append(v not in seen)
        seen.add(v)
    return torch.tensor(out, dtype=torch.bool)


def right_sort_based(x):
    order = torch.sort(x, stable=True).indices  # (M,)
    ranked = x[order]
    head = torch.ones_like(ranked, dtype=torch.bool)
    head[1:] = ranked[1:] != ranked[:-1]
    out = torch.zeros_like(x, dtype=torch.bool)
    out[order] = head
    return out


def right_pairwise(x):
    earlier = torch.tril(torch.ones(x.numel(), x.numel(), dtype=torch.bool, device=x.device), -1)
    return ~((x[:, None] == x[None, :]) & earlier).any(1)


def wrong_sorts_input(x):
    out = right_sort_based(x.clone())
    x.copy_(torch.sort(x).values)  # the caller's tensor sorted in place
    return out


def wrong_default_device(x):
    earlier = torch.tril(torch.ones(x.numel(), x.numel(), dtype=torch.bool), -1)  # no device=
    return ~((x[:, None] == x[None, :]) & earlier).any(1)


def wrong_narrow_dtype(x):
    return right_sort_based(x).to(torch.uint8)


_CACHE: dict = {}


def wrong_caches(x):
    key = x.numel()  # a cache that ignores the values
    if key not in _CACHE:
        _CACHE[key] = right_sort_based(x)
    return _CACHE[key]


def wrong_host(x):
    return brute_first_seen(x)  # .tolist(): a host sync


def wrong_value(x):
    out = right_sort_based(x)
    out[-1:] = True  # the last one always "first"
    return out


CONTRACT = Contract(
    "first_seen", part="Test Part A", host_syncs=0, boundaries=("empty", "duplicates")
)

values = st.lists(st.integers(0, 6), min_size=0, max_size=12)


def cases_of(lists):
    out = []
    for i, v in enumerate(lists):
        kinds = set()
        if not v:
            kinds.add("empty")
        if len(set(v)) < len(v):
            kinds.add("duplicates")
        out.append(Case((torch.tensor(v, dtype=torch.int64),), label=f"case {i}", kinds=kinds))
    return out


BASE = [[], [3], [2, 2, 5, 2], [1, 2, 3], [4, 1, 4, 1, 0], [6, 5, 4, 3, 3]]


@pytest.fixture(autouse=True)
def _clear_cache():
    _CACHE.clear()
    yield
    _CACHE.clear()


@pytest.mark.parametrize("fn", [right_sort_based, right_pairwise], ids=lambda f: f.__name__)
@settings(max_examples=25, deadline=None)
@given(extra=st.lists(values, min_size=1, max_size=6))
def test_answers_written_differently_keep_the_whole_contract(fn, extra):
    assert check(fn, CONTRACT, cases_of(BASE + extra), brute_first_seen, namespace={}) == len(
        BASE + extra
    )


@pytest.mark.parametrize(
    ("fn", "clause"),
    [
        (wrong_sorts_input, "inputs unchanged"),
        (wrong_default_device, "device"),
        (wrong_narrow_dtype, "dtype"),
        (wrong_caches, "returns"),
        (wrong_host, "host syncs"),
        (wrong_value, "returns"),
    ],
    ids=lambda v: getattr(v, "__name__", v),
)
@settings(max_examples=10, deadline=None)
@given(extra=st.lists(values, min_size=0, max_size=4))
def test_each_broken_clause_is_named_with_its_input(fn, clause, extra):
    _CACHE.clear()
    with pytest.raises(ContractFailure) as caught:
        check(fn, CONTRACT, cases_of(BASE + extra), brute_first_seen, namespace={})
    text = str(caught.value)
    assert f"clause '{clause}'" in text
    assert "Test Part A" in text and "on input 'case" in text and "x=int64[" in text
    assert "expected" in text or "was" in text


def test_a_global_cache_breaks_no_state():
    namespace = {"cache": {}, "right_sort_based": right_sort_based}
    # as a notebook cell defines it: the notebook's globals are the function's
    exec(
        "def caches_in_a_global(x):\n    cache[x.numel()] = True\n    return right_sort_based(x)",
        namespace,
    )
    caches_in_a_global = namespace["caches_in_a_global"]
    with pytest.raises(ContractFailure, match="clause 'no state'.*contents of global 'cache'"):
        check(caches_in_a_global, CONTRACT, cases_of(BASE), brute_first_seen, namespace=namespace)

    def mutable_default(x, _memo=[]):  # noqa: B006 (the state under test)
        _memo.append(x.numel())
        return right_sort_based(x)

    with pytest.raises(ContractFailure, match="clause 'no state'.*own state"):
        check(mutable_default, CONTRACT, cases_of(BASE), brute_first_seen, namespace={})


def test_wrappers_are_checked_as_the_function_they_wrap():
    @functools.wraps(right_sort_based)
    def decorated(x):
        return right_sort_based(x)

    assert check(decorated, CONTRACT, cases_of(BASE), brute_first_seen, namespace={}) == len(BASE)
    assert check(
        functools.partial(right_sort_based), CONTRACT, cases_of(BASE), brute_first_seen
    ) == len(BASE)


def test_missing_boundary_cases_are_the_labs_fault():
    with pytest.raises(ContractSetupError, match="cover no \\['empty'\\]"):
        check(right_sort_based, CONTRACT, cases_of([[1, 1]]), brute_first_seen)
    with pytest.raises(ContractSetupError, match="in_place"):
        Contract("f", part="p", in_place=("a",))
    with pytest.raises(ContractSetupError, match="host_syncs"):
        Contract("f", part="p", host_syncs=-1)


# ----------------------------------------------------------------------------- updates in place


def ref_sgd_(p, g, lr):
    p.sub_(lr * g)


def right_sgd_(p, g, lr):
    p.add_(g, alpha=-lr)


def wrong_sgd_rebinds(p, g, lr):
    p = p - lr * g  # the bug: a new tensor, the caller's unchanged


def wrong_sgd_scales_grad(p, g, lr):
    g.mul_(lr)
    p.sub_(g)


def wrong_sgd_replaces_storage(p, g, lr):
    p.set_(p - lr * g)


# lr * g subtracted in one rounding or two: values near zero may differ in their last bits
SGD = Contract(
    "sgd_", part="Test Part B", may_change=("p",), in_place=("p",), host_syncs=0, atol=1e-6
)


@settings(max_examples=15, deadline=None)
@given(n=st.integers(0, 9), lr=st.floats(1e-3, 0.9), seed=st.integers(0, 2**31 - 1))
def test_in_place_updates(n, lr, seed):
    gen = torch.Generator().manual_seed(seed)
    cases = [
        Case((torch.randn(n, generator=gen), torch.randn(n, generator=gen), lr)) for _ in range(3)
    ]
    assert check(right_sgd_, SGD, cases, ref_sgd_) == 3
    if n == 0:
        return  # nothing to update: every version leaves empty tensors as they were
    expect = {
        wrong_sgd_rebinds: "updates",
        wrong_sgd_scales_grad: "inputs unchanged",
        wrong_sgd_replaces_storage: "updates",
    }
    for fn, clause in expect.items():
        with pytest.raises(ContractFailure, match=f"clause '{clause}'"):
            check(fn, SGD, cases, ref_sgd_)


# ----------------------------------------------------------------------------- asynchrony


def fake_all_reduce(tensor, op=None, group=None, async_op=False):
    """Two workers holding the same tensor: the sum is twice it."""
    tensor.mul_(2)
    return None


def ref_mean(t):
    return t * 1.0


def right_async_mean(t):
    work = dist.all_reduce(t, async_op=True)
    return work.get_future().then(lambda f: f.value()[0] / 2)


def wrong_blocking(t):
    dist.all_reduce(t)
    done = torch.futures.Future()
    done.set_result(t / 2)
    return done


def wrong_waits(t):
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    done = torch.futures.Future()
    done.set_result(t / 2)
    return done


ASYNC = Contract("mean_", part="Test Part C", may_change=("t",), asynchronous=True, device=False)


def test_asynchronous_collectives(monkeypatch):
    monkeypatch.setattr(dist, "all_reduce", fake_all_reduce)

    def ref(t):
        t.mul_(2)
        return t / 2

    cases = [Case((torch.arange(float(n)),)) for n in range(1, 6)]
    assert check(right_async_mean, ASYNC, cases, ref) == 5
    for fn, why in [(wrong_blocking, "without async_op=True"), (wrong_waits, "wait\\(\\)")]:
        with pytest.raises(ContractFailure, match=f"clause 'asynchronous'.*{why}"):
            check(fn, ASYNC, cases, ref)
    assert dist.all_reduce is fake_all_reduce  # put back


def test_the_student_runs_under_the_hold(monkeypatch):
    """check() calls the student's function inside zg_course.labs.as_student(), so a held reference
    refuses however the function reached it."""
    entered = []

    class Probe:
        def __init__(self, function=None):
            self.function = function

        def __enter__(self):
            entered.append(self.function)

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(zg_course.labs, "as_student", Probe, raising=False)
    check(right_sort_based, CONTRACT, cases_of(BASE), brute_first_seen)
    # the call, the call again (deterministic) and the device run of every case, and the
    # refilled pairs (two at most), by name
    pairs = min(2, len(BASE) - 1)
    assert entered == ["first_seen"] * (3 * len(BASE) + pairs)


# ----------------------------------------------------------------------------- scratch, objects,
# gradients of a list of parameters, and a default-device tensor used only as an index


def ref_first_with_scratch(x, work):
    return brute_first_seen(x)


def right_uses_scratch(x, work):
    work[: x.numel()] = torch.arange(x.numel(), device=x.device)  # any contents: scratch
    return right_sort_based(x)


def wrong_replaces_scratch(x, work):
    work.set_(torch.zeros_like(work))  # a new storage: the caller's buffer is no longer it
    return right_sort_based(x)


SCRATCH = Contract("first_seen", part="Test Part D", scratch=("work",), boundaries=("empty",))


def test_scratch_arguments_may_hold_anything_but_stay_the_same_tensor():
    cases = [Case((c.args[0], torch.full((16,), -1)), kinds=c.kinds) for c in cases_of(BASE)]
    assert check(right_uses_scratch, SCRATCH, cases, ref_first_with_scratch) == len(cases)
    with pytest.raises(ContractFailure, match="clause 'updates'.*scratch space"):
        check(wrong_replaces_scratch, SCRATCH, cases, ref_first_with_scratch)
    with pytest.raises(ContractSetupError, match="overlap"):
        Contract("f", part="p", may_change=("a",), scratch=("a",))
    assert "scratch" in SCRATCH.describe() and "updates" in SCRATCH.clauses


class Counter:
    def __init__(self):
        self.total = torch.zeros(())
        self.seen = []


def ref_count(counter, x):
    counter.total += x.sum()
    counter.seen.append(x.numel())


def right_count(counter, x):
    counter.seen.append(len(x))
    counter.total.add_(x.sum())


def wrong_count_keeps_state(counter, x):
    right_count(counter, x)
    counter.last = x  # state kept on an object the contract says to leave as the reference does


def test_an_object_argument_must_end_as_the_reference_leaves_its_own_copy():
    contract = Contract("count", part="Test Part E", may_change=("counter",))
    cases = [Case((Counter(), torch.arange(float(n)))) for n in range(4)]
    assert check(right_count, contract, cases, ref_count) == 4
    with pytest.raises(ContractFailure, match="clause 'updates'.*got \\['last'"):
        check(wrong_count_keeps_state, contract, cases, ref_count)


def ref_step_(params, lr):
    with torch.no_grad():
        for p in params:
            p.sub_(lr * p.grad)


def right_step_(params, lr):
    with torch.no_grad():
        for p in params:
            p.add_(p.grad, alpha=-lr)


def wrong_step_scales_grad_(params, lr):
    with torch.no_grad():
        for p in params:
            p.grad.mul_(lr)  # the gradient left scaled
            p.sub_(p.grad)


def wrong_step_rebinds_(params, lr):
    for i, p in enumerate(params):
        params[i] = torch.nn.Parameter(p.detach() - lr * p.grad)  # new parameters, not in place
        params[i].grad = p.grad


def test_a_list_of_parameters_updated_in_place_with_its_gradients_kept():
    contract = Contract("step_", part="Test Part F", may_change=("params",), in_place=("params",))

    def params(n):
        out = []
        for i in range(n):
            p = torch.nn.Parameter(torch.randn(3, generator=torch.Generator().manual_seed(i)))
            p.grad = torch.full((3,), 0.5 + i)
            out.append(p)
        return out

    cases = [Case((params(n), 0.1)) for n in (1, 2, 3)]
    assert check(right_step_, contract, cases, ref_step_) == 3
    with pytest.raises(ContractFailure, match="clause 'updates'.*\\['grad'\\]"):
        check(wrong_step_scales_grad_, contract, cases, ref_step_)
    with pytest.raises(ContractFailure, match="clause 'updates'.*not updated in place"):
        check(wrong_step_rebinds_, contract, cases, ref_step_)


def wrong_index_on_default_device(x):
    # an index made without device= and only ever used to index a tensor of the input's device:
    # PyTorch runs that CPU kernel on a meta index instead of refusing; the check refuses it
    order = torch.arange(x.numel() - 1, -1, -1)
    return right_sort_based(x[order].flip(0))


def test_a_default_device_tensor_used_as_an_index_fails_device():
    with pytest.raises(ContractFailure, match="clause 'device'.*aten.index.*CPU tensor"):
        check(wrong_index_on_default_device, CONTRACT, cases_of(BASE), brute_first_seen)


# ----------------------------------------------------------------------------- an object's state
# step_(state): a training step on an object that holds its buffers; it may change the object
# only in place (every tensor it holds keeps its storage) and add nothing to it.


class Holder:
    def __init__(self, n, seed):
        gen = torch.Generator().manual_seed(seed)
        self.weight = torch.randn(n, generator=gen)
        self.inputs = torch.randn(n, generator=gen)
        self.loss = torch.zeros(())
        self.lr = 0.1


def ref_holder_step(state):
    state.weight.sub_(state.lr * state.inputs)
    state.loss.copy_((state.weight * state.inputs).sum())


def right_holder_step(state):
    state.weight.add_(state.inputs, alpha=-state.lr)
    torch.sum(state.weight * state.inputs, dim=0, out=state.loss)


def wrong_holder_rebinds_loss(state):
    state.weight.sub_(state.lr * state.inputs)
    state.loss = (state.weight * state.inputs).sum()  # the right value, in a new tensor


def wrong_holder_keeps_state(state):
    ref_holder_step(state)
    state.steps = getattr(state, "steps", 0) + 1  # an attribute added to the caller's object


def wrong_holder_changes_inputs(state):
    ref_holder_step(state)
    state.inputs.mul_(1.0 + state.lr)  # a buffer the step must only read, left changed


HOLDER = Contract("step_", part="Test Part G", may_change=("state",), in_place=("state",))


def test_an_object_updated_in_place_is_compared_by_its_attributes():
    cases = [Case((Holder(n, n),), label=f"n={n}") for n in (1, 4, 9)]
    assert check(right_holder_step, HOLDER, cases, ref_holder_step) == 3
    with pytest.raises(
        ContractFailure, match="clause 'updates'.*argument `state`.loss was replaced"
    ):
        check(wrong_holder_rebinds_loss, HOLDER, cases, ref_holder_step)
    with pytest.raises(ContractFailure, match="clause 'updates'.*expected keys.*got.*'steps'"):
        check(wrong_holder_keeps_state, HOLDER, cases, ref_holder_step)
    with pytest.raises(ContractFailure, match="clause 'updates'.*\\['inputs'\\]"):
        check(wrong_holder_changes_inputs, HOLDER, cases, ref_holder_step)


def test_extra_keys_of_a_returned_mapping_are_allowed_only_when_declared():
    def ref(x):
        return {"sum": float(sum(x)), "n": len(x)}

    def more(x):
        return {"sum": float(sum(x)), "n": len(x), "max": max(x)}

    def missing(x):
        return {"sum": float(sum(x))}

    cases = [Case(([1.0, 2.0, 3.5],)), Case(([4.0],))]
    contract = Contract("summary", part="Test Part H", extra_keys=True)
    assert check(more, contract, cases, ref) == 2
    with pytest.raises(ContractFailure, match="clause 'returns'.*expected keys"):
        check(missing, contract, cases, ref)
    with pytest.raises(ContractFailure, match="clause 'returns'.*expected keys"):
        check(more, Contract("summary", part="Test Part H"), cases, ref)


def test_the_hold_is_told_which_function_runs(monkeypatch):
    """Where zg_course.labs.as_student takes the student's function name, check() passes it (a kit
    function held only within other exercises' functions may then run in this one)."""
    import contextlib

    names = []

    def as_student(function=None):
        names.append(function)
        return contextlib.nullcontext()

    monkeypatch.setattr(zg_course.labs, "as_student", as_student)
    check(right_sort_based, CONTRACT, cases_of(BASE), brute_first_seen)
    assert names and set(names) == {"first_seen"}


# ----------------------------------------------------------------------------- the kit's own tensors


def _owners(chunk_of):
    """Through the kit: Partition.owner() makes its host-side table with torch.empty (no device=)."""
    from zg.grappa import Partition

    part = Partition(
        chunk_of, 2, [[[0], [1]]], method="random", seed=0, halo=False, schedule="round_robin"
    )
    return part.owner(0)


def right_owner_counts(chunk_of):
    return torch.bincount(_owners(chunk_of), minlength=2)


def wrong_owner_counts(chunk_of):
    counts = torch.zeros(2, dtype=torch.int64)  # no device=: the student's own tensor
    return counts.index_add_(0, _owners(chunk_of), torch.ones_like(chunk_of))


def test_the_device_clause_judges_the_tensors_the_student_makes():
    """Factory calls made inside the kit's code (zg/) are the kit's business, tested on their own;
    the clause judges the tensors the student's function makes."""
    owners = Contract("owner_counts", part="Test Part D", boundaries=())
    cases = [Case((torch.tensor(v, dtype=torch.int64),)) for v in ([0, 1, 1], [1], [0, 0, 1, 0])]

    def ref(chunk_of):
        return torch.bincount(chunk_of, minlength=2)

    assert check(right_owner_counts, owners, cases, ref) == 3
    with pytest.raises(ContractFailure, match="clause 'device'"):
        check(wrong_owner_counts, owners, cases, ref)


# ----------------------------------------------------------------------------- the whole
# process, layout, exact types, host constructors and state kept on the objects: an exercise
# scale(x) -> float32 [N] (x * 2, a fresh contiguous tensor on x's device), one wrong answer
# per way of breaking a clause that the values alone never show.


def ref_scale(x):
    return x * 2.0


def _leaves(setting):
    def wrong(x):
        setting()
        return x * 2.0

    return wrong


class _ModuleHooked(torch.nn.Module):
    pass


def _scale_alias(x):
    return x.mul_(1.0).mul(2.0) if False else (x if x.numel() == 0 else x.mul_(2.0))


_SCALE_ID_CACHE: dict = {}


def _scale_by_id(x):
    if id(x) not in _SCALE_ID_CACHE:
        _SCALE_ID_CACHE[id(x)] = x * 2.0
    return _SCALE_ID_CACHE[id(x)].clone()


_ONE = torch.ones(1)

SCALE_WRONG = {
    "default dtype": (_leaves(lambda: torch.set_default_dtype(torch.float64)), "others unchanged"),
    "threads": (_leaves(lambda: torch.set_num_threads(1)), "others unchanged"),
    "threads, to the count already set": (
        _leaves(lambda: torch.set_num_threads(torch.get_num_threads())),
        "others unchanged",
    ),
    "deterministic": (
        _leaves(lambda: torch.use_deterministic_algorithms(True)),
        "others unchanged",
    ),
    "torch seed": (_leaves(lambda: torch.manual_seed(0)), "others unchanged"),
    "torch draws": (_leaves(lambda: torch.rand(3)), "others unchanged"),
    "numpy seed": (_leaves(lambda: __import__("numpy").random.seed(0)), "others unchanged"),
    "environment": (
        _leaves(lambda: __import__("os").environ.__setitem__("ZG_PROBE", "1")),
        "others unchanged",
    ),
    "grad mode": (_leaves(lambda: torch.set_grad_enabled(False)), "others unchanged"),
    "global hook": (
        _leaves(lambda: torch.nn.modules.module.register_module_forward_hook(lambda *a: None)),
        "others unchanged",
    ),
    "requires grad on the input": (lambda x: x.requires_grad_() * 2.0, "inputs unchanged"),
    "hook left on the input": (
        lambda x: (x.requires_grad_(), x.register_hook(lambda g: g), (x * 2.0).detach())[-1],
        "inputs unchanged",
    ),
    "the input returned": (lambda x: x.mul_(2.0), "inputs unchanged"),
    "a view of the input": (
        lambda x: torch.stack([x * 2.0, x])[0] if False else (x * 2.0).expand(2, -1)[0],
        None,  # a fresh tensor after all: passes (the check is of memory, not of the call)
    ),
    "strided result": (lambda x: torch.stack([x * 2.0, x], 1)[:, 0], "returns"),
    "from_numpy": (lambda x: torch.from_numpy(x.numpy() * 2.0), "device"),
    "legacy constructor": (lambda x: torch.FloatTensor((x * 2.0).tolist()), "device"),
    "kept by id": (_scale_by_id, "no state"),
    # settings no list of the harness names: read from torch's and numpy's own getters
    "matmul precision": (
        _leaves(lambda: torch.set_float32_matmul_precision("high")),
        "others unchanged",
    ),
    "TF32 matmuls": (
        _leaves(lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True)),
        "others unchanged",
    ),
    "TF32 convolutions": (
        _leaves(lambda: setattr(torch.backends.cudnn, "allow_tf32", False)),
        "others unchanged",
    ),
    "warn always": (_leaves(lambda: torch.set_warn_always(True)), "others unchanged"),
    "torch print options": (
        _leaves(lambda: torch.set_printoptions(precision=9)),
        "others unchanged",
    ),
    "numpy errors": (_leaves(lambda: __import__("numpy").seterr(all="raise")), "others unchanged"),
    "numpy print options": (
        _leaves(lambda: __import__("numpy").set_printoptions(precision=3)),
        "others unchanged",
    ),
    "a memo kept on the input": (
        lambda x: (setattr(x, "memo", x * 2.0), x.memo.clone())[-1],
        "inputs unchanged",
    ),
}


def _library_settings_now():
    import numpy as np
    from torch._tensor_str import PRINT_OPTS

    return (
        torch.get_float32_matmul_precision(),
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.is_warn_always_enabled(),
        dict(vars(PRINT_OPTS)),
        np.geterr(),
        np.get_printoptions(),
    )


@pytest.mark.parametrize("name", sorted(SCALE_WRONG))
def test_every_way_around_the_values_is_caught(name):
    """Each wrong answer returns x * 2 (the right values) and breaks one clause the values do
    not show; check() names that clause, and leaves the process as it found it."""
    fn, clause = SCALE_WRONG[name]
    contract = Contract("scale", part="Test Part S")
    gen = torch.Generator().manual_seed(7)
    cases = [Case((torch.rand(n, generator=gen),), label=f"n={n}") for n in (5, 5, 3, 8)]
    state = (torch.get_default_dtype(), torch.get_num_threads(), torch.is_grad_enabled())
    rng = torch.random.get_rng_state()
    settings = _library_settings_now()
    try:
        if clause is None:
            assert check(fn, contract, cases, ref_scale) == len(cases)
        else:
            with pytest.raises(ContractFailure, match=f"clause '{clause}'"):
                check(fn, contract, cases, ref_scale)
    finally:
        import torch.nn.modules.module as module_hooks

        module_hooks._global_forward_hooks.clear()
        os_env = __import__("os").environ
        os_env.pop("ZG_PROBE", None)
    # the harness put back what the call changed
    assert (torch.get_default_dtype(), torch.get_num_threads(), torch.is_grad_enabled()) == state
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert _library_settings_now() == settings


def test_a_setting_the_reference_changes_too_is_allowed():
    """What the reference itself leaves changed (here: it draws from torch's generator) the
    student may change too: the clause is "as the reference leaves it"."""

    def ref_draws(x):
        return x * 2.0 + 0 * torch.rand(x.shape)

    def right_draws(x):
        torch.rand(1)
        return x * 2.0

    cases = [Case((torch.ones(n),), label=f"n={n}") for n in (2, 3)]
    assert check(right_draws, Contract("scale", part="Test Part S"), cases, ref_draws) == 2


@pytest.mark.parametrize(
    "expected, got, clause",
    [
        (1.5, 1, "dtype"),  # an int where a float is due
        (3, __import__("numpy").int64(3), "dtype"),
        (2.0, __import__("numpy").float64(2.0), "dtype"),
        (True, __import__("numpy").bool_(True), "dtype"),
        ([1, 2], (1, 2), "returns"),
        ((1, 2), [1, 2], "returns"),
        (3, 3, None),
        (2.0, 2.0, None),
        ([1.0, 2], [1.0, 2], None),
        ({"a": 1}, __import__("collections").Counter({"a": 1}), "returns"),
        ({"a": 1}, __import__("collections").defaultdict(int, {"a": 1}), "returns"),
        ({"a": 1}, __import__("collections").OrderedDict({"a": 1}), "returns"),
        ({"a": 1}, {"a": 1}, None),
    ],
)
def test_python_numbers_and_containers_are_their_exact_types(expected, got, clause):
    from zg_course.contract import compare_values

    found = compare_values(expected, got)
    assert (found[0] if found else None) == clause, found


def test_a_helper_cache_and_a_class_attribute_are_state():
    """State kept in a notebook's own helper (an lru_cache) or on a class it defined is state:
    the namespace's functions and classes are snapshotted, not only its dicts and lists."""
    namespace = {"__name__": "__main__", "torch": torch, "functools": functools}
    exec(
        "@functools.lru_cache(maxsize=None)\n"
        "def doubled(n):\n    return 2.0 * n\n"
        "def scale(x):\n    return x * doubled(1)\n"
        "class Memo:\n    last = None\n"
        "def scale2(x):\n    Memo.last = x.numel()\n    return x * 2.0\n",
        namespace,
    )
    cases = [Case((torch.ones(n),), label=f"n={n}") for n in (2, 3)]
    for name in ("scale", "scale2"):
        with pytest.raises(ContractFailure, match="clause 'no state'"):
            check(
                namespace[name], Contract("scale", part="T"), cases, ref_scale, namespace=namespace
            )


class Run:
    def __init__(self, steps):
        self.steps = steps


def ref_advance(run):
    run.steps += 1
    return run.steps


def wrong_marks_the_run(run):
    run.steps += 1
    run._seen = True  # state kept on the caller's object
    return run.steps


def test_an_attribute_left_on_an_argument_it_may_change_fails_updates():
    contract = Contract("advance", part="T", may_change=("run",))
    cases = [Case((Run(n),), label=f"steps={n}") for n in (0, 4)]
    assert check(ref_advance, contract, cases, ref_advance) == 2
    with pytest.raises(ContractFailure, match=r"clause 'updates'.*\['_seen'\] added"):
        check(wrong_marks_the_run, contract, cases, ref_advance)


def test_arguments_that_are_one_object_are_not_refilled_apart():
    """A case whose two arguments are one tensor (the same empty edge list as src and dst) is
    not refilled with the next case's two different tensors: a right answer keeps every point."""

    def add(a, b):
        return a + b

    empty = torch.zeros(0)
    cases = [
        Case((empty, empty), label="one tensor twice"),
        Case((torch.ones(3), torch.arange(3.0)), label="two tensors"),
        Case((torch.ones(2), torch.ones(2)), label="equal, not one"),
    ]
    assert check(add, Contract("add", part="T"), cases, add) == 3


def test_the_process_settings_are_read_from_the_libraries_getters_and_setters():
    """``others unchanged`` covers every setting a library offers a setter and a getter for, by
    their names, not a list: a setting a module gains is covered; a getter that takes arguments
    or warns (a deprecated alias) is not a setting."""
    import types
    import warnings

    import zg_course.contract as contract

    mod = types.ModuleType("fake")
    mod.level = 3
    mod.get_level = lambda: mod.level
    mod.set_level = lambda v: setattr(mod, "level", v)
    mod.is_fast_enabled = lambda: False
    mod.set_fast = lambda v: None
    mod.getsize = lambda: 8
    mod.setsize = lambda v: None
    mod.get_item = lambda i: i  # takes an argument
    mod.set_item = lambda i, v: None
    mod.get_old = lambda: warnings.warn("old", DeprecationWarning, stacklevel=2) or 1
    mod.set_old = lambda v: None
    mod.get_lonely = lambda: 1  # no setter
    found = {key: getter() for key, getter, _ in contract._paired(mod, "fake")}
    assert found == {"fake.get_level()": 3, "fake.is_fast_enabled()": False, "fake.getsize()": 8}
    state = contract._process_state()
    for key in (
        "torch.get_float32_matmul_precision()",
        "torch._C._get_cublas_allow_tf32()",
        "torch._C._get_cudnn_allow_tf32()",
        "numpy.geterr()",
        "numpy.get_printoptions()",
        "torch's print options (torch.set_printoptions)",
    ):
        assert key in state, key


def test_reading_the_process_settings_changes_none_of_the_graders_code():
    """The settings are found when the grader is imported: reading them the first time, inside a
    submission's fork, leaves every global of the grader as it was (zg_course/integrity.py
    would call a change tampering)."""
    import sys

    import processes

    code = (
        "import zg_course.contract as c\n"
        "from zg_course.integrity import changes, fingerprint\n"
        "before = fingerprint()\n"
        "c._process_state(); c._restore_process(c._process_state())\n"
        "print(changes(before))\n"
    )
    done = processes.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert out.strip().splitlines()[-1] == "[]", out


# ----------------------------------------------------------------------------- deterministic
# shuffled(n) -> list: some permutation of range(n), any one (compare accepts each), drawn from
# torch's generator, which the caller seeds: the same call gives the same permutation.


def _a_permutation(expected, got):
    ok = isinstance(got, list) and sorted(got) == list(range(len(expected)))
    return None if ok else f"expected a permutation of range({len(expected)}), got {got!r}"


def ref_shuffled(n):
    return torch.randperm(n).tolist()


def right_shuffled_by_sort(n):
    return torch.rand(n).argsort().tolist()  # another draw from the same generator


def wrong_own_random(n):
    import random

    out = list(range(n))
    random.Random().shuffle(out)  # seeded from the system's entropy at every call
    return out


def wrong_numpy_default_rng(n):
    import numpy as np

    return [int(v) for v in np.random.default_rng().permutation(n)]


def wrong_clock(n):
    import time

    g = torch.Generator().manual_seed(time.perf_counter_ns())
    return torch.randperm(n, generator=g).tolist()


SHUFFLED = Contract("shuffled", part="Test Part D", compare=_a_permutation, device=False)


@settings(max_examples=10, deadline=None)
@given(sizes=st.lists(st.integers(8, 40), min_size=1, max_size=4))
def test_the_same_call_twice_gives_the_same_answer(sizes):
    cases = [Case((n,), label=f"n={n}") for n in sizes]
    for right in (ref_shuffled, right_shuffled_by_sort):
        assert check(right, SHUFFLED, cases, ref_shuffled) == len(cases)
    for wrong in (wrong_own_random, wrong_numpy_default_rng, wrong_clock):
        with pytest.raises(ContractFailure, match="clause 'deterministic'") as caught:
            check(wrong, SHUFFLED, cases, ref_shuffled)
        assert "clause 'returns'" not in str(caught.value)  # each answer alone is valid


def test_a_measurement_may_differ_when_the_contract_says_so():
    """A function whose answer differs from call to call (a measurement) fails 'deterministic'
    unless its contract says deterministic=False; every answer alone is accepted."""
    import random

    def measured(n):
        return random.SystemRandom().random()  # the system's entropy: another value each call

    def a_fraction(expected, got):
        return None if isinstance(got, float) and 0.0 <= got < 1.0 else f"got {got!r}"

    cases = [Case((n,), label=f"n={n}") for n in (1, 2, 3)]
    strict = Contract("measured", part="Test Part D", compare=a_fraction)
    with pytest.raises(ContractFailure, match="clause 'deterministic'"):
        check(measured, strict, cases, lambda n: 0.5)
    loose = Contract("measured", part="Test Part D", compare=a_fraction, deterministic=False)
    assert "deterministic" not in loose.clauses and "deterministic" in strict.clauses
    assert check(measured, loose, cases, lambda n: 0.5) == 3


# ----------------------------------------------------------------------------- device, tagged
# degree_share(x) -> float32 [N]: x / x.sum() (0 where the sum is 0), on x's device. In the
# device check the inputs say they are on another device; every tensor made on the CPU and met
# with them, or returned, fails as on a GPU.


def ref_share(x):
    total = x.sum()
    return torch.where(total > 0, x / total.clamp_min(1e-12), torch.zeros_like(x))


RIGHT_SHARE = {
    "device=x.device": lambda x: (
        x / torch.full((), 1.0, device=x.device).mul(x.sum().clamp_min(1e-12)) * (x.sum() > 0)
    ),
    "new_zeros": lambda x: x.new_zeros(x.shape).add(x) / x.sum().clamp_min(1e-12),
    "a 0-d CPU scalar in an elementwise op": lambda x: (
        x * torch.tensor(1.0) / x.sum().clamp_min(torch.tensor(1e-12))
    ),
    "torch.tensor(..., device=x.device)": lambda x: (
        torch.tensor([1.0], device=x.device).expand_as(x) * x / x.sum().clamp_min(1e-12)
    ),
    "a host copy moved back": lambda x: (
        torch.from_numpy(x.cpu().numpy().copy()).to(x.device) / x.sum().clamp_min(1e-12)
    ),
    "host values read": lambda x: (
        x / max(float(x.sum().item()), 1e-12) if x.tolist() is not None else x
    ),
}
WRONG_SHARE = {
    "device='cpu'": lambda x: torch.ones(x.shape, device="cpu") * x / x.sum().clamp_min(1e-12),
    "no device=": lambda x: torch.ones(x.shape) * x / x.sum().clamp_min(1e-12),
    "a 0-d CPU tensor stacked": lambda x: (
        torch.stack([x.sum(), torch.tensor(1e-12)]).max().reciprocal() * x
    ),
    ".cpu() on the result": lambda x: (x / x.sum().clamp_min(1e-12)).cpu(),
    "computed in numpy": lambda x: torch.as_tensor(x.numpy() / max(float(x.numpy().sum()), 1e-12)),
    "torch.from_numpy": lambda x: (
        (torch.from_numpy(__import__("numpy").ones(x.shape, dtype="float32")) * x)
        / x.sum().clamp_min(1e-12)
    ),
}
SHARE = Contract("degree_share", part="Test Part E", rtol=1e-5, atol=1e-7)
shares = st.lists(st.integers(0, 9).map(float), min_size=1, max_size=10)


@settings(max_examples=8, deadline=None)
@given(lists=st.lists(shares, min_size=1, max_size=3))
def test_the_device_check_tags_the_inputs_and_refuses_a_cpu_tensor_among_them(lists):
    """Each way of making a tensor on the CPU (an explicit device='cpu', a 0-d CPU tensor where
    only an elementwise op takes one, a result moved to the CPU, numpy) fails 'device'; each way
    of following the inputs' device (and a 0-d CPU scalar in an elementwise op, as PyTorch
    allows) keeps the contract."""
    cases = [Case((torch.tensor(v),), label=f"case {i}") for i, v in enumerate(lists)]
    for name, right in RIGHT_SHARE.items():
        assert check(right, SHARE, cases, ref_share) == len(cases), name
    for name, wrong in WRONG_SHARE.items():
        with pytest.raises(ContractFailure, match="clause 'device'") as caught:
            check(wrong, SHARE, cases, ref_share)
        assert "clause 'returns'" not in str(caught.value), name  # right on the CPU


def _label_counts(g, nodes):
    labels = g.y[nodes]
    labels = labels[labels >= 0]
    return torch.bincount(labels, minlength=g.num_classes)


def test_a_kit_graph_is_moved_with_its_tensors():
    """A zg.Graph argument is copied with every tensor tagged (its methods and properties work
    on it; g.device names the inputs' device), so a result moved to the CPU fails."""
    import zg

    graphs = [zg.datasets.csbm(n, avg_degree=2, num_classes=3, feat_dim=2, seed=n) for n in (9, 30)]
    cases = [Case((g, torch.arange(0, g.num_nodes, 2)), label=f"n={g.num_nodes}") for g in graphs]
    counts = Contract("labelled_per_class", part="Test Part K")

    def follows(g, nodes):
        out = torch.zeros(g.num_classes, dtype=torch.int64, device=g.device)
        labels = g.y[nodes]
        labels = labels[labels >= 0]
        return out.index_add_(0, labels, torch.ones_like(labels))

    assert check(follows, counts, cases, _label_counts) == 2
    with pytest.raises(ContractFailure, match="clause 'device'.*came back on the CPU"):
        check(lambda g, nodes: _label_counts(g, nodes).cpu(), counts, cases, _label_counts)


def test_kit_objects_alone_are_tagged():
    """Arguments that are only kit objects (a Graph and a Partition, no tensor beside them):
    their tensors are tagged, and a tensor made on the CPU explicitly fails."""
    import zg
    from zg import grappa

    graphs = [zg.datasets.csbm(n, avg_degree=2, num_classes=3, feat_dim=2, seed=n) for n in (9, 30)]
    cases = [
        Case(
            (g, grappa.partition(g, num_parts=2, method="random", seed=0)), label=f"n={g.num_nodes}"
        )
        for g in graphs
    ]
    owners = Contract("owner_counts", part="Test Part K")

    def ref_owners(g, part):
        return torch.bincount(part.chunk_of, minlength=part.num_chunks)

    assert check(ref_owners, owners, cases, ref_owners) == 2
    with pytest.raises(ContractFailure, match="clause 'device'.*CPU tensor"):
        check(
            lambda g, part: (
                ref_owners(g, part) + torch.zeros(part.num_chunks, dtype=torch.int64, device="cpu")
            ),
            owners,
            cases,
            ref_owners,
        )


# ----------------------------------------------------------------------------- device, tagged:
# parameters (with their .grad), lists of them, and modules. A tagged parameter is still a
# torch.nn.Parameter and a leaf; a module's parameters and buffers are tagged in the check's own
# copy of it, so autograd, the module's forward and in-place updates run as on a GPU.


def ref_params_step_(params, lr):
    """In place: p -= lr * p.grad for every parameter with a gradient."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(lr * p.grad)


def _each_with_grad(step):
    def run(params, lr):
        with torch.no_grad():
            for p in params:
                if p.grad is not None:
                    step(p, lr)

    return run


def _cpu_grad_after(p, lr):
    p.sub_(lr * p.grad)
    p.grad = p.grad.to("cpu", copy=True)  # on a GPU: a gradient of another device, refused


RIGHT_SGD = {
    "sub_": _each_with_grad(lambda p, lr: p.sub_(lr * p.grad)),
    "device=p.device": _each_with_grad(
        lambda p, lr: p.sub_(torch.full(p.shape, lr, device=p.device) * p.grad)
    ),
    "zeros_like": _each_with_grad(lambda p, lr: p.copy_(torch.zeros_like(p) + p - lr * p.grad)),
    "a 0-d CPU scalar in an elementwise op": _each_with_grad(
        lambda p, lr: p.sub_(p.grad * torch.tensor(lr))
    ),
    "a CPU copy written back in place": _each_with_grad(
        lambda p, lr: p.copy_((p - lr * p.grad).cpu())  # copy_ moves it, on a GPU too
    ),
}
WRONG_SGD = {
    "device='cpu'": _each_with_grad(
        lambda p, lr: p.sub_(torch.full(p.shape, lr, device="cpu") * p.grad)
    ),
    "a 0-d CPU tensor stacked with the parameter's data": _each_with_grad(
        lambda p, lr: p.sub_(torch.stack([torch.tensor(lr), p.data.sum() * 0]).sum() * p.grad)
    ),
    "torch.zeros without device=": _each_with_grad(
        lambda p, lr: p.sub_(lr * p.grad + torch.zeros(p.numel()).view(p.shape))
    ),
    "a CPU gradient assigned": _each_with_grad(_cpu_grad_after),
}
PARAMS_STEP = Contract("sgd_", part="Test Part L", may_change=("params",), in_place=("params",))


def _parameters(shapes, seed):
    gen = torch.Generator().manual_seed(seed)
    params = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
    for p in params[::2]:
        p.grad = torch.randn(p.shape, generator=gen)
    return params


@settings(max_examples=4, deadline=None)
@given(
    shapes=st.lists(
        st.lists(st.integers(1, 4), min_size=1, max_size=2).map(tuple), min_size=1, max_size=3
    )
)
def test_the_device_check_tags_parameters_and_their_gradients(shapes):
    """A list of parameters with gradients is tagged (each stays a Parameter, its .grad tagged
    with it): an in-place step that follows the parameters' device keeps the contract; one that
    makes a tensor on the CPU (device='cpu', a 0-d CPU tensor stacked with the parameter's data,
    torch.zeros without device=) and mixes it with a parameter fails 'device', as on a GPU."""
    cases = [
        Case((_parameters(shapes, seed), 0.1 * (seed + 1)), label=f"seed {seed}") for seed in (0, 1)
    ]
    for name, right in RIGHT_SGD.items():
        assert check(right, PARAMS_STEP, cases, ref_params_step_) == 2, name
    for name, wrong in WRONG_SGD.items():
        with pytest.raises(ContractFailure, match="clause 'device'") as caught:
            check(wrong, PARAMS_STEP, cases, ref_params_step_)
        assert "clause 'returns'" not in str(caught.value), name  # right on the CPU


def ref_grad_norms(params):
    """float32 [P]: the norm of each parameter's gradient (0 where it has none)."""
    return torch.stack(
        [p.grad.norm() if p.grad is not None else p.detach().new_zeros(()) for p in params]
    )


NORMS = Contract("grad_norms", part="Test Part L")


def test_a_result_made_from_parameters_must_stay_on_their_device():
    cases = [
        Case((_parameters([(2, 3), (4,), ()], seed),), label=f"seed {seed}") for seed in (0, 1)
    ]
    assert check(ref_grad_norms, NORMS, cases, ref_grad_norms) == 2
    with pytest.raises(ContractFailure, match="clause 'device'.*came back on the CPU"):
        check(lambda params: ref_grad_norms(params).cpu(), NORMS, cases, ref_grad_norms)
    with pytest.raises(ContractFailure, match="clause 'device'.*aten.stack"):
        check(
            lambda params: torch.stack(
                [p.grad.norm() if p.grad is not None else torch.zeros(()) for p in params]
            ),
            NORMS,
            cases,
            ref_grad_norms,
        )


def _module(seed):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.BatchNorm1d(4))
    m.eval()  # the running statistics (buffers) are used
    m[2].running_mean.uniform_(-1, 1)
    return m


def ref_project(m, x):
    return m(x).detach()


RIGHT_PROJECT = {
    "the module": ref_project,
    "by hand, on the parameters": lambda m, x: m[2](
        torch.relu(x @ m[0].weight.T + m[0].bias)
    ).detach(),
    "a tensor made on the module's device": lambda m, x: (
        ref_project(m, x) + torch.zeros(4, device=next(m.parameters()).device)
    ),
}
WRONG_PROJECT = {
    ".cpu() on the result": lambda m, x: ref_project(m, x).cpu(),
    "device='cpu'": lambda m, x: ref_project(m, x) + torch.zeros(4, device="cpu"),
    "torch.zeros without device=": lambda m, x: ref_project(m, x) + torch.zeros(4),
    "a 0-d CPU tensor stacked with the parameter's data": lambda m, x: (
        ref_project(m, x) * torch.stack([m[0].weight.data.sum() * 0, torch.tensor(1.0)]).sum()
    ),
    "a buffer's values read against a CPU tensor": lambda m, x: (
        ref_project(m, x) + (m[2].running_var - torch.ones(4, device="cpu")) * 0
    ),
}
PROJECT = Contract("project", part="Test Part L", rtol=1e-5, atol=1e-6)


def test_the_device_check_tags_a_modules_parameters_and_buffers():
    """A module argument is tagged in the check's own copy (parameters and buffers): its forward
    runs, a result on its device keeps the contract, and every way of putting a CPU tensor in the
    computation or the result fails 'device'."""
    cases = [Case((_module(seed), torch.randn(5, 3)), label=f"seed {seed}") for seed in (0, 1)]
    for name, right in RIGHT_PROJECT.items():
        assert check(right, PROJECT, cases, ref_project) == 2, name
    for name, wrong in WRONG_PROJECT.items():
        with pytest.raises(ContractFailure, match="clause 'device'") as caught:
            check(wrong, PROJECT, cases, ref_project)
        assert "clause 'returns'" not in str(caught.value), name


def ref_train_step_(m, x, lr):
    """One step in place: loss = m(x).square().mean(), backward, p -= lr * p.grad; returns the loss."""
    m.zero_grad()
    loss = m(x).square().mean()
    loss.backward()
    with torch.no_grad():
        for p in m.parameters():
            p.sub_(lr * p.grad)
    return loss.detach()


def test_a_module_changed_in_place_is_judged_on_its_own_copy():
    """A step that trains a module in place: the main call still sees its own module (may_change,
    in_place judge it), the device run a tagged copy, where backward makes tagged gradients."""
    step = Contract(
        "train_step_", part="Test Part L", may_change=("m",), in_place=("m",), rtol=1e-5, atol=1e-6
    )
    cases = [
        Case((torch.nn.Linear(3, 2), torch.randn(4, 3), 0.1), label=f"case {i}") for i in range(2)
    ]
    assert check(ref_train_step_, step, cases, ref_train_step_) == 2

    def explicit_cpu(m, x, lr):
        m.zero_grad()
        loss = m(x).square().mean()
        loss.backward()
        with torch.no_grad():
            for p in m.parameters():
                p.sub_(lr * p.grad + torch.zeros(p.shape, device="cpu"))
        return loss.detach()

    with pytest.raises(ContractFailure, match="clause 'device'"):
        check(explicit_cpu, step, cases, ref_train_step_)

    def replaces(m, x, lr):  # right values, new parameters: in_place judges it
        loss = ref_train_step_(m, x, lr)
        m.weight = torch.nn.Parameter(m.weight.detach().clone())
        return loss

    with pytest.raises(ContractFailure, match="clause 'updates'") as caught:
        check(replaces, step, cases, ref_train_step_)
    assert "clause 'device'" not in str(caught.value)


class _Holder:
    """A notebook's (here a test's) own class holding a model and a tensor."""

    def __init__(self, seed):
        self.model = _module(seed)
        self.x = torch.randn(5, 3)
        self.scale = 2.0


def test_an_object_of_the_students_own_class_is_tagged():
    cases = [Case((_Holder(seed),), label=f"seed {seed}") for seed in (0, 1)]
    holds = Contract("held", part="Test Part L", rtol=1e-5, atol=1e-6)

    def ref_held(h):
        return h.model(h.x).detach() * h.scale

    assert check(ref_held, holds, cases, ref_held) == 2
    with pytest.raises(ContractFailure, match="clause 'device'.*CPU tensor"):
        check(lambda h: ref_held(h) * torch.ones(4, device="cpu"), holds, cases, ref_held)


def _opt_step(m, opt, x):
    opt.zero_grad()
    m(x).square().mean().backward()
    opt.step()
    return torch.cat([p.detach().flatten() for p in m.parameters()])


def test_an_optimizers_state_is_tagged_and_keyed_by_the_tagged_parameters():
    """(Unit-level: the main call's clauses compare an optimizer's state by its parameter keys,
    which differ between the reference's copy and the function's, so an optimizer is no case
    argument yet.) A module and its optimizer get one tagged parameter each for both; the
    momentum buffers are tagged, keyed by the module's tagged parameters, and a step under
    the device check's modes runs and leaves every parameter tagged."""
    from zg_course.contract import _Elsewhere, _elsewhere, _ElsewhereMode, _MadeElsewhere

    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    _opt_step(m, opt, torch.randn(4, 3))
    want = [p.detach().clone() for p in m.parameters()]
    memo: dict = {}
    tm, topt, x = _elsewhere((m, opt, torch.randn(4, 3)), memo=memo)
    params = list(tm.parameters())
    assert all(isinstance(p, _Elsewhere) and isinstance(p, torch.nn.Parameter) for p in params)
    assert topt.param_groups[0]["params"] == params and list(topt.state) == params
    assert all(isinstance(s["momentum_buffer"], _Elsewhere) for s in topt.state.values())
    with _MadeElsewhere(), _ElsewhereMode():
        out = _opt_step(tm, topt, x)
    assert isinstance(out, _Elsewhere) and all(isinstance(p.grad, _Elsewhere) for p in params)
    assert not any(torch.equal(p.elem, w) for p, w in zip(params, want))  # the step moved them


def test_a_librarys_object_holding_a_tensor_falls_back_to_redirection():
    """An argument of a library's class that holds a tensor (a SimpleNamespace) cannot be tagged
    (such an object may keep tensors out of reach): the check by redirection judges, and still
    catches a tensor made without device=."""
    import types

    cases = [Case((types.SimpleNamespace(x=torch.ones(3) * k),), label=f"k={k}") for k in (1, 2)]
    doubled = Contract("doubled", part="Test Part L")
    assert check(lambda ns: ns.x * 2, doubled, cases, lambda ns: ns.x * 2) == 2
    with pytest.raises(ContractFailure, match="clause 'device'"):
        check(lambda ns: ns.x * 2 + torch.zeros(3), doubled, cases, lambda ns: ns.x * 2)
