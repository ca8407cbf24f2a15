# lab: 06_estimator_weights
# cell: scales
# why: builds the three scalars with torch.tensor([...], dtype=torch.float64) and no device=: the stats land on the default device, not the weights'; right on a CPU, on the wrong device when the weights are on a GPU
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64)
    return torch.tensor([w.numel(), float(w.sum()), float((w * w).sum())], dtype=torch.float64)


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].to(torch.float64)
    return W_p / W_p.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
