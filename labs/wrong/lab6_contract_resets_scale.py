# lab: 06_estimator_weights
# cell: hook
# why: leaves the state changed: sets state.scale back to 1.0 after scaling ("so that nothing scales twice"); right with one bucket, but state is not the hook's to change, and every later bucket of the iteration goes unscaled
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    buffer.mul_(state.scale)
    state.scale = 1.0
    state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
    future = dist.all_reduce(buffer, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])
