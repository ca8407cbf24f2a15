# lab: 04_overflow_rewind
# cell: train_with_rewind
# why: state kept between calls on an input, in a private attribute: it records on run._resume_at where it stopped and starts there on the next call with the same run, so a second epoch on one run (train_with_rewind(run, n, k) called again) trains nothing
def train_with_rewind(run, num_batches, poll_every):
    """Run every batch of run with the poll / rewind policy; return the number of rewinds."""
    b = getattr(run, "_resume_at", 0)
    since, rewinds = 0, 0
    while b < num_batches:
        run.run_batch(b)
        b += 1
        since += 1
        if since < poll_every and b < num_batches:
            continue
        since = 0
        first = run.guard.poll_read(run.guard.poll_start())
        if first is not None:
            run.rewind(first)
            run.guard.reset()
            b = first
            rewinds += 1
    run._resume_at = b
    return rewinds
