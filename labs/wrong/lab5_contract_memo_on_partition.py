# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: leaves an argument changed: memoises the local graphs on the caller's Partition object (part.local_graphs[(worker, super_epoch)]); the coverage is right, but part comes back with an attribute it did not have
def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    if not hasattr(part, "local_graphs"):
        part.local_graphs = {}
    out = torch.empty(g.num_nodes, dtype=torch.float32, device=g.device)
    for worker in range(part.num_parts):
        if (worker, super_epoch) not in part.local_graphs:
            part.local_graphs[worker, super_epoch] = part.local_graph(g, worker, super_epoch)
        loc = part.local_graphs[worker, super_epoch]
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        out[loc.global_ids[: loc.num_owned]] = c[: loc.num_owned]
    return out
