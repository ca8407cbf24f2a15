# lab: 06_estimator_weights
# cell: scales
# why: shrinks toward lam / P instead of lam n_p / n: right only for equal batch sizes
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64)
    return torch.stack([w.new_tensor(float(w.numel())), w.sum(), (w * w).sum()])


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].to(torch.float64)
    return W_p / W_p.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    return (1 - lam) * batch_scales(stats) + lam / stats.shape[0]
