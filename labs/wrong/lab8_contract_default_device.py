# lab: 08_capture
# cell: static_step
# why: builds the one-hot targets with torch.zeros(B, C) and the row ids with torch.arange(B), both without device=: right on a CPU, but on a GPU they sit on the default device while the batch does not (a new tensor on the default device)
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    for p in state.model.parameters():
        p.grad.zero_()
    logits = state.model(state.features[state.seeds])
    labels = state.labels[state.seeds]
    targets = torch.zeros(logits.shape[0], logits.shape[1])
    targets[torch.arange(logits.shape[0]), labels] = 1.0
    loss = -(F.log_softmax(logits, dim=1) * targets).sum(1).mean()
    loss.backward()
    with torch.no_grad():
        for p in state.model.parameters():
            p.sub_(state.lr * p.grad)
        state.loss.copy_(loss)
