# lab: 03_sizing_an_envelope
# how: sizes block by block from the seeds outward in one loop (quantile of one column at a time, then cap, then the rows the block must hold), counts overflows with a per-block boolean OR, scans the margins in the given order keeping the smallest that meets the budget (skipping any not below it), and writes the memory model as separate index / feature / activation sums over precomputed per-block lists
# cell: envelope_sizes
def envelope_sizes(counts, quantile, margin, worst, batch_size):
    """One size per block (input layer first): quantile + margin, capped, >= destination rows."""
    num_blocks = counts.shape[1]
    sizes = [0] * num_blocks
    must_hold = batch_size                      # destination rows of the block being sized
    for i in range(num_blocks - 1, -1, -1):     # seeds outward: last block first
        q = torch.quantile(counts[:, i].to(torch.float64), quantile).item()
        size = min(math.ceil(q * (1 + margin)), int(worst[i]))
        sizes[i] = must_hold = max(size, must_hold)
    return sizes
# cell: overflow
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = torch.zeros(counts.shape[0], dtype=torch.bool, device=counts.device)
    for i, size in enumerate(sizes):
        over |= counts[:, i] > size
    return over.sum().item() / len(over)


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    best = None
    for m in margins:
        if best is not None and m >= best:
            continue                            # cannot improve on a margin already found
        sizes = envelope_sizes(profile_counts, quantile, m, worst, batch_size)
        if overflow_rate(sizes, eval_counts) <= budget:
            best = m
    return best
# cell: memory_bytes
def memory_bytes(sizes, fanouts, batch_size, feat_dim, hidden_dim, num_classes, max_degree):
    """Total bytes of the envelope's per-block buffers (see the formula above)."""
    L = len(sizes)
    src = [int(s) for s in sizes]
    dst = src[1:] + [batch_size]
    cap_k = max(max_degree, 1)
    slots = [min(k, cap_k) for k in fanouts]
    in_dims = [feat_dim] + [hidden_dim] * (L - 1)
    out_dims = [hidden_dim] * (L - 1) + [num_classes]
    index = sum(d * k * (8 + 1) + s * 8 for s, d, k in zip(src, dst, slots))
    features = sum(s * f * 4 for s, f in zip(src, in_dims))
    activations = sum(d * o * 4 for d, o in zip(dst, out_dims))
    return index + features + activations
