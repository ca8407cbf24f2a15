# lab: 03_sizing_an_envelope
# cell: overflow
# function: overflow_rate
# why: a wider/other return type than the contract's: returns the Python int 0 when no batch overflows and 1 when every batch does (a float otherwise); the contract says a float
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = (counts > torch.tensor(sizes, device=counts.device)).any(dim=1)
    hits = int(over.sum())
    if hits == 0:
        return 0
    if hits == over.numel():
        return 1
    return hits / over.numel()


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    for m in sorted(margins):
        sizes = envelope_sizes(profile_counts, quantile, m, worst, batch_size)
        if overflow_rate(sizes, eval_counts) <= budget:
            return m
    return None
