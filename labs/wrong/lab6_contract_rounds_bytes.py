# lab: 06_estimator_weights
# cell: bytes
# why: rounds 2 (P - 1) / P * S to the nearest byte with round() instead of the model's floor division; one byte too many whenever the fraction is a half or more
def bytes_per_iteration(num_params, world_size, needs_stats):
    P, S = world_size, num_params * 4
    total = round(2 * (P - 1) * S / P)
    if needs_stats:
        total += (P - 1) * 24
    return total
