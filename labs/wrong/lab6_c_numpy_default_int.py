# lab: 06_estimator_weights
# cell: bytes
# why: multiplies the byte count's factors in a numpy array made from Python ints, then returns a Python int: right on Linux, where numpy's default integer is 64 bits, but on Windows with numpy 1.x the array is 32 bits and its product wraps past 2**31 bytes (a model of a few hundred million parameters); only the portable clause, which runs the call where the default integer is 32 bits, sees it
import numpy as np


def bytes_per_iteration(num_params, world_size, needs_stats):
    factors = np.array([8, world_size - 1, num_params])
    total = int(factors.prod()) // world_size
    if needs_stats:
        total += 24 * (world_size - 1)
    return total
