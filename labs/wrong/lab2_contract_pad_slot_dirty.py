# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: resets only the real candidates' slots, so the padding slot N keeps a position: the marker is left dirty when a hop has padding
def first_occurrence(cand, marker):
    n = marker.numel() - 1
    pos = torch.arange(cand.numel(), device=cand.device)
    marker.scatter_reduce_(0, cand, pos, reduce="amin")
    first = torch.gather(marker, 0, cand) == pos
    real = cand < n
    marker.index_fill_(0, cand[real], INF)
    return first & real
