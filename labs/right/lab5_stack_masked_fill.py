# lab: 05_coverage_by_propagation
# how: brute force keeps each walk as an explicit list of nodes on a stack (iterative DFS) and multiplies 1 / d along it; propagation divides by the raw degree and repairs the d = 0 rows with masked_fill; the whole graph is assembled by spreading each worker's owned values into a full-size vector and merging it with torch.where on an ownership mask
# cell: brute
def coverage_brute_force(src, dst, deg, v, hops):
    """c_hops(v) by enumerating backward walks on the local edges (src -> dst)."""
    edges = list(zip(src.tolist(), dst.tolist()))
    d = [int(x) for x in deg.tolist()]
    total = 0.0
    stack = [[v]]                                   # each entry: one walk, newest node last
    while stack:
        walk = stack.pop()
        node = walk[-1]
        if len(walk) - 1 == hops or d[node] == 0:   # walked every hop, or stopped at d = 0
            prob = 1.0
            for w in walk[:-1]:
                prob /= d[w]
            total += prob
            continue
        for u, w in edges:
            if w == node:
                stack.append(walk + [u])
    return total
# cell: propagation
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    d = deg.double()
    isolated = d == 0
    c = d.new_ones(num_nodes)
    for _ in range(hops):
        summed = torch.zeros(num_nodes, dtype=torch.float64, device=d.device)
        summed.index_add_(0, dst, c.index_select(0, src))
        c = (summed / d).masked_fill(isolated, 1.0)      # 0 / 0 there: replaced by 1
    return c.to(dtype=torch.float32)
# cell: graph_coverage
def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    out = torch.zeros(g.num_nodes, dtype=torch.float32, device=g.device)
    for worker in range(part.num_parts):
        loc = part.local_graph(g, worker, super_epoch)
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        owned = loc.global_ids.narrow(0, 0, loc.num_owned)    # owned nodes first, then the halo
        spread = torch.zeros_like(out)
        spread[owned] = c.narrow(0, 0, loc.num_owned)
        mine = torch.zeros_like(out, dtype=torch.bool)
        mine[owned] = True
        out = torch.where(mine, spread, out)
    return out
