# lab: 04_overflow_rewind
# cell: gated_sgd
# why: hands the gated step to the kit's optimizer (zg.optim.DeviceSGD, whose step(apply=...) is this step) instead of writing it
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    zg.optim.DeviceSGD(list(params), lr=lr).step(apply=apply)
