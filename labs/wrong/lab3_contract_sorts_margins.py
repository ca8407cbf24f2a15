# lab: 03_sizing_an_envelope
# cell: overflow
# function: smallest_margin
# why: sorts the caller's list of margins in place (margins.sort()) before the search: the margin returned is right, but an input is changed
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = (counts > torch.tensor(sizes, device=counts.device)).any(dim=1)
    return float(over.double().mean())


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    margins.sort()
    for m in margins:
        sizes = envelope_sizes(profile_counts, quantile, m, worst, batch_size)
        if overflow_rate(sizes, eval_counts) <= budget:
            return m
    return None
