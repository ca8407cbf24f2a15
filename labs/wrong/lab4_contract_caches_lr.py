# lab: 04_overflow_rewind
# cell: gated_sgd
# why: makes the step size once, on the first call, and keeps it in a global: a later call with another learning rate still steps with the first one (a cache that ignores a change of setting)
_step_size = {}


def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    scale = _step_size.setdefault("lr", lr)
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.copy_(torch.where(apply, p - scale * p.grad, p))
