# lab: 04_overflow_rewind
# how: zeroes the whole gradient on the device with masked_fill(~apply, 0) and applies it with add_(alpha=-lr), and schedules polls by the batch index at which the next read is due (min(resume + poll_every, num_batches)) instead of a counter
# cell: gated_sgd
def gated_sgd_(params, lr, apply):
    """In place: p -= lr * p.grad where apply (bool [] tensor) is True; no host read of apply."""
    skip = ~apply                                         # bool [], stays on the device
    with torch.no_grad():
        for p in params:
            if p.grad is None:
                continue
            step = p.grad.masked_fill(skip, 0.0)          # inf / nan replaced, not multiplied
            p.add_(step, alpha=-lr)
# cell: train_with_rewind
def train_with_rewind(run, num_batches, poll_every):
    """Run every batch of run with the poll / rewind policy; return the number of rewinds."""
    rewinds = 0
    b = 0
    poll_at = min(poll_every, num_batches)
    while b < num_batches:
        run.run_batch(b)
        b += 1
        if b != poll_at:
            continue
        first = run.guard.poll_read(run.guard.poll_start())
        if first is not None:
            run.rewind(first)
            run.guard.reset()
            rewinds += 1
            b = first
        poll_at = min(b + poll_every, num_batches)        # poll_every batches from here, or the last
    return rewinds
