# lab: 05_coverage_by_propagation
# cell: propagation
# why: hands the propagation to the kit (zg.grappa.coverage's own) instead of writing it
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    from zg.grappa.coverage import _propagate

    return _propagate(zg.Graph.from_edges(src, dst, num_nodes), deg, hops).to(torch.float32)
