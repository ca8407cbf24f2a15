# lab: 09_replicate_a_claim
# how: paired_summary with numpy (mean, std with ddof=1) on an array of the gaps; measure_gap builds both run lists first from one helper, then trains both sides
# cell: measure
import numpy as np


def paired_summary(grappa_acc, single_acc):
    """{"gaps", "mean", "std" (sample), "n"} of the paired gaps grappa - single."""
    a = [float(x) for x in grappa_acc]
    b = [float(x) for x in single_acc]
    if len(a) != len(b):
        raise ValueError(f"the accuracies must pair seed by seed: {len(a)} and {len(b)}")
    if len(a) < 2:
        raise ValueError(f"a sample standard deviation needs two seeds or more, got {len(a)}")
    gaps = np.array(a) - np.array(b)
    return {"gaps": [float(x) for x in gaps], "mean": float(gaps.mean()),
            "std": float(gaps.std(ddof=1)), "n": int(gaps.size)}


def measure_gap(graph, setting, seeds, train_many=grappa.train_many):
    """setting's accuracy gap to single, seed by seed (see Part A)."""
    seeds = [s for s in seeds]

    def runs(options):
        return [{**options, "seed": s} for s in seeds]

    single_options = {**grappa.get_trainer("single").shared_options(setting), "trainer": "single"}
    grappa_acc = [accuracy(h) for h in train_many(graph, runs(setting))]
    single_acc = [accuracy(h) for h in train_many(graph, runs(single_options))]
    summary = paired_summary(grappa_acc, single_acc)
    return {**summary, "seeds": seeds, "grappa": grappa_acc, "single": single_acc}
