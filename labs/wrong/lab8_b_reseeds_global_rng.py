# lab: 08_capture
# cell: launches_per_step
# why: a side effect on torch's global state: reseeds the global generator (torch.manual_seed(0)) before counting "so dropout draws the same", which resets every random stream the caller had running
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    torch.manual_seed(0)
    step(state)
    counts = []
    for _ in range(steps):
        with LaunchCount() as count:
            step(state)
        counts.append(count.launches)
    return counts
