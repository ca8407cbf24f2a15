# lab: 01_host_syncs
# how: keeps the whole contract by other routes: counts into a fresh dict, walks a copy of the caller's list (popping from the copy, never from the caller's), makes every new tensor with *_like so it follows the hop's device, and makes the masked slots harmless on a clone of nbrs, not in place on the caller's
# cell: sync_ops
def sync_ops(fn):
    """{op name: count} of every host sync made while running fn()."""
    audit = SyncAudit(strict=True)
    with audit:
        fn()
    return {op: int(n) for op, n in audit.per_op.items()}
# cell: syncs_per_hop
def syncs_per_hop(fanouts_by_depth):
    """Total host syncs of one DynamicSampler(g, fanouts).sample(seeds) call, per fanout list."""
    todo = [list(f) for f in fanouts_by_depth]          # a copy: the caller's lists stay as given
    totals = []
    while todo:
        sampler = DynamicSampler(g, todo.pop(0), seed=0)
        totals.append(sum(sync_ops(lambda: sampler.sample(seeds)).values()))
    return totals
# cell: dynamic_compact
def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    found = nbrs[mask]
    uniq, inverse = torch.unique(found, return_inverse=True)
    pos = torch.ones_like(found).cumsum(0) - 1          # 0 .. M - 1 on the hop's device
    first = torch.full_like(uniq, found.numel()).scatter_reduce(0, inverse, pos, "amin")
    new = uniq[torch.argsort(first)]
    return torch.cat([dst, new[~torch.isin(new, dst)]])
# cell: compact_fewer_syncs
def compact_fewer_syncs(dst, nbrs, mask):
    """Same output as dynamic_compact, fewer host syncs."""
    found = nbrs.clone().masked_fill_(~mask, dst[0]).reshape(-1)   # the clone, not the caller's
    uniq, inverse = torch.unique(found, return_inverse=True)
    pos = torch.ones_like(found).cumsum(0) - 1
    first = torch.full_like(uniq, found.numel()).scatter_reduce(0, inverse, pos, "amin")
    new = uniq[torch.argsort(first)]
    return torch.cat([dst, new[~torch.isin(new, dst)]])
