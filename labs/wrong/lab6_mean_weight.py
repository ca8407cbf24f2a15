# lab: 06_estimator_weights
# cell: scales
# why: normalises the workers' mean weights (W_p / n_p) instead of W_p: right only for equal batch sizes
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64)
    return torch.stack([w.new_tensor(float(w.numel())), w.sum(), (w * w).sum()])


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    mean_weight = stats[:, 1].to(torch.float64) / stats[:, 0].to(torch.float64)
    return mean_weight / mean_weight.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
