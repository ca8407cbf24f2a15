# lab: 05_coverage_by_propagation
# cell: propagation
# why: changes an input in place: notes the d = 0 nodes, then clamps the caller's deg tensor with clamp_ (in place) before converting it; the coverage is right, deg comes back with 1 where it had 0
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    no_edges = deg == 0
    d = deg.clamp_(min=1).to(torch.float64)
    c = torch.ones(num_nodes, dtype=torch.float64, device=deg.device)
    for _ in range(hops):
        total = torch.zeros_like(c).index_add_(0, dst, c[src])
        c = torch.where(no_edges, 1.0, total / d)
    return c.to(torch.float32)
