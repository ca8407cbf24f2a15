# lab: 03_sizing_an_envelope
# how: writes the sizes into a copy of worst (list(worst)), compares counts with counts.new_tensor(sizes) (the counts' device), divides an int count by K, searches a sorted copy of the margins with a memo that lives only for one call, and clamps the fanouts into a new list
# cell: envelope_sizes
def envelope_sizes(counts, quantile, margin, worst, batch_size):
    """One size per block (input layer first): quantile + margin, capped, >= destination rows."""
    q = torch.quantile(counts.to(torch.float64), quantile, dim=0).tolist()
    sizes = list(worst)                                  # a copy: the caller's worst stays
    need = batch_size
    for i in range(len(q) - 1, -1, -1):
        sizes[i] = max(min(math.ceil(q[i] * (1 + margin)), int(sizes[i])), need)
        need = sizes[i]
    return [int(s) for s in sizes]
# cell: overflow
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = counts.gt(counts.new_tensor(list(sizes))).any(dim=1)
    return int(over.sum()) / counts.shape[0]


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    rate_of = {}                                         # this call's memo only
    for m in sorted(margins):
        if m not in rate_of:
            rate_of[m] = overflow_rate(envelope_sizes(profile_counts, quantile, m, worst, batch_size), eval_counts)
        if rate_of[m] <= budget:
            return m
    return None
# cell: memory_bytes
def memory_bytes(sizes, fanouts, batch_size, feat_dim, hidden_dim, num_classes, max_degree):
    """Total bytes of the envelope's per-block buffers (see the formula above)."""
    slots = [min(k, max(max_degree, 1)) for k in fanouts]          # a new list, not the caller's
    dst = list(sizes[1:]) + [batch_size]
    total = 0
    for i, (s, d, k) in enumerate(zip(sizes, dst, slots)):
        width_in = feat_dim if i == 0 else hidden_dim
        width_out = num_classes if i == len(slots) - 1 else hidden_dim
        total += 9 * d * k + 8 * s + 4 * s * width_in + 4 * d * width_out
    return total
