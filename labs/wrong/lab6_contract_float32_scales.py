# lab: 06_estimator_weights
# cell: scales
# why: a narrower dtype: computes W_p / W in float32 ("the gradients are float32 anyway") and returns it as float64; two workers whose W_p differ in the 10th digit get equal scales, and every scale is off in the 8th digit
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64)
    return torch.stack([w.new_tensor(float(w.numel())), w.sum(), (w * w).sum()])


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].float()
    return (W_p / W_p.sum()).double()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
