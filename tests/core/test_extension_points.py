"""The kit's extension points, used from outside the package through public names only.

A model: a GIN layer the kit does not have, on ``zg.models.BlockModel``; it trains a static
epoch with 0 host syncs and evaluates, its full-neighbour logits checked against the GIN
formula on the whole graph. A sampler: a "first k in-neighbours" sampler implementing
``zg.Sampler``, trained with ``Engine(..., sampler=..., mode="eager")``. And the check-once
rule: one ``Engine(...)`` build checks each of its arguments once and the graph's structure
once, in every mode. (The estimator extension point is tested in
tests/grappa/test_estimator_registry.py.)
"""

from __future__ import annotations

import inspect
import sys
from collections import Counter

import pytest
import torch
from graphs import tiny
from torch import nn

import zg
from zg.models import BlockModel, zero_padded_rows

# ----------------------------------------------------------------------------- a model


class GINConv(nn.Module):
    """GIN: ``h_i' = MLP((1 + eps) h_i + sum_{j in N(i)} h_j)`` on a padded zg block."""

    def __init__(self, in_dim: int, out_dim: int):
        super().__init__()
        self.in_dim, self.out_dim = in_dim, out_dim
        self.eps = nn.Parameter(torch.zeros(()))
        self.mlp = nn.Sequential(nn.Linear(in_dim, out_dim), nn.ReLU(), nn.Linear(out_dim, out_dim))

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.eps)
        for m in self.mlp:
            if isinstance(m, nn.Linear):
                m.reset_parameters()

    def forward(self, block: zg.Block, h: torch.Tensor) -> torch.Tensor:
        rows = block.nbr.shape[0]  # D destination rows, the first D source rows
        neighbours = torch.where(block.mask[..., None], h[block.nbr], 0.0).sum(1)  # [D, F]
        out = self.mlp((1 + self.eps) * h[:rows] + neighbours)  # [D, out]
        real = torch.arange(rows, device=h.device)[:, None] < block.num_dst  # [D, 1]
        return zero_padded_rows(out, real)


class GIN(BlockModel):
    def __init__(self, in_dim: int, hidden: int, classes: int, num_layers: int = 2):
        super().__init__()
        self.feature_dims = [in_dim] + [hidden] * (num_layers - 1) + [classes]
        self.layers = nn.ModuleList(
            GINConv(a, b) for a, b in zip(self.feature_dims[:-1], self.feature_dims[1:])
        )

    def after_layer(self, i: int, h: torch.Tensor) -> torch.Tensor:
        return torch.relu(h) if i < len(self.layers) - 1 else h


def gin_on_the_whole_graph(model: GIN, g: zg.Graph) -> torch.Tensor:
    """The GIN formula over every in-edge of ``g`` (CSC), with torch's index_add_."""
    dst = torch.repeat_interleave(torch.arange(g.num_nodes), g.indptr[1:] - g.indptr[:-1])
    h = g.x
    for i, layer in enumerate(model.layers):
        summed = torch.zeros_like(h).index_add_(0, dst, h[g.indices])
        h = model.after_layer(i, layer.mlp((1 + layer.eps) * h + summed))
    return h


def test_a_model_written_outside_trains_static_with_no_host_sync_and_evaluates():
    g = tiny()
    torch.manual_seed(0)
    model = GIN(g.feat_dim, 32, int(g.num_classes))
    adam = zg.optim.adam(lr=0.003)
    eng = zg.Engine(g, model, [4, 4], 32, mode="static", seed=0, optimizer=adam)
    first = eng.train_epoch()
    assert first.host_syncs == 0 and first.iterations == len(eng.batches(0))
    for _ in range(15):
        last = eng.train_epoch()
    assert last.loss < first.loss
    model.eval()
    with torch.no_grad():
        logits = zg.inference.full_neighbour_logits(model, eng.g)
        torch.testing.assert_close(logits, gin_on_the_whole_graph(model, eng.g))
    assert eng.evaluate("val") > 0.6  # chance is 1/3; this seed gives 0.72


