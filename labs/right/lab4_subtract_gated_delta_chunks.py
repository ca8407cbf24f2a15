# lab: 04_overflow_rewind
# how: gates the update rather than the result (p.sub_ of torch.where(apply, grad * lr, 0), and x - 0 is x exactly), and runs the loop as chunks of up to poll_every batches with one poll after each chunk
# cell: gated_sgd
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    with torch.no_grad():
        for p in (q for q in params if q.grad is not None):
            # where() selects, it does not multiply: an inf / nan gradient never reaches p
            delta = torch.where(apply, p.grad * lr, torch.zeros_like(p))
            p.sub_(delta)
# cell: train_with_rewind
def train_with_rewind(run, num_batches, poll_every):
    """Run every batch of run with the poll / rewind policy; return the number of rewinds."""
    rewinds, start = 0, 0
    while start < num_batches:
        stop = min(start + poll_every, num_batches)     # poll_every batches, or up to the last
        for b in range(start, stop):
            run.run_batch(b)
        first = run.guard.poll_read(run.guard.poll_start())
        if first is None:
            start = stop
        else:
            run.rewind(first)
            run.guard.reset()
            rewinds += 1
            start = first                               # the next chunk starts at the overflow
    return rewinds
