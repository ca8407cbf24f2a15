# lab: 01_host_syncs
# cell: dynamic_compact
# why: the right order, but the positions and the first-position table are made without device= (on the default device): on a GPU they cannot meet the hop's tensors; the CPU-only tests never see it
def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    found = nbrs[mask]
    uniq, inverse = torch.unique(found, return_inverse=True)
    first = torch.full((uniq.numel(),), found.numel(), dtype=torch.int64)
    first.scatter_reduce_(0, inverse, torch.arange(found.numel()), "amin")
    new = uniq[torch.argsort(first)]
    new = new[~torch.isin(new, dst)]
    return torch.cat([dst, new])