# ----------------------------------------------------------------------------- a sampler


class FirstNeighbours:
    """Each destination's first ``k`` in-neighbours in CSC order (no randomness), compacted on
    the host (destinations first, then new nodes in order of first appearance)."""

    def __init__(self, g: zg.Graph, fanouts):
        self.g, self.fanouts = g, list(fanouts)
        self.calls = 0

    def sample(self, seeds, epoch: int = 0, batch: int = 0, *, clock=None) -> zg.MiniBatch:
        self.calls += 1
        g = self.g
        seeds = torch.as_tensor(seeds, dtype=torch.int64)
        dst, blocks = seeds, []
        for k in reversed(self.fanouts):  # seeds outward
            start, degree = g.indptr[dst], g.indptr[dst + 1] - g.indptr[dst]
            mask = torch.arange(k)[None, :] < degree[:, None]  # [D, k]
            edge = (start[:, None] + torch.arange(k)[None, :]).clamp(max=g.num_edges - 1)
            neighbours = torch.where(mask, g.indices[edge], dst[:, None])  # [D, k] global
            order = list(dict.fromkeys(dst.tolist() + neighbours[mask].tolist()))
            local = {v: i for i, v in enumerate(order)}
            nbr = torch.tensor([[local[v] for v in row] for row in neighbours.tolist()])
            blocks.append(
                zg.Block(
                    nbr=torch.where(mask, nbr, 0),
                    mask=mask,
                    num_src=torch.tensor(len(order)),
                    num_dst=torch.tensor(dst.numel()),
                    src_nodes=torch.tensor(order),
                )
            )
            dst = torch.tensor(order)
            if clock is not None:
                clock("sample")
                clock("compact")
        blocks.reverse()
        return zg.MiniBatch(
            seeds=seeds,
            num_seeds=torch.tensor(seeds.numel()),
            blocks=blocks,
            counts=torch.stack([b.num_src for b in blocks]),
            overflowed=torch.zeros((), dtype=torch.bool),
        )


def test_a_sampler_written_outside_trains_through_the_engine():
    g = tiny()
    sampler = FirstNeighbours(g, [3, 3])
    assert isinstance(sampler, zg.Sampler) and not isinstance(sampler, zg.StaticSampler)
    torch.manual_seed(0)
    model = zg.models.SAGE(g.feat_dim, 16, int(g.num_classes), 2, dropout=0.0)
    eng = zg.Engine(g, model, [3, 3], 32, sampler=sampler, mode="eager", seed=0)
    assert eng.sampler is sampler and eng.launch == "eager"
    first = eng.train_epoch()
    assert sampler.calls == first.iterations == len(eng.batches(0))
    for _ in range(10):
        last = eng.train_epoch()
    assert last.loss < first.loss
    # Its blocks are what it says: the first k in-neighbours of each destination.
    mb = eng.sample(0)
    last_block = mb.blocks[-1]
    for row, v in enumerate(mb.seeds.tolist()):
        want = g.indices[g.indptr[v] : g.indptr[v + 1]][:3].tolist()
        got = last_block.src_nodes[last_block.nbr[row][last_block.mask[row]]].tolist()
        assert got == want


def test_a_sampler_is_refused_where_it_cannot_run():
    g = tiny()
    model = zg.models.SAGE(g.feat_dim, 8, int(g.num_classes), 2)
    with pytest.raises(TypeError, match="sample_static"):
        zg.Engine(g, model, [3, 3], 32, sampler=FirstNeighbours(g, [3, 3]), mode="static")
    with pytest.raises(ValueError, match="launch style"):
        zg.Engine(g, model, [3, 3], 32, sampler=FirstNeighbours(g, [3, 3]), mode="dynamic")
    with pytest.raises(ValueError, match="sampler.fanouts"):
        zg.Engine(g, model, [3, 3], 32, sampler=FirstNeighbours(g, [2, 3]), mode="eager")
    with pytest.raises(TypeError, match="zg.Sampler"):
        zg.Engine(g, model, [3, 3], 32, sampler=object(), mode="eager")
    with pytest.raises(ValueError, match="leave envelope out"):
        zg.Engine(g, model, [3, 3], 32, "worst_case", sampler=FirstNeighbours(g, [3, 3]))
    envelope_sampler = zg.EnvelopeSampler(g, [3, 3], 16)
    with pytest.raises(ValueError, match="sampler.batch_size"):
        zg.Engine(g, model, [3, 3], 32, sampler=envelope_sampler, mode="static")


