# lab: 08_capture
# how: a local helper counts one call; the warm-up runs first and a list comprehension collects the counted calls
# cell: launches_per_step
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    def one_counted():
        with LaunchCount() as launched:
            step(state)
        return launched.launches

    step(state)
    return [one_counted() for _ in range(steps)]
