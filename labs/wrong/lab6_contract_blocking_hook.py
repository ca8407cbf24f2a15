# lab: 06_estimator_weights
# cell: hook
# why: a blocking collective dressed as an asynchronous one: all-reduces with a plain dist.all_reduce(buffer) (it waits) and returns a torch.futures.Future it completed itself; DDP gets the right gradient, but backward can no longer overlap the communication
class ScaleState:
    def __init__(self, scale, ledger):
        self.scale, self.ledger = scale, ledger


def scaled_allreduce_hook(state, bucket):
    buffer = bucket.buffer()
    buffer.mul_(state.scale)
    state.ledger.record("gradients", "all_reduce", buffer.numel() * buffer.element_size())
    dist.all_reduce(buffer)
    done = torch.futures.Future()
    done.set_result(buffer)
    return done
