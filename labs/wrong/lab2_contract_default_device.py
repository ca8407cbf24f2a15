# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: the right flags, but the positions are made without device= (on the default device): on a GPU they cannot be scattered into the marker; the CPU-only tests never see it
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    n = marker.numel() - 1
    pos = torch.arange(cand.numel())
    marker.scatter_reduce_(0, cand, pos, reduce="amin")
    first = torch.gather(marker, 0, cand) == pos
    marker.index_fill_(0, cand, INF)
    return first & (cand < n)
