# lab: 06_estimator_weights
# cell: hook
# why: scales after the all-reduce: every worker gets scale_p * sum of gradients, not sum of scale_q * gradient_q
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
    future = dist.all_reduce(buffer, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0].mul_(state.scale))
