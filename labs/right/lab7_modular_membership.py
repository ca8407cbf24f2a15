# lab: 07_repartition_schedules
# how: pairs_met multiplies a one-hot worker-by-chunk membership matrix by its transpose (only the distinct rounds up to upto); round_robin uses the modular polygon formula (chunk C - 1 fixed, pairs (r + i, r - i) mod C - 1) instead of rotating a list; coverage_over_schedule builds the Partition by keyword and averages the per-super-epoch means in Python
# cell: pairs_met
def pairs_met(rounds, num_chunks, upto):
    """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. upto - 1."""
    met = torch.eye(num_chunks, dtype=torch.bool)
    for s in range(min(upto, len(rounds))):        # later super-epochs repeat these rounds
        member = torch.zeros(len(rounds[s]), num_chunks)          # [P, C]
        for p, group in enumerate(rounds[s]):
            member[p, list(group)] = 1.0
        met |= (member.T @ member) > 0
    return met
# cell: round_robin
def round_robin(num_chunks):
    """C - 1 rounds of C / 2 pairs; every pair of chunks meets exactly once."""
    m = num_chunks - 1                      # chunks 0 .. m - 1 sit on a circle, chunk m in the middle
    rounds = []
    for r in range(m):
        pairs = [[r, m]]
        for i in range(1, num_chunks // 2):
            pairs.append([(r + i) % m, (r - i) % m])
        rounds.append(pairs)
    return rounds
# cell: coverage_over
def coverage_over_schedule(g, rounds, chunk_of, hops):
    """Mean over super-epochs of the mean hops-coverage."""
    # coverage reads chunk_of, num_parts, the rounds, halo and whether seeds come from the base
    # chunk only (schedule "partner_sweep"); method and seed are labels.
    schedule = grappa.Partition(
        chunk_of=chunk_of,
        num_parts=len(rounds[0]),
        rounds=[[list(group) for group in r] for r in rounds],
        method="random",
        seed=0,
        halo=False,
        schedule="fixed_base",
    )
    means = [float(grappa.coverage(g, schedule, hops, s).mean()) for s in range(len(rounds))]
    return sum(means) / len(means)
