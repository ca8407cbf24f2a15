# lab: 03_sizing_an_envelope
# cell: envelope_sizes
# why: takes the quantile in float32 (counts.float()): the same sizes on the lab's profiles, one more or one less at a rounding boundary (counts above 2^24, which float32 cannot hold exactly)
def envelope_sizes(counts, quantile, margin, worst, batch_size):
    """One size per block (input layer first): quantile + margin, capped, >= destination rows."""
    q = torch.quantile(counts.float(), quantile, dim=0)
    sizes = [min(math.ceil(float(v) * (1 + margin)), int(w)) for v, w in zip(q, worst)]
    rows = batch_size
    for i in reversed(range(len(sizes))):
        sizes[i] = max(sizes[i], rows)
        rows = sizes[i]
    return sizes