def test_the_built_in_samplers_implement_the_protocol():
    g = tiny()
    assert isinstance(zg.DynamicSampler(g, [3, 3]), zg.Sampler)
    assert isinstance(zg.EnvelopeSampler(g, [3, 3], 16), zg.StaticSampler)
    assert not isinstance(zg.DynamicSampler(g, [3, 3]), zg.StaticSampler)


@pytest.mark.parametrize("mode", ["eager", "static"])
def test_an_envelope_sampler_given_is_the_modes_own(mode):
    """``Engine(sampler=EnvelopeSampler(...))`` trains bit for bit as the mode's own sampler."""
    g = tiny()
    rows = min(32, g.train_idx.numel())
    params = []
    for given in (False, True):
        torch.manual_seed(0)
        model = zg.models.SAGE(g.feat_dim, 8, int(g.num_classes), 2)
        if given:
            sampler = zg.EnvelopeSampler(g, [3, 3], rows, seed=5)
            eng = zg.Engine(g, model, [3, 3], 32, sampler=sampler, mode=mode, seed=5)
        else:
            eng = zg.Engine(g, model, [3, 3], 32, "worst_case", mode=mode, seed=5)
        eng.train_epoch()
        eng.train_epoch()
        params.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*params):
        assert torch.equal(a, b)


# ----------------------------------------------------------------------------- check once

ENGINE_ARGUMENTS = (
    "g",
    "model",
    "fanouts",
    "batch_size",
    "envelope",
    "mode",
    "device",
    "seed",
    "optimizer",
    "kernel",
    "hooks",
    "sampler",
)


def _checks_made(build) -> tuple[Counter, int]:
    """Run ``build()`` under a profiler; count the calls of the kit's argument checks by the
    argument name each was given, and the graph structure checks."""
    from zg import _checks, graph, kernels

    check_codes = {
        f.__code__
        for f in vars(_checks).values()
        if callable(f)
        and getattr(f, "__module__", "") == "zg._checks"
        and f.__name__.endswith("_arg")
    }
    check_codes |= {kernels.check.__code__, graph.graph_arg.__code__}
    structure = zg.Graph.check_structure.__code__
    by_name: Counter = Counter()
    structure_checks = 0
    inside: list = []  # the outermost check running (a check may call another for its parts)

    def profile(frame, event, arg):
        nonlocal structure_checks
        if event == "return" and inside and inside[-1] is frame:
            inside.pop()
        if event != "call":
            return
        if frame.f_code is structure:
            structure_checks += 1
        elif frame.f_code in check_codes and not inside:
            by_name[frame.f_locals.get("name", "?")] += 1
            inside.append(frame)

    sys.setprofile(profile)
    try:
        build()
    finally:
        sys.setprofile(None)
    return by_name, structure_checks


@pytest.mark.parametrize(
    "mode, envelope",
    [("dynamic", None), ("eager", None), ("static", None), ("static", "worst_case")],
)
def test_one_build_checks_each_argument_once(mode, envelope):
    g = tiny()
    model = zg.models.SAGE(g.feat_dim, 8, int(g.num_classes), 2)
    by_name, structure_checks = _checks_made(
        lambda: zg.Engine(g, model, [3, 3], 32, envelope, mode=mode, seed=1, kernel="auto")
    )
    assert structure_checks == 1, structure_checks
    twice = {name: n for name, n in by_name.items() if name in ENGINE_ARGUMENTS and n > 1}
    assert not twice, f"checked more than once in one Engine build: {twice}"
    for name in ("fanouts", "batch_size", "seed", "device", "kernel", "g"):
        assert by_name[name] == 1, (name, by_name)


