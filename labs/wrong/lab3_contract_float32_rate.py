# lab: 03_sizing_an_envelope
# cell: overflow
# function: overflow_rate
# why: averages the overflow flags in float32: 1 of 3 batches is 0.3333333432674408, not 1/3 (a narrower dtype, visible only where K is not a power of two)
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = (counts > torch.tensor(sizes, device=counts.device)).any(dim=1)
    return float(over.float().mean())


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    for m in sorted(margins):
        sizes = envelope_sizes(profile_counts, quantile, m, worst, batch_size)
        if overflow_rate(sizes, eval_counts) <= budget:
            return m
    return None
