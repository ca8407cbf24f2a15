# lab: 04_overflow_rewind
# cell: gated_sgd
# why: gates by multiplying: 0 * inf = nan, so a gated-off step with a non-finite gradient corrupts p
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(lr * p.grad * apply)
