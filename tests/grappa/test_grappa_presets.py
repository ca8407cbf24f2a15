"""The reference preset (zg.grappa.presets) pinned to the rules of the authors' public code:
seeds, local graphs, the partner sweep, the per-worker scalar c_r and the update it makes."""

import os

import pytest
import torch
import torch.nn.functional as F
from graphs import tiny

from zg import grappa, models
from zg.grappa.config import super_epoch_of
from zg.grappa.fullgraph import full_forward
from zg.grappa.presets import preset_values
from zg.grappa.train import prepare_many, run_graph

pytestmark = pytest.mark.timeout(300)

FAST = dict(timeout=60, run_timeout=240)


def _cfg(g, **options):
    return prepare_many(g, [options])[0][0]


def _stored(part, g, worker, s):
    """bool [N]: the nodes of worker's two chunks in super-epoch s (by the chunk ids alone)."""
    return torch.isin(part.chunk_of, torch.tensor(part.chunks(worker, s)))


def _hand_c(g, part, worker, s, halo):
    """c_r by the public code's rule, with Python loops: the mean over worker's seeds (its own
    chunk's training nodes) of min(1, d_local / (d_global + 1)), d_local counted in the local
    graph the rule describes (both chunks' nodes, plus their in-neighbours if halo)."""
    stored = _stored(part, g, worker, s).tolist()
    indptr, indices = g.indptr.tolist(), g.indices.tolist()
    halo_nodes = set()
    if halo:
        for v in range(g.num_nodes):
            if stored[v]:
                halo_nodes.update(u for u in indices[indptr[v] : indptr[v + 1]] if not stored[u])
    ratios = []
    for v in g.train_idx.tolist():
        if int(part.chunk_of[v]) != worker:
            continue
        sources = indices[indptr[v] : indptr[v + 1]]
        d_local = sum(1 for u in sources if stored[u] or u in halo_nodes)
        ratios.append(min(1.0, d_local / (len(sources) + 1)))
    return sum(ratios) / len(ratios)


# ----------------------------------------------------------------------------- the configuration


def test_preset_fills_what_is_not_given_and_the_trainers_stay_one_argument_apart():
    g = tiny()
    cfg = _cfg(g, preset="reference", epochs=2)
    assert cfg.workers == 4 and cfg.preset == "reference"
    expect = dict(
        method="random",
        num_chunks=4,
        halo=True,
        schedule="partner_sweep",
        repartition_every=50,
        estimator="reference",
        model="sage",
        hidden_dim=128,
        num_layers=3,
        fanouts=[15, 10, 5],
        dropout=0.5,
        batch_size=4000,
        lr=0.003,
        self_loops="add",
    )
    assert {k: getattr(cfg, k) for k in expect} == expect
    # An explicit option wins; the fanouts follow the depth asked for (t10nrun.py's).
    cfg2 = _cfg(g, preset="reference", num_layers=2, hidden_dim=32, workers=2)
    assert (cfg2.num_layers, cfg2.fanouts, cfg2.hidden_dim, cfg2.num_chunks, cfg2.batch_size) == (
        2,
        [25, 10],
        32,
        2,
        2000,
    )
    # Same model and training settings for single and isolated; each trainer fixes its own.
    single = _cfg(g, preset="reference", trainer="single")
    isolated = _cfg(g, preset="reference", trainer="isolated")
    for other in (single, isolated):
        for k in (
            "model",
            "hidden_dim",
            "num_layers",
            "fanouts",
            "dropout",
            "lr",
            "method",
            "halo",
            "self_loops",
        ):
            assert getattr(other, k) == getattr(cfg, k), k
    assert (single.workers, single.num_chunks, single.batch_size, single.estimator) == (
        1,
        1,
        1000,
        "mean",
    )
    assert (isolated.estimator, isolated.repartition_every, isolated.schedule) == (
        "mean",
        None,
        "partner_sweep",
    )
    assert preset_values("reference", "single", 4)["batch_size"] == 1000
    with pytest.raises(ValueError, match="preset"):
        _cfg(g, preset="paper")
    # The JSON form (the command line's path) applies it the same way.
    from_json = grappa.TrainConfig.from_dict({"preset": "reference", "workers": 4, "epochs": 2})
    assert from_json.to_dict() == cfg.to_dict()


