# lab: 09_replicate_a_claim
# cell: gradient
# why: returns the kit's grappa.gradient_error instead of computing the error
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    out = grappa.gradient_error(g, model, parts, estimator, super_epochs=super_epochs)
    return {"relative_error": out["relative_error"], "bias": out["bias"]}
