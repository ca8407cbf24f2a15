# lab: 07_repartition_schedules
# cell: pairs_met
# why: builds a Partition and asks the kit's pair_coverage instead of counting the meetings
def pairs_met(rounds, num_chunks, upto):
    """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. upto - 1."""
    p = grappa.Partition(
        torch.arange(num_chunks),
        len(rounds[0]),
        rounds,
        method="random",
        seed=0,
        halo=False,
        schedule="round_robin",
    )
    return p.pair_coverage(upto)
