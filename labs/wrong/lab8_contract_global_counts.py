# lab: 08_capture
# cell: launches_per_step
# why: appends every count to one module-level list and returns its tail: each call's counts are right, but the function keeps state between calls in a notebook global
COUNTS = []


def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    step(state)
    for _ in range(steps):
        with LaunchCount() as count:
            step(state)
        COUNTS.append(count.launches)
    return COUNTS[len(COUNTS) - steps :]
