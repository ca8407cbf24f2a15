# lab: 03_sizing_an_envelope
# cell: memory_bytes
# why: clamps the fanouts to the largest in-degree in the caller's list (fanouts[i] = ...): the total is right, but an input is changed
def memory_bytes(sizes, fanouts, batch_size, feat_dim, hidden_dim, num_classes, max_degree):
    """Total bytes of the envelope's per-block buffers (see the formula above)."""
    total, layers = 0, len(fanouts)
    dst_rows = list(sizes[1:]) + [batch_size]
    for i in range(layers):
        fanouts[i] = min(fanouts[i], max(max_degree, 1))
        s, d, k = sizes[i], dst_rows[i], fanouts[i]
        in_dim = feat_dim if i == 0 else hidden_dim
        out_dim = num_classes if i == layers - 1 else hidden_dim
        total += d * k * 9 + s * 8 + s * in_dim * 4 + d * out_dim * 4
    return total
