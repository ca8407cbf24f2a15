# lab: 05_coverage_by_propagation
# cell: brute
# why: memoises the walk by node alone, not by (node, hops left): a node reached at two depths (a cycle, or two paths of different lengths) reuses the value of the first depth it was seen at
def coverage_brute_force(src, dst, deg, v, hops):
    """c_hops(v) by enumerating backward walks on the local edges (src -> dst)."""
    in_edges = {}
    for u, w in zip(src.tolist(), dst.tolist()):
        in_edges.setdefault(w, []).append(u)
    degree = deg.tolist()
    memo = {}

    def walk(node, left):
        if left == 0 or degree[node] == 0:
            return 1.0
        if node not in memo:
            memo[node] = sum(walk(u, left - 1) for u in in_edges.get(node, [])) / degree[node]
        return memo[node]

    return walk(v, hops)
