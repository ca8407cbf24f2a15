# lab: 03_sizing_an_envelope
# cell: memory_bytes
# why: computes the byte counts in numpy arrays made from Python ints: 64 bits on Linux, but 32 bits on Windows with numpy 1.x, where any envelope of 2 GB or more (a large graph's) wraps; only the portable clause, which runs the call where numpy's default integer is 32 bits, sees it
import numpy as np


def memory_bytes(sizes, fanouts, batch_size, feat_dim, hidden_dim, num_classes, max_degree):
    """Total bytes of the envelope's per-block buffers (see the formula above)."""
    layers = len(fanouts)
    s = np.array(list(sizes))
    d = np.array(list(sizes[1:]) + [batch_size])
    k = np.minimum(np.array(list(fanouts)), max(max_degree, 1))
    i = np.array([feat_dim] + [hidden_dim] * (layers - 1))
    o = np.array([hidden_dim] * (layers - 1) + [num_classes])
    return int((d * k * 9 + s * 8 + s * i * 4 + d * o * 4).sum())
