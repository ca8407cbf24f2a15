# lab: 06_estimator_weights
# cell: scales
# why: a narrower dtype: sums the weights and their squares in the weights' own dtype (float32) and converts the three scalars to float64 only at the end; W_p and Q_p lose the digits float32 cannot hold (weights 1 and 2^-24 sum to 1)
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach()
    return torch.stack([w.new_tensor(float(w.numel())), w.sum(), (w * w).sum()]).to(torch.float64)


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].to(torch.float64)
    return W_p / W_p.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
