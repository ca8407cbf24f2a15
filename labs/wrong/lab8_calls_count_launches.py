# lab: 08_capture
# cell: launches_per_step
# why: counts each step with the kit's zg.audit.count_launches (what the tests check against) instead of with a LaunchCount of its own
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    from zg.audit import count_launches

    step(state)
    return [count_launches(step, state)[1].launches for _ in range(steps)]
