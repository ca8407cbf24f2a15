# lab: 05_coverage_by_propagation
# cell: propagation
# why: ignores the d = 0 rule (a node without in-edges must keep coverage 1)
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    d = deg.to(torch.float64)
    c = torch.ones(num_nodes, dtype=torch.float64)
    for _ in range(hops):
        c = torch.zeros_like(c).index_add_(0, dst, c[src]) / d.clamp(min=1)
    return c.to(torch.float32)
