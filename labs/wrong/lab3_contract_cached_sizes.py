# lab: 03_sizing_an_envelope
# cell: overflow
# function: smallest_margin
# why: caches each margin's overflow rate in a global dict keyed by the margin alone: a later call with another quantile reuses rates of the first quantile (a cache that ignores a change of setting)
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = (counts > torch.tensor(sizes, device=counts.device)).any(dim=1)
    return float(over.double().mean())


_rate_of_margin = {}


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    for m in sorted(margins):
        if m not in _rate_of_margin:
            sizes = envelope_sizes(profile_counts, quantile, m, worst, batch_size)
            _rate_of_margin[m] = overflow_rate(sizes, eval_counts)
        if _rate_of_margin[m] <= budget:
            return m
    return None
