# lab: 05_coverage_by_propagation
# cell: graph_coverage
# why: writes every local node's coverage, halo nodes included, in one index_put_ with the owners' values last so that they stay: PyTorch does not define which of several writes to one index index_put_ keeps (the CPU happens to keep the last; a GPU need not)
def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    halo_ids, halo_values, own_ids, own_values = [], [], [], []
    for worker in range(part.num_parts):
        loc = part.local_graph(g, worker, super_epoch)
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        halo_ids.append(loc.global_ids[loc.num_owned :])
        halo_values.append(c[loc.num_owned :])
        own_ids.append(loc.global_ids[: loc.num_owned])
        own_values.append(c[: loc.num_owned])
    out = torch.empty(g.num_nodes, dtype=torch.float32)
    # every local node at once; the owners' values come last, so theirs are the ones that stay
    out[torch.cat(halo_ids + own_ids)] = torch.cat(halo_values + own_values)
    return out
