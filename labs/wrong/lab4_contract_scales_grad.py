# lab: 04_overflow_rewind
# cell: gated_sgd
# why: scales each gradient by lr in place (p.grad.mul_(lr)) to save a tensor, then subtracts it where apply: the parameters are right, but every gradient is left scaled (an object it does not own left changed)
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                step = p.grad.mul_(lr)
                p.copy_(torch.where(apply, p - step, p))
