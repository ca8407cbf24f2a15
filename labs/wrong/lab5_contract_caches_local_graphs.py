# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: keeps state between calls: caches the local graphs in a notebook-level dict keyed by (number of nodes, worker, super-epoch) to save rebuilding them; a later call with another partition (or another graph of the same size) gets the stale local graphs
local_graph_cache = {}


def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    out = torch.empty(g.num_nodes, dtype=torch.float32, device=g.device)
    for worker in range(part.num_parts):
        key = (g.num_nodes, worker, super_epoch)
        if key not in local_graph_cache:
            local_graph_cache[key] = part.local_graph(g, worker, super_epoch)
        loc = local_graph_cache[key]
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        out[loc.global_ids[: loc.num_owned]] = c[: loc.num_owned]
    return out
