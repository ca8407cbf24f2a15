# lab: 08_capture
# cell: static_step
# why: an input object changed where the clauses do not look: every call registers one more gradient hook on each of state.model's parameters (to log gradient norms) and never removes it, so hooks pile up on the caller's model, one per step
_grad_norms = []


def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    params = list(state.model.parameters())
    for p in params:
        p.register_hook(lambda grad: grad)  # a place to watch gradient norms later
        p.grad.zero_()
    logits = state.model(state.features[state.seeds])
    loss = F.cross_entropy(logits, state.labels[state.seeds])
    loss.backward()
    with torch.no_grad():
        for p in params:
            p.sub_(state.lr * p.grad)
        state.loss.copy_(loss)
