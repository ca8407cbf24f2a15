"""SyncAudit catches every host sync and data-dependent-shape op it lists, counts nothing in
sync-free code, and keeps a consistent state through nesting, exceptions and reset."""

import inspect
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from zg.audit import (
    _CUDA_SYNC_MESSAGE,
    DYNAMIC_SHAPE,
    HOST_SYNC,
    SyncAudit,
    _crosses_host,
    count_syncs,
)


def _inputs():
    ints = torch.tensor([0, 1, 2, 2, 0, 3])  # int64 [6]
    return SimpleNamespace(
        ints=ints,
        mask=ints > 0,  # bool [6]
        floats=torch.tensor([0.5, 1.5, -1.0, 2.0]),  # float32 [4]
        other=torch.tensor([0.5, 1.5, -1.0, 2.0]),  # equal values, another tensor
        matrix=torch.arange(6.0).view(2, 3),  # float32 [2, 3]
        rows=torch.tensor([[1, 2], [1, 2], [3, 4]]),  # int64 [3, 2]
        buffer=torch.zeros(6),  # float32 [6], preallocated
        index=torch.tensor([4, 0, 2]),  # int64 [3]
    )


def _if(x):
    if x.ints[1]:
        pass


def _setitem_bool(x):
    x.ints[x.mask] = 7


def _case(program, kind, *op_names, marks=()):
    """One program that must trigger ``kind``; any of ``op_names`` may name it in per_op (some
    composite ops arrive as the op they decompose into)."""
    return pytest.param(
        program,
        kind,
        set(op_names),
        marks=marks,
        id=program.__name__ if program.__name__ != "<lambda>" else op_names[0],
    )


SYNCING = [
    # one value read on the host
    _case(lambda x: x.ints[1].item(), HOST_SYNC, "_local_scalar_dense"),
    pytest.param(lambda x: int(x.ints[1]), HOST_SYNC, {"_local_scalar_dense"}, id="int"),
    pytest.param(lambda x: float(x.floats[0]), HOST_SYNC, {"_local_scalar_dense"}, id="float"),
    pytest.param(lambda x: bool(x.ints[1]), HOST_SYNC, {"_local_scalar_dense"}, id="bool"),
    _case(_if, HOST_SYNC, "_local_scalar_dense"),
    pytest.param(
        lambda x: x.ints[1].is_nonzero(),
        HOST_SYNC,
        {"is_nonzero", "_local_scalar_dense"},
        id="is_nonzero",
    ),
    pytest.param(lambda x: torch.equal(x.floats, x.other), HOST_SYNC, {"equal"}, id="equal"),
    pytest.param(
        lambda x: torch.allclose(x.floats, x.other), HOST_SYNC, {"allclose"}, id="allclose"
    ),
    pytest.param(
        lambda x: torch.histc(x.floats, bins=4), HOST_SYNC, {"histc"}, id="histc-data-range"
    ),
    _case(_setitem_bool, HOST_SYNC, "index_put_"),
    pytest.param(
        lambda x: x.ints.index_put_((x.mask,), torch.tensor(7)),
        HOST_SYNC,
        {"index_put_"},
        id="index_put_-bool",
    ),
    # data read on the host at the Python level
    pytest.param(lambda x: x.ints.tolist(), HOST_SYNC, {"tolist"}, id="tolist"),
    pytest.param(lambda x: repr(x.ints), HOST_SYNC, {"__repr__"}, id="print"),
    pytest.param(lambda x: f"{x.floats[0]:.2f}", HOST_SYNC, {"__format__"}, id="f-string"),
    # output shape depends on values
    pytest.param(lambda x: x.ints.nonzero(), DYNAMIC_SHAPE, {"nonzero"}, id="nonzero"),
    pytest.param(lambda x: torch.where(x.mask), DYNAMIC_SHAPE, {"nonzero"}, id="where-1-arg"),
    pytest.param(
        lambda x: torch.argwhere(x.ints), DYNAMIC_SHAPE, {"argwhere", "nonzero"}, id="argwhere"
    ),
    pytest.param(
        lambda x: torch.unique(x.ints), DYNAMIC_SHAPE, {"_unique2", "unique"}, id="unique"
    ),
    pytest.param(
        lambda x: torch.unique(x.ints, return_inverse=True, return_counts=True),
        DYNAMIC_SHAPE,
        {"_unique2", "unique"},
        id="unique-inverse",
    ),
    pytest.param(lambda x: torch._unique(x.ints), DYNAMIC_SHAPE, {"_unique"}, id="_unique"),
    pytest.param(
        lambda x: torch.unique(x.rows, dim=0), DYNAMIC_SHAPE, {"unique_dim"}, id="unique_dim"
    ),
    pytest.param(
        lambda x: torch.unique_consecutive(x.ints),
        DYNAMIC_SHAPE,
        {"unique_consecutive"},
        id="unique_consecutive",
    ),
    pytest.param(
        lambda x: torch.unique_consecutive(x.rows, dim=0),
        DYNAMIC_SHAPE,
        {"unique_consecutive", "unique_dim_consecutive"},
        id="unique_consecutive-dim",
    ),
    pytest.param(lambda x: x.ints[x.mask], DYNAMIC_SHAPE, {"index"}, id="bool-mask-index"),
    pytest.param(
        lambda x: x.ints[x.mask.to(torch.uint8)],
        DYNAMIC_SHAPE,
        {"index"},
        id="uint8-mask-index",
        marks=pytest.mark.filterwarnings("ignore:indexing with dtype torch.uint8"),
    ),
    pytest.param(
        lambda x: x.ints.masked_select(x.mask), DYNAMIC_SHAPE, {"masked_select"}, id="masked_select"
    ),
    pytest.param(
        lambda x: torch.repeat_interleave(x.ints, x.ints),
        DYNAMIC_SHAPE,
        {"repeat_interleave"},
        id="repeat_interleave",
    ),
    pytest.param(
        lambda x: torch.repeat_interleave(x.ints),
        DYNAMIC_SHAPE,
        {"repeat_interleave"},
        id="repeat_interleave-counts",
    ),
    pytest.param(lambda x: torch.bincount(x.ints), DYNAMIC_SHAPE, {"bincount"}, id="bincount"),
    pytest.param(
        lambda x: torch.bincount(x.ints, minlength=10),
        DYNAMIC_SHAPE,
        {"bincount"},
        id="bincount-minlength",
    ),
]


