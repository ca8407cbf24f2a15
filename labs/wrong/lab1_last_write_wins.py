# lab: 01_host_syncs
# cell: dynamic_compact
# why: finds first appearances by scattering positions back to front so that the last write, the first appearance, stays: PyTorch does not define which of several writes to one index scatter_ keeps (the CPU happens to keep the last; a GPU need not)
def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    found = nbrs[mask]  # the real slots, row by row
    uniq, inverse = torch.unique(found, return_inverse=True)
    first = torch.empty(uniq.numel(), dtype=torch.int64)
    # written back to front: of the writes to one node the last, its first position, stays
    first.scatter_(0, inverse.flip(0), torch.arange(found.numel()).flip(0))
    new = uniq[torch.argsort(first)]  # by first appearance
    new = new[~torch.isin(new, dst)]
    return torch.cat([dst, new])
