# lab: 06_estimator_weights
# cell: scales
# why: fills a float64 tensor made with an explicit device="cpu": the values are right on a CPU, where the inputs are too; on a GPU the stats sit on the host and the next step mixes devices
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64)
    out = torch.zeros(3, dtype=torch.float64, device="cpu")
    out[0] = w.numel()
    out[1] = w.sum()
    out[2] = (w * w).sum()
    return out


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].to(torch.float64)
    return W_p / W_p.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
    ### END SOLUTION
