# lab: 07_repartition_schedules
# how: keeps the whole contract another way: pairs_met marks the pairs of sorted copies of the groups (sorted(), never group.sort()) in nested lists and builds the tensor once; round_robin pairs chunk i with chunk C - 1 - i of a seat list it rebuilds on every call and rotates by slicing; coverage_over_schedule hands the Partition sorted copies of the groups and averages the per-super-epoch means with math.fsum
# cell: pairs_met
def pairs_met(rounds, num_chunks, upto):
    """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. upto - 1."""
    met = [[a == b for b in range(num_chunks)] for a in range(num_chunks)]
    for s in range(min(upto, len(rounds))):        # later super-epochs repeat these rounds
        for group in rounds[s]:
            ordered = sorted(group)                # a copy: the caller's group keeps its order
            for i, a in enumerate(ordered):
                for b in ordered[i + 1:]:
                    met[a][b] = met[b][a] = True
    return torch.tensor(met, dtype=torch.bool)
# cell: round_robin
def round_robin(num_chunks):
    """C - 1 rounds of C / 2 pairs; every pair of chunks meets exactly once."""
    seats = list(range(num_chunks))                # fresh each call: nothing kept between calls
    rounds = []
    for _ in range(num_chunks - 1):
        rounds.append([[seats[i], seats[num_chunks - 1 - i]] for i in range(num_chunks // 2)])
        seats = [seats[0], seats[-1]] + seats[1:-1]   # chunk seats[0] stays, the others turn
    return rounds
# cell: coverage_over
def coverage_over_schedule(g, rounds, chunk_of, hops):
    """Mean over super-epochs of the mean hops-coverage."""
    import math

    copies = [[sorted(group) for group in r] for r in rounds]
    p = grappa.Partition(chunk_of, len(copies[0]), copies, method="random", seed=0, halo=False,
                         schedule="round_robin")
    return math.fsum(float(grappa.coverage(g, p, hops, s).mean()) for s in range(len(copies))) / len(copies)