def test_one_dgl_build_checks_each_argument_once():
    pytest.importorskip("dgl")
    from zg.baselines.dgl import DGLModel

    g = tiny()
    model = DGLModel("sage", g.feat_dim, 8, int(g.num_classes), 2)
    by_name, structure_checks = _checks_made(lambda: zg.Engine(g, model, [3, 3], 32, mode="dgl"))
    assert structure_checks == 1
    assert not {n: c for n, c in by_name.items() if n in ENGINE_ARGUMENTS and c > 1}


def _code_lines(function) -> int:
    """Lines of ``function``'s source that hold code (no blank, comment or docstring line)."""
    import ast
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(function))
    tree = ast.parse(source).body[0]
    doc = set()
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
        doc = set(range(first.lineno, first.end_lineno + 1))
    lines = source.splitlines()
    return sum(
        1
        for i, line in enumerate(lines, 1)
        if i not in doc and line.strip() and not line.strip().startswith("#")
    )


def test_the_engine_constructor_is_short():
    """Check once, then build in named steps: at most 50 code lines (issue 49)."""
    assert _code_lines(zg.Engine.__init__) <= 50, _code_lines(zg.Engine.__init__)


def test_the_engine_takes_at_most_twelve_parameters():
    """Issue 57: the retired step= and the sampler's own replace= are gone."""
    names = list(inspect.signature(zg.Engine.__init__).parameters)[1:]  # without self
    assert len(names) <= 12, names
    assert "step" not in names and "replace" not in names


def test_the_old_names_still_work_with_a_warning():
    """engine.source and engine.step read until 0.6; the keyword step= is retired (0.5)."""
    g = tiny()
    model = zg.models.SAGE(g.feat_dim, 8, int(g.num_classes), 2)
    eng = zg.Engine(g, model, [3, 3], 32, hooks=zg.StepHooks(poll_every=3))
    assert eng.hooks.poll_every == 3
    with pytest.warns(DeprecationWarning, match="engine.sampler"):
        assert eng.source is eng.sampler
    with pytest.warns(DeprecationWarning, match="engine.hooks"):
        assert eng.step is eng.hooks
    with pytest.raises(TypeError, match="step"):
        zg.Engine(g, model, [3, 3], 32, step=zg.StepHooks())


def test_a_built_in_sampler_is_passed_like_any_other():
    """mode="dynamic" is the eager launch of zg.DynamicSampler: passed as sampler=..., with the
    engine's seed, it trains the same parameters bit for bit. Its options travel with it:
    replace=True samples with replacement, and the settings (and checkpoints) record it."""
    g = tiny()

    def engine(**kw):
        model = zg.models.build_seeded("sage", g.feat_dim, 8, g.num_classes, 2, seed=2)
        return zg.Engine(g, model, [3, 3], 32, seed=4, **kw)

    named, passed = (
        engine(mode="dynamic"),
        engine(mode="eager", sampler=zg.DynamicSampler(g, [3, 3], seed=4)),
    )
    named.train_epoch()
    passed.train_epoch()
    for a, b in zip(named.model.parameters(), passed.model.parameters()):
        assert torch.equal(a, b)
    assert not named.settings.replace and not passed.settings.replace
    drawing = engine(mode="eager", sampler=zg.DynamicSampler(g, [3, 3], replace=True, seed=4))
    assert drawing.settings.replace and drawing.replace
    # The engine samples as the sampler it was given does, and not as one without replacement.
    alone = zg.DynamicSampler(g, [3, 3], replace=True, seed=4)
    without = zg.DynamicSampler(g, [3, 3], seed=4)
    differs = False
    for b, seeds in enumerate(drawing.batches(0)):
        mine = drawing.sample(b, epoch=0).node_sets()
        assert all(torch.equal(x, y) for x, y in zip(mine, alone.sample(seeds, 0, b).node_sets()))
        theirs = without.sample(seeds, 0, b).node_sets()
        differs |= any(not torch.equal(x, y) for x, y in zip(mine, theirs))
    assert differs
    drawing.train_epoch()
