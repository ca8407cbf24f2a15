# lab: 08_capture
# cell: launches_per_step
# why: zeroes the model's gradients before every counted step so that each starts "clean": the counts of static_step come out right, but counting changes the model it only observes (gradients left zeroed)
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    step(state)
    counts = []
    for _ in range(steps):
        model = getattr(state, "model", None)
        if model is not None:
            for p in model.parameters():
                if p.grad is not None:
                    p.grad.zero_()
        with LaunchCount() as count:
            step(state)
        counts.append(count.launches)
    return counts
