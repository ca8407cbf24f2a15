# lab: 01_host_syncs
# cell: dynamic_compact
# why: a view sharing storage with an input: when a hop brings no new node it returns its argument dst itself ("nothing to add"), so a caller that later writes into the returned src writes into dst
def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    found = nbrs[mask]
    uniq, inverse = torch.unique(found, return_inverse=True)
    first = torch.full((uniq.numel(),), found.numel(), dtype=torch.int64, device=found.device)
    first.scatter_reduce_(0, inverse, torch.arange(found.numel(), device=found.device), "amin")
    new = uniq[torch.argsort(first)]
    new = new[~torch.isin(new, dst)]
    if new.numel() == 0:
        return dst  # nothing new: dst is already the answer
    return torch.cat([dst, new])
