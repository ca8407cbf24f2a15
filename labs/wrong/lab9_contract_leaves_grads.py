# lab: 09_replicate_a_claim
# cell: gradient
# why: computes g* with its own backward() through the model, in float64 like exact_gradient: the errors are right, but every parameter's .grad is left set (an object it does not own left changed)
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    was_training = model.training
    model.eval()
    try:
        params = [p for p in model.parameters() if p.requires_grad]
        for p in params:
            p.grad = None
        logits = full_forward(model, g)
        torch.nn.functional.cross_entropy(logits[g.train_idx], g.y[g.train_idx]).backward()
        g_star = torch.cat([p.grad.reshape(-1) for p in params]).double()
        draws = [
            combined_gradients(g, model, part, [grappa.Estimator(estimator)], s)[estimator]
            for part in parts
            for s in super_epochs
        ]
    finally:
        model.train(was_training)
    G = torch.stack(draws)
    norm = float(g_star.norm())
    return {
        "relative_error": float((G - g_star).norm(dim=1).mean()) / norm,
        "bias": float((G.mean(0) - g_star).norm()) / norm,
    }
