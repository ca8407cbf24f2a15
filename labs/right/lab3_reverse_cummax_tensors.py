# lab: 03_sizing_an_envelope
# how: stays in tensors: ceil and the cap by worst with torch ops, and the outward feasibility pass as a reverse cumulative max (a block's size is the max of its own and every later block's, and batch_size); the overflow rate counts overflowing rows and divides by K, the margin search filters then takes min()
# cell: envelope_sizes
def envelope_sizes(counts, quantile, margin, worst, batch_size):
    """One size per block (input layer first): quantile + margin, capped, >= destination rows."""
    q = torch.quantile(counts.double(), quantile, dim=0)             # [L] float64
    sizes = torch.ceil(q * (1 + margin)).to(torch.int64)
    sizes = torch.minimum(sizes, torch.as_tensor(list(worst), dtype=torch.int64, device=counts.device))
    # going outward, block i must hold block i + 1's size (or batch_size for the last):
    # unrolled, that is the max over blocks i .. L - 1 and batch_size
    with_rows = torch.cat([sizes, torch.tensor([batch_size], dtype=torch.int64, device=counts.device)])
    feasible = torch.flip(torch.cummax(torch.flip(with_rows, [0]), dim=0).values, [0])
    return feasible[:-1].tolist()
# cell: overflow
def overflow_rate(sizes, counts):
    """Fraction of batches (rows of counts [K, L]) with some count above its size."""
    limits = torch.as_tensor(list(sizes), dtype=counts.dtype, device=counts.device)
    overflowing = int((counts - limits).amax(dim=1).gt(0).sum())
    return overflowing / counts.shape[0]


def smallest_margin(quantile, budget, margins):
    """The smallest margin (from margins) meeting the overflow budget on eval_counts, or None."""
    meeting = [m for m in margins
               if overflow_rate(envelope_sizes(profile_counts, quantile, m, worst, batch_size),
                                eval_counts) <= budget]
    return min(meeting) if meeting else None
