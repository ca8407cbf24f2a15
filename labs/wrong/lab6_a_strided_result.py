# lab: 06_estimator_weights
# cell: scales
# why: a non-contiguous result: batch_scales and shrink_scales return every other entry of an interleaved buffer (a strided view of a [2P] tensor), so .view(), a DDP bucket copy or a CUDA Graph's static input cannot take it as is
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64)
    return torch.stack([w.new_tensor(float(w.numel())), w.sum(), (w * w).sum()])


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].to(torch.float64)
    both = torch.stack([W_p / W_p.sum(), W_p], dim=1).reshape(-1)  # [s_0, W_0, s_1, W_1, ...]
    return both[0::2]


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    s = (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
    return torch.stack([s, n_p], dim=1).reshape(-1)[0::2]
