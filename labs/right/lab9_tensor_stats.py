# lab: 09_replicate_a_claim
# how: paired_summary computes the mean and the sample standard deviation with float64 torch ops (Tensor.std, correction=1); the single side is built by filtering the setting against the single trainer's fixed() fields directly; gradient_error_of looks the combined gradient up by the Estimator object's name and averages per-draw relative errors (each already divided by |g*|)
# cell: measure
def paired_summary(grappa_acc, single_acc):
    """{"gaps", "mean", "std" (sample), "n"} of the paired gaps grappa - single."""
    a = torch.as_tensor(list(grappa_acc), dtype=torch.float64)
    b = torch.as_tensor(list(single_acc), dtype=torch.float64)
    if a.numel() != b.numel():
        raise ValueError("grappa_acc and single_acc must have one accuracy per seed each")
    if a.numel() < 2:
        raise ValueError("the standard deviation over seeds needs at least two seeds")
    gaps = a - b
    return {
        "gaps": gaps.tolist(),
        "mean": gaps.mean().item(),
        "std": gaps.std(correction=1).item(),
        "n": int(gaps.numel()),
    }


def measure_gap(graph, setting, seeds, train_many=grappa.train_many):
    """setting's accuracy gap to single, seed by seed (see Part A)."""
    order = list(seeds)
    fixed = grappa.get_trainer("single").fixed()
    common = {key: value for key, value in setting.items() if key not in fixed}
    runs = {
        "grappa": [dict(setting, seed=s) for s in order],
        "single": [dict(common, trainer="single", seed=s) for s in order],
    }
    acc = {side: [accuracy(h) for h in train_many(graph, r)] for side, r in runs.items()}
    summary = paired_summary(acc["grappa"], acc["single"])
    return dict(summary, seeds=order, grappa=acc["grappa"], single=acc["single"])
# cell: gradient
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    was_training = model.training
    model.train(False)
    est = grappa.Estimator(estimator)
    try:
        target = grappa.exact_gradient(g, model)
        draws = torch.stack([
            combined_gradients(g, model, p, [est], epoch)[est.name]
            for p in parts for epoch in super_epochs
        ])
    finally:
        model.train(was_training)
    target_norm = target.norm()
    per_draw = (draws - target).norm(dim=1) / target_norm
    return {
        "relative_error": per_draw.mean().item(),
        "bias": ((draws.mean(dim=0) - target).norm() / target_norm).item(),
    }