@pytest.mark.parametrize("program, kind, op_names", SYNCING)
def test_catches_each_syncing_op(program, kind, op_names):
    x = _inputs()
    with SyncAudit() as audit:
        program(x)
    assert audit.host_syncs >= 1
    if kind == DYNAMIC_SHAPE:
        assert audit.dynamic_shape_ops >= 1
    else:
        assert audit.dynamic_shape_ops == 0
    assert op_names & set(audit.per_op), audit.per_op
    assert all(k == kind for op, k in audit.events if op in op_names)


def _inplace_on_buffers(x):
    x.buffer.mul_(2).add_(1)
    torch.add(x.buffer, 1, out=x.buffer)
    x.buffer.copy_(x.buffer.flip(0))
    x.buffer.masked_fill_(x.mask, 0.0)


def _training_step(x):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(x.matrix), torch.tensor([0, 1]))
    loss.backward()
    optimizer.step()


SYNC_FREE = [
    pytest.param(lambda x: (x.floats * 2 + 1).exp().sum(), id="arithmetic"),
    pytest.param(lambda x: x.matrix @ x.matrix.T, id="matmul"),
    pytest.param(lambda x: torch.sort(x.ints), id="sort"),
    pytest.param(lambda x: torch.topk(x.floats, 2), id="topk"),
    pytest.param(lambda x: x.buffer.scatter_add_(0, x.ints, torch.ones(6)), id="scatter_add_"),
    pytest.param(lambda x: x.buffer.index_add_(0, x.index, torch.ones(3)), id="index_add_"),
    pytest.param(lambda x: x.ints.index_select(0, x.index), id="index_select"),
    pytest.param(lambda x: torch.gather(x.ints, 0, x.index), id="gather"),
    pytest.param(lambda x: x.ints.cumsum(0), id="cumsum"),
    pytest.param(lambda x: torch.where(x.mask, x.ints, 0), id="where-3-arg"),
    pytest.param(lambda x: x.ints.masked_fill(x.mask, 0), id="masked_fill"),
    pytest.param(
        lambda x: torch.zeros(6).masked_scatter(x.mask, torch.ones(6)), id="masked_scatter"
    ),
    pytest.param(lambda x: torch.histc(x.floats, bins=4, min=-2, max=2), id="histc-range"),
    pytest.param(
        lambda x: torch.repeat_interleave(x.ints, x.ints, output_size=8),
        id="repeat_interleave-output_size",
    ),
    pytest.param(lambda x: torch.repeat_interleave(x.ints, 2), id="repeat_interleave-int"),
    pytest.param(lambda x: x.ints[x.index], id="int64-index"),
    pytest.param(lambda x: x.ints.max(), id="max-stays-on-device"),
    pytest.param(lambda x: x.mask.any(), id="any-stays-on-device"),
    pytest.param(lambda x: x.ints.to("meta"), id="copy-to-meta"),
    # numpy refuses device tensors (the sync is the .cpu() before it); host data is free
    pytest.param(lambda x: x.ints.numpy().max(), id="numpy"),
    pytest.param(lambda x: np.asarray(x.ints), id="np.asarray"),
    pytest.param(_inplace_on_buffers, id="in-place-on-buffers"),
    pytest.param(_training_step, id="sgd-training-step"),
]
if hasattr(torch, "nonzero_static"):
    SYNC_FREE.append(
        pytest.param(lambda x: torch.nonzero_static(x.ints, size=6), id="nonzero_static")
    )


