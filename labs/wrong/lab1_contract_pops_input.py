# lab: 01_host_syncs
# cell: syncs_per_hop
# why: the right totals, but it consumes the caller's list with pop(0): fanouts_by_depth is empty afterwards (an input changed in place)
def syncs_per_hop(fanouts_by_depth):
    """Total host syncs of one DynamicSampler(g, fanouts).sample(seeds) call, per fanout list."""
    totals = []
    while fanouts_by_depth:
        fanouts = fanouts_by_depth.pop(0)
        sampler = DynamicSampler(g, fanouts, seed=0)
        totals.append(sum(sync_ops(lambda s=sampler: s.sample(seeds)).values()))
    return totals
