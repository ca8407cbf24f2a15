# lab: 07_repartition_schedules
# cell: round_robin
# why: keeps state between calls: builds the circle of seats once, in a notebook-level variable, and reuses it on every later call; a later call with another number of chunks rotates the old circle and returns an invalid schedule
circle = []


def round_robin(num_chunks):
    """C - 1 rounds of C / 2 pairs; every pair of chunks meets exactly once."""
    if not circle:
        circle.extend(range(1, num_chunks))
    C = len(circle) + 1
    rounds = []
    for r in range(C - 1):
        seats = [0] + circle[r:] + circle[:r]
        rounds.append([[seats[p], seats[C - 1 - p]] for p in range(C // 2)])
    return rounds
