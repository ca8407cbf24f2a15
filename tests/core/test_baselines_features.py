"""zg.baselines.features: the feature-only floor (logistic regression on x, no graph) against
the Bayes accuracy the csbm model implies and against scikit-learn's logistic regression."""

import math

import pytest
import torch

import zg
from zg.baselines.features import feature_only_accuracy


def two_class_csbm(snr, seed=0):
    return zg.datasets.csbm(
        num_nodes=3000, avg_degree=4, num_classes=2, feat_dim=8, feature_snr=snr, seed=seed
    )


@pytest.mark.parametrize("snr", [1.0, 2.0])
def test_two_classes_reach_the_bayes_accuracy_of_the_features(snr):
    """csbm's two class means lie ``feature_snr`` noise deviations apart, so the best any
    classifier of x can do is Phi(snr / 2) (69 % at snr 1, 84 % at snr 2)."""
    g = two_class_csbm(snr)
    bayes = 0.5 * (1 + math.erf(snr / 2 / math.sqrt(2)))
    accuracy = feature_only_accuracy(g)
    assert abs(accuracy - bayes) < 0.05, (accuracy, bayes)


@pytest.mark.slow
def test_it_matches_scikit_learns_logistic_regression(require):
    sklearn = require("sklearn.linear_model")
    g = zg.datasets.csbm(
        num_nodes=2000, avg_degree=4, num_classes=4, feat_dim=12, feature_snr=1.5, seed=4
    )
    reference = sklearn.LogisticRegression(max_iter=2000).fit(
        g.x[g.train_idx].numpy(), g.y[g.train_idx].numpy()
    )
    theirs = float(
        (torch.from_numpy(reference.predict(g.x[g.test_idx].numpy())) == g.y[g.test_idx])
        .double()
        .mean()
    )
    mine = feature_only_accuracy(g)
    assert abs(mine - theirs) < 0.03, (mine, theirs)


def test_without_signal_it_is_chance_and_it_ignores_the_graph():
    g = zg.datasets.csbm(
        num_nodes=3000,
        avg_degree=6,
        num_classes=4,
        feat_dim=8,
        feature_snr=0.0,
        homophily=1.0,
        seed=1,
    )
    assert abs(feature_only_accuracy(g) - 0.25) < 0.05, "no feature signal: a quarter right"
    other_edges = zg.Graph.from_edges(
        torch.tensor([0]),
        torch.tensor([1]),
        g.num_nodes,
        x=g.x,
        y=g.y,
        train_idx=g.train_idx,
        val_idx=g.val_idx,
        test_idx=g.test_idx,
    )
    assert feature_only_accuracy(other_edges) == feature_only_accuracy(g)


@pytest.mark.slow
def test_the_split_and_seed_choose_what_is_measured():
    g = two_class_csbm(2.0, seed=2)
    assert feature_only_accuracy(g, seed=3) == feature_only_accuracy(g, seed=3), "deterministic"
    accuracies = {split: feature_only_accuracy(g, split) for split in ("train", "val", "test")}
    for split, accuracy in accuracies.items():  # a fraction of that split's nodes
        n = getattr(g, f"{split}_idx").numel()
        assert abs(accuracy * n - round(accuracy * n)) < 1e-6, split
    assert len(set(accuracies.values())) == 3, "three splits, three different node sets"


def test_errors_name_what_is_missing():
    g = two_class_csbm(1.0)
    bare = zg.Graph.from_edges([0, 1], [1, 0], num_nodes=2)
    with pytest.raises(ValueError, match="needs x, y and train_idx"):
        feature_only_accuracy(bare)
    with pytest.raises(ValueError, match="split must be 'train', 'val' or 'test'.*got 'valid'"):
        feature_only_accuracy(g, "valid")
    no_test = zg.Graph.from_edges(
        [0, 1], [1, 0], num_nodes=4, x=torch.randn(4, 2), y=[0, 1, 0, 1], train_idx=[0, 1]
    )
    with pytest.raises(ValueError, match="with nodes in the graph, got 'test'"):
        feature_only_accuracy(no_test, "test")
