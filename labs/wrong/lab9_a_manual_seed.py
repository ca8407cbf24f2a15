# lab: 09_replicate_a_claim
# cell: measure
# function: measure_gap
# why: a side effect on torch's global state: measure_gap calls torch.manual_seed(seed) before each pair of runs "to pair them" and leaves the global generator reseeded to the last seed
def paired_summary(grappa_acc, single_acc):
    """{"gaps", "mean", "std" (sample), "n"} of the paired gaps grappa - single."""
    grappa_acc, single_acc = list(grappa_acc), list(single_acc)
    if len(grappa_acc) != len(single_acc):
        raise ValueError("grappa_acc and single_acc must pair seed by seed")
    if len(grappa_acc) < 2:
        raise ValueError("a spread needs at least two seeds")
    gaps = [float(a) - float(b) for a, b in zip(grappa_acc, single_acc)]
    n = len(gaps)
    mean = sum(gaps) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in gaps) / (n - 1))
    return {"gaps": gaps, "mean": mean, "std": std, "n": n}


def measure_gap(graph, setting, seeds, train_many=grappa.train_many):
    """setting's accuracy gap to single, seed by seed (see Part A)."""
    seeds = list(seeds)
    for s in seeds:
        torch.manual_seed(s)
    shared = grappa.get_trainer("single").shared_options(setting)
    isolated = train_many(graph, [dict(setting, seed=s) for s in seeds])
    single = train_many(graph, [dict(shared, trainer="single", seed=s) for s in seeds])
    grappa_acc = [accuracy(h) for h in isolated]
    single_acc = [accuracy(h) for h in single]
    out = paired_summary(grappa_acc, single_acc)
    out.update(seeds=seeds, grappa=grappa_acc, single=single_acc)
    return out
