# lab: 02_fixed_shape_sampler
# how: reads the marker with torch.take instead of gather and cleans it with a scatter_ of the scalar INF (every write to one index writes the same value, so their order cannot matter)
# cell: first_occurrence
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    positions = torch.arange(cand.numel(), device=cand.device)
    marker.scatter_reduce_(0, cand, positions, reduce="amin")
    earliest = torch.take(marker, cand)
    marker.scatter_(0, cand, INF)
    return (cand < marker.numel() - 1) & (earliest == positions)
