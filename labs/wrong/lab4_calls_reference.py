# lab: 04_overflow_rewind
# cell: train_with_rewind
# why: calls the kit's own loop (zg_course.labs.rewind_loop) instead of writing it
def train_with_rewind(run, num_batches, poll_every):
    """Run every batch of run with the poll / rewind policy; return the number of rewinds."""
    from zg_course.labs import rewind_loop

    out = rewind_loop(run.run_batch, 0, num_batches, run.guard, poll_every, run.rewind)
    return out.overflows
