# lab: 09_replicate_a_claim
# how: paired_summary uses the statistics module (its StatisticsError, a ValueError, covers fewer than two seeds); the single side keeps the whole setting and overrides the settings the single trainer fixes with the trainer's own values (workers=1, num_chunks=1, estimator="mean", repartition_every=None) instead of dropping them; gradient_error_of accumulates norms and the running sum of the draws in a loop instead of stacking them
# cell: measure
def paired_summary(grappa_acc, single_acc):
    """{"gaps", "mean", "std" (sample), "n"} of the paired gaps grappa - single."""
    if len(grappa_acc) != len(single_acc):
        raise ValueError(f"cannot pair {len(grappa_acc)} accuracies with {len(single_acc)}")
    gaps = [float(a) - float(b) for a, b in zip(grappa_acc, single_acc)]
    # statistics.mean / stdev raise statistics.StatisticsError (a ValueError) below two values
    return {"gaps": gaps, "mean": statistics.mean(gaps), "std": statistics.stdev(gaps), "n": len(gaps)}


def measure_gap(graph, setting, seeds, train_many=grappa.train_many):
    """setting's accuracy gap to single, seed by seed (see Part A)."""
    seeds = list(seeds)
    # what the single trainer only runs with: state it, rather than leave it out
    own = {field: value for field, (value, _why) in grappa.get_trainer("single").fixed().items()}
    grappa_runs = [{**setting, "seed": seed} for seed in seeds]
    single_runs = [{**setting, **own, "trainer": "single", "seed": seed} for seed in seeds]
    grappa_hist = train_many(graph, grappa_runs)
    single_hist = train_many(graph, single_runs)
    result = {
        "seeds": seeds,
        "grappa": [accuracy(h) for h in grappa_hist],
        "single": [accuracy(h) for h in single_hist],
    }
    result.update(paired_summary(result["grappa"], result["single"]))
    return result
# cell: gradient
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    mode = model.training
    model.eval()
    try:
        exact = grappa.exact_gradient(g, model)
        total, errors = torch.zeros_like(exact), []
        for part in parts:
            for s in super_epochs:
                G = combined_gradients(g, model, part, [grappa.Estimator(estimator)], s)[estimator]
                errors.append(float(torch.linalg.vector_norm(G - exact)))
                total += G
    finally:
        model.train(mode)
    scale = float(torch.linalg.vector_norm(exact))
    return {
        "relative_error": sum(errors) / len(errors) / scale,
        "bias": float(torch.linalg.vector_norm(total / len(errors) - exact)) / scale,
    }
