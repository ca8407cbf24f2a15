"""The envelope sampler's two stages, torch against numba, stage by stage and hop by hop.

``EnvelopeSampler.sample_static`` (``kernel="torch"``) is a loop over hops of two stages:
``_sample_hop`` ("sample": the neighbour slots) and ``_compact_hop`` ("compact": deduplicate and
relabel into the envelope's buffer). Its compiled twin, ``zg.kernels.sampling``, runs the same two
stages as ``pick`` and ``compact``. Here each hop's stages are fed the same inputs on both sides
(the same destination rows and key; then the same candidates) and their outputs compared bit for
bit: the neighbours and mask, then the source nodes, local ids and counts. The end-to-end
comparison of whole batches is ``tests/core/test_kernels_sampling.py``.
"""

import graphs
import numpy as np
import pytest
import torch
from graphs import random_graph

import zg
from zg import sampling
from zg.envelope import Envelope
from zg.kernels import sampling as _fused
from zg.rng import mix64
from zg.sampling import EnvelopeSampler, worst_case_sizes

INT64_MAX = torch.iinfo(torch.int64).max


@pytest.fixture
def numba(require):
    """The numba stages: an error in the reference env, a skip elsewhere (as in
    test_kernels_sampling.py); compiled (or loaded from numba's cache) once."""
    require("numba")
    if not zg.kernels.available():
        pytest.skip("numba did not import")
    _fused.warm_up()
    _fused.set_threads()


def compare_stages(sampler, seeds, num_seeds, key):
    """Run every hop of one batch through both stage pairs, seeds outward, and compare them.

    seeds int64 [B] (rows >= num_seeds hold any node id), num_seeds int, key int (int64).
    Each hop's inputs are the torch stages' outputs of the hop before. Returns the per-hop
    (src_nodes, nbr_local, mask, true count), input layer last, for the caller's checks.
    """
    g = sampler.g
    indptr, indices = g.indptr.numpy(), g.indices.numpy()
    marker = _fused.new_marker(g.num_nodes).numpy()
    seen = _fused.new_seen_bitmap(g.num_nodes)
    key_t = torch.tensor(key, dtype=torch.int64)
    hop_keys = mix64(key_t + sampler._hop_constants)  # [hops], as sample_static makes them
    dst, n_dst = seeds, torch.tensor(num_seeds)
    fanouts = list(reversed(sampler.effective_fanouts))  # seeds outward
    caps = list(reversed(sampler.sizes))
    hops = []
    for hop, (k, cap) in enumerate(zip(fanouts, caps)):
        rows = dst.shape[0]
        # The hop's key: the same 64 bits on both sides (a uint64, as sample_all passes it:
        # a compiled function's result comes back as a Python int).
        hop_key = np.uint64(_fused.hop_key(np.uint64(key % 2**64), hop))
        assert int(hop_key) == int(hop_keys[hop]) % 2**64, hop

        # "sample": torch's slots (masked ones repeat their row's node) against pick's (0 there).
        cand, real_rows, mask = sampler._sample_hop(dst, n_dst, k, hop_keys[hop])
        assert cand.shape == (rows * (k + 1),) and mask.shape == (rows, k)
        assert torch.equal(real_rows, torch.arange(rows * (k + 1)) < int(n_dst))
        slots = torch.where(mask, cand[rows:].view(rows, k), 0)  # [R, k]
        nbr = np.full(rows * k, -1, dtype=np.int64)  # junk: every entry must be written
        nbr_mask = np.ones(rows * k, dtype=np.bool_)
        all_neighbors = (not sampler.replace) and k >= sampler.max_degree
        _fused.pick(
            indptr,
            indices,
            dst.numpy(),
            int(n_dst),
            k,
            hop_key,
            sampler.replace,
            all_neighbors,
            nbr,
            nbr_mask,
        )
        where = f"hop {hop} (k={k}, rows={rows}, n_dst={int(n_dst)})"
        assert torch.equal(torch.from_numpy(nbr_mask).view(rows, k), mask), f"{where}: mask"
        assert torch.equal(torch.from_numpy(nbr).view(rows, k), slots), f"{where}: neighbours"
        assert not mask[int(n_dst) :].any(), f"{where}: a padding row has a neighbour"

        # "compact": the same candidates on both sides (torch's; numba's are equal, above).
        src_nodes, nbr_local, num_src = sampler._compact_hop(cand, real_rows, mask, n_dst, cap)
        local = slots.flatten().numpy().copy()  # [R * k], rewritten in place into local ids
        src = np.full(cap, -1, dtype=np.int64)  # junk: every entry must be written
        count = _fused.compact(
            dst.numpy(), int(n_dst), k, marker, seen, local, mask.flatten().numpy(), src
        )
        assert int(num_src) == count, f"{where}: true count {int(num_src)} vs {count}"
        assert torch.equal(torch.from_numpy(src), src_nodes), f"{where}: source nodes"
        assert torch.equal(torch.from_numpy(local).view(rows, k), nbr_local), f"{where}: local ids"
        # Both leave their node-indexed state as they found it.
        assert not seen.any(), f"{where}: the seen bitmap is not all zero after the hop"
        assert bool((sampler._first == INT64_MAX).all()), f"{where}: the marker was not reset"
        # What the stages mean, against torch.unique: the real rows (a repeated seed keeps
        # its own row), then each other node of the hop once.
        rows_real = dst[: int(n_dst)]
        new_nodes = src_nodes[int(n_dst) : min(count, cap)]
        assert torch.equal(src_nodes[: int(n_dst)], rows_real), where
        assert not torch.isin(new_nodes, rows_real).any(), where
        assert torch.equal(torch.sort(new_nodes).values, torch.unique(new_nodes)), where
        if count <= cap:
            real = torch.cat([rows_real, slots[mask]])
            assert torch.equal(torch.unique(src_nodes[:count]), torch.unique(real)), where
            assert torch.equal(src_nodes[nbr_local][mask], slots[mask]), where
        hops.append((src_nodes, nbr_local, mask, count))
        dst, n_dst = src_nodes, num_src.clamp(max=cap)
    return hops[::-1]


