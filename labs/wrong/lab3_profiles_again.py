# lab: 03_sizing_an_envelope
# cell: overflow
# function: smallest_margin
# why: sizes each margin by profiling again with the kit (zg.Envelope.profile, the same 24 batches) instead of with envelope_sizes on profile_counts
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    over = (counts > torch.tensor(sizes)).any(dim=1)
    return float(over.double().mean())


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    for m in sorted(margins):
        env = zg.Envelope.profile(
            g, fanouts, batch_size, num_batches=24, quantile=quantile, margin=m, seed=0
        )
        if overflow_rate(env.sizes, eval_counts) <= budget:
            return m
    return None
