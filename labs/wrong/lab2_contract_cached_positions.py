# lab: 02_fixed_shape_sampler
# cell: first_occurrence
# why: keeps the positions 0 .. M - 1 of every M it has seen in a global cache: state kept between calls, and a cache that ignores a change of setting (inputs on another device get the first call's CPU tensor)
_positions = {}


def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    n = marker.numel() - 1
    m = cand.numel()
    if m not in _positions:
        _positions[m] = torch.arange(m, device=cand.device)
    pos = _positions[m]
    marker.scatter_reduce_(0, cand, pos, reduce="amin")
    first = torch.gather(marker, 0, cand) == pos
    marker.index_fill_(0, cand, INF)
    return first & (cand < n)
