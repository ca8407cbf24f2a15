# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: makes the whole graph's vector with device="cpu": right on a CPU, where the graph is too; with the graph on a GPU the owners' coverage is written from the device into a host tensor and returned there (an explicit device, which redirecting the default device never saw)
def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    out = torch.empty(g.num_nodes, dtype=torch.float32, device="cpu")
    for worker in range(part.num_parts):
        loc = part.local_graph(g, worker, super_epoch)
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        out[loc.global_ids[: loc.num_owned]] = c[: loc.num_owned]
    return out
