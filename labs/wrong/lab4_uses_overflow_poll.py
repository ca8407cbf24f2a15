# lab: 04_overflow_rewind
# cell: train_with_rewind
# why: hands the policy to the kit's zg.step.OverflowPoll instead of writing the poll and rewind
def train_with_rewind(run, num_batches, poll_every):
    """Run every batch of run with the poll / rewind policy; return the number of rewinds."""
    poll = zg.step.OverflowPoll(run.guard, poll_every, 0, num_batches)
    b = 0
    while b < num_batches:
        run.run_batch(b)
        first = poll.after(b)
        b += 1
        if first is not None:
            run.rewind(first)
            run.guard.reset()
            b = first
    return poll.overflows
