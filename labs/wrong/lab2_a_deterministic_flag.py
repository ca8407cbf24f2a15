# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: a side effect on torch's global state: turns on torch.use_deterministic_algorithms(True) "so the scatters are reproducible" and leaves it on for the whole notebook (every later op of the caller that has no deterministic kernel now raises on a GPU)
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    torch.use_deterministic_algorithms(True)
    n = marker.numel() - 1
    pos = torch.arange(cand.numel(), device=cand.device)
    marker.scatter_reduce_(0, cand, pos, reduce="amin")
    first = torch.gather(marker, 0, cand) == pos
    marker.index_fill_(0, cand, INF)
    return first & (cand < n)
