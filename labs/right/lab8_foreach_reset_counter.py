# lab: 08_capture
# how: static_step zeroes and updates every parameter at once with torch._foreach_zero_ / torch._foreach_add_(alpha=-lr) instead of a per-parameter loop; launches_per_step enters one LaunchCount around all the counted steps and reset()s it before each one
# cell: static_step
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    params = [p for p in state.model.parameters()]
    grads = [p.grad for p in params]                 # the buffers StaticState allocated
    torch._foreach_zero_(grads)
    out = state.model(torch.index_select(state.features, 0, state.seeds))
    loss = F.cross_entropy(out, torch.index_select(state.labels, 0, state.seeds))
    loss.backward()
    with torch.no_grad():
        torch._foreach_add_(params, grads, alpha=-state.lr)
        state.loss.copy_(loss.detach())
# cell: launches_per_step
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    step(state)                                      # warm-up, outside the counter
    counts = []
    with LaunchCount() as counter:
        for _ in range(steps):
            counter.reset()
            step(state)
            counts.append(int(counter.launches))
    return counts
