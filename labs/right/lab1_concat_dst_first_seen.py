# lab: 01_host_syncs
# how: counts syncs from the audit's event list, and compacts by putting dst in front of the candidates so that one first-occurrence selection (unique inverse + scatter_reduce amin, no isin, no argsort) yields dst then the new nodes in order
# cell: sync_ops
def sync_ops(fn):
    """{op name: count} of every host sync made while running fn()."""
    audit = SyncAudit(strict=True)
    with audit:
        fn()
    counts = {}
    for op, _kind in audit.events:
        counts[op] = counts.get(op, 0) + 1
    return counts
# cell: syncs_per_hop
def syncs_per_hop(fanouts_by_depth):
    """Total host syncs of one DynamicSampler(g, fanouts).sample(seeds) call, per fanout list."""
    def total(fanouts):
        sampler = DynamicSampler(g, fanouts, seed=0)
        with SyncAudit(strict=True) as audit:
            sampler.sample(seeds)
        return audit.host_syncs

    return [total(fanouts) for fanouts in fanouts_by_depth]
# cell: dynamic_compact
def _first_occurrences(cand):
    """bool [M]: cand[i] is the first position holding its value (tensor ops, one unique)."""
    _, inverse = torch.unique(cand, return_inverse=True)
    pos = torch.arange(cand.numel(), device=cand.device)
    first = torch.full_like(pos, cand.numel()).scatter_reduce(0, inverse, pos, "amin")
    return first.gather(0, inverse) == pos


def dynamic_compact(dst, nbrs, mask):
    """src int64 [S]: dst, then the distinct real neighbours not in dst, in first-appearance order."""
    # dst leads: its (distinct) nodes are all first occurrences, and a neighbour already in dst
    # is not, so one selection gives dst then the new nodes in first-appearance order
    cand = torch.cat([dst, nbrs[mask]])
    return cand[_first_occurrences(cand)]
# cell: compact_fewer_syncs
def compact_fewer_syncs(dst, nbrs, mask):
    """Same output as dynamic_compact, fewer host syncs."""
    # masked slots repeat dst[0], which dst already holds: never a first occurrence, no mask index
    cand = torch.cat([dst, torch.where(mask, nbrs, dst[0]).flatten()])
    return cand[_first_occurrences(cand)]