@pytest.mark.parametrize("program", SYNC_FREE)
def test_sync_free_programs_count_zero(program):
    x = _inputs()
    with SyncAudit() as audit:
        program(x)
    assert audit.host_syncs == 0, audit.report()
    assert audit.dynamic_shape_ops == 0
    assert audit.events == [] and not audit.per_op


def test_copy_between_host_and_device_is_a_sync_unless_non_blocking():
    # The full path needs a GPU (test_cuda_sync_debug_mode); here the rule itself.
    cpu, cuda, meta = torch.device("cpu"), torch.device("cuda", 0), torch.device("meta")
    assert _crosses_host(cuda, cpu) and _crosses_host(cpu, cuda)
    assert not _crosses_host(cpu, cpu) and not _crosses_host(cuda, cuda)
    assert not _crosses_host(cpu, meta)


def test_each_event_is_recorded_in_order_with_its_kind():
    x = _inputs()
    with SyncAudit() as audit:
        x.ints.nonzero()
        x.ints[0].item()
        x.ints.nonzero()
    assert audit.events == [
        ("nonzero", DYNAMIC_SHAPE),
        ("_local_scalar_dense", HOST_SYNC),
        ("nonzero", DYNAMIC_SHAPE),
    ]
    assert audit.per_op == {"nonzero": 2, "_local_scalar_dense": 1}
    assert (audit.host_syncs, audit.dynamic_shape_ops) == (3, 2)


def test_where_points_at_the_line_that_synced():
    x = _inputs()
    with SyncAudit(where=True) as audit:
        line = inspect.currentframe().f_lineno + 1
        x.ints[x.mask]
    assert audit.locations == [
        f"core/test_audit.py:{line} (test_where_points_at_the_line_that_synced)"
    ]
    assert f"test_audit.py:{line}" in audit.report()


def test_without_where_locations_are_none():
    with SyncAudit() as audit:
        torch.tensor(1).item()
    assert audit.locations == [None]


def test_allocations_count_new_tensors_and_their_bytes():
    with SyncAudit() as audit:
        torch.empty(10)  # float32 [10]
    assert audit.allocations >= 1 and audit.allocated_bytes >= 40

    buffer, ones = torch.zeros(10), torch.ones(10)
    with SyncAudit() as audit:
        buffer.add_(ones)
        buffer.view(2, 5)[0].mul_(2)
    assert (audit.allocations, audit.allocated_bytes) == (0, 0)

    with SyncAudit() as audit:
        buffer + ones  # float32 [10]
        torch.zeros(3, dtype=torch.int64)  # int64 [3]
    assert (audit.allocations, audit.allocated_bytes) == (2, 40 + 24)


def test_nested_audits_both_count_and_inner_inspection_is_invisible():
    x = _inputs()
    with SyncAudit() as outer:
        x.ints[0].item()
        with SyncAudit() as inner:
            x.ints[x.mask]  # inner inspects the index dtype
            x.ints.tolist()
            torch.empty(4)
        assert _get_current_dispatch_mode() is outer
    assert inner.per_op == {"index": 1, "tolist": 1}
    assert outer.per_op == {"_local_scalar_dense": 1, "index": 1, "tolist": 1}
    # x.ints[0] is a view: the only allocations are those of the inner block
    assert (outer.allocations, outer.allocated_bytes) == (inner.allocations, inner.allocated_bytes)
    assert _get_current_dispatch_mode() is None