def check_batch(sampler, seeds, num_seeds, key):
    """compare_stages, then: the stages chained are sample_static's batch, block by block."""
    hops = compare_stages(sampler, seeds, num_seeds, key)
    batch = sampler.sample_static(seeds, torch.tensor(num_seeds), torch.tensor(key))
    for (src_nodes, nbr_local, mask, count), block, wanted in zip(
        hops, batch.blocks, batch.wanted.tolist()
    ):
        assert torch.equal(block.src_nodes, src_nodes) and torch.equal(block.nbr, nbr_local)
        assert torch.equal(block.mask, mask) and wanted == count
    return batch


def padded(seeds, batch_size, junk=0):
    """int64 [batch_size]: the seeds, then ``junk`` node ids in the padding rows."""
    out = torch.full((batch_size,), junk, dtype=torch.int64)
    out[: len(seeds)] = torch.as_tensor(seeds, dtype=torch.int64)
    return out


@pytest.mark.parametrize("table", [True, False], ids=["node_table", "no_table"])
@pytest.mark.parametrize("replace", [False, True])
def test_hub_degree_zero_fanout_above_degree_padding_and_repeated_seeds(
    numba, replace, table, monkeypatch
):
    """Node 4 is a hub (degree 100,000), 5 has no in-edges, 0..2 fewer than the fanout; two
    padding rows hold junk, and a seed repeats (it keeps its first row's local id)."""
    if not table:  # the path of graphs above NODE_HASH_MAX_NODES: no [N + 1, 3] node table
        monkeypatch.setattr(sampling, "NODE_HASH_MAX_NODES", -1)
    g = graphs.mixed_degree_graph(extra_edges=20_000)[0]
    sampler = EnvelopeSampler(g, [4, 3, 6], 9, replace=replace, seed=11)
    assert (sampler._node_table is not None) == table
    seeds = padded([4, 5, 0, 1, 2, 3, 1], 9, junk=77)
    for key in (0, -1, 12345, -(2**63), 2**63 - 1):
        check_batch(sampler, seeds, 7, key)
    check_batch(sampler, padded([5, 5], 9), 2, 3)  # only a node without in-edges, twice
    check_batch(sampler, padded([], 9, junk=4), 0, 3)  # no real seed


@pytest.mark.parametrize("replace", [False, True])
def test_overflowing_envelope_and_every_neighbour(numba, replace):
    g = random_graph(n=2000, e=30_000)
    rows = 32
    worst = worst_case_sizes(g.num_nodes, [3, 3, 6], rows)
    tight = EnvelopeSampler(
        g, [3, 3, 6], rows, envelope=Envelope([worst[0], 60, rows + 5]), replace=replace
    )
    batch = check_batch(tight, torch.arange(rows), rows, 7)
    assert bool(batch.overflowed)  # local ids clamped to cap - 1, the later hops truncated
    # Fanouts above the largest in-degree (without replacement: all neighbours, Floyd skipped).
    every = EnvelopeSampler(g, [1000, 1000], 20, replace=replace)
    check_batch(every, torch.arange(20), 20, 1)


