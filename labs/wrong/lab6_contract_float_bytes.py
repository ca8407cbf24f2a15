# lab: 06_estimator_weights
# cell: bytes
# why: returns a float: divides with / instead of //, so the bytes come back as 827580.0 (equal to the int when the division is exact, as in the visible test) or with a fraction
def bytes_per_iteration(num_params, world_size, needs_stats):
    P, S = world_size, num_params * 4
    total = 2 * (P - 1) * S / P
    if needs_stats:
        total += (P - 1) * 24
    return total
