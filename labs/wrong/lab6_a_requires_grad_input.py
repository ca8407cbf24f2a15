# lab: 06_estimator_weights
# cell: scales
# why: an input changed in place (its metadata): stats_of turns on weights.requires_grad_() ("to keep the graph for the derivation") and leaves it so; the caller's weights tensor now records autograd history in every later op
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    if weights.is_floating_point():
        weights.requires_grad_()
    w = weights.detach().to(torch.float64)
    return torch.stack([w.new_tensor(float(w.numel())), w.sum(), (w * w).sum()])


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].to(torch.float64)
    return W_p / W_p.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
