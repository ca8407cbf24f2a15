# lab: 05_coverage_by_propagation
# how: brute force expands a frontier of (node, probability) walks hop by hop instead of recursing; propagation precomputes per-edge weights 1 / d(dst) and adds a "stays" vector for d = 0 instead of dividing with torch.where; the whole graph is assembled with one index_copy_ after the loop
# cell: brute
def coverage_brute_force(src, dst, deg, v, hops):
    """c_hops(v) by enumerating backward walks on the local edges (src -> dst)."""
    parents = {}
    for u, w in zip(src.tolist(), dst.tolist()):
        parents.setdefault(w, []).append(u)
    d = deg.tolist()
    walks = [(v, 1.0)]                      # every walk still inside the partition, with its probability
    for _ in range(hops):
        longer = []
        for node, prob in walks:
            if d[node] == 0:                # no in-edges anywhere: the walk stays put
                longer.append((node, prob))
                continue
            for u in parents.get(node, []):
                longer.append((u, prob / d[node]))
        walks = longer
    return float(sum(prob for _, prob in walks))
# cell: propagation
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    d = deg.to(torch.float64)
    edge_w = d[dst].reciprocal()             # every local edge ends at a node with d >= 1
    stays = (d == 0).to(torch.float64)       # nodes without in-edges keep coverage 1
    c = torch.ones(num_nodes, dtype=torch.float64, device=deg.device)
    for _ in range(hops):
        c = stays + torch.zeros_like(c).index_add_(0, dst, c[src] * edge_w)
    return c.float()
# cell: graph_coverage
def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    ids, values = [], []
    for worker in range(part.num_parts):
        loc = part.local_graph(g, worker, super_epoch)
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        ids.append(loc.global_ids[: loc.num_owned])
        values.append(c[: loc.num_owned])
    return torch.zeros(g.num_nodes, dtype=torch.float32, device=g.device).index_copy_(0, torch.cat(ids), torch.cat(values))
