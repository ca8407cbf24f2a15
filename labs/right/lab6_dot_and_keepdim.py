# lab: 06_estimator_weights
# how: stats_of as a stack of a 0-d count, a sum and a dot product; the scales divide by a keepdim sum and the shrinkage adds lam times the uniform share to (1 - lam) times the batch share
# cell: scales
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().double().reshape(-1)
    count = torch.full((), w.numel(), dtype=torch.float64, device=w.device)
    return torch.stack((count, w.sum(), torch.dot(w, w)))


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W = stats.double().select(1, 1)
    return W / W.sum(dim=0, keepdim=True)


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n = stats.double().select(1, 0)
    return (1 - lam) * batch_scales(stats) + lam * (n / n.sum())