def test_the_command_line_has_a_preset_flag():
    from zg.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(["grappa", "--preset", "reference"])
    assert args.preset == "reference"


# ----------------------------------------------------------------------------- the structure


def test_seeds_never_leave_their_worker():
    g = tiny()
    part = grappa.partition(g, 4, "random", 0, halo=True, schedule="partner_sweep")
    for r in range(4):
        own = g.train_idx[part.chunk_of[g.train_idx] == r].sort().values
        for s in range(part.num_super_epochs + 1):  # one wrap too
            local = part.local_graph(g, r, s)
            seeds = local.global_ids[local.graph.train_idx].sort().values
            assert torch.equal(seeds, own), (r, s)
    owners = part.owner(0)[g.train_idx]
    assert torch.equal(owners, part.chunk_of[g.train_idx])  # every seed has exactly one worker


@pytest.mark.parametrize("halo", [True, False])
def test_local_graph_holds_both_chunks_in_edges_and_none_of_the_halo(halo):
    g = tiny()
    part = grappa.partition(g, 4, "random", 1, halo=halo, schedule="partner_sweep")
    src, dst = g.edges()
    for r in range(4):
        for s in range(part.num_super_epochs):
            local = part.local_graph(g, r, s)
            stored = _stored(part, g, r, s)
            lsrc, ldst = local.graph.edges()
            got = set(zip(local.global_ids[lsrc].tolist(), local.global_ids[ldst].tolist()))
            into = stored[dst] & (torch.ones_like(stored[src]) if halo else stored[src])
            want = set(zip(src[into].tolist(), dst[into].tolist()))
            assert got == want, (r, s)
            assert set(local.global_ids[: local.num_owned].tolist()) == set(
                torch.nonzero(stored).flatten().tolist()
            )
            halo_deg = local.graph.in_degrees()[local.num_owned :]
            assert int(halo_deg.sum()) == 0  # halo nodes: no in-edges
            assert (local.num_halo > 0) == halo


@pytest.mark.parametrize("every", [50, 7])
def test_partner_sequence_for_four_workers_over_200_epochs(every):
    g = tiny()
    cfg = _cfg(g, preset="reference", repartition_every=every, epochs=200, batch_size=10)
    part = grappa.partition(g, 4, "random", 0, halo=True, schedule="partner_sweep")
    for r in range(4):
        nbr = r  # the public code's loop
        for epoch in range(200):
            if epoch % every == 0:
                nbr = (nbr + 1) % 4
                if nbr == r:
                    nbr = (nbr + 1) % 4
            s = super_epoch_of(cfg, epoch)
            assert part.partner(r, s) == nbr, (r, epoch)
            assert part.chunks(r, s) == [r, nbr]


# ----------------------------------------------------------------------------- the weighting


def test_the_preset_trains_on_the_graph_with_one_self_loop_per_node():
    """As the public code stores every graph (issue 57: the difference that made the preset
    learn less than their code in 30 epochs on Cora, bench/grappa_ablation.py)."""
    g = tiny()
    looped = g.with_self_loops()
    assert looped.num_edges == g.num_edges + g.num_nodes  # tiny() has no self-loop
    for v in range(g.num_nodes):
        sources = looped.indices[looped.indptr[v] : looped.indptr[v + 1]].tolist()
        assert sources.count(v) == 1
        assert sorted(u for u in sources if u != v) == sorted(
            g.indices[g.indptr[v] : g.indptr[v + 1]].tolist()
        )
    assert looped.with_self_loops().num_edges == looped.num_edges  # one per node, never two
    assert torch.equal(looped.x, g.x) and torch.equal(looped.train_idx, g.train_idx)
    assert run_graph(g, _cfg(g, preset="reference")).num_edges == looped.num_edges
    # The kit's defaults and an explicit "keep" take the graph as given (the same object).
    assert run_graph(g, _cfg(g)) is g
    assert run_graph(g, _cfg(g, preset="reference", self_loops="keep")) is g
    with pytest.raises(ValueError, match="self_loops"):
        _cfg(g, self_loops="twice")


