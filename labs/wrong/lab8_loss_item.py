# lab: 08_capture
# cell: static_step
# why: stores the loss through .item() (a host sync, which breaks capture) and rebinds state.loss to a new tensor
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    for p in state.model.parameters():
        p.grad.zero_()
    logits = state.model(state.features[state.seeds])
    loss = F.cross_entropy(logits, state.labels[state.seeds])
    loss.backward()
    with torch.no_grad():
        for p in state.model.parameters():
            p.sub_(state.lr * p.grad)
    state.loss = torch.tensor(loss.item())
