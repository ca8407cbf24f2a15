# lab: 07_repartition_schedules
# how: the circle method with the last chunk fixed and the others paired by modular arithmetic (r + i, r - i mod C - 1), no rotated list
# cell: round_robin
def round_robin(num_chunks):
    """C - 1 rounds of C / 2 pairs; every pair of chunks meets exactly once."""
    C = num_chunks
    m = C - 1
    return [
        [[C - 1, r]] + [[(r + i) % m, (r - i) % m] for i in range(1, C // 2)]
        for r in range(m)
    ]
