# lab: 05_coverage_by_propagation
# cell: brute
# why: changes an input in place: remembers which nodes have d = 0, then sets their degree to 1 in the caller's deg tensor to avoid dividing by zero; the value is right, deg is left changed
def coverage_brute_force(src, dst, deg, v, hops):
    """c_hops(v) by enumerating backward walks on the local edges (src -> dst)."""
    in_edges = {}
    for u, w in zip(src.tolist(), dst.tolist()):
        in_edges.setdefault(w, []).append(u)
    stays = (deg == 0).tolist()
    deg[deg == 0] = 1  # no division by zero below
    degree = deg.tolist()

    def walk(node, left):
        if left == 0 or stays[node]:
            return 1.0
        return sum(walk(u, left - 1) for u in in_edges.get(node, [])) / degree[node]

    return walk(v, hops)
