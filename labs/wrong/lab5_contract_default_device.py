# lab: 05_coverage_by_propagation
# cell: propagation
# why: makes its coverage vector with torch.ones(num_nodes, dtype=torch.float64), without device=: on the default device, not deg's; right on a CPU, a device error as soon as the graph is on a GPU
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    d = deg.to(torch.float64)
    c = torch.ones(num_nodes, dtype=torch.float64)
    for _ in range(hops):
        total = torch.zeros_like(c).index_add_(0, dst, c[src])
        c = torch.where(d == 0, 1.0, total / d.clamp(min=1))
    return c.to(torch.float32)
