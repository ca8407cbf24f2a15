# lab: 08_capture
# cell: static_step
# why: builds the one-hot targets with torch.zeros(B, C, device="cpu"): right on a CPU, where the state is too; on a GPU the targets sit on the host while the logits do not (an explicit device, which redirecting the default device never saw)
def static_step(state):
    """One SGD step of state.model on state.seeds, in place, 0 host syncs; loss -> state.loss."""
    for p in state.model.parameters():
        p.grad.zero_()
    logits = state.model(state.features[state.seeds])
    labels = state.labels[state.seeds]
    targets = torch.zeros(logits.shape[0], logits.shape[1], device="cpu")
    targets.scatter_(1, labels.unsqueeze(1), 1.0)
    loss = -(F.log_softmax(logits, dim=1) * targets).sum(1).mean()
    loss.backward()
    with torch.no_grad():
        for p in state.model.parameters():
            p.sub_(state.lr * p.grad)
        state.loss.copy_(loss)
