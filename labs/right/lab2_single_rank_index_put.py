# lab: 02_fixed_shape_sampler
# how: marks with index_reduce_(amin) and resets with index_put_, and numbers dst rows and new nodes with one cumsum over every first occurrence (the k-th first occurrence has local id k - 1), writing local_of and src_nodes with index_put_ and reading slots by advanced indexing
# cell: first_occurrence
def first_occurrence(cand, marker):
    """bool [M]: cand[i] is real (< N) and its value's first occurrence. Leaves marker all INF."""
    trash = marker.numel() - 1
    pos = torch.arange(cand.numel(), dtype=torch.int64, device=cand.device)
    marker.index_reduce_(0, cand, pos, "amin", include_self=True)
    earliest = marker[cand]                            # integer index: fixed shape, no sync
    marker.index_put_((cand,), torch.tensor(INF))      # undo exactly the entries touched
    return (earliest == pos) & (cand != trash)
# cell: compact_hop
def compact_hop(dst, n_dst, nbrs, mask, num_nodes, cap, marker, local_of):
    """(src_nodes int64 [cap], num_src int64 [], nbr_local int64 [R, k]); no host syncs; marker left all INF."""
    rows, k = nbrs.shape
    junk_row = torch.arange(rows, device=dst.device) >= n_dst
    cand = torch.cat([dst.masked_fill(junk_row, num_nodes), nbrs.reshape(-1)])
    is_first = first_occurrence(cand, marker)
    # the real dst rows are the first first-occurrences (distinct, in front), so a running count
    # of first occurrences is every node's local id: 0 .. n_dst - 1 for dst, then the new nodes
    local = torch.cumsum(is_first, 0) - 1
    num_src = local[-1] + 1
    # one write per distinct node (the rest go to the trash row num_nodes)
    local_of.index_put_((torch.where(is_first, cand, num_nodes),), local)
    slot_local = local_of[nbrs]                       # [R, k]; masked slots read the trash row
    nbr_local = torch.where(mask, slot_local, 0).clamp(max=cap - 1)
    src_nodes = torch.zeros(cap + 1, dtype=torch.int64, device=dst.device)   # slot cap is the overflow trash
    where_to = torch.where(is_first, local.clamp(max=cap), cap)
    src_nodes.index_put_((where_to,), torch.where(is_first, cand, 0))
    return src_nodes[:cap], num_src, nbr_local
