# lab: 09_replicate_a_claim
# cell: measure
# function: measure_gap
# why: sorts the caller's seeds in place to run them in a canonical order (and reports them in the order given, from a copy): every number is right, but the caller's list comes back sorted (an input changed in place)
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
    gaps = [float(a) - float(b) for a, b in zip(grappa_acc, single_acc)]
    n = len(gaps)
    mean = sum(gaps) / n
    std = math.sqrt(sum((x - mean) ** 2 for x in gaps) / (n - 1))
    return {"gaps": gaps, "mean": mean, "std": std, "n": n}


def measure_gap(graph, setting, seeds, train_many=grappa.train_many):
    """setting's accuracy gap to single, seed by seed (see Part A)."""
    given = list(seeds)
    if isinstance(seeds, list):
        seeds.sort()  # run the seeds in a canonical order
    order = sorted(given)
    shared = grappa.get_trainer("single").shared_options(setting)
    isolated = train_many(graph, [dict(setting, seed=s) for s in order])
    single = train_many(graph, [dict(shared, trainer="single", seed=s) for s in order])
    mine = {s: accuracy(h) for s, h in zip(order, isolated)}
    theirs = {s: accuracy(h) for s, h in zip(order, single)}
    grappa_acc = [mine[s] for s in given]
    single_acc = [theirs[s] for s in given]
    out = paired_summary(grappa_acc, single_acc)
    out.update(seeds=given, grappa=grappa_acc, single=single_acc)
    return out
