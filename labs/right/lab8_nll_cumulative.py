# lab: 08_capture
# how: static_step computes the loss as nll_loss of log_softmax, zeroes gradients with fill_(0) and applies SGD with p.add_(grad, alpha=-lr) (torch.optim.SGD's own form); launches_per_step counts all steps under one LaunchCount and takes the differences of the running total
# cell: static_step
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    model, lr = state.model, state.lr
    for p in model.parameters():
        p.grad.fill_(0.0)
    x = state.features[state.seeds]
    y = state.labels[state.seeds]
    loss = F.nll_loss(F.log_softmax(model(x), dim=-1), y)
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(p.grad, alpha=-lr)
    state.loss.copy_(loss.detach())
# cell: launches_per_step
def launches_per_step(step, state, steps=3):
    """[int] * steps: the launches of each step(state) call after one uncounted warm-up."""
    step(state)
    running = [0]
    counter = LaunchCount()
    with counter:
        for _ in range(steps):
            step(state)
            running.append(counter.launches)
    return [after - before for before, after in zip(running, running[1:])]
