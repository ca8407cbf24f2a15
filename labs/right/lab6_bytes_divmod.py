# lab: 06_estimator_weights
# how: one integer divmod of 8 (P - 1) num_params by P (the ring's 2 (P - 1) / P of 4-byte floats), then the scalars' bytes added with a conditional expression
# cell: bytes
def bytes_per_iteration(num_params, world_size, needs_stats):
    gradient_bytes, _ = divmod(8 * (world_size - 1) * num_params, world_size)
    return gradient_bytes + (24 * (world_size - 1) if needs_stats else 0)
