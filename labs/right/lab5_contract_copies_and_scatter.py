# lab: 05_coverage_by_propagation
# how: keeps the whole contract another way: brute force memoises (node, hops left) in a dict that lives only inside the call and works on a copy of the degrees with the zeros replaced; propagation uses scatter_add_ on tensors made with new_ones / zeros_like (the inputs' device), dividing by a float64 copy of the degrees; the whole graph is assembled from a dict of local graphs built inside the call into a torch.full on g.device
# cell: brute
def coverage_brute_force(src, dst, deg, v, hops):
    """c_hops(v) by enumerating backward walks on the local edges (src -> dst)."""
    safe = deg.clone()
    stays = (safe == 0).tolist()
    safe[safe == 0] = 1                     # a copy: the caller's deg is untouched
    degree = safe.tolist()
    parents = {}
    for u, w in zip(src.tolist(), dst.tolist()):
        parents.setdefault(w, []).append(u)
    memo = {}                               # this call's only

    def walk(node, left):
        if left == 0 or stays[node]:
            return 1.0
        if (node, left) not in memo:
            memo[node, left] = sum(walk(u, left - 1) for u in parents.get(node, [])) / degree[node]
        return memo[node, left]

    return walk(v, hops)
# cell: propagation
def coverage_propagation(src, dst, deg, num_nodes, hops):
    """float32 [num_nodes]: c_hops of every local node, one sparse product per hop."""
    d = deg.to(torch.float64)                    # a new tensor: deg stays as given
    stays = d == 0
    c = d.new_ones(num_nodes)
    for _ in range(hops):
        total = torch.zeros_like(c).scatter_add_(0, dst, c[src])
        c = torch.where(stays, torch.ones_like(c), total / torch.where(stays, torch.ones_like(d), d))
    return c.float()
# cell: graph_coverage
def graph_coverage(g, part, hops, super_epoch=0):
    """float32 [N]: c_hops of every node, in its owner's local graph."""
    locals_ = {w: part.local_graph(g, w, super_epoch) for w in range(part.num_parts)}
    out = torch.full((g.num_nodes,), float("nan"), dtype=torch.float32, device=g.device)
    for loc in locals_.values():
        s, d = loc.graph.edges()
        c = coverage_propagation(s, d, loc.global_in_degree, loc.graph.num_nodes, hops)
        out.index_copy_(0, loc.global_ids[: loc.num_owned], c[: loc.num_owned])
    return out
