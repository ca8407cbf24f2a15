# lab: 06_estimator_weights
# cell: hook
# why: a narrower dtype: multiplies by the scale as a float32 tensor (torch.tensor(state.scale, dtype=torch.float32), "like the gradients"); exact on float32 buckets, off in the 8th digit on a float64 bucket whose scale float32 cannot hold (0.1, 1/3)
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    buffer.mul_(torch.tensor(state.scale, dtype=torch.float32))
    state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
    future = dist.all_reduce(buffer, async_op=True).get_future()
    return future.then(lambda fut: fut.value()[0])
