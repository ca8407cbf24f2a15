# lab: 06_estimator_weights
# cell: scales
# function: shrink_scales
# why: returns the shrunk scales with .cpu(): equal values on a CPU, but on a GPU the result leaves the stats' device (a copy to the host and a sync at every call)
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
    n_p = stats[:, 0].to(torch.float64)
    return ((1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()).cpu()
    ### END SOLUTION
