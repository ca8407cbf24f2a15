# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: resets the entries it touched at the start of the next call (kept in a global) instead of before returning: the marker is left dirty on exit, state kept between calls
_touched = []


def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    while _touched:
        old_marker, old_cand = _touched.pop()
        old_marker.index_fill_(0, old_cand, INF)
    n = marker.numel() - 1
    pos = torch.arange(cand.numel(), device=cand.device)
    marker.scatter_reduce_(0, cand, pos, reduce="amin")
    first = torch.gather(marker, 0, cand) == pos
    _touched.append((marker, cand))
    return first & (cand < n)
