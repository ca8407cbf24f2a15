# lab: 02_fixed_shape_sampler
# cell: compact_hop
# why: ignores the buffers it is given and allocates two node-sized arrays per call (O(N) per hop)
def compact_hop(dst, n_dst, nbrs, mask, num_nodes, cap, marker, local_of):
    """(src_nodes int64 [cap], num_src int64 [], nbr_local int64 [R, k]); no host syncs."""
    n = num_nodes
    rows, k = nbrs.shape
    valid_rows = torch.arange(rows) < n_dst
    cand = torch.cat([torch.where(valid_rows, dst, n), nbrs.flatten()])
    pos = torch.arange(cand.numel())
    is_first = first_occurrence(cand, torch.full((n + 1,), INF))
    is_new = is_first & (pos >= rows)
    rank = torch.cumsum(is_new.to(torch.int64), 0)
    num_src = n_dst + rank[-1]
    new_local = n_dst + rank - 1
    lookup = torch.zeros(n + 1, dtype=torch.int64)
    lookup.scatter_(0, torch.where(is_first, cand, n), torch.where(is_new, new_local, pos))
    local = torch.gather(lookup, 0, cand)
    src_nodes = torch.zeros(cap + 1, dtype=torch.int64)
    src_nodes[:rows] = torch.where(valid_rows, dst, 0)
    src_nodes.scatter_(0, torch.where(is_new, new_local.clamp(max=cap), cap), cand.clamp(max=n - 1))
    nbr_local = torch.where(mask, local[rows:].view(rows, k), 0).clamp(max=cap - 1)
    return src_nodes[:cap], num_src, nbr_local
