# lab: 07_repartition_schedules
# cell: coverage_over
# why: keeps state between calls: builds the Partition once per number of rounds and keeps it in a notebook-level dict; a later call with another chunk assignment or schedule of as many rounds measures the old one
partitions = {}


def coverage_over_schedule(g, rounds, chunk_of, hops):
    """Mean over super-epochs of the mean hops-coverage."""
    if len(rounds) not in partitions:
        partitions[len(rounds)] = grappa.Partition(
            chunk_of,
            len(rounds[0]),
            rounds,
            method="random",
            seed=0,
            halo=False,
            schedule="round_robin",
        )
    p = partitions[len(rounds)]
    return float(
        torch.stack([grappa.coverage(g, p, hops, s).mean() for s in range(len(rounds))]).mean()
    )
