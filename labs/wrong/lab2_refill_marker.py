# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: resets all N + 1 marker entries every call instead of only the ones it touched
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    n = marker.numel() - 1
    pos = torch.arange(cand.numel())
    marker.scatter_reduce_(0, cand, pos, reduce="amin")
    first = torch.gather(marker, 0, cand) == pos
    marker.fill_(INF)
    return first & (cand < n)
