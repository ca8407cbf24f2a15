# lab: 05_coverage_by_propagation
# cell: propagation
# why: a narrower dtype: propagates in float32 instead of float64 (the result is float32 anyway, so it looks harmless); after two hops the last bit differs from the float64 propagation rounded once
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    d = deg.to(torch.float32)
    c = torch.ones(num_nodes, dtype=torch.float32, device=deg.device)
    for _ in range(hops):
        total = torch.zeros_like(c).index_add_(0, dst, c[src])
        c = torch.where(d == 0, 1.0, total / d.clamp(min=1))
    return c
