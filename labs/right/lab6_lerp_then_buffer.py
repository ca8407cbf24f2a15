# lab: 06_estimator_weights
# how: stats_of builds the three scalars with torch.tensor (device= the weights') from float64 reductions; batch_scales normalises with F.normalize(p=1); shrink_scales uses torch.lerp toward the uniform scales; the hook returns a then() that hands back the (in-place reduced) buffer itself and counts bytes with Tensor.nbytes; bytes_per_iteration adds a boolean-weighted term
# cell: scales
def stats_of(weights):
    """float64 [3]: (n_p, W_p, Q_p)."""
    w = weights.detach().double()
    return torch.tensor([w.numel(), w.sum().item(), w.square().sum().item()], dtype=torch.float64,
                        device=w.device)


def batch_scales(stats):
    """float64 [P]: s_p = W_p / W."""
    return torch.nn.functional.normalize(stats[:, 1].double(), p=1, dim=0)


def shrink_scales(stats, lam):
    """float64 [P]: (1 - lam) W_p / W + lam n_p / n."""
    n_p = stats[:, 0].double()
    uniform = n_p / n_p.sum()
    return torch.lerp(batch_scales(stats), uniform, float(lam))
# cell: hook
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    grads = bucket.buffer()
    torch.mul(grads, state.scale, out=grads)                      # scale before the sum
    state.ledger.record("gradients", "all_reduce", grads.nbytes)
    work = dist.all_reduce(grads, async_op=True)
    return work.get_future().then(lambda _: grads)                # reduced in place
# cell: bytes
def bytes_per_iteration(num_params, world_size, needs_stats):
    grad_bytes = 4 * num_params
    ring = grad_bytes * 2 * (world_size - 1) // world_size
    scalars = 3 * 8 * (world_size - 1)
    return ring + int(bool(needs_stats)) * scalars
