# lab: 02_fixed_shape_sampler
# cell: compact_hop
# why: copies every dst row into src_nodes, the padding rows' junk included: when the hop has fewer distinct nodes than rows, the entries past the count hold junk instead of 0 (padding rows past the count)
def compact_hop(dst, n_dst, nbrs, mask, num_nodes, cap, marker, local_of):
    """(src_nodes int64 [cap], num_src int64 [], nbr_local int64 [R, k]); no host syncs; marker left all INF."""
    n = num_nodes
    rows, k = nbrs.shape
    valid_rows = torch.arange(rows, device=dst.device) < n_dst
    cand = torch.cat([torch.where(valid_rows, dst, n), nbrs.flatten()])
    pos = torch.arange(cand.numel(), device=cand.device)
    is_first = first_occurrence(cand, marker)
    is_new = is_first & (pos >= rows)
    rank = torch.cumsum(is_new.to(torch.int64), 0)
    num_src = n_dst + rank[-1]
    new_local = n_dst + rank - 1
    local_of.scatter_(0, torch.where(is_first, cand, n), torch.where(is_new, new_local, pos))
    local = torch.gather(local_of, 0, cand)
    src_nodes = torch.zeros(cap + 1, dtype=torch.int64, device=dst.device)
    src_nodes[:rows] = dst  # the junk rows past n_dst too
    src_nodes.scatter_(0, torch.where(is_new, new_local.clamp(max=cap), cap), cand.clamp(max=n - 1))
    nbr_local = torch.where(mask, local[rows:].view(rows, k), 0).clamp(max=cap - 1)
    return src_nodes[:cap], num_src, nbr_local
