# lab: 09_replicate_a_claim
# cell: gradient
# why: caches g* in a global dict keyed by the graph (it is the slow part): right the first time, stale when the same graph comes back with another model (a cache that ignores a later change, kept in a global)
EXACT = {}


def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    was_training = model.training
    model.eval()
    try:
        if id(g) not in EXACT:
            EXACT[id(g)] = grappa.exact_gradient(g, model)
        g_star = EXACT[id(g)]
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
