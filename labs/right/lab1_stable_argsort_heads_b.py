# lab: 01_host_syncs
# how: no unique and no scatter: a stable argsort of the real slots puts equal ids together in slot order, the head of each run is that id's first slot, and sorting those slots gives first-appearance order
# cell: dynamic_compact
def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    found = nbrs[mask]
    order = torch.argsort(found, stable=True)
    ordered = found[order]
    head = torch.ones_like(ordered, dtype=torch.bool)
    head[1:] = ordered[1:] != ordered[:-1]
    first_slots = order[head].sort().values
    new = found[first_slots]
    return torch.cat([dst, new[~torch.isin(new, dst)]])
