# lab: 03_sizing_an_envelope
# cell: envelope_sizes
# why: builds the sizes in the caller's worst list (sizes = worst is not a copy): the sizes returned are right, but worst is overwritten (an input changed in place)
def envelope_sizes(counts, quantile, margin, worst, batch_size):
    """One size per block (input layer first): quantile + margin, capped, >= destination rows."""
    q = torch.quantile(counts.double(), quantile, dim=0)
    sizes = worst
    for i, v in enumerate(q):
        sizes[i] = min(math.ceil(float(v) * (1 + margin)), int(sizes[i]))
    rows = batch_size
    for i in reversed(range(len(sizes))):
        sizes[i] = max(sizes[i], rows)
        rows = sizes[i]
    return list(sizes)
