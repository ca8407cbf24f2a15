# lab: 04_overflow_rewind
# cell: gated_sgd
# why: builds each parameter's gate with torch.ones(p.shape, device="cpu"): right on a CPU, where the parameters are too; on a GPU the gate sits on the host and meets the parameter's gradient (an explicit device, which redirecting the default device never saw)
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    with torch.no_grad():
        for p in params:
            if p.grad is not None:
                gate = torch.ones(p.shape, dtype=torch.bool, device="cpu") & apply
                p.sub_(torch.where(gate, lr * p.grad, 0.0))
