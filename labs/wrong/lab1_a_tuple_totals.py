# lab: 01_host_syncs
# cell: syncs_per_hop
# why: another return type than the contract's: a tuple of totals where the contract (and the reference) returns a list, so a caller's totals.append(...) raises
def syncs_per_hop(fanouts_by_depth):
    """Total host syncs of one DynamicSampler(g, fanouts).sample(seeds) call, per fanout list."""

    def total(fanouts):
        sampler = DynamicSampler(g, fanouts, seed=0)
        return sum(sync_ops(lambda: sampler.sample(seeds)).values())

    return tuple(total(f) for f in fanouts_by_depth)
