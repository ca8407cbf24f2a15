# lab: 07_repartition_schedules
# how: pairs_met marks pairs with itertools.combinations in Python then builds the tensor once; round_robin keeps chunk 0 fixed and rotates the others with collections.deque, pairing the first half with the reversed second half; coverage_over_schedule sums each worker's owned-node local_coverage over all super-epochs and divides once by S * N instead of calling grappa.coverage
# cell: pairs_met
def pairs_met(rounds, num_chunks, upto):
    """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. upto - 1."""
    import itertools

    seen = [[a == b for b in range(num_chunks)] for a in range(num_chunks)]
    for s in range(upto):
        for group in rounds[s % len(rounds)]:
            for a, b in itertools.combinations(group, 2):
                seen[a][b] = seen[b][a] = True
    return torch.tensor(seen, dtype=torch.bool)
# cell: round_robin
def round_robin(num_chunks):
    """C - 1 rounds of C / 2 pairs; every pair of chunks meets exactly once."""
    from collections import deque

    half = num_chunks // 2
    circle = deque(range(1, num_chunks))
    rounds = []
    for _ in range(num_chunks - 1):
        seats = [0, *circle]
        top, bottom = seats[:half], seats[half:][::-1]
        rounds.append([[a, b] for a, b in zip(top, bottom)])
        circle.rotate(1)
    return rounds
# cell: coverage_over
def coverage_over_schedule(g, rounds, chunk_of, hops):
    """Mean over super-epochs of the mean hops-coverage."""
    S, P = len(rounds), len(rounds[0])
    p = grappa.Partition(chunk_of, P, rounds, method="random", seed=0, halo=False, schedule="round_robin")
    total = 0.0
    for s in range(S):
        for worker in range(P):         # every node is owned by exactly one worker per round
            loc = p.local_graph(g, worker, s)
            total += float(grappa.local_coverage(loc, hops)[: loc.num_owned].double().sum())
    return total / (S * g.num_nodes)
