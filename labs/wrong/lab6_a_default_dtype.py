# lab: 06_estimator_weights
# cell: scales
# why: a side effect on torch's global state: torch.set_default_dtype(torch.float64) "so the scales are float64", left set for the rest of the notebook (every float tensor the caller makes afterwards is float64)
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    torch.set_default_dtype(torch.float64)
    w = weights.detach().to(torch.float64)
    return torch.stack([w.new_tensor(float(w.numel())), w.sum(), (w * w).sum()])


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    torch.set_default_dtype(torch.float64)
    W_p = stats[:, 1].to(torch.float64)
    return W_p / W_p.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
