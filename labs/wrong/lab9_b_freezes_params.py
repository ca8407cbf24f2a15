# lab: 09_replicate_a_claim
# cell: gradient
# why: an input changed in place (its parameters' metadata): after measuring, it freezes every parameter of the caller's model with requires_grad_(False) ("done with gradients"), so the caller's next training step trains nothing
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    was_training = model.training
    model.eval()
    try:
        g_star = grappa.exact_gradient(g, model)
        draws = [
            combined_gradients(g, model, part, [grappa.Estimator(estimator)], s)[estimator]
            for part in parts
            for s in super_epochs
        ]
    finally:
        model.train(was_training)
    for p in model.parameters():
        if p.grad is None:
            p.requires_grad_(False)
    G = torch.stack(draws)
    norm = float(g_star.norm())
    return {
        "relative_error": float((G - g_star).norm(dim=1).mean()) / norm,
        "bias": float((G.mean(0) - g_star).norm()) / norm,
    }
