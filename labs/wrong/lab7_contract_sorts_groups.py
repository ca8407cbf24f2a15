# lab: 07_repartition_schedules
# cell: pairs_met
# why: changes its argument: sorts each of the caller's groups in place (group.sort(), so that a < b) to visit every pair once; the matrix is right, but rounds comes back with its groups reordered
def pairs_met(rounds, num_chunks, upto):
    """bool [C, C]: which chunk pairs shared a worker in super-epochs 0 .. upto - 1."""
    met = torch.eye(num_chunks, dtype=torch.bool)
    for s in range(upto):
        for group in rounds[s % len(rounds)]:
            group.sort()
            for i, a in enumerate(group):
                for b in group[i + 1 :]:
                    met[a, b] = met[b, a] = True
    return met
