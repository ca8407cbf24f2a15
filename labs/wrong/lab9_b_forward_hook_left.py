# lab: 09_replicate_a_claim
# cell: gradient
# why: an input changed where the clauses do not look: registers a forward hook on the caller's model (a placeholder "for debugging") and never removes it; the caller's model keeps one more hook after every call
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    model.register_forward_hook(lambda module, inputs, output: None)
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
    G = torch.stack(draws)
    norm = float(g_star.norm())
    return {
        "relative_error": float((G - g_star).norm(dim=1).mean()) / norm,
        "bias": float((G.mean(0) - g_star).norm()) / norm,
    }
