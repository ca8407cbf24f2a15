# lab: 08_capture
# cell: static_step
# why: keeps the parameter list on state between steps (state.params, made on the first call): every value is right, but the step leaves state it was told not to keep (an attribute added to an object it must leave clean)
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    if not hasattr(state, "params"):
        state.params = list(state.model.parameters())  # made once, reused by later steps
    for p in state.params:
        p.grad.zero_()
    logits = state.model(state.features[state.seeds])
    loss = F.cross_entropy(logits, state.labels[state.seeds])
    loss.backward()
    with torch.no_grad():
        for p in state.params:
            p.sub_(state.lr * p.grad)
        state.loss.copy_(loss)
