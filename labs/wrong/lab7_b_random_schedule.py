# lab: 07_repartition_schedules
# cell: round_robin
# why: a valid round-robin schedule, relabelled by a random.Random() of its own at every call: each answer is a schedule, but the same call gives another one each time (no caller can reproduce a run)
def round_robin(num_chunks):
    """C - 1 rounds of C / 2 pairs; every pair of chunks meets exactly once."""
    import random

    C = num_chunks
    label = list(range(C))
    random.Random().shuffle(label)
    others = list(range(1, C))
    rounds = []
    for r in range(C - 1):
        seats = [0] + others[r:] + others[:r]
        rounds.append([sorted([label[seats[p]], label[seats[C - 1 - p]]]) for p in range(C // 2)])
    return rounds
