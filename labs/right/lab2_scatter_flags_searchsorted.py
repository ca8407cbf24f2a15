# lab: 02_fixed_shape_sampler
# how: flags first occurrences by scattering True at each value's earliest position (no comparison of positions), and fills src_nodes by gathering rather than scattering: searchsorted on the running count of new nodes finds where the j-th new node sits in the candidates
# cell: first_occurrence
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    m = cand.numel()
    marker.scatter_reduce_(0, cand, torch.arange(m, device=cand.device), reduce="amin")
    earliest = marker.gather(0, cand)                 # per candidate: where its value first shows
    marker.scatter_(0, cand, INF)                     # reset only what was touched
    flags = torch.zeros(m, dtype=torch.bool, device=cand.device).scatter_(0, earliest, True)
    return flags & (cand != marker.numel() - 1)
# cell: compact_hop
def compact_hop(dst, n_dst, nbrs, mask, num_nodes, cap, marker, local_of):
    """(src_nodes int64 [cap], num_src int64 [], nbr_local int64 [R, k]); no host syncs; marker left all INF."""
    rows, k = nbrs.shape
    row_ids = torch.arange(rows, device=dst.device)
    real_rows = row_ids < n_dst
    head = torch.where(real_rows, dst, num_nodes)
    cand = torch.cat([head, nbrs.flatten()])
    is_first = first_occurrence(cand, marker)
    is_new = is_first.clone()
    is_new[:rows] = False                             # the dst rows are not new nodes
    new_count = is_new.to(torch.int64).cumsum(0)      # new nodes up to and including each slot
    num_src = n_dst + new_count[-1]

    # local ids: dst row i -> i, the j-th new node (1-based) -> n_dst + j - 1
    local_of.scatter_(0, head, row_ids)               # junk rows all land in the trash row
    local_of.scatter_(0, torch.where(is_new, cand, num_nodes), n_dst + new_count - 1)
    nbr_local = local_of.gather(0, nbrs.flatten()).view(rows, k)
    nbr_local = nbr_local.masked_fill(~mask, 0).clamp(max=cap - 1)

    # src_nodes[j]: dst[j] for j < n_dst, else the (j - n_dst + 1)-th new node, found by
    # searchsorted in the non-decreasing new_count; past the last one it points at a 0 pad
    j = torch.arange(cap, device=dst.device)
    where_new = torch.searchsorted(new_count, (j - n_dst + 1).clamp(min=1))
    padded = torch.cat([cand, torch.zeros(1, dtype=torch.int64, device=cand.device)])
    from_new = padded.gather(0, where_new)
    from_dst = dst.gather(0, j.clamp(max=rows - 1))
    src_nodes = torch.where(j < n_dst, from_dst, from_new)
    return src_nodes, num_src, nbr_local
