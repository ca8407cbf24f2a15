# lab: 04_overflow_rewind
# cell: gated_sgd
# why: gates the update with torch.zeros(p.shape) made without device= (on the default device): on a GPU it cannot meet the parameter; the CPU-only tests never see it
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                p.sub_(torch.where(apply, lr * p.grad, torch.zeros(p.shape)))
