# lab: 08_capture
# cell: static_step
# why: sorts the caller's state.seeds in place (for a friendlier gather order): the loss and the parameters come out right, but a buffer the step must only read is left changed (inputs changed in place)
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    state.seeds.copy_(torch.sort(state.seeds).values)  # neighbouring rows: a better gather
    for p in state.model.parameters():
        p.grad.zero_()
    logits = state.model(state.features[state.seeds])
    loss = F.cross_entropy(logits, state.labels[state.seeds])
    loss.backward()
    with torch.no_grad():
        for p in state.model.parameters():
            p.sub_(state.lr * p.grad)
        state.loss.copy_(loss)
