# lab: 04_overflow_rewind
# how: selects the step with torch.where against torch.zeros_like (a zero step where gated off, so x - 0 is x exactly) without touching the gradients, and keeps the loop's state in a small local object that lives only for the call, never on the run or its guard
# cell: gated_sgd
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            step = torch.where(apply, lr * p.grad, torch.zeros_like(p.grad))
            p.sub_(step)
# cell: train_with_rewind
def train_with_rewind(run, num_batches, poll_every):
    """Run every batch of run with the poll / rewind policy; return the number of rewinds."""
    from types import SimpleNamespace

    state = SimpleNamespace(next=0, since=0, rewinds=0)   # local: gone when the call returns
    while state.next < num_batches:
        run.run_batch(state.next)
        state.next += 1
        state.since += 1
        if state.since == poll_every or state.next == num_batches:
            state.since = 0
            first = run.guard.poll_read(run.guard.poll_start())
            if first is not None:
                run.rewind(first)
                run.guard.reset()
                state.next, state.rewinds = first, state.rewinds + 1
    return state.rewinds
