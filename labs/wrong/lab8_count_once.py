# lab: 08_capture
# cell: launches_per_step
# why: counts the first call (the warm-up, with its one-time work) and repeats that number
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    with LaunchCount() as count:
        step(state)
    return [count.launches] * steps
