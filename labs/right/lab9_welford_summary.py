# lab: 09_replicate_a_claim
# how: Welford's one-pass update of the mean and the sum of squared deviations: stable on nearly equal gaps
# cell: measure
def paired_summary(grappa_acc, single_acc):
    """{"gaps", "mean", "std" (sample), "n"} of the paired gaps grappa - single."""
    grappa_acc, single_acc = list(grappa_acc), list(single_acc)
    if len(grappa_acc) != len(single_acc):
        raise ValueError(
            f"grappa_acc and single_acc must pair seed by seed; got {len(grappa_acc)} and "
            f"{len(single_acc)} accuracies"
        )
    if len(grappa_acc) < 2:
        raise ValueError(f"a spread needs at least two seeds; got {len(grappa_acc)}")
    gaps, mean, m2 = [], 0.0, 0.0
    for k, (a, b) in enumerate(zip(grappa_acc, single_acc), start=1):
        x = float(a) - float(b)
        gaps.append(x)
        delta = x - mean
        mean += delta / k
        m2 += delta * (x - mean)
    n = len(gaps)
    return {"gaps": gaps, "mean": mean, "std": math.sqrt(m2 / (n - 1)), "n": n}


def measure_gap(graph, setting, seeds, train_many=grappa.train_many):
    """setting's accuracy gap to single, seed by seed (see Part A)."""
    seeds = list(seeds)
    shared = grappa.get_trainer("single").shared_options(setting)
    isolated = train_many(graph, [dict(setting, seed=s) for s in seeds])
    single = train_many(graph, [dict(shared, trainer="single", seed=s) for s in seeds])
    grappa_acc = [accuracy(h) for h in isolated]
    single_acc = [accuracy(h) for h in single]
    out = paired_summary(grappa_acc, single_acc)
    out.update(seeds=seeds, grappa=grappa_acc, single=single_acc)
    return out
