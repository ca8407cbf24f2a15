"""Sizes that cannot fit are refused before anything is allocated: a MemoryError naming the
sizes, the estimate and the machine's memory, instead of the allocator's traceback (or the
kernel's out-of-memory killer) in the middle of a build or a step."""

import re

import pytest
import torch

import zg
from zg import models
from zg._checks import machine_memory, memory_arg

AVAILABLE, TOTAL = machine_memory()
# Far past any machine: the check must refuse it, and nothing may be allocated first.
HUGE = 10**12


def refused(match=r"needs at least [\d.]+ GiB, and this machine has [\d.]+ GiB available"):
    return pytest.raises(MemoryError, match=match)


def test_the_machine_reports_its_memory():
    assert 0 < AVAILABLE <= TOTAL
    memory_arg(1024, "a kibibyte")  # fits: no error
    with refused():  # (free memory moves while other processes run: past the total, never)
        memory_arg(TOTAL + 2**30, "one GiB more than the machine has")


@pytest.mark.parametrize("name", sorted(models.MODELS))
@pytest.mark.parametrize("where", ["in_dim", "hidden_dim", "num_classes"])
def test_a_model_too_wide_for_memory_is_refused_naming_its_widths(name, where):
    sizes = dict(in_dim=8, hidden_dim=16, num_classes=3)
    sizes[where] = HUGE // 10**3
    with refused() as info:
        models.build(name, sizes["in_dim"], sizes["hidden_dim"], sizes["num_classes"], 2)
    assert re.search(r"layer widths \[.*\d{9}", str(info.value)), str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: zg.datasets.csbm(num_nodes=1000, avg_degree=5, num_classes=3, feat_dim=HUGE),
        lambda: zg.datasets.csbm(num_nodes=2**31, avg_degree=500, num_classes=3, feat_dim=8),
        lambda: zg.datasets.rmat(30, edge_factor=10**6, feat_dim=8),
        lambda: zg.datasets.products_like(num_nodes=10**9, feat_dim=10**4, cache=False),
    ],
    ids=["csbm features", "csbm edges", "rmat edges", "products_like"],
)
def test_a_generated_graph_too_large_for_memory_is_refused_before_it_is_drawn(make):
    with refused():
        make()


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
def test_an_engine_whose_step_cannot_fit_is_refused_at_the_build(mode):
    """Widths that fit as parameters but whose activations (rows x width) cannot: refused when
    the engine is built, with the estimate; a normal engine's estimate is small and passes."""
    g = zg.datasets.csbm(num_nodes=3000, avg_degree=10, num_classes=4, feat_dim=16, seed=0)
    width = int(AVAILABLE // (4 * 3000)) + 1  # one row block of activations already too much
    if 4 * 2 * 16 * width > AVAILABLE // 4:
        pytest.skip("this machine's memory is too small for the parameters of this test")
    with refused() as info:
        zg.Engine(g, models.SAGE(16, width, 4, 2), [5, 5], 2048, mode=mode)
    assert "one step at batch 1800, fanouts [5, 5]" in str(info.value)
    eng = zg.Engine(g, models.SAGE(16, 32, 4, 2), [5, 5], 128, mode=mode)
    assert 0 < eng.step_bytes() < 2**26
    eng.train_epoch(max_batches=1)


def test_the_step_estimate_is_a_lower_bound_of_what_a_step_holds():
    """The estimate counts buffers a step really allocates: at least the parameters with their
    gradients and Adam's moments, and the gathered input rows of the envelope."""
    g = zg.datasets.csbm(num_nodes=2000, avg_degree=8, num_classes=4, feat_dim=32, seed=0)
    eng = zg.Engine(g, models.SAGE(32, 64, 4, 2), [5, 5], 256, mode="static")
    params = sum(p.numel() * 4 for p in eng.model.parameters())
    gathered = eng.envelope.sizes[0] * 32 * 4
    assert eng.step_bytes() >= 4 * params + gathered
    stats = eng.train_epoch(max_batches=2)
    assert torch.isfinite(torch.tensor(stats.loss))


# ----------------------------------------------------------------------------- one reading per build


def _counting_reads(monkeypatch):
    """Count the reads of the machine's memory (zg._checks.machine_memory, which every
    memory_arg goes through)."""
    from zg import _checks

    reads = []
    real = _checks.machine_memory

    def counted(device=None):
        reads.append(device)
        return real(device)

    monkeypatch.setattr(_checks, "machine_memory", counted)
    return reads


def test_one_memory_reading_reads_once_per_block_and_still_refuses(monkeypatch):
    from zg._checks import one_memory_reading

    reads = _counting_reads(monkeypatch)
    memory_arg(1024, "a kibibyte")
    memory_arg(1024, "a kibibyte")
    assert len(reads) == 2  # outside a block: every check reads
    reads.clear()
    with one_memory_reading():
        for _ in range(5):
            memory_arg(1024, "a kibibyte")
        with one_memory_reading():  # nested: the outer block's reading
            memory_arg(1024, "a kibibyte")
        with refused():  # compared with the block's reading, refused all the same
            memory_arg(TOTAL + 2**30, "one GiB more than the machine has")
    assert len(reads) == 1
    memory_arg(1024, "a kibibyte")  # the block's reading is gone with the block
    assert len(reads) == 2


@pytest.mark.parametrize("mode", ["dynamic", "eager", "static"])
def test_an_engine_build_and_a_regroup_read_the_memory_once(monkeypatch, mode):
    """An Engine's build checks several sizes (the profile's batches, the sampler's node arrays,
    the step): against one reading of the machine's memory, as is a regroup's."""
    g = zg.datasets.csbm(num_nodes=300, avg_degree=6, num_classes=3, feat_dim=8, seed=0)
    model = models.build_seeded("sage", g.feat_dim, 8, g.num_classes, 2, seed=0)
    reads = _counting_reads(monkeypatch)
    engine = zg.Engine(g, model, [3, 3], 64, mode=mode)
    assert len(reads) == 1
    reads.clear()
    engine.regroup(g, 32)
    assert len(reads) == 1
