# lab: 05_coverage_by_propagation
# how: scatter_add_ instead of index_add_, and the zero-degree rule as a division by a degree with its zeros replaced by 1 inside a where
# cell: propagation
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    d = deg.double()
    has_in = d > 0
    safe = torch.where(has_in, d, torch.ones_like(d))
    c = torch.ones_like(d) if d.numel() == num_nodes else torch.ones(num_nodes, dtype=torch.float64, device=deg.device)
    for _ in range(hops):
        summed = torch.zeros_like(c).scatter_add_(0, dst, c[src])
        c = torch.where(has_in, summed / safe, torch.ones_like(c))
    return c.float()
