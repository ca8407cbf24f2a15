# lab: 06_estimator_weights
# cell: bytes
# why: a fixed-width integer where the contract says a Python int: returns numpy.int64 (computed with numpy "for speed"), which wraps silently past 2**63 and is not an int
import numpy as np


def bytes_per_iteration(num_params, world_size, needs_stats):
    P, S = np.int64(world_size), np.int64(num_params) * 4
    total = (2 * (P - 1) * S) // P
    if needs_stats:
        total += (P - 1) * 24
    return total
