# lab: 09_replicate_a_claim
# how: paired_summary uses statistics.fmean / statistics.stdev and raises its own ValueErrors first; measure_gap builds both sides from the seeds with {**setting, "seed": s} and the single trainer's fixed() fields, without copying the seeds (a tuple works as it is); paired_interval multiplies t975 by the standard error std / n ** 0.5, tests "0 in [low, high]" with a chained comparison and returns the t it used as an extra key; gradient_error_of sums the draws and their distances to g* in a loop with torch.linalg.vector_norm
# cell: measure
def paired_summary(grappa_acc, single_acc):
    """{"gaps", "mean", "std" (sample), "n"} of the paired gaps grappa - single."""
    if len(grappa_acc) != len(single_acc):
        raise ValueError(f"{len(grappa_acc)} grappa and {len(single_acc)} single accuracies cannot pair")
    if len(grappa_acc) < 2:
        raise ValueError("the sample standard deviation needs two seeds or more")
    gaps = [float(a) - float(b) for a, b in zip(grappa_acc, single_acc)]
    return {"gaps": gaps, "mean": statistics.fmean(gaps), "std": statistics.stdev(gaps), "n": len(gaps)}


def measure_gap(graph, setting, seeds, train_many=grappa.train_many):
    """setting's accuracy gap to single, seed by seed (see Part A)."""
    fixed = grappa.get_trainer("single").fixed()
    common = {key: value for key, value in setting.items() if key not in fixed}
    isolated = train_many(graph, [{**setting, "seed": s} for s in seeds])
    single = train_many(graph, [{**common, "trainer": "single", "seed": s} for s in seeds])
    a = [accuracy(h) for h in isolated]
    b = [accuracy(h) for h in single]
    return {**paired_summary(a, b), "seeds": [s for s in seeds], "grappa": a, "single": b}
# cell: interval
def paired_interval(summary):
    """The 95 % t interval of the mean gap: {"low", "high", "half_width", "excludes_zero"}."""
    n, mean = summary["n"], summary["mean"]
    t = t975(n - 1)
    half = t * (summary["std"] / n ** 0.5)
    low, high = mean - half, mean + half
    return {"low": low, "high": high, "half_width": half, "excludes_zero": not (low <= 0.0 <= high), "t": t}
# cell: gradient
def gradient_error_of(g, model, parts, estimator, super_epochs=(0,)):
    """{"relative_error", "bias"} of an estimator's combined gradient against g*."""
    mode = model.training
    model.eval()
    try:
        exact = grappa.exact_gradient(g, model)
        total, distance, count = torch.zeros_like(exact), 0.0, 0
        for part in parts:
            for s in super_epochs:
                G = combined_gradients(g, model, part, [grappa.Estimator(estimator)], s)[estimator]
                distance += float(torch.linalg.vector_norm(G - exact))
                total += G
                count += 1
    finally:
        model.train(mode)
    scale = float(torch.linalg.vector_norm(exact))
    return {"relative_error": distance / count / scale,
            "bias": float(torch.linalg.vector_norm(total / count - exact)) / scale}
