# lab: 09_replicate_a_claim
# cell: gradient
# why: sums the draws into torch.zeros(num_params, dtype=torch.float64, device="cpu"): right on a CPU, but with the model on a GPU the running sum sits on the host while every draw does not (an explicit device, which redirecting the default device never saw)
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    was_training = model.training
    model.eval()
    try:
        g_star = grappa.exact_gradient(g, model)
        total = torch.zeros(g_star.numel(), dtype=torch.float64, device="cpu")
        errors = []
        for part in parts:
            for s in super_epochs:
                G = combined_gradients(g, model, part, [grappa.Estimator(estimator)], s)[estimator]
                errors.append(float((G - g_star).norm()))
                total += G
    finally:
        model.train(was_training)
    norm = float(g_star.norm())
    return {
        "relative_error": sum(errors) / len(errors) / norm,
        "bias": float((total / len(errors) - g_star).norm()) / norm,
    }
