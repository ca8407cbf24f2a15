# lab: 03_sizing_an_envelope
# how: overflow_rate compares the largest excess per batch (amax of counts - sizes) with 0 and divides two Python ints; smallest_margin scans the margins unsorted, keeping the smallest that meets the budget and skipping any not below the best so far
# cell: overflow
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    excess = (counts - counts.new_tensor(sizes)).amax(dim=1)
    k = excess.numel()
    if k == 0:
        return float("nan")
    return int((excess > 0).sum()) / k


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    best = None
    for m in margins:
        if best is not None and not m < best:
            continue
        sizes = envelope_sizes(profile_counts, quantile, m, worst, batch_size)
        if overflow_rate(sizes, eval_counts) <= budget:
            best = m
    return best