@pytest.mark.parametrize("replace", [False, True])
def test_graph_without_edges(numba, replace):
    empty = zg.Graph.from_edges([], [], num_nodes=10)
    sampler = EnvelopeSampler(empty, [3, 2], 4, replace=replace)
    check_batch(sampler, padded([1, 2, 2], 4), 3, 5)


def test_hypothesis_stages(numba, require, monkeypatch):
    hypothesis = require("hypothesis")
    st = hypothesis.strategies

    @hypothesis.settings(max_examples=40, deadline=None, derandomize=True)
    @hypothesis.given(
        n=st.integers(1, 60),
        edges=st.integers(0, 400),
        fanouts=st.lists(st.integers(1, 9), min_size=1, max_size=3),
        rows=st.integers(1, 12),
        data=st.data(),
        replace=st.booleans(),
        tight=st.booleans(),
        table=st.booleans(),
        key=st.integers(-(2**63), 2**63 - 1),
        graph_seed=st.integers(0, 99),
    )
    def check(n, edges, fanouts, rows, data, replace, tight, table, key, graph_seed):
        rows = min(rows, n)
        num_seeds = data.draw(st.integers(0, rows), label="num_seeds")
        # Seeds may repeat; the padding rows hold any node id.
        ids = data.draw(st.lists(st.integers(0, n - 1), min_size=rows, max_size=rows), label="ids")
        g = random_graph(n=n, e=edges, seed=graph_seed)
        envelope = Envelope([rows] * len(fanouts)) if tight else None
        monkeypatch.setattr(sampling, "NODE_HASH_MAX_NODES", 1 << 26 if table else -1)
        sampler = EnvelopeSampler(g, fanouts, rows, envelope=envelope, replace=replace)
        check_batch(sampler, torch.tensor(ids, dtype=torch.int64), num_seeds, key)

    check()


@pytest.fixture
def restored_after_holding():
    """Lab 2's held functions get their own code back after the test (a hold lasts for the
    process, and would change, say, inspect.signature(sample_fused) for the tests after it)."""
    import zg_course.labs

    functions = [
        fn
        for target in zg_course.labs._lab_references()[2][1]
        for fn in zg_course.labs._functions_of(target)
    ]
    saved = [(fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__) for fn in functions]
    yield
    for fn, code, defaults, kwdefaults in saved:
        fn.__code__, fn.__defaults__, fn.__kwdefaults__ = code, defaults, kwdefaults


def test_lab_2_holds_both_stages_inside_the_students_functions(restored_after_holding):
    """Lab 2 asks for compact_hop: inside the student's functions the kit's loop and both of its
    stages refuse (zg_course.labs.hold_references); the lab's own tests still call them. No numba."""
    import zg_course.labs
    from zg_course.labs import ForbiddenCall

    namespace = {}
    held = zg_course.labs.hold_references(namespace, 2)
    for name in ("sample_static", "_sample_hop", "_compact_hop"):
        assert f"zg.sampling.EnvelopeSampler.{name}" in held, (name, held)
    sampler = EnvelopeSampler(random_graph(n=50, e=300), [3], 4)
    seeds, n_dst, key = torch.arange(4), torch.tensor(4), torch.tensor(1)

    def sample_hop_of_mine():  # a helper: the kit's sample stage, called inside compact_hop
        return sampler._sample_hop(seeds, n_dst, 3, key)

    def compact_hop(*args):
        return sampler._compact_hop(*args)

    namespace["compact_hop"] = compact_hop
    namespace["first_occurrence"] = sample_hop_of_mine
    with pytest.raises(ForbiddenCall, match=r"Lab 2 .*EnvelopeSampler\._sample_hop"):
        sample_hop_of_mine()
    cand, real_rows, mask = sampler._sample_hop(seeds, n_dst, 3, key)  # outside: as before
    with pytest.raises(ForbiddenCall, match=r"Lab 2 .*EnvelopeSampler\._compact_hop"):
        compact_hop(cand, real_rows, mask, n_dst, 12)
    src_nodes, nbr_local, num_src = sampler._compact_hop(cand, real_rows, mask, n_dst, 12)
    assert torch.equal(src_nodes[:4], seeds) and int(num_src) >= 4
