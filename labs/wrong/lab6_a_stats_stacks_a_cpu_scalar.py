# lab: 06_estimator_weights
# cell: scales
# why: stacks a 0-d torch.tensor(n) made on the CPU with two sums on the weights' device: PyTorch lets a CPU scalar into an elementwise op, not into torch.stack, so on a GPU the call fails
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64)
    return torch.stack(
        [torch.tensor(float(w.numel()), dtype=torch.float64), w.sum(), (w * w).sum()]
    )


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W_p = stats[:, 1].to(torch.float64)
    return W_p / W_p.sum()


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].to(torch.float64)
    return (1 - lam) * batch_scales(stats) + lam * n_p / n_p.sum()
    ### END SOLUTION
