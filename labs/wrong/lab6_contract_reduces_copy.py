# lab: 06_estimator_weights
# cell: hook
# why: leaves the bucket's gradient scaled: scales the bucket in place, then all-reduces a copy of it and returns the copy's future; DDP reads the future, so the gradients are right, but the bucket is left holding the scaled local gradient instead of the reduced one
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    buffer.mul_(state.scale)
    state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
    reduced = buffer.clone()
    future = dist.all_reduce(reduced, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])
