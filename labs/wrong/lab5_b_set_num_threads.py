# lab: 05_coverage_by_propagation
# cell: propagation
# why: a side effect on torch's global state: calls torch.set_num_threads(1) ("index_add_ sums in one order then") and never restores it, so everything the notebook runs afterwards is single-threaded
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    torch.set_num_threads(1)
    d = deg.to(torch.float64)
    c = torch.ones(num_nodes, dtype=torch.float64, device=deg.device)
    for _ in range(hops):
        total = torch.zeros_like(c).index_add_(0, dst, c[src])
        c = torch.where(d == 0, 1.0, total / d.clamp(min=1))
    return c.to(torch.float32)
