# lab: 01_host_syncs
# cell: compact_fewer_syncs
# part: test_compact_fewer_syncs test_compact_fewer_syncs_hidden
# why: two .tolist() and a Python set: "2 syncs < 3", although the whole hop goes to the host
def compact_fewer_syncs(dst, nbrs, mask):
    """Same output as dynamic_compact, fewer host syncs."""
    found = set(torch.where(mask, nbrs, dst[0]).flatten().tolist())
    new = sorted(found - set(dst.tolist()))
    return torch.cat([dst, torch.tensor(new, dtype=torch.int64)])
