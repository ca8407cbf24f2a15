# lab: 02_fixed_shape_sampler
# how: makes every new tensor from an input (new_zeros, ones_like(...).cumsum, new_full), so it follows the inputs' device; resets the marker with scatter_ of a 0-d INF; uses local_of as scratch for every first occurrence (rows and new nodes alike, numbered by one cumsum) and pads src_nodes with zeros by a masked where, never touching the caller's dst
# cell: first_occurrence
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    pos = torch.ones_like(cand).cumsum(0) - 1
    marker.scatter_reduce_(0, cand, pos, reduce="amin")
    first = marker.gather(0, cand) == pos
    marker.scatter_(0, cand, marker.new_full((), INF).expand(cand.shape))
    return first & (cand != marker.numel() - 1)
# cell: compact_hop
def compact_hop(dst, n_dst, nbrs, mask, num_nodes, cap, marker, local_of):
    """(src_nodes int64 [cap], num_src int64 [], nbr_local int64 [R, k]); no host syncs; marker left all INF."""
    rows, k = nbrs.shape
    row_ids = torch.ones_like(dst).cumsum(0) - 1
    cand = torch.cat([torch.where(row_ids < n_dst, dst, num_nodes), nbrs.reshape(-1)])
    is_first = first_occurrence(cand, marker)
    local = is_first.long().cumsum(0) - 1                 # dst rows 0 .. n_dst - 1, then the new nodes
    num_src = local[-1] + 1
    local_of.scatter_(0, torch.where(is_first, cand, num_nodes), local)
    nbr_local = torch.where(mask, local_of[nbrs], 0).clamp(max=cap - 1)
    src_nodes = dst.new_zeros(cap + 1)
    src_nodes.scatter_(0, torch.where(is_first, local.clamp(max=cap), cap), torch.where(is_first, cand, 0))
    return src_nodes[:cap], num_src, nbr_local
