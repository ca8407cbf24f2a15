# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: writes the positions back to front with scatter_ so that the last write, the first occurrence, stays: PyTorch does not define which of several writes to one index scatter_ keeps (the CPU happens to keep the last; a GPU need not)
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    n = marker.numel() - 1
    pos = torch.arange(cand.numel())
    marker.scatter_(0, cand.flip(0), pos.flip(0))  # the last write to a node is its first position
    first = torch.gather(marker, 0, cand) == pos
    marker.index_fill_(0, cand, INF)
    return first & (cand < n)
