# lab: 02_fixed_shape_sampler
# how: finds first occurrences without the marker at all: a stable sort puts equal ids together in their original order, the head of each run is its first occurrence, scattered back to candidate order (the marker is never touched, so it stays all INF)
# cell: first_occurrence
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    ordered, perm = torch.sort(cand, stable=True)     # ties keep their positions' order
    head = torch.cat([torch.ones(1, dtype=torch.bool, device=cand.device), ordered[1:] != ordered[:-1]])
    first = torch.empty_like(head).scatter_(0, perm, head)
    return first & (cand < marker.numel() - 1)
