# lab: 07_repartition_schedules
# cell: coverage_over
# why: changes its argument: sorts every group of the caller's rounds in place ("a Partition wants them sorted") before building the Partition; the coverage is the same, but rounds comes back reordered
def coverage_over_schedule(g, rounds, chunk_of, hops):
    """Mean over super-epochs of the mean hops-coverage."""
    for r in rounds:
        for group in r:
            group.sort()
    p = grappa.Partition(
        chunk_of,
        len(rounds[0]),
        rounds,
        method="random",
        seed=0,
        halo=False,
        schedule="round_robin",
    )
    return float(
        torch.stack([grappa.coverage(g, p, hops, s).mean() for s in range(len(rounds))]).mean()
    )
