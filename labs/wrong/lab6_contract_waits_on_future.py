# lab: 06_estimator_weights
# cell: hook
# why: starts the all-reduce with async_op=True but waits on it before returning ("to be safe"), so the future it returns is already complete: a blocking hook in asynchronous dress
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    buffer.mul_(state.scale)
    state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
    work = dist.all_reduce(buffer, async_op=True)
    work.wait()
    return work.get_future().then(lambda fut: fut.value()[0])
