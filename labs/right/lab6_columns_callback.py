# lab: 06_estimator_weights
# how: stats_of takes powers 0, 1, 2 of the weights in one broadcast and sums the columns; the scales are computed from column views with explicit totals (shrink writes out the formula instead of reusing batch_scales); the hook completes its own torch.futures.Future from a done-callback of the all-reduce; bytes_per_iteration branches on P and needs_stats
# cell: scales
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().to(torch.float64).reshape(-1, 1)                  # [n_p, 1]
    powers = torch.arange(3, dtype=torch.float64, device=w.device)         # w^0, w^1, w^2
    return (w ** powers).sum(dim=0)


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    n, W, Q = stats.to(torch.float64).unbind(dim=1)
    return W / torch.sum(W)


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n, W, Q = stats.to(torch.float64).unbind(dim=1)
    return (1.0 - lam) * (W / W.sum()) + lam * (n / n.sum())
# cell: hook
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    buf = bucket.buffer()
    buf *= state.scale
    state.ledger.record("gradients", "all_reduce", buf.element_size() * buf.numel())
    result = torch.futures.Future()
    reduced = dist.all_reduce(buf, async_op=True).get_future()
    reduced.add_done_callback(lambda fut: result.set_result(fut.value()[0]))
    return result
# cell: bytes
def bytes_per_iteration(num_params, world_size, needs_stats):
    P = world_size
    if P == 1:
        return 0                                   # nobody to send to
    sent = 2 * (P - 1) * (4 * num_params) // P
    if needs_stats:
        sent = sent + 24 * (P - 1)
    return sent
