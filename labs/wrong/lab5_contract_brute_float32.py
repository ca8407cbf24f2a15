# lab: 05_coverage_by_propagation
# cell: brute
# why: a narrower dtype: multiplies the walk probabilities as float32 tensors (1 / d of deg.float()), which keeps about 7 digits; exact on halves and quarters, off in the 8th digit on degrees such as 3
def coverage_brute_force(src, dst, deg, v, hops):
    """c_hops(v) by enumerating backward walks on the local edges (src -> dst)."""
    in_edges = {}
    for u, w in zip(src.tolist(), dst.tolist()):
        in_edges.setdefault(w, []).append(u)
    step = 1.0 / deg.float().clamp(min=1)  # probability of one in-edge, per node

    def walk(node, left):
        if left == 0 or int(deg[node]) == 0:
            return torch.ones((), dtype=torch.float32)
        total = torch.zeros((), dtype=torch.float32)
        for u in in_edges.get(node, []):
            total = total + walk(u, left - 1)
        return total * step[node]

    return float(walk(v, hops))
