# lab: 08_capture
# how: static_step makes a torch.optim.SGD for this one call (nothing kept) and lets it update the parameters in place, with the one-hot targets built on the batch's device (torch.zeros(..., device=logits.device)) and a soft-target loss; launches_per_step counts with one LaunchCount per call in a list comprehension over a helper
# cell: static_step
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    opt = torch.optim.SGD(state.model.parameters(), lr=state.lr)    # this call's only
    opt.zero_grad(set_to_none=True)
    logits = state.model(state.features.index_select(0, state.seeds))
    labels = state.labels.index_select(0, state.seeds)
    targets = torch.zeros(logits.shape, dtype=logits.dtype, device=logits.device)
    targets.scatter_(1, labels[:, None], 1.0)
    loss = -(F.log_softmax(logits, dim=1) * targets).sum(dim=1).mean()
    loss.backward()
    opt.step()
    with torch.no_grad():
        state.loss.copy_(loss)
# cell: launches_per_step
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""

    def counted():
        with LaunchCount() as count:
            step(state)
        return int(count.launches)

    step(state)
    return [counted() for _ in range(steps)]