def test_exception_inside_the_block_pops_the_modes_and_keeps_the_counts():
    function_modes_before = torch._C._len_torch_function_stack()
    with pytest.raises(ValueError, match="boom"):
        with SyncAudit() as audit:
            torch.tensor(3).item()
            raise ValueError("boom")
    assert _get_current_dispatch_mode() is None
    assert torch._C._len_torch_function_stack() == function_modes_before
    assert audit.host_syncs == 1
    # An op that fails inside the block is still counted, and the audit can be entered again.
    with pytest.raises(RuntimeError):
        with audit:
            torch.bincount(torch.tensor([-1]))  # the kernel rejects negatives
    assert audit.per_op == {"_local_scalar_dense": 1, "bincount": 1}
    assert _get_current_dispatch_mode() is None


def test_reset_clears_everything():
    with SyncAudit(where=True) as audit:
        torch.tensor([1, 0]).nonzero()
    audit.reset()
    assert (
        audit.host_syncs,
        audit.dynamic_shape_ops,
        audit.allocations,
        audit.allocated_bytes,
        audit.cuda_sync_warnings,
    ) == (0, 0, 0, 0, 0)
    assert audit.events == [] and audit.locations == [] and not audit.per_op


def test_report_lists_ops_and_says_what_it_means():
    x = _inputs()
    with SyncAudit(where=True) as audit:
        x.ints.nonzero()
        x.ints.nonzero()
        x.ints[0].item()
    text = audit.report()
    assert "3 host syncs (2 with data-dependent shapes)" in text
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith("  ")}
    assert rows["nonzero"][1:3] == [DYNAMIC_SHAPE, "2"]
    assert rows["_local_scalar_dense"][1:3] == [HOST_SYNC, "1"]
    assert "non-zero entries" in text and "CPU wait" in text and "where:" in text

    with SyncAudit() as clean:
        x.floats * 2
    assert "No host syncs" in clean.report() and "CUDA Graph" in clean.report()


def test_count_syncs_returns_result_and_audit():
    result, audit = count_syncs(lambda t, k: int(t.sum()) * k, torch.tensor([1, 2]), k=3)
    assert result == 9
    assert audit.per_op == {"_local_scalar_dense": 1}
    assert audit.locations[0] is not None
    with pytest.raises(TypeError, match="fn"):
        count_syncs(42)
    with pytest.raises(TypeError, match="where"):
        SyncAudit(where="yes")


@pytest.mark.skipif(
    not hasattr(torch._C, "_cuda_set_sync_debug_mode"), reason="torch built without CUDA"
)
def test_cuda_warning_bookkeeping_without_a_gpu(monkeypatch):
    # A CUDA build can flip the sync debug mode without a driver; a plain warning stands in for
    # the one torch's kernels emit.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with SyncAudit() as outer:
            assert torch._C._cuda_get_sync_debug_mode() == 1
            warnings.warn(_CUDA_SYNC_MESSAGE, stacklevel=1)
            with SyncAudit() as inner:
                warnings.warn(_CUDA_SYNC_MESSAGE, stacklevel=1)
                warnings.warn("unrelated", stacklevel=1)
            assert torch._C._cuda_get_sync_debug_mode() == 1
        assert torch._C._cuda_get_sync_debug_mode() == 0
    assert (inner.cuda_sync_warnings, outer.cuda_sync_warnings) == (1, 2)
    assert [str(w.message) for w in seen] == ["unrelated"]  # sync warnings nobody asked for
    assert "CUDA sync debug mode reported 2 syncs" in outer.report()

    with pytest.raises(ValueError):
        with SyncAudit():
            raise ValueError("the mode is restored on the way out")
    assert torch._C._cuda_get_sync_debug_mode() == 0


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_sync_debug_mode_is_counted_and_restored():
    previous = torch.cuda.get_sync_debug_mode()
    x = torch.arange(5, device="cuda")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        with SyncAudit() as audit:
            x.sum().item()
            x.nonzero()
            x.cpu()
            x.to("cpu", non_blocking=True)
            y = x * 2  # no sync
        torch.cuda.synchronize()
    assert audit.cuda_sync_warnings >= 3
    assert audit.per_op["_local_scalar_dense"] == 1 and audit.per_op["nonzero"] == 1
    assert audit.per_op["_to_copy"] == 1  # the non_blocking copy is free
    assert torch.cuda.get_sync_debug_mode() == previous
    if previous == 0:  # nobody outside asked for them
        assert not any("synchronizing" in str(w.message) for w in seen)
    del y


