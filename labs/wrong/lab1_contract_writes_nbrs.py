# lab: 01_host_syncs
# cell: compact_fewer_syncs
# why: makes the masked slots harmless by writing dst[0] into the caller's nbrs in place (masked_fill_): the output and the syncs are right, but an argument is changed
def compact_fewer_syncs(dst, nbrs, mask):
    """Same output as dynamic_compact, fewer host syncs."""
    nbrs.masked_fill_(~mask, dst[0])
    found = nbrs.reshape(-1)
    uniq, inverse = torch.unique(found, return_inverse=True)
    first = torch.full((uniq.numel(),), found.numel(), dtype=torch.int64, device=found.device)
    first.scatter_reduce_(0, inverse, torch.arange(found.numel(), device=found.device), "amin")
    new = uniq[torch.argsort(first)]
    new = new[~torch.isin(new, dst)]
    return torch.cat([dst, new])
