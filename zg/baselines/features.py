"""Feature-only baseline: multinomial logistic regression on node features, no graph.

Where it sits: the floor under every GNN accuracy in the kit. On a csbm graph the features
alone carry ``feature_snr`` worth of signal; what a GNN adds above this floor is what the
graph's homophily allows it to add (bench/accuracy.py shows the curve).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .._checks import seed_arg
from ..graph import Graph

__all__ = ["feature_only_accuracy"]


def feature_only_accuracy(
    g: Graph,
    split: str = "test",
    epochs: int = 200,
    lr: float = 0.05,
    weight_decay: float = 1e-4,
    seed: int = 0,
) -> float:
    """Accuracy on ``split`` of logistic regression trained full-batch on the training nodes."""
    if g.x is None or g.y is None or g.train_idx is None:
        raise ValueError("feature_only_accuracy needs x, y and train_idx")
    idx = getattr(g, f"{split}_idx", None) if split in ("train", "val", "test") else None
    if idx is None:
        raise ValueError(
            f"split must be 'train', 'val' or 'test' with nodes in the graph, got {split!r}"
        )
    gen = torch.Generator().manual_seed(seed_arg(seed))
    weight = (torch.randn(g.feat_dim, g.num_classes, generator=gen) * 0.01).requires_grad_()
    bias = torch.zeros(g.num_classes, requires_grad=True)
    opt = torch.optim.Adam([weight, bias], lr=lr, weight_decay=weight_decay)
    x, y = g.x[g.train_idx], g.y[g.train_idx]
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(x @ weight + bias, y).backward()
        opt.step()
    with torch.no_grad():
        pred = (g.x[idx] @ weight + bias).argmax(1)
    return float((pred == g.y[idx]).double().mean())
