# lab: 03_sizing_an_envelope
# how: builds the list of layer widths (feat, hidden..., classes) and the destination rows first, then sums one generator expression over the blocks
# cell: memory_bytes
def memory_bytes(sizes, fanouts, batch_size, feat_dim, hidden_dim, num_classes, max_degree):
    """Total bytes of the envelope's per-block buffers (see the formula above)."""
    layers = len(fanouts)
    widths = [feat_dim] + [hidden_dim] * (layers - 1) + [num_classes]
    rows_out = list(sizes[1:]) + [batch_size]
    cap = max_degree if max_degree >= 1 else 1
    return sum(
        rows_out[i] * min(fanouts[i], cap) * (8 + 1)     # int64 neighbour slot + bool mask
        + sizes[i] * 8                                    # src node ids
        + sizes[i] * widths[i] * 4                        # input features
        + rows_out[i] * widths[i + 1] * 4                 # output features
        for i in range(layers)
    )