@pytest.mark.slow
def test_hand_computed_c_r_is_the_hooks_scale():
    g = tiny()
    runs = [
        dict(preset="reference", epochs=1, seed=0, hidden_dim=16, **FAST),
        dict(preset="reference", epochs=1, seed=0, hidden_dim=16, halo=False, **FAST),
    ]
    histories = grappa.train_many(g, runs)
    looped = g.with_self_loops()  # the graph the preset trains on (self_loops="add")
    for run, history in zip(runs, histories):
        halo = run.get("halo", True)
        part = grappa.partition(looped, 4, "random", 0, halo=halo, schedule="partner_sweep")
        record = history["epochs"][0]
        assert record["iterations"] == 1  # batch 4000 > 300 nodes
        assert history["graph"]["num_edges"] == g.num_edges + g.num_nodes
        for r in range(4):
            hand = _hand_c(looped, part, r, 0, halo)
            scale = record["worker_scale"]
            assert scale["min"][r] == scale["max"][r]
            assert scale["mean"][r] * 4 == pytest.approx(hand, rel=1e-6), (halo, r)
        assert history["preset"]["name"] == "reference"
        assert set(history["preset"]["overrides"]) == (
            {"hidden_dim"} if halo else {"hidden_dim", "halo"}
        )
    # With the complete halo d_local = d_global: c_r is about the mean of (d + 1) / (d + 2).
    full = histories[0]["epochs"][0]["worker_scale"]["mean"]
    cut = histories[1]["epochs"][0]["worker_scale"]["mean"]
    assert all(a > b for a, b in zip(full, cut))


@pytest.mark.slow
def test_one_step_applies_the_unnormalised_sum_of_c_r_times_g_r_over_p(tmp_path):
    """2 gloo workers, full local graphs, no dropout: the first Adam moment after one step is
    (1 - beta1) G, so it gives the applied gradient G itself, scale included."""
    g = tiny(200)
    options = dict(
        preset="reference",
        workers=2,
        epochs=1,
        seed=3,
        batching="full",
        dropout=0.0,
        hidden_dim=16,
        checkpoint_dir=str(tmp_path / "ck"),
        **FAST,
    )
    cfg = _cfg(g, **options)
    grappa.train(g, **options)
    g = g.with_self_loops()  # the graph the preset trains on (self_loops="add")
    state = torch.load(os.path.join(tmp_path / "ck", "checkpoint.pt"), weights_only=False)
    torch.manual_seed(cfg.seed)  # the workers' initial parameters
    model = models.build(
        cfg.model, g.feat_dim, cfg.hidden_dim, g.num_classes, cfg.num_layers, dropout=cfg.dropout
    )
    names = [name for name, _ in model.named_parameters()]
    initial = [p.detach().clone() for p in model.parameters()]
    part = grappa.partition(g, 2, "random", cfg.seed, halo=True, schedule="partner_sweep")
    params = list(model.parameters())
    grads, cs = [], []
    for r in range(2):
        local = part.local_graph(g, r, 0)
        lg = local.graph
        loss = F.cross_entropy(full_forward(model, lg)[lg.train_idx], lg.y[lg.train_idx])
        grads.append([gr.detach() for gr in torch.autograd.grad(loss, params)])
        cs.append(_hand_c(g, part, r, 0, halo=True))
    G = [(cs[0] * a + cs[1] * b) / 2 for a, b in zip(grads[0], grads[1])]  # (1/P) sum c_r g_r
    normalised = [(cs[0] * a + cs[1] * b) / (cs[0] + cs[1]) for a, b in zip(grads[0], grads[1])]
    opt = state["optimizer"][0]
    beta1 = opt["param_groups"][0]["betas"][0]
    eps, lr = opt["param_groups"][0]["eps"], opt["param_groups"][0]["lr"]
    for i, (want, _other) in enumerate(zip(G, normalised)):
        applied = opt["state"][i]["exp_avg"] / (1 - beta1)
        assert torch.allclose(applied, want, rtol=1e-4, atol=1e-8), i
    flat = lambda ts: torch.cat([t.reshape(-1) for t in ts])  # noqa: E731
    applied = flat([opt["state"][i]["exp_avg"] / (1 - beta1) for i in range(len(G))])
    assert not torch.allclose(applied, flat(normalised), rtol=1e-3, atol=0)  # not normalised
    # The parameters after the step: Adam's first step on G.
    saved = [state["model"][0][name] for name in names]
    for p0, gr, p1 in zip(initial, G, saved):
        step = lr * gr / (gr.abs() + eps)
        assert torch.allclose(p1, p0 - step, atol=1e-6)
