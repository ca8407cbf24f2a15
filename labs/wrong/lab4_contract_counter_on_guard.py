# lab: 04_overflow_rewind
# cell: train_with_rewind
# why: keeps its poll counter and rewind count as attributes of run.guard: the loop is right, but it leaves its own state on an object it does not own (the guard must stay as the rules leave it)
def train_with_rewind(run, num_batches, poll_every):
    """Run every batch of run with the poll / rewind policy; return the number of rewinds."""
    guard = run.guard
    guard.since, guard.rewinds = 0, 0
    b = 0
    while b < num_batches:
        run.run_batch(b)
        b += 1
        guard.since += 1
        if guard.since < poll_every and b < num_batches:
            continue
        guard.since = 0
        first = guard.poll_read(guard.poll_start())
        if first is not None:
            run.rewind(first)
            guard.reset()
            b = first
            guard.rewinds += 1
    return guard.rewinds
