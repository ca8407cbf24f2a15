# lab: 03_sizing_an_envelope
# cell: overflow
# function: overflow_rate
# why: compares the counts with torch.tensor(sizes) made without device= (on the default device): on a GPU it cannot meet counts; the CPU-only tests never see it
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = (counts > torch.tensor(sizes)).any(dim=1)
    return float(over.double().mean())


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    for m in sorted(margins):
        sizes = envelope_sizes(profile_counts, quantile, m, worst, batch_size)
        if overflow_rate(sizes, eval_counts) <= budget:
            return m
    return None
