# lab: 04_overflow_rewind
# how: gates the update, not the parameter: subtracts torch.where(apply, grad * lr, 0) in place, a zero step where the flag is off (a non-finite gradient is never multiplied into the parameter then)
# cell: gated_sgd
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    with torch.no_grad():
        for p in params:
            g = p.grad
            if g is None:
                continue
            zero = torch.zeros((), dtype=g.dtype, device=g.device)
            p.sub_(torch.where(apply, g * lr, zero))
