# lab: 06_estimator_weights
# how: keeps the whole contract another way: stats_of counts with ones_like and reduces one float64 copy of the weights; batch_scales normalises a float64 copy of the W column in place (never the caller's stats); shrink_scales mixes with addcmul; the hook chains two then() callbacks on the pending all-reduce and records Tensor.nbytes; bytes_per_iteration uses divmod
# cell: scales
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64, copy=True)
    return torch.stack([torch.ones_like(w).sum(), w.sum(), w.square().sum()])


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    W = stats[:, 1].to(torch.float64, copy=True)
    W /= W.sum()                       # the copy, not the caller's stats
    return W


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n = stats[:, 0].to(torch.float64)
    uniform = n / n.sum()
    return torch.addcmul(uniform * lam, batch_scales(stats), torch.ones_like(uniform), value=1 - lam)
# cell: hook
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    flat = bucket.buffer()
    flat.mul_(state.scale)
    state.ledger.record("gradients", "all_reduce", flat.nbytes)
    pending = dist.all_reduce(flat, async_op=True).get_future()
    return pending.then(lambda fut: fut.value()).then(lambda fut: fut.value()[0])
# cell: bytes
def bytes_per_iteration(num_params, world_size, needs_stats):
    whole, _ = divmod(2 * (world_size - 1) * (num_params * 4), world_size)
    return whole + (24 * (world_size - 1) if needs_stats else 0)