# ----------------------------------------------------------------------------- launches


def test_launch_count_of_a_hand_counted_toy_step():
    """mm, relu, sum, add launch; t(), view(), empty() do not (a view, a view, an allocation)."""
    from zg.audit import LaunchCount, SyncAudit

    x, w = torch.randn(4, 3), torch.randn(3, 2)

    def toy():
        y = (x @ w).relu()  # mm, relu
        z = y.t()  # view
        torch.empty(3)  # allocation only
        x.view(-1)  # view
        return z.sum() + 1  # sum, add

    with LaunchCount() as count, SyncAudit() as audit:
        toy()
    assert count.launches == 4, count.report()
    assert dict(count.per_op) == {"mm": 1, "relu": 1, "sum": 1, "add": 1}
    assert audit.launches == 4 and audit.launches_per_op == count.per_op


def test_launches_reach_epoch_stats():
    import zg
    from zg import models
    from zg.audit import LaunchCount

    g = zg.datasets.csbm(num_nodes=600, avg_degree=8, num_classes=3, feat_dim=8, seed=0)
    torch.manual_seed(0)
    eng = zg.Engine(
        g, models.build("sage", g.feat_dim, 16, g.num_classes, 2), [5, 5], 64, kernel="torch"
    )
    eng.train_epoch()
    stats = eng.train_epoch()
    with LaunchCount() as count:
        eng.run_batch(1, 1)
    assert stats.launches == count.launches > 0


# ----------------------------------------------------------------------------- strict mode


STRICT_ONLY = [
    # every way data reaches the host that runs no counted aten op on the CPU
    pytest.param(lambda x: x.ints.numpy(), "numpy", id="numpy"),
    pytest.param(lambda x: np.asarray(x.ints), "__array__", id="np.asarray"),
    pytest.param(lambda x: np.array(x.floats), "__array__", id="np.array"),
    pytest.param(lambda x: [v for v in x.ints], "__iter__", id="iteration"),
    pytest.param(lambda x: list(x.floats), "__iter__", id="list"),
    pytest.param(lambda x: x.ints.cpu(), "cpu", id="cpu"),
    pytest.param(lambda x: x.ints.to("cpu"), "to", id="to-cpu"),
    pytest.param(lambda x: x.ints.to(device=torch.device("cpu")), "to", id="to-device-cpu"),
    pytest.param(lambda x: np.unique(x.ints.numpy()[x.mask.numpy()]), "numpy", id="np.unique"),
]


@pytest.mark.parametrize("program, op", STRICT_ONLY)
def test_strict_mode_counts_what_the_default_mode_lets_through(program, op):
    """On the CPU these read host memory without a syncing aten op (the default mode's rule:
    validation of host-side inputs stays out of the audit); on a GPU each moves data to the host,
    so the strict audit counts it, as a whole-tensor copy."""
    with SyncAudit() as default:
        program(_inputs())
    assert default.host_syncs == 0, default.report()
    with SyncAudit(strict=True) as strict:
        program(_inputs())
    assert strict.host_syncs >= 1 and set(strict.per_op) == {op}, strict.report()
    assert strict.host_copies == strict.host_syncs and strict.dynamic_shape_ops == 0


SCALAR_READS = [
    pytest.param(lambda x: x.ints[1].item(), id="item"),
    pytest.param(lambda x: bool(x.ints[1]), id="bool"),
    pytest.param(lambda x: int(x.ints[1]), id="int"),
    pytest.param(lambda x: float(x.floats[0]), id="float"),
    pytest.param(lambda x: [10, 20, 30][x.ints[2]], id="index"),
    pytest.param(lambda x: range(x.ints[3]), id="range"),
    pytest.param(lambda x: 2 in x.ints, id="contains"),
    pytest.param(_if, id="if"),
]


