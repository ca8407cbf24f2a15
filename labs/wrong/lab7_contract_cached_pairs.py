# lab: 07_repartition_schedules
# cell: pairs_met
# why: keeps state between calls: caches the matrix in a notebook-level dict keyed by (num_chunks, upto), to save recounting; a later call with other rounds of the same size gets the stale matrix
met_cache = {}


def pairs_met(rounds, num_chunks, upto):
    """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. upto - 1."""
    if (num_chunks, upto) not in met_cache:
        met = torch.eye(num_chunks, dtype=torch.bool)
        for s in range(upto):
            for group in rounds[s % len(rounds)]:
                grp = torch.as_tensor(group)
                met[grp[:, None], grp[None, :]] = True
        met_cache[num_chunks, upto] = met
    return met_cache[num_chunks, upto].clone()
