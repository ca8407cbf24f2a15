# lab: 08_capture
# cell: static_step
# why: keeps one torch.optim.SGD per model in a global dict, made with the learning rate of the first call: a cache that ignores a later change of state.lr, and a global the step changes
OPTIMIZERS = {}


def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    key = id(state.model)
    if key not in OPTIMIZERS:
        OPTIMIZERS[key] = torch.optim.SGD(state.model.parameters(), lr=state.lr)
    opt = OPTIMIZERS[key]
    opt.zero_grad(set_to_none=False)
    loss = F.cross_entropy(state.model(state.features[state.seeds]), state.labels[state.seeds])
    loss.backward()
    opt.step()
    with torch.no_grad():
        state.loss.copy_(loss)
