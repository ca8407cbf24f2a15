# lab: 01_host_syncs
# how: finds first occurrences with a stable sort (the head of each run of equal ids is its first position) scattered back to candidate order, with no torch.unique at all: 2 syncs in Part B and a single one in Part C
# cell: sync_ops
def sync_ops(fn):
    """{op name: count} of every host sync made while running fn()."""
    audit = SyncAudit(strict=True)
    audit.__enter__()
    try:
        fn()
    finally:
        audit.__exit__(None, None, None)
    return {op: n for op, n in audit.per_op.items() if n > 0}
# cell: syncs_per_hop
def syncs_per_hop(fanouts_by_depth):
    """Total host syncs of one DynamicSampler(g, fanouts).sample(seeds) call, per fanout list."""
    totals = []
    for fanouts in fanouts_by_depth:
        sampler = DynamicSampler(g, fanouts, seed=0)      # built outside: only sample() counts
        per_op = sync_ops(lambda: sampler.sample(seeds))
        total = 0
        for n in per_op.values():
            total += n
        totals.append(total)
    return totals
# cell: dynamic_compact
def first_in_order(cand):
    """bool [M]: True where cand[i] is the first occurrence of its value (fixed shapes, no sync)."""
    ordered, perm = torch.sort(cand, stable=True)      # equal ids keep their original order
    head = torch.ones_like(ordered, dtype=torch.bool)
    head[1:] = ordered[1:] != ordered[:-1]              # first of each run = earliest position
    return torch.zeros_like(head).scatter_(0, perm, head)


def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    found = nbrs[mask]                                   # real slots, row by row
    is_new = first_in_order(found) & ~torch.isin(found, dst)
    return torch.cat([dst, found[is_new]])
# cell: compact_fewer_syncs
def compact_fewer_syncs(dst, nbrs, mask):
    """Same output as dynamic_compact, fewer host syncs."""
    # every masked slot becomes dst[0]: already in dst, so never a new node
    found = torch.where(mask, nbrs, dst[0]).reshape(-1)
    is_new = first_in_order(found) & ~torch.isin(found, dst)
    return torch.cat([dst, found[is_new]])