@pytest.mark.parametrize("program", SCALAR_READS)
def test_strict_mode_counts_each_scalar_read_once_under_the_default_name(program):
    """.item(), bool, int, float, __index__, `in`: one event each, named as the default mode
    names it (the aten op underneath), so both modes agree and nothing is counted twice."""
    with SyncAudit() as default:
        program(_inputs())
    with SyncAudit(strict=True) as strict:
        program(_inputs())
    assert strict.host_syncs == default.host_syncs == 1, (default.report(), strict.report())
    assert strict.per_op == default.per_op == {"_local_scalar_dense": 1}
    assert strict.host_copies == 0


@pytest.mark.parametrize(
    "program, op",
    [
        pytest.param(lambda x: x.ints.tolist(), "tolist", id="tolist"),
        pytest.param(lambda x: repr(x.ints), "__repr__", id="repr"),
        pytest.param(lambda x: f"{x.floats[0]:.2f}", "__format__", id="format"),
    ],
)
def test_strict_and_default_agree_on_python_level_reads_the_default_already_counts(program, op):
    for strict in (False, True):
        with SyncAudit(strict=strict) as audit:
            program(_inputs())
        assert dict(audit.per_op) == {op: 1} and audit.host_copies == 1, (strict, audit.report())


@pytest.mark.parametrize("program", [p for p in SYNC_FREE if p.id not in ("numpy", "np.asarray")])
def test_strict_mode_still_counts_zero_in_sync_free_code(program):
    """Every device-side program of the default mode's list (the two numpy reads of host memory
    are exactly what strict mode adds, above)."""
    with SyncAudit(strict=True) as audit:
        program(_inputs())
    assert audit.host_syncs == 0, audit.report()


def test_strict_mode_leaves_device_free_conversions_alone():
    """Changing dtype, making views, shapes and len() read no data: 0 in both modes."""
    x = _inputs()
    with SyncAudit(strict=True) as audit:
        x.ints.to(torch.float32)
        x.ints.to(dtype=torch.float64)
        x.matrix.view(-1)
        len(x.ints)
        x.ints.shape[0] + x.ints.numel()
        torch.where(x.mask, x.ints, 0).sum()
    assert audit.host_syncs == 0, audit.report()


def test_default_mode_is_unchanged_by_strict_mode():
    """The documented default rules: .numpy() / np.asarray of a CPU tensor, .cpu() and
    iteration are not counted; .item() and tolist are."""
    x = _inputs()
    with SyncAudit() as audit:
        x.ints.numpy()
        np.asarray(x.floats)
        x.ints.cpu()
        list(x.ints)
    assert audit.host_syncs == 0 and not audit.strict, audit.report()
    with SyncAudit() as audit:
        x.ints[0].item()
        x.ints.tolist()
    assert dict(audit.per_op) == {"_local_scalar_dense": 1, "tolist": 1}


def test_strict_mode_nests_with_a_default_audit_and_rejects_a_non_bool():
    x = _inputs()
    with SyncAudit() as outer, SyncAudit(strict=True) as inner:
        x.ints.numpy()
        x.ints[0].item()
    assert inner.host_syncs == 2 and dict(inner.per_op) == {"numpy": 1, "_local_scalar_dense": 1}
    assert outer.host_syncs == 1 and dict(outer.per_op) == {"_local_scalar_dense": 1}
    assert "strict=True" in repr(inner) and "numpy" in inner.report()
    with pytest.raises(TypeError, match="strict must be a bool"):
        SyncAudit(strict=1)


def test_strict_mode_catches_the_lab_1_host_round_trips():
    """Issue 27: Part C of Lab 1 solved by moving the hop to the host must not look sync-free."""
    dst = torch.tensor([4, 1])
    nbrs = torch.tensor([[1, 7, 9], [7, 2, 0]])
    mask = torch.tensor([[True, True, False], [True, True, False]])

    def via_numpy():
        new = np.setdiff1d(np.unique(nbrs.numpy()[mask.numpy()]), dst.numpy())
        return torch.cat([dst, torch.from_numpy(new)])

    def via_set():
        seen = set(dst.tolist())
        new = sorted(set(torch.where(mask, nbrs, dst[0]).flatten().tolist()) - seen)
        return torch.cat([dst, torch.tensor(new, dtype=torch.int64)])

    for fn in (via_numpy, via_set):
        with SyncAudit(strict=True) as audit:
            out = fn()
        assert out.tolist() == [4, 1, 2, 7]
        assert audit.host_copies >= 2, (fn.__name__, audit.report())
