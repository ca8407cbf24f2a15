# lab: 08_capture
# cell: static_step
# part: test_static_step test_static_step_hidden
# why: model.zero_grad() sets the gradients to None, so backward allocates new ones every step: the same numbers as SGD, but the buffers move
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    state.model.zero_grad()
    logits = state.model(state.features[state.seeds])
    loss = F.cross_entropy(logits, state.labels[state.seeds])
    loss.backward()
    with torch.no_grad():
        for p in state.model.parameters():
            p.sub_(state.lr * p.grad)
        state.loss.copy_(loss)
